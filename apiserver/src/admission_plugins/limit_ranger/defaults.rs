//! A LimitRange's container defaults: `default` fills missing limits and
//! `defaultRequest` missing requests of every container and init container,
//! and the pod's `kubernetes.io/limit-ranger` annotation says what was set.

use serde_json::{Map, Value, json};

use crate::object::{meta_mut, path_mut};

/// The annotation naming what LimitRanger set.
pub(super) const ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// The Container items' `default` (limits) and `defaultRequest` (requests)
/// of one LimitRange, later items overriding earlier ones.
fn container_defaults(range: &Value) -> (Map<String, Value>, Map<String, Value>) {
    let mut requests = Map::new();
    let mut limits = Map::new();
    for item in range["spec"]["limits"].as_array().into_iter().flatten() {
        if item["type"] != "Container" {
            continue;
        }
        for (field, into) in [("defaultRequest", &mut requests), ("default", &mut limits)] {
            if let Some(values) = item[field].as_object() {
                into.extend(values.clone());
            }
        }
    }
    (requests, limits)
}

/// Sets in `resources.<field>` each default it lacks; the names it set, in
/// order.
fn fill(container: &mut Value, field: &str, defaults: &Map<String, Value>) -> Vec<String> {
    if defaults.is_empty() {
        return Vec::new();
    }
    if !container["resources"].is_object() {
        container["resources"] = json!({});
    }
    if !container["resources"][field].is_object() {
        container["resources"][field] = json!({});
    }
    let Some(have) = container["resources"][field].as_object_mut() else {
        return Vec::new();
    };
    let mut set: Vec<String> = Vec::new();
    for (name, value) in defaults {
        if !have.contains_key(name) {
            have.insert(name.clone(), value.clone());
            set.push(name.clone());
        }
    }
    set.sort();
    set
}

/// Applies `range`'s container defaults to `pod`.
pub(super) fn apply(range: &Value, pod: &mut Value) {
    let (requests, limits) = container_defaults(range);
    if requests.is_empty() && limits.is_empty() {
        return;
    }
    let mut notes: Vec<String> = Vec::new();
    for (list, what) in [
        ("containers", "container"),
        ("initContainers", "init container"),
    ] {
        let Some(containers) = path_mut(pod, &["spec", list]).and_then(Value::as_array_mut) else {
            continue;
        };
        for container in containers {
            let name = container["name"].as_str().unwrap_or("").to_string();
            let set_requests = fill(container, "requests", &requests);
            let set_limits = fill(container, "limits", &limits);
            if !set_requests.is_empty() {
                notes.push(format!(
                    "{} request for {what} {name}",
                    set_requests.join(", ")
                ));
            }
            if !set_limits.is_empty() {
                notes.push(format!("{} limit for {what} {name}", set_limits.join(", ")));
            }
        }
    }
    if notes.is_empty() {
        return;
    }
    let meta = meta_mut(pod);
    if !meta.get("annotations").is_some_and(Value::is_object) {
        meta.insert("annotations".into(), json!({}));
    }
    if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
        annotations.insert(
            ANNOTATION.into(),
            json!(format!("LimitRanger plugin set: {}", notes.join("; "))),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_requests_and_limits_are_filled_and_annotated() {
        let range = json!({"spec": {"limits": [
            {"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"},
             "defaultRequest": {"cpu": "100m", "memory": "128Mi"}},
            {"type": "Pod", "max": {"cpu": "2"}}
        ]}});
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {
            "containers": [
                {"name": "a", "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}},
                {"name": "b"}
            ],
            "initContainers": [{"name": "i", "resources": {"requests": {"memory": "1Gi"}}}]
        }});
        apply(&range, &mut pod);
        let spec = &pod["spec"];
        assert_eq!(
            spec["containers"][0]["resources"],
            json!({"limits": {"cpu": "1", "memory": "256Mi"}, "requests": {"cpu": "1", "memory": "128Mi"}})
        );
        assert_eq!(
            spec["containers"][1]["resources"],
            json!({"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}})
        );
        assert_eq!(
            spec["initContainers"][0]["resources"]["requests"],
            json!({"cpu": "100m", "memory": "1Gi"})
        );
        assert_eq!(
            pod["metadata"]["annotations"][ANNOTATION],
            "LimitRanger plugin set: memory request for container a; memory limit for container a; \
             cpu, memory request for container b; cpu, memory limit for container b; \
             cpu request for init container i; cpu, memory limit for init container i"
        );
    }

    #[test]
    fn a_pod_that_specifies_everything_is_left_alone() {
        let range = json!({"spec": {"limits": [
            {"type": "Container", "default": {"cpu": "1"}, "defaultRequest": {"cpu": "1"}}
        ]}});
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "a", "resources": {"limits": {"cpu": "2"}, "requests": {"cpu": "2"}}}
        ]}});
        let before = pod.clone();
        apply(&range, &mut pod);
        assert_eq!(pod, before);
    }
}
