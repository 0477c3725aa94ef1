//! Defaulting from a structural schema: a missing property with a `default`
//! gets it (then its own nested defaults), on writes and on every read from
//! storage, so objects stored before a default was added show it too.

use serde_json::Value;

use super::schema::{Additional, Schema};

/// Fills in the schema's defaults below `value`.
pub(crate) fn apply(schema: &Schema, value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, child) in &schema.properties {
                if let Some(default) = &child.default
                    && map.get(key).is_none_or(|v| v.is_null() && !child.nullable)
                {
                    map.insert(key.clone(), default.clone());
                }
            }
            let additional = match &schema.additional_properties {
                Some(Additional::Schema(s)) => Some(&**s),
                _ => None,
            };
            for (key, v) in map.iter_mut() {
                if let Some(child) = schema.properties.get(key).or(additional) {
                    apply(child, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = &schema.items {
                for item in items {
                    apply(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn missing_fields_get_their_defaults_nested() {
        let schema = Schema::parse(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "default": {}, "properties": {
                "replicas": {"type": "integer", "default": 1},
                "mode": {"type": "string", "default": "fast"},
                "ports": {"type": "array", "items": {"type": "object", "properties": {
                    "protocol": {"type": "string", "default": "TCP"}}}}}}}}))
        .unwrap();
        let mut empty = json!({"metadata": {"name": "a"}});
        apply(&schema, &mut empty);
        assert_eq!(empty["spec"], json!({"replicas": 1, "mode": "fast"}));
        let mut given = json!({"spec": {"replicas": 3, "ports": [{"port": 80}]}});
        apply(&schema, &mut given);
        assert_eq!(
            given["spec"],
            json!({"replicas": 3, "mode": "fast", "ports": [{"port": 80, "protocol": "TCP"}]})
        );
    }
}
