//! Deployment bookkeeping upstream keeps in labels and annotations: the
//! pod-template-hash, revisions, desired/max replicas, and conditions.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::Value;

use crate::controller_utils::now;

/// The label that ties pods and ReplicaSets to one template.
pub(super) const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// The revision of a ReplicaSet (and the Deployment's current one).
pub(super) const REVISION: &str = "deployment.kubernetes.io/revision";
/// Earlier revisions a ReplicaSet had (when rolled back to).
pub(super) const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
/// spec.replicas of the Deployment when the ReplicaSet was last scaled.
pub(super) const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
/// replicas + maxSurge of the Deployment when the ReplicaSet was last scaled.
pub(super) const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";

/// Annotations never copied from a Deployment to its ReplicaSets.
const NOT_COPIED: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    REVISION_HISTORY,
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    "deprecated.deployment.rollback.to",
];

/// FNV-1a, 32 bits.
fn fnv32a(data: &[u8]) -> u32 {
    let mut hash: u32 = 0x811c9dc5;
    for b in data {
        hash ^= u32::from(*b);
        hash = hash.wrapping_mul(0x01000193);
    }
    hash
}

/// The pod-template-hash of `template` (with the collision count mixed in),
/// spelled with upstream's safe alphabet (no vowels, no look-alikes).
pub(super) fn template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let mut bytes = serde_json::to_vec(template).unwrap_or_default();
    if let Some(c) = collision_count {
        bytes.extend_from_slice(&c.to_le_bytes());
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    fnv32a(&bytes)
        .to_string()
        .bytes()
        .map(|b| ALPHABET[usize::from(b) % ALPHABET.len()] as char)
        .collect()
}

/// The template as JSON without the pod-template-hash label, for comparing a
/// Deployment's template with a ReplicaSet's.
fn template_without_hash(template: Option<&PodTemplateSpec>) -> Value {
    let mut value = serde_json::to_value(template).unwrap_or(Value::Null);
    if let Some(labels) = value
        .get_mut("metadata")
        .and_then(|m| m.get_mut("labels"))
        .and_then(Value::as_object_mut)
    {
        labels.remove(POD_TEMPLATE_HASH);
        if labels.is_empty()
            && let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.remove("labels");
        }
    }
    value
}

/// True when the two templates are equal apart from pod-template-hash.
pub(super) fn equal_ignoring_hash(
    a: Option<&PodTemplateSpec>,
    b: Option<&PodTemplateSpec>,
) -> bool {
    template_without_hash(a) == template_without_hash(b)
}

/// The revision annotation of an object (0 when absent or unparsable).
pub(super) fn revision_of(annotations: Option<&BTreeMap<String, String>>) -> i64 {
    annotations
        .and_then(|a| a.get(REVISION))
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// Sets the annotations a ReplicaSet of `d` carries: the Deployment's own
/// (minus bookkeeping ones), its revision (recording a replaced one in the
/// history), desired and max replicas. Returns true when anything changed.
pub(super) fn set_replica_set_annotations(
    rs: &mut ReplicaSet,
    d: &Deployment,
    revision: Option<i64>,
    max_surge: i32,
) -> bool {
    let before = rs.metadata.annotations.clone();
    let annotations = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    for (k, v) in d.metadata.annotations.iter().flatten() {
        if !NOT_COPIED.contains(&k.as_str()) {
            annotations.insert(k.clone(), v.clone());
        }
    }
    if let Some(new_revision) = revision {
        let old = annotations.get(REVISION).cloned();
        let old_number = old
            .as_deref()
            .and_then(|r| r.parse::<i64>().ok())
            .unwrap_or(0);
        if old_number < new_revision {
            if let Some(old) = old.filter(|_| old_number > 0) {
                let history = match annotations.get(REVISION_HISTORY) {
                    Some(h) if !h.is_empty() => format!("{h},{old}"),
                    _ => old,
                };
                annotations.insert(REVISION_HISTORY.into(), history);
            }
            annotations.insert(REVISION.into(), new_revision.to_string());
        }
    }
    let replicas = desired(d);
    annotations.insert(DESIRED_REPLICAS.into(), replicas.to_string());
    annotations.insert(MAX_REPLICAS.into(), (replicas + max_surge).to_string());
    rs.metadata.annotations != before
}

/// spec.replicas of a Deployment (1 when unset).
pub(super) fn desired(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// spec.replicas of a ReplicaSet (0 when unset, as upstream counts it).
pub(super) fn rs_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
}

/// status.availableReplicas of a ReplicaSet.
pub(super) fn rs_available(rs: &ReplicaSet) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
}

