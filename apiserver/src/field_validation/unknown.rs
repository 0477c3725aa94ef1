//! Finds fields a kind does not know by comparing a body with its typed
//! round trip: every non-null field of the body must survive it.

use serde_json::Value;

/// Paths of the fields of `input` missing from `known` (its typed round
/// trip), e.g. `spec.containers[0].foo`. A missing field's children are not
/// listed; null fields are never unknown (they decode to "unset").
pub(crate) fn unknown_fields(input: &Value, known: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(input, known, &mut String::new(), &mut out);
    out
}

fn walk(input: &Value, known: &Value, path: &mut String, out: &mut Vec<String>) {
    match (input, known) {
        (Value::Object(fields), Value::Object(known_fields)) => {
            for (key, value) in fields {
                if value.is_null() {
                    continue;
                }
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                match known_fields.get(key) {
                    Some(k) => walk(value, k, path, out),
                    None => out.push(path.clone()),
                }
                path.truncate(len);
            }
        }
        (Value::Array(items), Value::Array(known_items)) if items.len() == known_items.len() => {
            for (i, (item, k)) in items.iter().zip(known_items).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk(item, k, path, out);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// Removes from `input` the fields `unknown_fields` would report, so what
/// the handlers see is what will be stored (an unknown field must not count
/// as a change).
pub(crate) fn strip_unknown(input: &mut Value, known: &Value) {
    match (input, known) {
        (Value::Object(fields), Value::Object(known_fields)) => {
            fields.retain(|key, value| value.is_null() || known_fields.contains_key(key));
            for (key, value) in fields.iter_mut() {
                if let Some(k) = known_fields.get(key) {
                    strip_unknown(value, k);
                }
            }
        }
        (Value::Array(items), Value::Array(known_items)) if items.len() == known_items.len() => {
            for (item, k) in items.iter_mut().zip(known_items) {
                strip_unknown(item, k);
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
    fn reports_what_the_round_trip_lost() {
        let input = json!({"metadata": {"name": "a", "bogus": {"x": 1}, "labels": null},
            "spec": {"containers": [{"name": "c", "foo": 1}]}});
        let known = json!({"apiVersion": "v1", "metadata": {"name": "a"},
            "spec": {"containers": [{"name": "c"}]}});
        assert_eq!(
            unknown_fields(&input, &known),
            vec!["metadata.bogus", "spec.containers[0].foo"]
        );
        assert!(unknown_fields(&known, &known).is_empty());
        let mut stripped = input.clone();
        strip_unknown(&mut stripped, &known);
        assert!(unknown_fields(&stripped, &known).is_empty());
        assert_eq!(stripped["metadata"], json!({"name": "a", "labels": null}));
    }
}
