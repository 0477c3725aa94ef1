//! Strings in double quotes as Go's `%q` and TOML's basic strings write them
//! (RBAC and Pod Security refusals that must read as upstream's, containerd's
//! configuration): both escape the quote, the backslash, newline, tab and
//! carriage return alike and differ only in how other control characters look.

/// `s` as Go's `%q` prints it: double quotes, with backslash escapes for
/// quotes, backslashes and control characters (`\x7f`).
pub fn go_quote(s: &str) -> String {
    quoted(s, |c| {
        let code = u32::from(c);
        (code < 0x20 || code == 0x7f).then(|| format!("\\x{code:02x}"))
    })
}

/// `s` as a TOML basic string: double quotes, with backslash escapes for
/// quotes, backslashes and control characters (`\u007F`).
pub fn toml_string(s: &str) -> String {
    quoted(s, |c| {
        c.is_control().then(|| format!("\\u{:04X}", u32::from(c)))
    })
}

/// `s` in double quotes with the escapes both formats share; any other
/// character is written as `control` escapes it, or as itself when it gives
/// no escape.
fn quoted(s: &str, control: impl Fn(char) -> Option<String>) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c => match control(c) {
                Some(escape) => out.push_str(&escape),
                None => out.push(c),
            },
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_and_toml_share_the_common_escapes_and_differ_on_control_characters() {
        assert_eq!(go_quote("a\"b\\\n\t\r"), r#""a\"b\\\n\t\r""#);
        assert_eq!(toml_string("a\"b\\\n\t\r"), r#""a\"b\\\n\t\r""#);
        assert_eq!(go_quote("\u{1}\u{7f}é"), r#""\x01\x7fé""#);
        assert_eq!(toml_string("\u{1}\u{7f}é"), r#""\u0001\u007Fé""#);
    }
}
