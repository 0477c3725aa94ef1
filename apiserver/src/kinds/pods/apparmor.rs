//! A pod's AppArmor profiles in both spellings, as upstream keeps them
//! since the field replaced the beta annotation (v1.30): on create, a
//! container's annotation fills its missing field and a field (the
//! container's, else the pod's) fills a missing annotation, so old and new
//! clients and nodes read the same profile; where both are given they must
//! agree, and an annotation must name one of the pod's containers.

use serde_json::{Map, Value, json};

use crate::request_notes::RequestNotes;
use crate::status::FieldError;

/// Where the beta API named a container's profile.
const ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// The container lists of a pod spec, in upstream's visiting order.
const CONTAINER_LISTS: [&str; 3] = ["initContainers", "containers", "ephemeralContainers"];

/// Whether the pod runs on Windows, where AppArmor means nothing.
fn on_windows(pod: &Value) -> bool {
    pod["spec"]["os"]["name"] == "windows"
}

/// The annotation value a profile field stands for (empty: none).
fn annotation_for(profile: &Value) -> String {
    match profile["type"].as_str() {
        Some("RuntimeDefault") => "runtime/default".into(),
        Some("Unconfined") => "unconfined".into(),
        Some("Localhost") => profile["localhostProfile"]
            .as_str()
            .map(|name| format!("localhost/{name}"))
            .unwrap_or_default(),
        _ => String::new(),
    }
}

/// The profile field an annotation value stands for, when it is a valid one.
fn field_for(annotation: &str) -> Option<Value> {
    match annotation {
        "runtime/default" => Some(json!({"type": "RuntimeDefault"})),
        "unconfined" => Some(json!({"type": "Unconfined"})),
        _ => {
            let name = annotation.strip_prefix("localhost/")?;
            (!name.is_empty() && name.trim() == name && name.len() <= 4095)
                .then(|| json!({"type": "Localhost", "localhostProfile": name}))
        }
    }
}

