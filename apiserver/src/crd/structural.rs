//! The structural-schema rules a CRD's `openAPIV3Schema` must follow before
//! the CRD is accepted: a type at every level (unless the node is an
//! int-or-string or preserves unknown fields), `items` for arrays, no
//! `additionalProperties` next to `properties`, an object at the root whose
//! `metadata` names at most `name` and `generateName`, patterns that compile
//! and defaults that fit their schema.

use serde_json::{Map, Value};

use super::schema::Schema;
use crate::status::FieldError;

const TYPES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];

/// Field errors of the schema JSON at `path` (the root of a version's schema).
pub(crate) fn check_root(schema: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let Some(map) = schema.as_object() else {
        errors.push(FieldError::invalid(
            path,
            schema.clone(),
            "must be an object",
        ));
        return;
    };
    match map.get("type").and_then(Value::as_str) {
        Some("object") => {}
        Some(other) => errors.push(FieldError::invalid(
            format!("{path}.type"),
            other,
            "must be object at the root",
        )),
        None => errors.push(FieldError::required(
            format!("{path}.type"),
            "must not be empty at the root",
        )),
    }
    if let Some(meta) = map
        .get("properties")
        .and_then(|p| p.get("metadata"))
        .and_then(Value::as_object)
    {
        let allowed = ["type", "properties"];
        let named_only = meta.keys().all(|k| allowed.contains(&k.as_str()))
            && meta
                .get("properties")
                .and_then(Value::as_object)
                .is_none_or(|p| p.keys().all(|k| k == "name" || k == "generateName"));
        if !named_only {
            errors.push(FieldError::forbidden(
                format!("{path}.properties[metadata]"),
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
    check_node(map, path, true, errors);
}

fn check_node(map: &Map<String, Value>, path: &str, root: bool, errors: &mut Vec<FieldError>) {
    let preserve = map.get("x-kubernetes-preserve-unknown-fields");
    if let Some(p) = preserve
        && p != &Value::Bool(true)
    {
        errors.push(FieldError::invalid(
            format!("{path}.x-kubernetes-preserve-unknown-fields"),
            p.clone(),
            "must be true or undefined",
        ));
    }
    let int_or_string = map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let ty = map.get("type").and_then(Value::as_str).unwrap_or("");
    if int_or_string && !ty.is_empty() {
        errors.push(FieldError::invalid(
            format!("{path}.type"),
            ty,
            "must be empty if x-kubernetes-int-or-string is true",
        ));
    }
    if ty.is_empty() && !int_or_string && preserve != Some(&Value::Bool(true)) && !root {
        errors.push(FieldError::required(
            format!("{path}.type"),
            "must not be empty for specified object fields",
        ));
    }
    if !ty.is_empty() && !TYPES.contains(&ty) {
        errors.push(FieldError::not_supported(format!("{path}.type"), ty, TYPES));
    }
    if map.contains_key("properties") && map.contains_key("additionalProperties") {
        errors.push(FieldError::forbidden(
            format!("{path}.additionalProperties"),
            "additionalProperties and properties are mutual exclusive",
        ));
    }
    if ty == "array" && !map.contains_key("items") {
        errors.push(FieldError::required(
            format!("{path}.items"),
            "must be specified",
        ));
    }
    if let Some(pattern) = map.get("pattern").and_then(Value::as_str)
        && regex::Regex::new(pattern).is_err()
    {
        errors.push(FieldError::invalid(
            format!("{path}.pattern"),
            pattern,
            "must be a valid regular expression",
        ));
    }
    for keyword in ["allOf", "anyOf", "oneOf", "not"] {
        if map.contains_key(keyword) {
            errors.push(FieldError::forbidden(
                format!("{path}.{keyword}"),
                "is not supported by this server",
            ));
        }
    }
    if let Some(props) = map.get("properties").and_then(Value::as_object) {
        for (name, child) in props {
            let child_path = format!("{path}.properties[{name}]");
            match child.as_object() {
                Some(c) => check_node(c, &child_path, false, errors),
                None => errors.push(FieldError::invalid(
                    child_path,
                    child.clone(),
                    "must be an object",
                )),
            }
        }
    }
    match map.get("items") {
        Some(Value::Object(c)) => check_node(c, &format!("{path}.items"), false, errors),
        Some(Value::Array(_)) => errors.push(FieldError::forbidden(
            format!("{path}.items"),
            "items must be a schema object and not an array",
        )),
        _ => {}
    }
    if let Some(Value::Object(c)) = map.get("additionalProperties") {
        check_node(c, &format!("{path}.additionalProperties"), false, errors);
    }
    if let Some(default) = map.get("default") {
        check_default(map, default, path, errors);
    }
}

/// A default must itself be valid against the node it sits on.
fn check_default(
    map: &Map<String, Value>,
    default: &Value,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    let Ok(schema) = Schema::parse(&Value::Object(map.clone())) else {
        return;
    };
    let mut found = Vec::new();
    let at = format!("{path}.default");
    super::values::validate(&schema, default, &at, &mut found);
    errors.extend(found);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(schema: Value) -> Vec<String> {
        let mut errors = Vec::new();
        check_root(&schema, "s", &mut errors);
        errors.iter().map(FieldError::render).collect()
    }

    #[test]
    fn common_rules_are_enforced() {
        assert!(
            check(
                json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"a": {"type": "string"}, "p": {"x-kubernetes-int-or-string": true},
            "free": {"x-kubernetes-preserve-unknown-fields": true}}}}})
            )
            .is_empty()
        );
        assert_eq!(
            check(
                json!({"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}})
            ),
            vec![
                "s.properties[spec].type: Required value: must not be empty for specified object fields"
            ]
        );
        assert_eq!(
            check(json!({"type": "string"})),
            vec!["s.type: Invalid value: \"string\": must be object at the root"]
        );
        let both = check(
            json!({"type": "object", "properties": {"m": {"type": "object",
            "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}}}),
        );
        assert_eq!(
            both,
            vec![
                "s.properties[m].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
            ]
        );
        let misc = check(json!({"type": "object", "properties": {
            "l": {"type": "array"}, "t": {"type": "text"}, "r": {"type": "string", "pattern": "(["},
            "d": {"type": "integer", "default": "x"},
            "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}}));
        assert!(
            misc.contains(&"s.properties[l].items: Required value: must be specified".to_string()),
            "{misc:?}"
        );
        crate::crd::assert_reported(&misc, "s.properties[t].type: Unsupported value: \"text\"");
        crate::crd::assert_reported(&misc, "s.properties[r].pattern: Invalid value");
        crate::crd::assert_reported(&misc, "s.properties[d].default: Invalid value: \"string\"");
        crate::crd::assert_reported(&misc, "s.properties[metadata]: Forbidden");
    }
}