/// A condition of `status` by type.
pub(super) fn condition<'a>(
    status: &'a DeploymentStatus,
    type_: &str,
) -> Option<&'a DeploymentCondition> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
}

/// A new condition stamped now.
pub(super) fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: Some(now()),
        last_transition_time: Some(now()),
    }
}

/// Sets `cond` unless one with the same status and reason is there; keeps the
/// old transition time when only the reason changes.
pub(super) fn set_condition(status: &mut DeploymentStatus, mut cond: DeploymentCondition) {
    if let Some(current) = condition(status, &cond.type_) {
        if current.status == cond.status && current.reason == cond.reason {
            return;
        }
        if current.status == cond.status {
            cond.last_transition_time = current.last_transition_time.clone();
        }
    }
    remove_condition(status, &cond.type_);
    status.conditions.get_or_insert_with(Vec::new).push(cond);
}

/// Removes the condition of `type_`.
pub(super) fn remove_condition(status: &mut DeploymentStatus, type_: &str) {
    if let Some(cs) = status.conditions.as_mut() {
        cs.retain(|c| c.type_ != type_);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn template(labels: &[(&str, &str)], image: &str) -> PodTemplateSpec {
        serde_json::from_value(serde_json::json!({
            "metadata": {"labels": skiff_common::labels::from_pairs(labels)},
            "spec": {"containers": [{"name": "c", "image": image}]}
        }))
        .unwrap()
    }

    #[test]
    fn hashes_are_stable_safe_and_change_with_collisions() {
        let t = template(&[("app", "a")], "nginx:1");
        let h = template_hash(&t, None);
        assert_eq!(h, template_hash(&t, None));
        assert!(
            h.bytes()
                .all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b))
        );
        assert_ne!(h, template_hash(&t, Some(1)));
        assert_ne!(
            h,
            template_hash(&template(&[("app", "a")], "nginx:2"), None)
        );
    }

    #[test]
    fn template_equality_ignores_the_hash_label() {
        let a = template(&[("app", "a")], "nginx:1");
        let b = template(&[("app", "a"), (POD_TEMPLATE_HASH, "xyz")], "nginx:1");
        assert!(equal_ignoring_hash(Some(&a), Some(&b)));
        let c = template(&[("app", "a")], "nginx:2");
        assert!(!equal_ignoring_hash(Some(&a), Some(&c)));
    }

    #[test]
    fn revisions_move_into_history_when_reused() {
        let d = Deployment {
            metadata: ObjectMeta {
                annotations: Some([("team".to_string(), "x".to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut rs = ReplicaSet::default();
        assert!(set_replica_set_annotations(&mut rs, &d, Some(1), 1));
        assert!(set_replica_set_annotations(&mut rs, &d, Some(3), 1));
        let a = rs.metadata.annotations.as_ref().unwrap();
        assert_eq!(a[REVISION], "3");
        assert_eq!(a[REVISION_HISTORY], "1");
        assert_eq!(a["team"], "x");
        assert_eq!(a[DESIRED_REPLICAS], "1");
        assert_eq!(a[MAX_REPLICAS], "2");
        assert!(!set_replica_set_annotations(&mut rs, &d, Some(2), 1));
    }
}
