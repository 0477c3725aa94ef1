//! A tree read back from the `Debug` output of a prost message.
//!
//! k8s-pb's generated messages have no serde support and no reflection, but
//! prost derives a `Debug` that spells out every field in a fixed, regular
//! grammar: `Name { field: value, .. }`, `Some(v)`, `None`, `[..]`, `{k: v}`,
//! Rust-escaped strings, numbers and bools. Parsing it back gives a generic
//! walk over any decoded message without hand-written code per type.

use std::fmt;

/// One value of a decoded message, as its `Debug` output spelled it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Node {
    /// A message: its Rust type name and its fields in declaration order.
    Message {
        name: String,
        fields: Vec<(String, Node)>,
    },
    /// An optional field that was set.
    Some(Box<Node>),
    /// An optional field that was not set.
    None,
    /// A repeated field, or a `bytes` field (a list of byte values).
    List(Vec<Node>),
    /// A map field, in the map's iteration order.
    Map(Vec<(Node, Node)>),
    /// A string.
    Str(String),
    /// A number exactly as printed (integer or float).
    Number(String),
    /// A bool.
    Bool(bool),
}

/// Why a `Debug` string could not be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unreadable message dump at byte {offset}: {reason}")]
pub struct ParseError {
    offset: usize,
    reason: String,
}

/// Parses the `Debug` output of a prost message (`format!("{:?}", msg)`).
pub(super) fn parse(text: &str) -> Result<Node, ParseError> {
    let mut parser = Parser {
        text: text.as_bytes(),
        pos: 0,
    };
    let node = parser.value()?;
    parser.skip_ws();
    if parser.pos != parser.text.len() {
        return Err(parser.error("trailing text"));
    }
    Ok(node)
}

