//! Pruning: fields a structural schema does not specify are dropped before
//! an object is stored, unless the schema preserves unknown fields there.
//! `apiVersion`, `kind` and `metadata` are kept at the root and in embedded
//! resources, as upstream keeps them.

use serde_json::Value;

use super::schema::{Additional, Schema};

/// Removes every field of `value` that `schema` does not allow.
pub(crate) fn prune_root(schema: &Schema, value: &mut Value) {
    prune(schema, value, true);
}

fn prune(schema: &Schema, value: &mut Value, resource_root: bool) {
    match value {
        Value::Object(map) => {
            let keep_unknown = schema.preserves_unknown();
            let additional = match &schema.additional_properties {
                Some(Additional::Schema(s)) => Some(&**s),
                Some(Additional::Allowed(true)) => None,
                _ => None,
            };
            let allow_any = keep_unknown
                || matches!(
                    schema.additional_properties,
                    Some(Additional::Allowed(true))
                );
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let meta_field =
                    resource_root && matches!(key.as_str(), "apiVersion" | "kind" | "metadata");
                let child_schema = schema.properties.get(&key).or(additional);
                match child_schema {
                    _ if meta_field && key == "metadata" => {}
                    Some(child) => {
                        if let Some(v) = map.get_mut(&key) {
                            prune(child, v, child.embedded_resource);
                        }
                    }
                    None if meta_field || allow_any => {}
                    None => {
                        map.remove(&key);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = &schema.items {
                for item in items {
                    prune(item_schema, item, item_schema.embedded_resource);
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
    fn unknown_fields_go_unless_preserved() {
        let schema = Schema::parse(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": "integer"},
                "list": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}}}))
        .unwrap();
        let mut object = json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "n", "extra": 1},
            "spec": {"size": 1, "bogus": true, "list": [{"a": "x", "b": "y"}],
                "free": {"any": {"thing": 1}}, "labels": {"k": "v"}},
            "status": {"dropped": true}});
        prune_root(&schema, &mut object);
        assert_eq!(
            object,
            json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "n", "extra": 1},
                "spec": {"size": 1, "list": [{"a": "x"}], "free": {"any": {"thing": 1}}, "labels": {"k": "v"}}})
        );
    }
}
