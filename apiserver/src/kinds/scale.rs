//! The autoscaling/v1 Scale view built-in workloads share: `spec.replicas`,
//! `status.replicas` and the selector as a query string.

use serde_json::{Value, json};

use crate::object::set_section_field;
use crate::selectors::LabelSelector;

/// `spec.selector` (a LabelSelector) as a query string; empty when absent
/// or malformed.
pub(super) fn label_selector(object: &Value) -> String {
    LabelSelector::from_object(&object["spec"]["selector"])
        .map(|s| s.to_query())
        .unwrap_or_default()
}

/// The Scale of `object`, with `selector` as `status.selector`.
pub(super) fn view(object: &Value, selector: String) -> Value {
    let replicas = |part: &str| object[part]["replicas"].as_i64().unwrap_or(0);
    scale_of(object, replicas("spec"), replicas("status"), &selector)
}

/// The autoscaling/v1 Scale of `object` (built-in or custom) with these
/// replica counts and `status.selector`.
pub(crate) fn scale_of(object: &Value, spec: i64, status: i64, selector: &str) -> Value {
    let meta = &object["metadata"];
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
            "creationTimestamp": meta["creationTimestamp"],
        },
        "spec": { "replicas": spec },
        "status": { "replicas": status, "selector": selector },
    })
}

/// Sets `spec.replicas`, creating `spec` when missing.
pub(super) fn set_spec_replicas(object: &mut Value, replicas: i64) {
    set_section_field(object, "spec", "replicas", json!(replicas));
}
