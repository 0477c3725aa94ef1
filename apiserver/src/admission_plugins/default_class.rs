//! DefaultIngressClass and DefaultStorageClass, as upstream's admission
//! plugins of those names: a new Ingress or PersistentVolumeClaim that names
//! no class is given the class its kind marks as the default by annotation.
//! When several are marked, the newest wins, and among equally new ones the
//! first by name. Updates are left alone, and so is a claim whose
//! `storageClassName` is `""`: that asks for no class at all.
//!
//! Classes are read from their watch cache; nothing is written.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::networking::v1::Ingress;
use serde_json::{Value, json};
use skiff_common::default_class::{
    BETA_STORAGE_CLASS_MARKER, Candidate, INGRESS_CLASS_MARKER, STORAGE_CLASS_MARKER, is_marked,
    newest_default,
};

use super::cached_in_namespace;
use crate::kinds::GroupResource;
use crate::object::meta_str;
use crate::registry::ResourceInfo;
use crate::server::Inner;

/// How one kind names its class, and how classes mark the default.
struct ClassRule {
    /// The v1 class resource: (group, resource).
    classes: (&'static str, &'static str),
    /// The spec field that names the class.
    field: &'static str,
    /// The legacy annotation that names the class instead.
    legacy_annotation: &'static str,
    /// Annotations whose value `"true"` marks a class as the default.
    default_markers: &'static [&'static str],
}

const INGRESS: ClassRule = ClassRule {
    classes: ("networking.k8s.io", "ingressclasses"),
    field: "ingressClassName",
    legacy_annotation: "kubernetes.io/ingress.class",
    default_markers: &[INGRESS_CLASS_MARKER],
};

const CLAIM: ClassRule = ClassRule {
    classes: ("storage.k8s.io", "storageclasses"),
    field: "storageClassName",
    legacy_annotation: "volume.beta.kubernetes.io/storage-class",
    default_markers: &[STORAGE_CLASS_MARKER, BETA_STORAGE_CLASS_MARKER],
};

/// Sets a new Ingress's or claim's class to the default one when it names
/// none.
pub(crate) fn default_class(inner: &Inner, info: &ResourceInfo, object: &mut Value) {
    let rule = if info.is(GroupResource::of::<Ingress>()) {
        &INGRESS
    } else if info.is(GroupResource::of::<PersistentVolumeClaim>()) {
        &CLAIM
    } else {
        return;
    };
    if rule.named_in(object) {
        return;
    }
    let (group, resource) = rule.classes;
    let Some(classes) = inner.registry.get(group, "v1", resource) else {
        return;
    };
    let classes = cached_in_namespace(inner, &classes, "");
    if let Some(name) = rule.default_among(classes.iter().map(|c| &**c))
        && let Some(spec) = object
            .as_object_mut()
            .map(|o| o.entry("spec").or_insert(json!({})))
        && let Some(spec) = spec.as_object_mut()
    {
        spec.insert(rule.field.into(), json!(name));
    }
}

impl ClassRule {
    /// Whether `object` names a class (or, with `""`, asks for none).
    fn named_in(&self, object: &Value) -> bool {
        let by_field = object
            .pointer(&format!("/spec/{}", self.field))
            .is_some_and(|v| !v.is_null());
        let by_annotation = object
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .is_some_and(|a| a.contains_key(self.legacy_annotation));
        by_field || by_annotation
    }

    /// The default class among these stored classes, if any is marked.
    fn default_among<'a>(&self, classes: impl Iterator<Item = &'a Value>) -> Option<String> {
        let candidates = classes.filter_map(|c| {
            let annotations = c
                .pointer("/metadata/annotations")
                .and_then(Value::as_object);
            let marked = is_marked(self.default_markers, |key| {
                annotations.and_then(|a| a.get(key)).and_then(Value::as_str)
            });
            Some(Candidate {
                name: meta_str(c, "name")?,
                created: meta_str(c, "creationTimestamp").unwrap_or(""),
                marked,
            })
        });
        newest_default(candidates).map(str::to_owned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, created: &str, annotations: &[(&str, &str)]) -> Value {
        let annotations: serde_json::Map<String, Value> = annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), json!(v)))
            .collect();
        json!({"metadata": {"name": name, "creationTimestamp": created, "annotations": annotations}})
    }

    #[test]
    fn storage_classes_are_marked_by_either_annotation() {
        let classes = [
            class(
                "beta",
                "2026-01-01T00:00:00Z",
                &[("storageclass.beta.kubernetes.io/is-default-class", "true")],
            ),
            class(
                "ingress-marked",
                "2026-02-01T00:00:00Z",
                &[("ingressclass.kubernetes.io/is-default-class", "true")],
            ),
        ];
        assert_eq!(CLAIM.default_among(classes.iter()).as_deref(), Some("beta"));
        assert_eq!(
            INGRESS.default_among(classes.iter()).as_deref(),
            Some("ingress-marked")
        );
    }

    #[test]
    fn a_class_named_either_way_is_kept() {
        let cases = [
            (&INGRESS, json!({"spec": {"ingressClassName": "x"}}), true),
            (
                &INGRESS,
                json!({"metadata": {"annotations": {"kubernetes.io/ingress.class": "x"}}}),
                true,
            ),
            (&INGRESS, json!({"spec": {"ingressClassName": null}}), false),
            (&INGRESS, json!({"metadata": {}, "spec": {}}), false),
            // "" asks for a claim without a class: no default is given.
            (&CLAIM, json!({"spec": {"storageClassName": ""}}), true),
            (
                &CLAIM,
                json!({"metadata": {"annotations": {"volume.beta.kubernetes.io/storage-class": "x"}}}),
                true,
            ),
            (
                &CLAIM,
                json!({"spec": {"accessModes": ["ReadWriteOnce"]}}),
                false,
            ),
        ];
        for (rule, object, named) in cases {
            assert_eq!(rule.named_in(&object), named, "{object}");
        }
    }
}
