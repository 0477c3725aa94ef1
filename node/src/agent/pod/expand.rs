//! `$(VAR)` expansion in env values, command and args, with upstream's rules:
//! a defined variable is replaced, an undefined one is left as written, and
//! `$$` escapes a `$` (so `$$(VAR)` yields the text `$(VAR)`).

/// Expands `$(NAME)` references in `input` using `lookup`.
pub(crate) fn expand(input: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(input.len());
    let bytes = input.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'$' || i + 1 >= bytes.len() {
            let next = next_char_boundary(input, i);
            out.push_str(&input[i..next]);
            i = next;
            continue;
        }
        match bytes[i + 1] {
            b'$' => {
                out.push('$');
                i += 2;
            }
            b'(' => match input[i + 2..].find(')') {
                Some(close) => {
                    let name = &input[i + 2..i + 2 + close];
                    match lookup(name) {
                        Some(value) => out.push_str(&value),
                        None => out.push_str(&input[i..i + 3 + close]),
                    }
                    i += 3 + close;
                }
                None => {
                    out.push_str(&input[i..]);
                    i = bytes.len();
                }
            },
            _ => {
                out.push('$');
                i += 1;
            }
        }
    }
    out
}

fn next_char_boundary(s: &str, i: usize) -> usize {
    let mut next = i + 1;
    while next < s.len() && !s.is_char_boundary(next) {
        next += 1;
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(name: &str) -> Option<String> {
        match name {
            "GREETING" => Some("hello".into()),
            "WHO" => Some("wörld".into()),
            _ => None,
        }
    }

    #[test]
    fn defined_variables_are_replaced_and_undefined_ones_kept() {
        assert_eq!(expand("$(GREETING) $(WHO)!", vars), "hello wörld!");
        assert_eq!(expand("$(MISSING)-x", vars), "$(MISSING)-x");
        assert_eq!(expand("no refs", vars), "no refs");
    }

    #[test]
    fn double_dollar_escapes() {
        assert_eq!(expand("$$(GREETING)", vars), "$(GREETING)");
        assert_eq!(expand("cost $5 $", vars), "cost $5 $");
        assert_eq!(expand("$(UNCLOSED", vars), "$(UNCLOSED");
    }
}
