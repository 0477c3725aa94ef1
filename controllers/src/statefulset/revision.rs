//! StatefulSet revisions: each distinct pod template is stored as a
//! ControllerRevision named `<set>-<hash>`, and pods carry the name in their
//! `controller-revision-hash` label.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use serde_json::{Value, json};

use crate::controller_utils::{controller_owner_ref, safe_hash};

/// The pod label naming the revision a pod was made from.
pub(super) const REVISION_LABEL: &str = "controller-revision-hash";

/// What a revision stores: the set's pod template as a replacing patch.
pub(super) fn revision_data(set: &StatefulSet) -> Value {
    let template = set
        .spec
        .as_ref()
        .map(|s| serde_json::to_value(&s.template).unwrap_or(Value::Null))
        .unwrap_or(Value::Null);
    let mut template = template;
    if let Some(map) = template.as_object_mut() {
        map.insert("$patch".into(), json!("replace"));
    }
    json!({"spec": {"template": template}})
}

/// The pod template a revision stores.
pub(super) fn template_of(revision: &ControllerRevision) -> Option<PodTemplateSpec> {
    let mut template = revision
        .data
        .as_ref()?
        .0
        .get("spec")?
        .get("template")?
        .clone();
    if let Some(map) = template.as_object_mut() {
        map.remove("$patch");
    }
    serde_json::from_value(template).ok()
}

/// A new revision object for the set's current template.
pub(super) fn new_revision(
    set: &StatefulSet,
    number: i64,
    collision_count: Option<i32>,
) -> ControllerRevision {
    let data = revision_data(set);
    let hash = safe_hash(
        &serde_json::to_vec(&data).unwrap_or_default(),
        collision_count,
    );
    let set_name = set.metadata.name.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = set
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert("controller.kubernetes.io/hash".into(), hash.clone());
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(format!("{set_name}-{hash}")),
            namespace: set.metadata.namespace.clone(),
            labels: Some(labels),
            owner_references: Some(vec![controller_owner_ref(set)]),
            ..Default::default()
        },
        data: Some(RawExtension(data)),
        revision: number,
    }
}

/// True when `revision` stores the set's current template.
pub(super) fn matches(revision: &ControllerRevision, set: &StatefulSet) -> bool {
    revision.data.as_ref().map(|d| &d.0) == Some(&revision_data(set))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(image: &str) -> StatefulSet {
        serde_json::from_value(json!({
            "metadata": {"name": "db", "namespace": "ns", "uid": "u"},
            "spec": {"selector": {"matchLabels": {"app": "db"}},
                     "template": {"metadata": {"labels": {"app": "db"}},
                                  "spec": {"containers": [{"name": "c", "image": image}]}}}
        }))
        .unwrap()
    }

    #[test]
    fn revisions_round_trip_templates_and_names_follow_the_hash() {
        let s = set("pg:1");
        let r = new_revision(&s, 1, None);
        assert!(r.metadata.name.as_deref().unwrap().starts_with("db-"));
        assert!(matches(&r, &s));
        assert!(!matches(&r, &set("pg:2")));
        assert_eq!(
            template_of(&r),
            s.spec.as_ref().map(|sp| sp.template.clone())
        );
        assert_ne!(new_revision(&s, 1, Some(1)).metadata.name, r.metadata.name);
    }
}