/// Copies each container's profile between its annotation and its field,
/// where one of them is missing; warns of every annotation still used.
pub(super) fn sync_on_create(pod: &mut Value, notes: &RequestNotes) {
    if on_windows(pod) {
        return;
    }
    let pod_profile = pod["spec"]["securityContext"]["appArmorProfile"].clone();
    let mut annotations = pod["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let before = annotations.clone();
    for list in CONTAINER_LISTS {
        let Some(containers) = pod["spec"][list].as_array_mut() else {
            continue;
        };
        for container in containers {
            let Some(name) = container["name"].as_str() else {
                continue;
            };
            let key = format!("{ANNOTATION_PREFIX}{name}");
            let own = &container["securityContext"]["appArmorProfile"];
            match annotations.get(&key).and_then(Value::as_str) {
                None => {
                    let value = match own.is_null() {
                        false => annotation_for(own),
                        true => annotation_for(&pod_profile),
                    };
                    if !value.is_empty() {
                        annotations.insert(key, json!(value));
                    }
                }
                Some(annotation) if own.is_null() => {
                    let field = field_for(annotation);
                    let copied = field.as_ref().filter(|f| **f != pod_profile);
                    if let Some(field) = copied {
                        set_container_profile(container, field.clone());
                    }
                    if field.is_none() || copied.is_some() {
                        notes.warn(format!(
                            "metadata.annotations[{key}]: deprecated since v1.30; use the \"appArmorProfile\" field instead"
                        ));
                    }
                }
                Some(_) => {}
            }
        }
    }
    if annotations != before {
        set_annotations(pod, annotations);
    }
}

fn set_container_profile(container: &mut Value, profile: Value) {
    if !container["securityContext"].is_object() {
        container["securityContext"] = json!({});
    }
    container["securityContext"]["appArmorProfile"] = profile;
}

fn set_annotations(pod: &mut Value, annotations: Map<String, Value>) {
    if !pod["metadata"].is_object() {
        pod["metadata"] = json!({});
    }
    pod["metadata"]["annotations"] = Value::Object(annotations);
}

/// On create: every AppArmor annotation names one of the pod's containers
/// and a profile, and agrees with the field where both are given.
pub(super) fn validate_on_create(pod: &Value, errors: &mut Vec<FieldError>) {
    if on_windows(pod) {
        return;
    }
    let annotations = pod["metadata"]["annotations"].as_object();
    let mut named: Vec<&str> = Vec::new();
    let pod_profile = &pod["spec"]["securityContext"]["appArmorProfile"];
    for list in CONTAINER_LISTS {
        for (i, container) in pod["spec"][list]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let Some(name) = container["name"].as_str() else {
                continue;
            };
            named.push(name);
            let own = &container["securityContext"]["appArmorProfile"];
            let profile = if own.is_null() { pod_profile } else { own };
            let annotation = annotations
                .and_then(|a| a.get(&format!("{ANNOTATION_PREFIX}{name}")))
                .and_then(Value::as_str);
            let (Some(annotation), false) = (annotation, profile.is_null()) else {
                continue;
            };
            let at = format!("spec.{list}[{i}].securityContext.appArmorProfile");
            let mismatch = |field: &str, what: &str| {
                FieldError::forbidden(
                    format!("{at}.{field}"),
                    format!("apparmor {what} in annotation and field must match"),
                )
            };
            match profile["type"].as_str() {
                Some("Localhost") => match annotation.strip_prefix("localhost/") {
                    None => errors.push(mismatch("type", "type")),
                    Some(name) if profile["localhostProfile"].as_str() != Some(name) => {
                        errors.push(mismatch("localhostProfile", "profile"))
                    }
                    Some(_) => {}
                },
                Some(kind) if annotation_for(&json!({"type": kind})) != annotation => {
                    errors.push(mismatch("type", "type"))
                }
                _ => {}
            }
        }
    }
    for (key, value) in annotations.into_iter().flatten() {
        let Some(container) = key.strip_prefix(ANNOTATION_PREFIX) else {
            continue;
        };
        let at = format!("metadata.annotations[{key}]");
        if !named.contains(&container) {
            errors.push(FieldError::invalid(
                at.clone(),
                container,
                "container not found",
            ));
        }
        let value = value.as_str().unwrap_or_default();
        if field_for(value).is_none() {
            errors.push(FieldError::invalid(
                at,
                value,
                "invalid AppArmor profile name",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synced(pod: Value) -> (Value, Vec<String>) {
        let mut pod = pod;
        let notes = RequestNotes::default();
        sync_on_create(&mut pod, &notes);
        (pod, notes.warnings())
    }

    #[test]
    fn a_field_fills_the_missing_annotation_the_containers_before_the_pods() {
        let (pod, warnings) = synced(json!({
            "metadata": {"name": "p"},
            "spec": {"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
                     "containers": [
                         {"name": "a", "securityContext": {"appArmorProfile":
                             {"type": "Localhost", "localhostProfile": "k8s-deny"}}},
                         {"name": "b"}]}}));
        let annotations = &pod["metadata"]["annotations"];
        assert_eq!(
            annotations[format!("{ANNOTATION_PREFIX}a")],
            "localhost/k8s-deny"
        );
        assert_eq!(
            annotations[format!("{ANNOTATION_PREFIX}b")],
            "runtime/default"
        );
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn an_annotation_fills_the_missing_field_and_is_warned_of() {
        let key = format!("{ANNOTATION_PREFIX}c");
        let (pod, warnings) = synced(json!({
            "metadata": {"name": "p", "annotations": {&key: "localhost/mine"}},
            "spec": {"containers": [{"name": "c"}]}}));
        assert_eq!(
            pod["spec"]["containers"][0]["securityContext"]["appArmorProfile"],
            json!({"type": "Localhost", "localhostProfile": "mine"})
        );
        assert_eq!(
            warnings,
            [format!(
                "metadata.annotations[{key}]: deprecated since v1.30; use the \"appArmorProfile\" field instead"
            )]
        );
        // The pod's own profile already says it: nothing is copied.
        let (pod, _) = synced(json!({
            "metadata": {"name": "p", "annotations": {&key: "runtime/default"}},
            "spec": {"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
                     "containers": [{"name": "c"}]}}));
        assert!(pod["spec"]["containers"][0]["securityContext"].is_null());
    }

    #[test]
    fn disagreeing_or_orphaned_annotations_are_refused_on_create() {
        let key = |c: &str| format!("{ANNOTATION_PREFIX}{c}");
        let pod = json!({
            "metadata": {"name": "p", "annotations": {
                key("a"): "unconfined", key("b"): "localhost/other", key("ghost"): "runtime/default",
                key("c"): "bogus"}},
            "spec": {"containers": [
                {"name": "a", "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}},
                {"name": "b", "securityContext": {"appArmorProfile":
                    {"type": "Localhost", "localhostProfile": "mine"}}},
                {"name": "c"}]}});
        let mut errors = Vec::new();
        validate_on_create(&pod, &mut errors);
        let got: Vec<(String, String)> = errors.into_iter().map(|e| (e.field, e.detail)).collect();
        let want = [
            (
                "spec.containers[0].securityContext.appArmorProfile.type".to_string(),
                "apparmor type in annotation and field must match".to_string(),
            ),
            (
                "spec.containers[1].securityContext.appArmorProfile.localhostProfile".into(),
                "apparmor profile in annotation and field must match".into(),
            ),
            (
                format!("metadata.annotations[{}]", key("c")),
                "invalid AppArmor profile name".into(),
            ),
            (
                format!("metadata.annotations[{}]", key("ghost")),
                "container not found".into(),
            ),
        ];
        assert_eq!(got, want);
    }
}
