//! DefaultIngressClass, as upstream's admission plugin: a new Ingress that
//! names no class (neither `spec.ingressClassName` nor the legacy
//! `kubernetes.io/ingress.class` annotation) is given the IngressClass marked
//! `ingressclass.kubernetes.io/is-default-class: "true"` — the newest such
//! class when several are. Updates are left alone.
//!
//! It reads IngressClasses from their watch cache and never writes.

use k8s_openapi::api::networking::v1::Ingress;
use serde_json::{Value, json};

use super::cached_in_namespace;
use crate::kinds::GroupResource;
use crate::object::meta_str;
use crate::registry::ResourceInfo;
use crate::server::Inner;

/// The annotation marking the default class.
const DEFAULT_CLASS: &str = "ingressclass.kubernetes.io/is-default-class";

/// Sets a new Ingress's class to the default one when it names none.
pub(crate) fn default_class(inner: &Inner, info: &ResourceInfo, ingress: &mut Value) {
    if !info.is(GroupResource::of::<Ingress>()) {
        return;
    }
    if names_a_class(ingress) {
        return;
    }
    let Some(classes) = inner
        .registry
        .get("networking.k8s.io", "v1", "ingressclasses")
    else {
        return;
    };
    let classes = cached_in_namespace(inner, &classes, "");
    if let Some(name) = newest_default(classes.iter().map(|c| &**c))
        && let Some(spec) = ingress
            .as_object_mut()
            .map(|o| o.entry("spec").or_insert(json!({})))
        && let Some(spec) = spec.as_object_mut()
    {
        spec.insert("ingressClassName".into(), json!(name));
    }
}

fn names_a_class(ingress: &Value) -> bool {
    let by_field = ingress
        .pointer("/spec/ingressClassName")
        .is_some_and(|v| !v.is_null());
    let by_annotation = ingress
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| a.contains_key("kubernetes.io/ingress.class"));
    by_field || by_annotation
}

/// The name of the newest class marked default (by creation time, then
/// name), if any.
fn newest_default<'a>(classes: impl Iterator<Item = &'a Value>) -> Option<String> {
    classes
        .filter(|c| {
            c.pointer("/metadata/annotations")
                .and_then(|a| a.get(DEFAULT_CLASS))
                .and_then(Value::as_str)
                == Some("true")
        })
        .filter_map(|c| {
            let created = meta_str(c, "creationTimestamp").unwrap_or("").to_owned();
            Some((created, meta_str(c, "name")?.to_owned()))
        })
        .max()
        .map(|(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, created: &str, default: Option<&str>) -> Value {
        let mut class = json!({"metadata": {"name": name, "creationTimestamp": created}});
        if let Some(value) = default {
            class["metadata"]["annotations"] = json!({DEFAULT_CLASS: value});
        }
        class
    }

    #[test]
    fn the_newest_default_class_wins() {
        let classes = [
            class("old", "2026-01-01T00:00:00Z", Some("true")),
            class("new", "2026-02-01T00:00:00Z", Some("true")),
            class(
                "newer-but-not-default",
                "2026-03-01T00:00:00Z",
                Some("false"),
            ),
            class("plain", "2026-03-01T00:00:00Z", None),
        ];
        assert_eq!(newest_default(classes.iter()).as_deref(), Some("new"));
        assert_eq!(newest_default(classes[2..].iter()), None);
    }

    #[test]
    fn a_class_named_either_way_is_kept() {
        assert!(names_a_class(&json!({"spec": {"ingressClassName": "x"}})));
        assert!(names_a_class(
            &json!({"metadata": {"annotations": {"kubernetes.io/ingress.class": "x"}}})
        ));
        assert!(!names_a_class(&json!({"spec": {"ingressClassName": null}})));
        assert!(!names_a_class(&json!({"metadata": {}, "spec": {}})));
    }
}
