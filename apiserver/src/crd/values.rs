//! Checks a custom object (or a schema default) against its structural
//! schema: every violation becomes a field error worded as upstream's
//! OpenAPI validator words it (`spec.replicas in body must be of type
//! integer: "string"`), so clients see the messages they know.

use serde_json::Value;

use super::schema::{Additional, Schema};
use crate::status::FieldError;

/// Every field error of `value` at `path` against `schema`.
pub(crate) fn validate(schema: &Schema, value: &Value, path: &str, errors: &mut Vec<FieldError>) {
    if value.is_null() {
        if !schema.nullable && schema.ty.is_some() && !schema.int_or_string {
            errors.push(type_error(schema, value, path));
        }
        return;
    }
    if !type_matches(schema, value) {
        errors.push(type_error(schema, value, path));
        return;
    }
    if let Some(allowed) = &schema.enumeration
        && !allowed.iter().any(|a| a == value)
    {
        let supported: Vec<String> = allowed
            .iter()
            .map(|a| match a {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        let supported: Vec<&str> = supported.iter().map(String::as_str).collect();
        errors.push(FieldError::not_supported(path, value.clone(), &supported));
    }
    match value {
        Value::Number(n) => number(schema, n, value, path, errors),
        Value::String(s) => string(schema, s, path, errors),
        Value::Array(items) => array(schema, items, path, errors),
        Value::Object(map) => {
            check_size(
                map.len(),
                (schema.min_properties, schema.max_properties),
                path,
                "properties",
                errors,
            );
            for key in &schema.required {
                if !map.contains_key(key) {
                    errors.push(FieldError::required(child_path(path, key), ""));
                }
            }
            for (key, child) in map {
                let sub = schema
                    .properties
                    .get(key)
                    .or(match &schema.additional_properties {
                        Some(Additional::Schema(s)) => Some(s),
                        _ => None,
                    });
                if let Some(sub) = sub {
                    validate(sub, child, &child_path(path, key), errors);
                }
            }
        }
        Value::Bool(_) | Value::Null => {}
    }
}

/// The path of property `key` below `path` (`""` at the root), as field
/// errors name it.
pub(super) fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The JSON type names upstream reports for a value.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(schema: &Schema, value: &Value) -> bool {
    if schema.int_or_string {
        return value.is_string() || is_integer(value);
    }
    match schema.ty.as_deref() {
        None | Some("") => true,
        Some("object") => value.is_object(),
        Some("array") => value.is_array(),
        Some("string") => value.is_string(),
        Some("boolean") => value.is_boolean(),
        Some("integer") => is_integer(value),
        Some("number") => value.is_number(),
        Some(_) => false,
    }
}

/// Integers may arrive as `3.0` from clients that only have floats.
fn is_integer(value: &Value) -> bool {
    match value {
        Value::Number(n) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

fn type_error(schema: &Schema, value: &Value, path: &str) -> FieldError {
    let wanted = if schema.int_or_string {
        "integer,string".to_string()
    } else {
        schema.ty.clone().unwrap_or_default()
    };
    let got = type_name(value);
    FieldError::invalid(
        path,
        got,
        format!("{path} in body must be of type {wanted}: \"{got}\""),
    )
}

fn number(
    schema: &Schema,
    n: &serde_json::Number,
    value: &Value,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    let Some(x) = n.as_f64() else {
        return;
    };
    if let Some(min) = schema.minimum {
        let (bad, word) = if schema.exclusive_minimum {
            (x <= min, "greater than")
        } else {
            (x < min, "greater than or equal to")
        };
        if bad {
            errors.push(FieldError::invalid(
                path,
                value.clone(),
                format!("{path} in body should be {word} {}", render_bound(min)),
            ));
        }
    }
    if let Some(max) = schema.maximum {
        let (bad, word) = if schema.exclusive_maximum {
            (x >= max, "less than")
        } else {
            (x > max, "less than or equal to")
        };
        if bad {
            errors.push(FieldError::invalid(
                path,
                value.clone(),
                format!("{path} in body should be {word} {}", render_bound(max)),
            ));
        }
    }
    let range = match schema.format.as_deref() {
        Some("int32") => Some((f64::from(i32::MIN), f64::from(i32::MAX))),
        Some("int64") => Some((i64::MIN as f64, i64::MAX as f64)),
        _ => None,
    };
    if let (Some((lo, hi)), Some(format)) = (range, schema.format.as_deref())
        && (x < lo || x > hi)
    {
        errors.push(FieldError::invalid(
            path,
            value.clone(),
            format!("{path} in body must be of type {format}: \"{n}\""),
        ));
    }
}

/// Bounds print as integers when they are whole, as Go's %v does.
fn render_bound(b: f64) -> String {
    if b.fract() == 0.0 && b.abs() < 1e15 {
        format!("{}", b as i64)
    } else {
        b.to_string()
    }
}

/// A `count` (of characters, items or properties) below `min` on the field
/// `(path, value)`, in upstream's words: "`path` in body should " and what
/// `should` says of the bound.
fn check_min(
    count: u64,
    min: Option<u64>,
    (path, value): (&str, Value),
    should: impl Fn(u64) -> String,
    errors: &mut Vec<FieldError>,
) {
    if let Some(min) = min.filter(|&min| count < min) {
        errors.push(FieldError::invalid(
            path,
            value,
            format!("{path} in body should {}", should(min)),
        ));
    }
}

/// `minItems`/`maxItems` and `minProperties`/`maxProperties`: bounds on how
/// many `what` a value has. Too few is Invalid with the count as the value;
/// too many is upstream's TooMany, which says "items" of maps as well.
fn check_size(
    len: usize,
    (min, max): (Option<u64>, Option<u64>),
    path: &str,
    what: &str,
    errors: &mut Vec<FieldError>,
) {
    let count = len as u64;
    check_min(
        count,
        min,
        (path, count.into()),
        |n| format!("have at least {n} {what}"),
        errors,
    );
    if let Some(max) = max.filter(|&max| count > max) {
        errors.push(FieldError::too_many(path, count, max));
    }
}

fn string(schema: &Schema, s: &str, path: &str, errors: &mut Vec<FieldError>) {
    // Characters are counted, but a string too long is upstream's TooLong,
    // which says bytes all the same.
    let chars = s.chars().count() as u64;
    check_min(
        chars,
        schema.min_length,
        (path, s.into()),
        |n| format!("be at least {n} chars long"),
        errors,
    );
    if let Some(max) = schema.max_length.filter(|&max| chars > max) {
        errors.push(FieldError::too_long(path, max as usize));
    }
    if let (Some(pattern), Some(regex)) = (&schema.pattern, &schema.regex)
        && !regex.is_match(s)
    {
        errors.push(FieldError::invalid(
            path,
            s,
            format!("{path} in body should match '{pattern}'"),
        ));
    }
    let format_ok = match schema.format.as_deref() {
        Some("date-time") => s.parse::<jiff::Timestamp>().is_ok(),
        Some("int-or-string") | None => true,
        Some(_) => true,
    };
    if !format_ok {
        let format = schema.format.as_deref().unwrap_or("");
        errors.push(FieldError::invalid(
            path,
            s,
            format!("{path} in body must be of type {format}: \"{s}\""),
        ));
    }
}

fn array(schema: &Schema, items: &[Value], path: &str, errors: &mut Vec<FieldError>) {
    check_size(
        items.len(),
        (schema.min_items, schema.max_items),
        path,
        "items",
        errors,
    );
    if let Some(item_schema) = &schema.items {
        for (i, item) in items.iter().enumerate() {
            validate(item_schema, item, &format!("{path}[{i}]"), errors);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(schema: Value, value: Value) -> Vec<String> {
        let schema = Schema::parse(&schema).unwrap();
        let mut out = Vec::new();
        validate(&schema, &value, "", &mut out);
        out.iter().map(FieldError::render).collect()
    }

    #[test]
    fn wrong_type_is_worded_as_upstream() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"replicas": {"type": "integer"}}}}});
        assert_eq!(
            errors(schema, json!({"spec": {"replicas": "three"}})),
            vec![
                "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
            ]
        );
    }

    #[test]
    fn every_violation_is_reported_with_its_path() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "required": ["size"],
            "properties": {
                "replicas": {"type": "integer", "minimum": 1, "maximum": 5, "format": "int32"},
                "name": {"type": "string", "minLength": 2, "maxLength": 4, "pattern": "^[a-z]+$"},
                "mode": {"type": "string", "enum": ["fast", "slow"]},
                "tags": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}},
                "note": {"type": "string", "nullable": true},
                "port": {"x-kubernetes-int-or-string": true}}}}});
        let got = errors(
            schema.clone(),
            json!({"spec": {"replicas": 9, "name": "ABCDEF", "mode": "medium",
                "tags": ["a", 1, "c"], "note": null, "port": true}}),
        );
        assert!(
            got.contains(&"spec.size: Required value".to_string()),
            "{got:?}"
        );
        assert!(got.contains(&"spec.replicas: Invalid value: 9: spec.replicas in body should be less than or equal to 5".to_string()), "{got:?}");
        assert!(
            got.contains(&"spec.name: Too long: may not be more than 4 bytes".to_string()),
            "{got:?}"
        );
        assert!(
            got.contains(
                &"spec.name: Invalid value: \"ABCDEF\": spec.name in body should match '^[a-z]+$'"
                    .to_string()
            ),
            "{got:?}"
        );
        assert!(
            got.contains(
                &"spec.mode: Unsupported value: \"medium\": supported values: \"fast\", \"slow\""
                    .to_string()
            ),
            "{got:?}"
        );
        assert!(
            got.contains(&"spec.tags: Too many: 3: must have at most 2 items".to_string()),
            "{got:?}"
        );
        assert!(got.contains(&"spec.tags[1]: Invalid value: \"integer\": spec.tags[1] in body must be of type string: \"integer\"".to_string()), "{got:?}");
        assert!(got.contains(&"spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"".to_string()), "{got:?}");
        assert_eq!(got.len(), 8, "{got:?}");
        assert!(errors(schema.clone(), json!({"spec": {"size": 1, "replicas": 0}}))
            .contains(&"spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1".to_string()));
        assert!(
            errors(
                schema.clone(),
                json!({"spec": {"size": 1, "replicas": 3000000000u64}})
            )
            .iter()
            .any(|e| e.contains("must be of type int32"))
        );
        assert!(errors(schema, json!({"spec": {"size": 1, "replicas": 3, "name": "ab", "mode": "fast", "tags": ["x"], "port": "80"}})).is_empty());
    }
}
