//! A mutating webhook's answer applied: its JSON patch (RFC 6902, as
//! upstream's library applies it: `crate::patch::json`) on the object as
//! the hook was sent it. A patch may change anything a client
//! could write except what names the object — `metadata.name`,
//! `metadata.namespace`, `apiVersion` and `kind` — and must leave an object.

use serde_json::Value;

/// Why a patch was not applied (the text upstream puts in its 500).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(super) enum PatchError {
    #[error("invalid JSON patch: {0}")]
    Malformed(String),
    #[error("{0}")]
    Apply(String),
    #[error(
        "admission webhook \"{hook}\" attempted to change the object's {field}, which is not allowed"
    )]
    Renamed { hook: String, field: &'static str },
}

/// Applies `patch` to `object`; `Ok(true)` when it changed anything.
pub(super) fn apply(hook: &str, object: &mut Value, patch: &[u8]) -> Result<bool, PatchError> {
    let body: Value =
        serde_json::from_slice(patch).map_err(|e| PatchError::Malformed(e.to_string()))?;
    let operations =
        crate::patch::json::decode(&body).map_err(|e| PatchError::Malformed(e.to_string()))?;
    if operations.is_empty() {
        return Ok(false);
    }
    // A copy, dropped when an operation fails.
    let mut patched = object.clone();
    crate::patch::json::apply(&mut patched, operations)
        .map_err(|e| PatchError::Apply(e.to_string()))?;
    if !patched.is_object() {
        return Err(PatchError::Apply(
            "the patch produced something other than an object".into(),
        ));
    }
    for (field, path) in [
        ("name", "/metadata/name"),
        ("namespace", "/metadata/namespace"),
        ("apiVersion", "/apiVersion"),
        ("kind", "/kind"),
    ] {
        if patched.pointer(path) != object.pointer(path) {
            return Err(PatchError::Renamed {
                hook: hook.to_string(),
                field,
            });
        }
    }
    let changed = patched != *object;
    *object = patched;
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "labels": {"a": "1"}}})
    }

    #[test]
    fn a_failing_patch_after_a_move_is_refused_and_changes_nothing() {
        let mut object = pod();
        let patch = br#"[{"op": "move", "from": "/metadata/labels", "path": "/metadata"},
            {"op": "copy", "from": "/spec/template", "path": "/spec/other"}]"#;
        let refused = apply("hook", &mut object, patch);
        assert!(matches!(refused, Err(PatchError::Apply(_))), "{refused:?}");
        assert_eq!(object, pod());
    }

    #[test]
    fn a_patch_adds_a_label() {
        let mut object = pod();
        let patch = br#"[{"op":"add","path":"/metadata/labels/mutated","value":"yes"}]"#;
        assert_eq!(apply("m.example.com", &mut object, patch), Ok(true));
        assert_eq!(object["metadata"]["labels"]["mutated"], "yes");
    }

    #[test]
    fn a_patch_that_changes_nothing_says_so() {
        let mut object = pod();
        let same = br#"[{"op":"replace","path":"/metadata/labels/a","value":"1"}]"#;
        assert_eq!(apply("m.example.com", &mut object, same), Ok(false));
        assert_eq!(apply("m.example.com", &mut object, b"[]"), Ok(false));
    }

    #[test]
    fn renaming_or_moving_the_object_is_refused_and_leaves_it_alone() {
        for (path, field) in [
            ("/metadata/name", "name"),
            ("/metadata/namespace", "namespace"),
            ("/kind", "kind"),
        ] {
            let mut object = pod();
            let patch = serde_json::to_vec(&json!([{"op": "replace", "path": path, "value": "x"}]))
                .unwrap();
            let error = apply("m.example.com", &mut object, &patch).unwrap_err();
            assert_eq!(
                error.to_string(),
                format!(
                    "admission webhook \"m.example.com\" attempted to change the object's {field}, which is not allowed"
                )
            );
            assert_eq!(object, pod());
        }
    }

    #[test]
    fn failing_and_malformed_patches_are_errors() {
        let mut object = pod();
        let failing = br#"[{"op":"remove","path":"/spec/missing"}]"#;
        assert!(matches!(
            apply("h", &mut object, failing),
            Err(PatchError::Apply(_))
        ));
        assert!(matches!(
            apply("h", &mut object, b"{}"),
            Err(PatchError::Malformed(_))
        ));
        assert_eq!(object, pod());
    }
}
