//! Why bytes are not the JSON a Go decoder wanted, in the words of Go's
//! `encoding/json`, which upstream's API server answers with: `invalid
//! character 'n' looking for beginning of object key string`, `unexpected
//! end of JSON input`, `json: cannot unmarshal array into Go value of type
//! map[string]interface {}`. serde_json says the same things differently
//! (`key must be a string at line 1 column 2`), and people search for
//! upstream's words.
//!
//! Only text that failed to parse is scanned again, so a good body pays
//! nothing. The scan keeps its own stack, so no nesting depth can overflow
//! the thread's.

use serde_json::Value;

/// Go's message for why `bytes` is not one JSON value; `None` when it is.
pub(crate) fn syntax_error(bytes: &[u8]) -> Option<String> {
    Scanner { bytes, at: 0 }.check().err()
}

/// Go's message for a JSON value of the wrong kind decoded into a value of
/// the Go type `go_type` (`json: cannot unmarshal array into Go value of type
/// map[string]interface {}`).
pub(crate) fn cannot_unmarshal(value: &Value, go_type: &str) -> String {
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    format!("json: cannot unmarshal {kind} into Go value of type {go_type}")
}

/// A container being read.
#[derive(Clone, Copy)]
enum Open {
    Object,
    Array,
}

/// What the scanner reads next.
#[derive(Clone, Copy)]
enum Next {
    /// Any value.
    Value,
    /// An object's first key, or its `}`.
    FirstKey,
    /// An object's key after a `,`.
    Key,
    /// An array's first element, or its `]`.
    FirstElement,
    /// What follows a value: the open container's `,` or its end.
    AfterValue,
}

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
}

const END: &str = "unexpected end of JSON input";

impl Scanner<'_> {
    fn check(&mut self) -> Result<(), String> {
        let mut stack: Vec<Open> = Vec::new();
        let mut next = Next::Value;
        loop {
            let c = match self.next_token() {
                Ok(c) => c,
                Err(_) if stack.is_empty() && matches!(next, Next::AfterValue) => return Ok(()),
                Err(end) => return Err(end),
            };
            next = match next {
                Next::Value => match c {
                    b'{' => {
                        self.at += 1;
                        stack.push(Open::Object);
                        Next::FirstKey
                    }
                    b'[' => {
                        self.at += 1;
                        stack.push(Open::Array);
                        Next::FirstElement
                    }
                    _ => {
                        self.scalar(c)?;
                        Next::AfterValue
                    }
                },
                Next::FirstElement if c == b']' => {
                    self.at += 1;
                    stack.pop();
                    Next::AfterValue
                }
                Next::FirstElement => Next::Value,
                Next::FirstKey if c == b'}' => {
                    self.at += 1;
                    stack.pop();
                    Next::AfterValue
                }
                Next::FirstKey | Next::Key => {
                    if c != b'"' {
                        return Err(invalid(c, "looking for beginning of object key string"));
                    }
                    self.string()?;
                    let c = self.next_token()?;
                    if c != b':' {
                        return Err(invalid(c, "after object key"));
                    }
                    self.at += 1;
                    Next::Value
                }
                Next::AfterValue => {
                    let (close, context) = match stack.last() {
                        None => return Err(invalid(c, "after top-level value")),
                        Some(Open::Object) => (b'}', "after object key:value pair"),
                        Some(Open::Array) => (b']', "after array element"),
                    };
                    self.at += 1;
                    match (c, stack.last()) {
                        (b',', Some(Open::Object)) => Next::Key,
                        (b',', _) => Next::Value,
                        (c, _) if c == close => {
                            stack.pop();
                            Next::AfterValue
                        }
                        (c, _) => return Err(invalid(c, context)),
                    }
                }
            };
        }
    }

    /// The next byte that is not white space, not consumed.
    fn next_token(&mut self) -> Result<u8, String> {
        while let Some(c) = self.bytes.get(self.at) {
            if !matches!(c, b' ' | b'\t' | b'\r' | b'\n') {
                return Ok(*c);
            }
            self.at += 1;
        }
        Err(END.to_owned())
    }

    /// A string, number or literal starting with `c`.
    fn scalar(&mut self, c: u8) -> Result<(), String> {
        match c {
            b'"' => self.string(),
            b'-' | b'0'..=b'9' => self.number(),
            b't' => self.literal("true"),
            b'f' => self.literal("false"),
            b'n' => self.literal("null"),
            _ => Err(invalid(c, "looking for beginning of value")),
        }
    }

    fn byte(&self) -> Result<u8, String> {
        self.bytes
            .get(self.at)
            .copied()
            .ok_or_else(|| END.to_owned())
    }

    fn string(&mut self) -> Result<(), String> {
        self.at += 1;
        loop {
            let c = self.byte()?;
            self.at += 1;
            match c {
                b'"' => return Ok(()),
                b'\\' => {
                    let e = self.byte()?;
                    self.at += 1;
                    match e {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            for _ in 0..4 {
                                let h = self.byte()?;
                                if !h.is_ascii_hexdigit() {
                                    return Err(invalid(h, "in \\u hexadecimal character escape"));
                                }
                                self.at += 1;
                            }
                        }
                        _ => return Err(invalid(e, "in string escape code")),
                    }
                }
                c if c < 0x20 => return Err(invalid(c, "in string literal")),
                _ => {}
            }
        }
    }

    /// A number; what ends it is left for the container to judge, as Go's
    /// scanner does (so `01` fails after the value `0`).
    fn number(&mut self) -> Result<(), String> {
        let digits = |s: &mut Self| {
            while s.bytes.get(s.at).is_some_and(u8::is_ascii_digit) {
                s.at += 1;
            }
        };
        if self.byte()? == b'-' {
            self.at += 1;
            let c = self.byte()?;
            if !c.is_ascii_digit() {
                return Err(invalid(c, "in numeric literal"));
            }
        }
        if self.byte()? == b'0' {
            self.at += 1;
        } else {
            digits(self);
        }
        if self.bytes.get(self.at) == Some(&b'.') {
            self.at += 1;
            let c = self.byte()?;
            if !c.is_ascii_digit() {
                return Err(invalid(c, "after decimal point in numeric literal"));
            }
            digits(self);
        }
        if matches!(self.bytes.get(self.at), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.bytes.get(self.at), Some(b'+' | b'-')) {
                self.at += 1;
            }
            let c = self.byte()?;
            if !c.is_ascii_digit() {
                return Err(invalid(c, "in exponent of numeric literal"));
            }
            digits(self);
        }
        Ok(())
    }

    fn literal(&mut self, word: &str) -> Result<(), String> {
        self.at += 1;
        for expected in word.bytes().skip(1) {
            let c = self.byte()?;
            if c != expected {
                let context = format!("in literal {word} (expecting {})", quote_char(expected));
                return Err(invalid(c, &context));
            }
            self.at += 1;
        }
        Ok(())
    }
}

