//! Namespaces: a DNS label name, the `kubernetes` finalizer in
//! `spec.finalizers` (which only `namespaces/finalize` changes, and which
//! holds a deleted namespace in its Terminating phase), and the system
//! namespaces that may not be deleted.

use serde_json::{Value, json};

use super::{InitialStatus, KindStrategy, PodSecurityCheck};
use crate::handlers::storage;
use crate::object::{set_field, set_section_field};
use crate::registry::ResourceInfo;
use crate::status::ApiError;
use crate::validation::NameRule;

/// Upstream refuses to delete these.
const UNDELETABLE: &[&str] = &["default", "kube-system", "kube-public"];

named_kind! {
    /// The `namespaces` resource.
    Namespaces = k8s_openapi::api::core::v1::Namespace;
}

/// The label every namespace carries with its own name.
const METADATA_NAME_LABEL: &str = "kubernetes.io/metadata.name";

impl KindStrategy for Namespaces {
    fn name_rule(&self) -> NameRule {
        NameRule::Label
    }

    fn deletes_collections(&self) -> bool {
        false
    }

    fn pod_security(&self) -> PodSecurityCheck {
        PodSecurityCheck::NamespaceLabels
    }

    fn initial_status(&self) -> InitialStatus {
        InitialStatus::Phase("Active")
    }

    /// The `kubernetes` finalizer, and the label upstream keeps equal to
    /// the name (so a namespace selector can pick a namespace by name).
    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        set_field(object, "spec", json!({ "finalizers": ["kubernetes"] }));
        let Some(name) = object["metadata"]["name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .map(String::from)
        else {
            return;
        };
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            let labels = meta.entry("labels").or_insert_with(|| json!({}));
            if !labels.is_object() {
                *labels = json!({});
            }
            labels[METADATA_NAME_LABEL] = json!(name);
        }
    }

    fn carry_on_update(&self, old: &Value, new: &mut Value) {
        let mut spec = new
            .get("spec")
            .filter(|s| s.is_object())
            .cloned()
            .unwrap_or_else(|| json!({}));
        match old["spec"].get("finalizers") {
            Some(f) => set_field(&mut spec, "finalizers", f.clone()),
            None => {
                if let Some(m) = spec.as_object_mut() {
                    m.remove("finalizers");
                }
            }
        }
        set_field(new, "spec", spec);
    }

    fn check_delete(&self, info: &ResourceInfo, name: &str) -> Result<(), ApiError> {
        if !UNDELETABLE.contains(&name) {
            return Ok(());
        }
        Err(storage::forbidden(
            info,
            name,
            "this namespace may not be deleted".into(),
        ))
    }

    fn held(&self, namespace: &Value) -> bool {
        namespace["spec"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
    }

    fn mark_deleting(&self, namespace: &mut Value) {
        set_section_field(namespace, "status", "phase", json!("Terminating"));
    }
}
