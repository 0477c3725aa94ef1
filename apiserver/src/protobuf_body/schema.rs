//! The message table from `schema.txt`, parsed once.

use std::collections::HashMap;
use std::sync::OnceLock;

/// How a field's value is encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    String,
    Bool,
    Int32,
    Int64,
    Double,
    Bytes,
    Message(String),
    /// A map with string keys and values of the inner kind.
    Map(Box<Kind>),
}

/// One field of a message.
#[derive(Debug, Clone)]
pub struct FieldSpec {
    /// JSON name; `None` for an embedded struct whose fields are inlined.
    pub json: Option<String>,
    pub kind: Kind,
    pub repeated: bool,
}

/// All known messages by full dotted name.
pub struct Schema {
    messages: HashMap<String, HashMap<u64, FieldSpec>>,
}

const TABLE: &str = include_str!("schema.txt");

fn parse_kind(spec: &str) -> Option<Kind> {
    if let Some(message) = spec.strip_prefix("m ") {
        return Some(Kind::Message(message.to_string()));
    }
    if let Some(value) = spec.strip_prefix("map:") {
        return Some(Kind::Map(Box::new(parse_kind(value)?)));
    }
    Some(match spec {
        "string" => Kind::String,
        "bool" => Kind::Bool,
        "int32" => Kind::Int32,
        "int64" => Kind::Int64,
        "double" => Kind::Double,
        "bytes" => Kind::Bytes,
        _ => return None,
    })
}

impl Schema {
    /// The table, parsed on first use.
    pub fn get() -> &'static Schema {
        static SCHEMA: OnceLock<Schema> = OnceLock::new();
        SCHEMA.get_or_init(|| Schema::parse(TABLE))
    }

    fn parse(table: &str) -> Schema {
        let mut messages: HashMap<String, HashMap<u64, FieldSpec>> = HashMap::new();
        let mut current: Option<String> = None;
        for line in table.lines() {
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            if let Some(name) = line.strip_prefix('@') {
                messages.entry(name.to_string()).or_default();
                current = Some(name.to_string());
                continue;
            }
            let mut parts = line.splitn(3, ' ');
            let (Some(number), Some(json), Some(spec)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let Ok(number) = number.parse::<u64>() else {
                continue;
            };
            let (repeated, spec) = match spec.strip_prefix("[]") {
                Some(rest) => (true, rest),
                None => (false, spec),
            };
            let (Some(kind), Some(message)) = (parse_kind(spec), current.as_ref()) else {
                continue;
            };
            let json = (json != "-").then(|| json.to_string());
            if let Some(fields) = messages.get_mut(message) {
                fields.insert(
                    number,
                    FieldSpec {
                        json,
                        kind,
                        repeated,
                    },
                );
            }
        }
        Schema { messages }
    }

    pub fn message(&self, name: &str) -> Option<&HashMap<u64, FieldSpec>> {
        self.messages.get(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_knows_core_messages() {
        let schema = Schema::get();
        let secret = schema.message("api.core.v1.Secret").unwrap();
        assert_eq!(secret[&2].json.as_deref(), Some("data"));
        assert_eq!(secret[&2].kind, Kind::Map(Box::new(Kind::Bytes)));
        let volume = schema.message("api.core.v1.Volume").unwrap();
        assert_eq!(volume[&2].json, None, "VolumeSource is inlined");
        let rule = schema.message("api.rbac.v1.PolicyRule").unwrap();
        assert_eq!(rule[&5].json.as_deref(), Some("nonResourceURLs"));
        assert!(rule[&5].repeated);
    }
}