fn invalid(c: u8, context: &str) -> String {
    format!("invalid character {} {context}", quote_char(c))
}

/// A byte as Go's scanner quotes it: in single quotes, escaped as Go's
/// `strconv.Quote` escapes the character of that code point.
fn quote_char(c: u8) -> String {
    let inner = match c {
        b'\'' => "\\'".to_owned(),
        b'"' => "\"".to_owned(),
        b'\\' => "\\\\".to_owned(),
        0x07 => "\\a".to_owned(),
        0x08 => "\\b".to_owned(),
        0x0c => "\\f".to_owned(),
        b'\n' => "\\n".to_owned(),
        b'\r' => "\\r".to_owned(),
        b'\t' => "\\t".to_owned(),
        0x0b => "\\v".to_owned(),
        c if c < 0x20 || c == 0x7f => format!("\\x{c:02x}"),
        // Latin-1 code points Go does not count as printable.
        c if (0x80..=0xa0).contains(&c) || c == 0xad => format!("\\u{c:04x}"),
        c => char::from(c).to_string(),
    };
    format!("'{inner}'")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn error(text: &str) -> String {
        syntax_error(text.as_bytes()).unwrap_or_default()
    }

    #[test]
    fn good_json_has_no_error() {
        for text in [
            "{}",
            "[]",
            " {\"a\": [1, -2.5e+3, true, false, null, \"x\\u00e9\\n\"], \"b\": {}} ",
            "0",
            "\"s\"",
            "[[[]]]",
        ] {
            assert_eq!(syntax_error(text.as_bytes()), None, "{text}");
        }
    }

    #[test]
    fn bad_json_is_described_as_go_describes_it() {
        let cases = [
            (
                "{not json",
                "invalid character 'n' looking for beginning of object key string",
            ),
            ("{\"a\" 1}", "invalid character '1' after object key"),
            (
                "{\"a\": 1 \"b\": 2}",
                "invalid character '\"' after object key:value pair",
            ),
            (
                "{\"a\": 1,}",
                "invalid character '}' looking for beginning of object key string",
            ),
            ("[1 2]", "invalid character '2' after array element"),
            (
                "[1,]",
                "invalid character ']' looking for beginning of value",
            ),
            ("{} x", "invalid character 'x' after top-level value"),
            ("01", "invalid character '1' after top-level value"),
            ("-a", "invalid character 'a' in numeric literal"),
            (
                "1.e",
                "invalid character 'e' after decimal point in numeric literal",
            ),
            ("1e+", "unexpected end of JSON input"),
            (
                "1ex",
                "invalid character 'x' in exponent of numeric literal",
            ),
            ("tru", "unexpected end of JSON input"),
            (
                "trui",
                "invalid character 'i' in literal true (expecting 'e')",
            ),
            (
                "nul1",
                "invalid character '1' in literal null (expecting 'l')",
            ),
            ("\"a\tb\"", "invalid character '\\t' in string literal"),
            ("\"\\x\"", "invalid character 'x' in string escape code"),
            (
                "\"\\u12g4\"",
                "invalid character 'g' in \\u hexadecimal character escape",
            ),
            (
                "{'a': 1}",
                "invalid character '\\'' looking for beginning of object key string",
            ),
            ("", "unexpected end of JSON input"),
            ("{\"a\": [1, {\"b\": ", "unexpected end of JSON input"),
        ];
        for (text, message) in cases {
            assert_eq!(error(text), message, "{text}");
        }
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let text = "[".repeat(1_000_000);
        assert_eq!(error(&text), "unexpected end of JSON input");
    }

    #[test]
    fn wrong_kinds_are_named_as_go_names_them() {
        assert_eq!(
            cannot_unmarshal(&json!([1]), "map[string]interface {}"),
            "json: cannot unmarshal array into Go value of type map[string]interface {}"
        );
    }
}
