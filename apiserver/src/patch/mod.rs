//! PATCH bodies: JSON Patch (RFC 6902), JSON Merge Patch (RFC 7386) and
//! Kubernetes strategic merge patch, applied to the JSON form of an object.

pub mod apply;
pub mod json;
mod strategic;
pub(crate) mod strategic_schema;

use serde_json::Value;

pub use strategic::strategic_merge;
pub(crate) use strategic_schema::{ListStrategy, list_strategy};

/// The patch formats, by request Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// RFC 6902 JSON patch (`application/json-patch+json`).
    Json,
    /// RFC 7386 JSON merge patch (`application/merge-patch+json`).
    Merge,
    /// Kubernetes' strategic merge patch (`application/strategic-merge-patch+json`).
    StrategicMerge,
    /// Server-side apply, approximated for now: the applied configuration is
    /// strategic-merged onto the live object (no field ownership, no removal
    /// of fields the manager stopped applying, no conflicts).
    Apply,
}

/// Accepted media types, as upstream lists them in a 415.
pub const PATCH_MEDIA_TYPES: &str = "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json";

impl PatchType {
    /// The patch type for a Content-Type header value, if supported.
    pub fn from_content_type(content_type: &str) -> Option<Self> {
        match content_type.split(';').next().unwrap_or("").trim() {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::StrategicMerge),
            "application/apply-patch+yaml" => Some(PatchType::Apply),
            _ => None,
        }
    }
}

/// A patch that could not be parsed or applied.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The patch does not parse.
    #[error("{0}")]
    Malformed(String),
    /// The patch parsed but does not apply to the object.
    #[error("{0}")]
    Apply(String),
}

/// Applies `patch` (the raw request body) of `kind` to `original`.
pub fn apply(kind: PatchType, original: &Value, patch: &[u8]) -> Result<Value, PatchError> {
    match kind {
        PatchType::Json => {
            let ops = parse_json(patch)?;
            check_nesting(original, &ops)?;
            let ops = json::decode(&ops).map_err(|e| PatchError::Malformed(e.to_string()))?;
            // Applied to a copy, dropped when an operation fails.
            let mut doc = original.clone();
            json::apply(&mut doc, ops).map_err(|e| PatchError::Apply(e.to_string()))?;
            Ok(doc)
        }
        PatchType::Merge => {
            let p = parse_object(patch)?;
            let mut doc = original.clone();
            json_patch::merge(&mut doc, &p);
            Ok(doc)
        }
        PatchType::StrategicMerge => {
            let p = parse_object(patch)?;
            strategic_merge(original, &p).map_err(PatchError::Apply)
        }
        PatchType::Apply => {
            let p = parse_applied(patch)?;
            strategic_merge(original, &p).map_err(PatchError::Apply)
        }
    }
}

/// How deeply a patched object may nest arrays and objects. Every object is
/// stored as JSON that must read back under serde_json's limit of 128, and
/// values nested without bound overflow the stack of whatever walks them
/// (dropping one included). Merge and strategic patches cannot nest deeper
/// than the object or the patch they combine; a JSON patch can, by adding
/// deep values at deep paths op after op.
pub const MAX_NESTING: usize = 100;

/// Refuses a JSON patch whose operations could nest the object deeper than
/// [`MAX_NESTING`], before any is applied: a bound on the result from each
/// operation's path and value, so nothing deep is ever built.
fn check_nesting(original: &Value, ops: &Value) -> Result<(), PatchError> {
    let segments = |op: &Value, field: &str| {
        op.get(field)
            .and_then(Value::as_str)
            .map_or(0, |p| p.matches('/').count())
    };
    let mut bound = nesting(original);
    for op in ops.as_array().into_iter().flatten() {
        let placed = match op.get("op").and_then(Value::as_str) {
            Some("add" | "replace" | "test") => {
                segments(op, "path") + op.get("value").map_or(0, nesting)
            }
            // The copied subtree is at most as deep as what is below `from`.
            Some("copy" | "move") => {
                segments(op, "path") + bound.saturating_sub(segments(op, "from"))
            }
            _ => 0,
        };
        bound = bound.max(placed);
        if bound > MAX_NESTING {
            return Err(PatchError::Malformed(format!(
                "the patch would nest the object more than {MAX_NESTING} levels deep"
            )));
        }
    }
    Ok(())
}

/// Levels of arrays and objects in `value` (parsed JSON, so at most 128).
fn nesting(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(nesting).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(nesting).max().unwrap_or(0),
        _ => 0,
    }
}

/// Whether a patch body (of a kind other than apply) sets or tests
/// `metadata.resourceVersion`, making it a precondition of the write. A body
/// that cannot be read names nothing (applying it fails anyway).
pub fn names_resource_version(kind: PatchType, patch: &[u8]) -> bool {
    let Ok(body) = serde_json::from_slice::<Value>(patch) else {
        return false;
    };
    match kind {
        PatchType::Json => body.as_array().is_some_and(|ops| {
            ops.iter().any(|op| {
                ["path", "from"].iter().any(|field| {
                    op[*field].as_str().is_some_and(|path| {
                        path == "/metadata/resourceVersion"
                            || path == "/metadata"
                            || path.is_empty()
                    })
                })
            })
        }),
        _ => body["metadata"].get("resourceVersion").is_some(),
    }
}

/// An apply body: a YAML (or JSON) object.
pub fn parse_applied(patch: &[u8]) -> Result<Value, PatchError> {
    let yaml: serde_yaml::Value = serde_yaml::from_slice(patch)
        .map_err(|e| PatchError::Malformed(format!("error decoding YAML: {e}")))?;
    let value = serde_json::to_value(yaml)
        .map_err(|e| PatchError::Malformed(format!("error decoding YAML: {e}")))?;
    if !value.is_object() {
        return Err(PatchError::Malformed("apply body must be an object".into()));
    }
    Ok(value)
}