struct Parser<'a> {
    text: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, reason: impl fmt::Display) -> ParseError {
        ParseError {
            offset: self.pos,
            reason: reason.to_string(),
        }
    }

    fn skip_ws(&mut self) {
        while self.text.get(self.pos).is_some_and(u8::is_ascii_whitespace) {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.text.get(self.pos).copied()
    }

    fn expect(&mut self, byte: u8) -> Result<(), ParseError> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(format!("expected '{}'", byte as char)))
        }
    }

    /// Consumes `byte` if it comes next.
    fn eat(&mut self, byte: u8) -> bool {
        if self.peek() == Some(byte) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn ident(&mut self) -> Result<String, ParseError> {
        self.skip_ws();
        let start = self.pos;
        // Raw identifiers (`r#type`) keep the `#`; the caller strips the prefix.
        while self
            .text
            .get(self.pos)
            .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'#')
        {
            self.pos += 1;
        }
        if start == self.pos {
            return Err(self.error("expected an identifier"));
        }
        let raw = std::str::from_utf8(&self.text[start..self.pos])
            .map_err(|_| self.error("identifier is not UTF-8"))?;
        Ok(raw.strip_prefix("r#").unwrap_or(raw).to_string())
    }

    fn value(&mut self) -> Result<Node, ParseError> {
        match self.peek() {
            Some(b'"') => self.string().map(Node::Str),
            Some(b'[') => self.list(),
            Some(b'{') => self.map(),
            Some(b) if b == b'-' || b.is_ascii_digit() => self.number(),
            Some(b) if b.is_ascii_alphabetic() || b == b'_' => {
                let ident = self.ident()?;
                match ident.as_str() {
                    "None" => Ok(Node::None),
                    "true" => Ok(Node::Bool(true)),
                    "false" => Ok(Node::Bool(false)),
                    "inf" | "NaN" => Ok(Node::Number(ident)),
                    "Some" => {
                        self.expect(b'(')?;
                        let inner = self.value()?;
                        self.expect(b')')?;
                        Ok(Node::Some(Box::new(inner)))
                    }
                    _ => self.message(ident),
                }
            }
            _ => Err(self.error("expected a value")),
        }
    }

    fn message(&mut self, name: String) -> Result<Node, ParseError> {
        // A message without fields prints as its bare name.
        let fields = if self.eat(b'{') {
            self.items(b'}', |p| {
                let field = p.ident()?;
                p.expect(b':')?;
                Ok((field, p.value()?))
            })?
        } else {
            Vec::new()
        };
        Ok(Node::Message { name, fields })
    }

    fn list(&mut self) -> Result<Node, ParseError> {
        self.expect(b'[')?;
        self.items(b']', Self::value).map(Node::List)
    }

    fn map(&mut self) -> Result<Node, ParseError> {
        self.expect(b'{')?;
        self.items(b'}', |p| {
            let key = p.value()?;
            p.expect(b':')?;
            Ok((key, p.value()?))
        })
        .map(Node::Map)
    }

    /// Comma-separated items, each read by `item`, up to and including
    /// `close` (the opening bracket already read); a trailing comma is
    /// allowed.
    fn items<T>(
        &mut self,
        close: u8,
        mut item: impl FnMut(&mut Self) -> Result<T, ParseError>,
    ) -> Result<Vec<T>, ParseError> {
        let mut items = Vec::new();
        while !self.eat(close) {
            items.push(item(self)?);
            if !self.eat(b',') {
                self.expect(close)?;
                break;
            }
        }
        Ok(items)
    }

    fn number(&mut self) -> Result<Node, ParseError> {
        self.skip_ws();
        let start = self.pos;
        if self.text.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        while self
            .text
            .get(self.pos)
            .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-'))
        {
            self.pos += 1;
        }
        let text = std::str::from_utf8(&self.text[start..self.pos])
            .map_err(|_| self.error("number is not UTF-8"))?;
        Ok(Node::Number(text.to_string()))
    }

    /// Reads a string literal as `str`'s `Debug` escapes it.
    fn string(&mut self) -> Result<String, ParseError> {
        self.expect(b'"')?;
        let mut out = Vec::new();
        loop {
            let Some(&b) = self.text.get(self.pos) else {
                return Err(self.error("unterminated string"));
            };
            self.pos += 1;
            match b {
                b'"' => break,
                b'\\' => {
                    let Some(&esc) = self.text.get(self.pos) else {
                        return Err(self.error("unterminated escape"));
                    };
                    self.pos += 1;
                    match esc {
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'0' => out.push(0),
                        b'\\' | b'"' | b'\'' => out.push(esc),
                        b'u' => {
                            let c = self.unicode_escape()?;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                        }
                        other => {
                            return Err(self.error(format!("unknown escape \\{}", other as char)));
                        }
                    }
                }
                _ => out.push(b),
            }
        }
        String::from_utf8(out).map_err(|_| self.error("string is not UTF-8"))
    }

    /// Reads the `{hex}` after `\u`.
    fn unicode_escape(&mut self) -> Result<char, ParseError> {
        if self.text.get(self.pos) != Some(&b'{') {
            return Err(self.error("expected '{' after \\u"));
        }
        let start = self.pos + 1;
        let end = self.text[start..]
            .iter()
            .position(|b| *b == b'}')
            .map(|n| start + n)
            .ok_or_else(|| self.error("unterminated \\u{..}"))?;
        let hex = std::str::from_utf8(&self.text[start..end])
            .map_err(|_| self.error("bad \\u escape"))?;
        self.pos = end + 1;
        u32::from_str_radix(hex, 16)
            .ok()
            .and_then(char::from_u32)
            .ok_or_else(|| self.error(format!("bad \\u{{{hex}}} escape")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Debug)]
    #[allow(dead_code)] // read through Debug only
    struct Inner {
        r#type: Option<String>,
        count: i64,
    }

    #[derive(Debug)]
    #[allow(dead_code)] // read through Debug only
    struct Outer {
        name: Option<String>,
        inner: Option<Inner>,
        items: Vec<Inner>,
        labels: BTreeMap<String, String>,
        blob: Option<Vec<u8>>,
        ratio: f64,
        on: bool,
    }

    #[derive(Debug)]
    struct Empty {}

    fn field<'a>(node: &'a Node, name: &str) -> &'a Node {
        match node {
            Node::Message { fields, .. } => &fields.iter().find(|(n, _)| n == name).unwrap().1,
            other => panic!("not a message: {other:?}"),
        }
    }

    #[test]
    fn reads_back_a_nested_value() {
        let value = Outer {
            name: Some("tricky \"quoted\" \\ \n\t\u{7} é ✓ '".into()),
            inner: Some(Inner {
                r#type: None,
                count: -3,
            }),
            items: vec![
                Inner {
                    r#type: Some("a".into()),
                    count: 1,
                },
                Inner {
                    r#type: Some(String::new()),
                    count: 0,
                },
            ],
            labels: BTreeMap::from([("k{:}".to_string(), "v, w".to_string())]),
            blob: Some(vec![0, 255, 7]),
            ratio: 1e-7,
            on: true,
        };
        let tree = parse(&format!("{value:?}")).unwrap();
        let Node::Message { name, .. } = &tree else {
            panic!("{tree:?}")
        };
        assert_eq!(name, "Outer");
        assert_eq!(
            field(&tree, "name"),
            &Node::Some(Box::new(Node::Str(value.name.clone().unwrap())))
        );
        let Node::Some(inner) = field(&tree, "inner") else {
            panic!()
        };
        assert_eq!(field(inner, "type"), &Node::None);
        assert_eq!(field(inner, "count"), &Node::Number("-3".into()));
        let Node::List(items) = field(&tree, "items") else {
            panic!()
        };
        assert_eq!(items.len(), 2);
        assert_eq!(
            field(&items[1], "type"),
            &Node::Some(Box::new(Node::Str(String::new())))
        );
        assert_eq!(
            field(&tree, "labels"),
            &Node::Map(vec![(Node::Str("k{:}".into()), Node::Str("v, w".into()))])
        );
        assert_eq!(
            field(&tree, "blob"),
            &Node::Some(Box::new(Node::List(vec![
                Node::Number("0".into()),
                Node::Number("255".into()),
                Node::Number("7".into())
            ])))
        );
        assert_eq!(field(&tree, "ratio"), &Node::Number("1e-7".into()));
        assert_eq!(field(&tree, "on"), &Node::Bool(true));
    }

    #[test]
    fn reads_pretty_output_and_fieldless_messages() {
        let tree = parse(&format!("{:#?}", vec![Empty {}])).unwrap();
        assert_eq!(
            tree,
            Node::List(vec![Node::Message {
                name: "Empty".into(),
                fields: vec![]
            }])
        );
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse("Outer { name: ").is_err());
        assert!(parse("\"open").is_err());
        assert!(parse("[1, 2] extra").is_err());
    }
}
