//! Decodes a JSON text and, in the same pass, finds keys repeated within one
//! object, by path (a decoded object keeps only the last value of a repeated
//! key, so they cannot be found afterwards).

use std::fmt;
use std::fmt::Write as _;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Paths of every repeated key in a JSON text (`metadata.name`,
/// `spec.containers[0].image`); empty when the text is not valid JSON (the
/// decoder reports that).
pub(crate) fn duplicate_fields(json: &[u8]) -> Vec<String> {
    decode_noting_duplicates(json)
        .map(|(_, found)| found)
        .unwrap_or_default()
}

/// The JSON text decoded as `serde_json::from_slice` decodes it (a repeated
/// key keeps its last value), with the paths of the repeated keys, in one
/// pass over the text.
pub(crate) fn decode_noting_duplicates(
    json: &[u8],
) -> Result<(Value, Vec<String>), serde_json::Error> {
    let mut path = Vec::new();
    let mut found = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(json);
    let value = Decode {
        path: &mut path,
        found: &mut found,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok((value, found))
}

/// One step of the path to the value being decoded.
enum Step {
    Key(String),
    Index(usize),
}

/// The path as upstream words it: keys joined by dots, indexes in brackets.
fn display(path: &[Step], last: &str) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(key) if out.is_empty() => out.push_str(key),
            Step::Key(key) => {
                out.push('.');
                out.push_str(key);
            }
            Step::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
        }
    }
    if !out.is_empty() {
        out.push('.');
    }
    out.push_str(last);
    out
}

/// Builds one value; the path is only spelled out when a key repeats.
struct Decode<'a> {
    path: &'a mut Vec<Step>,
    found: &'a mut Vec<String>,
}

impl Decode<'_> {
    fn child(&mut self) -> Decode<'_> {
        Decode {
            path: &mut *self.path,
            found: &mut *self.found,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Decode<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Decode<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        loop {
            self.path.push(Step::Index(items.len()));
            let item = seq.next_element_seed(self.child());
            self.path.pop();
            match item? {
                Some(item) => items.push(item),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                let path = display(self.path, &key);
                if !self.found.contains(&path) {
                    self.found.push(path);
                }
            }
            self.path.push(Step::Key(key));
            let value = map.next_value_seed(self.child());
            let Some(Step::Key(key)) = self.path.pop() else {
                return Err(serde::de::Error::custom("the decoder lost its place"));
            };
            object.insert(key, value?);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_repeated_keys_at_any_depth() {
        let text = br#"{"metadata":{"name":"a","name":"b"},
            "spec":{"containers":[{"name":"c","image":"x","image":"y"}]},
            "kind":"Pod"}"#;
        assert_eq!(
            duplicate_fields(text),
            vec!["metadata.name", "spec.containers[0].image"]
        );
        assert!(duplicate_fields(br#"{"a":{"b":1},"c":{"b":2}}"#).is_empty());
        assert!(duplicate_fields(b"not json").is_empty());
        assert_eq!(duplicate_fields(br#"[{"a":1,"a":2}]"#), vec!["[0].a"]);
    }

    #[test]
    fn decodes_as_serde_json_does() {
        for text in [
            r#"{"metadata":{"name":"a","name":"b"},"n":[1,-2,3.5,1e300,18446744073709551615],"s":"\u00e9\n","t":true,"z":null,"e":{},"l":[]}"#,
            r#"{"a":{"b":[{"c":1,"c":{"d":2}}]},"a":7}"#,
            "[]",
            "\"text\"",
            "0.1",
        ] {
            let theirs: Result<Value, _> = serde_json::from_slice(text.as_bytes());
            let ours = decode_noting_duplicates(text.as_bytes()).map(|(v, _)| v);
            assert_eq!(ours.ok(), theirs.ok(), "{text}");
        }
        for bad in ["{", "{} x", "{\"a\":}", "", "nul"] {
            assert!(decode_noting_duplicates(bad.as_bytes()).is_err(), "{bad}");
            assert!(
                serde_json::from_slice::<Value>(bad.as_bytes()).is_err(),
                "{bad}"
            );
        }
        let (_, found) =
            decode_noting_duplicates(br#"{"a":{"b":[{"c":1,"c":{"d":2}}]},"a":7}"#).unwrap();
        assert_eq!(found, vec!["a.b[0].c", "a"]);
    }
}