/// A patch body as JSON; what is not JSON is refused in the words of Go's
/// decoder, as upstream's (`unexpected end of JSON input`).
fn parse_json(patch: &[u8]) -> Result<Value, PatchError> {
    serde_json::from_slice(patch).map_err(|e| {
        PatchError::Malformed(crate::go_json::syntax_error(patch).unwrap_or_else(|| e.to_string()))
    })
}

/// A merge or strategic merge patch: a JSON object, which upstream
/// decodes into a Go map.
fn parse_object(patch: &[u8]) -> Result<Value, PatchError> {
    let value = parse_json(patch)?;
    if !value.is_object() {
        return Err(PatchError::Malformed(crate::go_json::cannot_unmarshal(
            &value,
            "map[string]interface {}",
        )));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// JSON patch operations adding 125-deep arrays at the bottom of the last
    /// ones, as many as fit in `bytes`: each is valid JSON, together they
    /// nest thousands deep.
    fn deepening_patch(bytes: usize) -> Vec<u8> {
        let value = format!("{}{}", "[".repeat(125), "]".repeat(125));
        let mut ops = Vec::new();
        let (mut depth, mut size) = (0, 0);
        loop {
            let op = format!(
                r#"{{"op":"add","path":"/a{}/0","value":{value}}}"#,
                "/0".repeat(depth)
            );
            if size + op.len() > bytes {
                break;
            }
            size += op.len() + 1;
            ops.push(op);
            depth += 125;
        }
        format!("[{}]", ops.join(",")).into_bytes()
    }

    /// Found while fuzzing the patch path: a 3 MB JSON patch nested the
    /// object 19 000 deep and overflowed a 2 MB stack (a tokio worker's),
    /// killing the server; it is refused as a bad request before any
    /// operation is applied.
    #[test]
    fn a_json_patch_failing_after_a_move_is_refused_not_a_panic() {
        // Found by the `patch` fuzz target: undoing the move would move
        // `/metadata` into its own child.
        let original = json!({"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {}});
        let ops = br#"[{"op": "move", "from": "/metadata/labels", "path": "/metadata"},
            {"op": "copy", "from": "/spec/template", "path": "/spec/other"}]"#;
        // As upstream's library does: the move replaces `/metadata` with
        // the labels, and a copy from a missing member copies null.
        assert_eq!(
            apply(PatchType::Json, &original, ops).unwrap(),
            json!({"metadata": {"app": "web"}, "spec": {"other": null}})
        );
    }

    #[test]
    fn json_patches_cannot_nest_objects_without_bound() {
        let doc = json!({"a": []});
        let two = deepening_patch(700);
        assert!(matches!(
            apply(PatchType::Json, &doc, &two),
            Err(PatchError::Malformed(m)) if m.contains("more than 100 levels deep")
        ));
        let body = deepening_patch(crate::status::MAX_BODY_BYTES - 100);
        let outcome = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || apply(PatchType::Json, &doc, &body).map(|_| ()))
            .unwrap()
            .join()
            .expect("the patch did not overflow the stack");
        assert!(matches!(outcome, Err(PatchError::Malformed(_))));
        // Deep but within bounds, and copies that stay level, still apply.
        let level = json!({"a": {"b": {"c": 1}}});
        let ops = br#"[{"op":"copy","from":"/a/b","path":"/a/d"},{"op":"move","from":"/a/d","path":"/e"}]"#;
        let out = apply(PatchType::Json, &level, ops).unwrap();
        assert_eq!(out, json!({"a": {"b": {"c": 1}}, "e": {"c": 1}}));
    }

    #[test]
    fn bodies_that_do_not_decode_are_refused_in_go_decoder_words() {
        let doc = json!({"data": {}});
        let refused = |kind, body: &[u8]| match apply(kind, &doc, body) {
            Err(PatchError::Malformed(message)) => message,
            other => panic!("{other:?}"),
        };
        for kind in [PatchType::Json, PatchType::Merge, PatchType::StrategicMerge] {
            assert_eq!(
                refused(kind, br#"{"data":"#),
                "unexpected end of JSON input"
            );
        }
        assert_eq!(
            refused(PatchType::StrategicMerge, b"[1]"),
            "json: cannot unmarshal array into Go value of type map[string]interface {}"
        );
        assert_eq!(
            refused(PatchType::Json, br#"{"op": "add"}"#),
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
        );
    }

    #[test]
    fn json_and_merge_patches() {
        let doc = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "data": {"k": "v"}});
        let jp = br#"[{"op":"replace","path":"/data/k","value":"w"},{"op":"remove","path":"/metadata/labels/a"}]"#;
        let out = apply(PatchType::Json, &doc, jp).unwrap();
        assert_eq!(
            out,
            json!({"metadata": {"labels": {"b": "2"}}, "data": {"k": "w"}})
        );
        let mp = br#"{"metadata":{"labels":{"b":null,"c":"3"}}}"#;
        let out = apply(PatchType::Merge, &doc, mp).unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"a": "1", "c": "3"}));
        assert!(matches!(
            apply(PatchType::Json, &doc, b"{"),
            Err(PatchError::Malformed(_))
        ));
        let failing = br#"[{"op":"test","path":"/data/k","value":"nope"}]"#;
        assert!(matches!(
            apply(PatchType::Json, &doc, failing),
            Err(PatchError::Apply(_))
        ));
    }
}
