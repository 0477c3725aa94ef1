//! JSON objects as CEL values and back, as upstream's unstructured
//! conversion does: whole numbers are `int`, other numbers `double`,
//! objects are maps with string keys.

use std::collections::HashMap;
use std::sync::Arc;

use cel::Value;
use cel::objects::{Key, Map};
use serde_json::Value as Json;

/// `json` as a CEL value.
pub(crate) fn from_json(json: &Json) -> Value {
    match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Value::Int(i),
            (None, Some(u)) => Value::UInt(u),
            _ => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Value::String(Arc::new(s.clone())),
        Json::Array(items) => Value::List(Arc::new(items.iter().map(from_json).collect())),
        Json::Object(map) => {
            let entries: HashMap<Key, Value> = map
                .iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), from_json(v)))
                .collect();
            Value::Map(Map {
                map: Arc::new(entries),
            })
        }
    }
}

/// A CEL value as JSON; `None` for values JSON cannot hold (functions,
/// opaque values, non-finite doubles).
pub(crate) fn to_json(value: &Value) -> Option<Json> {
    Some(match value {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::from(*i),
        Value::UInt(u) => Json::from(*u),
        Value::Float(f) => Json::Number(serde_json::Number::from_f64(*f)?),
        Value::String(s) => Json::String(s.to_string()),
        Value::List(items) => Json::Array(items.iter().map(to_json).collect::<Option<_>>()?),
        Value::Map(map) => {
            let mut object = serde_json::Map::new();
            for (key, value) in map.map.iter() {
                let key = match key {
                    Key::String(s) => s.to_string(),
                    Key::Int(i) => i.to_string(),
                    Key::Uint(u) => u.to_string(),
                    Key::Bool(b) => b.to_string(),
                };
                object.insert(key, to_json(value)?);
            }
            Json::Object(object)
        }
        _ => return None,
    })
}
