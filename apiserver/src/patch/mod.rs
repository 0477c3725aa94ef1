//! PATCH bodies: JSON Patch (RFC 6902), JSON Merge Patch (RFC 7386) and
//! Kubernetes strategic merge patch, applied to the JSON form of an object.

pub mod apply;
mod strategic;
pub(crate) mod strategic_schema;

use serde_json::Value;

pub use strategic::strategic_merge;
pub(crate) use strategic_schema::{ListStrategy, list_strategy};

/// The patch formats, by request Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
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
    #[error("{0}")]
    Malformed(String),
    #[error("{0}")]
    Apply(String),
}

/// Applies `patch` (the raw request body) of `kind` to `original`.
pub fn apply(kind: PatchType, original: &Value, patch: &[u8]) -> Result<Value, PatchError> {
    match kind {
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_slice(patch)
                .map_err(|e| PatchError::Malformed(format!("error decoding patch: {e}")))?;
            let mut doc = original.clone();
            json_patch::patch(&mut doc, &ops).map_err(|e| PatchError::Apply(e.to_string()))?;
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

fn parse_object(patch: &[u8]) -> Result<Value, PatchError> {
    let value: Value = serde_json::from_slice(patch)
        .map_err(|e| PatchError::Malformed(format!("error decoding patch: {e}")))?;
    if !value.is_object() {
        return Err(PatchError::Malformed(
            "patch body must be a JSON object".into(),
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
