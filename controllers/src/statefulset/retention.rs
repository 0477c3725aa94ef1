//! `persistentVolumeClaimRetentionPolicy`: what becomes of the claims a
//! StatefulSet made from its templates. The controller says it with owner
//! references and the garbage collector does the rest, as upstream's:
//! - `whenDeleted: Delete`: a claim is owned by the StatefulSet, so it goes
//!   when the set does;
//! - `whenScaled: Delete`: the claim of a pod past the replicas (scaled
//!   down) is owned by that pod, so it goes with it (and by the set no
//!   more); scaled up again before the pod went, the pod lets it go.
//!
//! `Retain` (the default of both) leaves no reference. A claim still used
//! by a running pod is kept by pvc-protection until the pod is gone.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;

/// The set's policy, `Retain` where unset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Retention {
    /// `whenDeleted: Delete`.
    delete_with_set: bool,
    /// `whenScaled: Delete`.
    delete_when_scaled: bool,
}

impl Retention {
    /// The policy of `set`.
    pub(super) fn of(set: &StatefulSet) -> Self {
        let policy = set
            .spec
            .as_ref()
            .and_then(|s| s.persistent_volume_claim_retention_policy.as_ref());
        let deletes = |v: Option<&String>| v.is_some_and(|v| v == "Delete");
        Retention {
            delete_with_set: deletes(policy.and_then(|p| p.when_deleted.as_ref())),
            delete_when_scaled: deletes(policy.and_then(|p| p.when_scaled.as_ref())),
        }
    }

    /// The owner references `claim` (of `pod`, `scaled_down` or not) should
    /// have, when they are not what it has: its others kept, the set's and
    /// the pod's as the policy says.
    pub(super) fn owners_to_write(
        self,
        claim: &PersistentVolumeClaim,
        set: &StatefulSet,
        pod: Option<&Pod>,
        scaled_down: bool,
    ) -> Option<Vec<OwnerReference>> {
        let want_set = self.delete_with_set && !(self.delete_when_scaled && scaled_down);
        let want_pod = self.delete_when_scaled && scaled_down;
        let refs = claim.metadata.owner_references.clone().unwrap_or_default();
        let set_uid = set.meta().uid.as_deref();
        let pod_uid = pod.and_then(|p| p.meta().uid.as_deref());
        let has = |uid: Option<&str>| uid.is_some_and(|u| refs.iter().any(|r| r.uid == u));
        if has(set_uid) == want_set && (pod.is_none() || has(pod_uid) == want_pod) {
            return None;
        }
        let mut wanted: Vec<OwnerReference> = refs
            .iter()
            .filter(|r| Some(r.uid.as_str()) != set_uid && Some(r.uid.as_str()) != pod_uid)
            .cloned()
            .collect();
        if want_set {
            wanted.push(reference(set));
        }
        if let Some(pod) = pod.filter(|_| want_pod) {
            wanted.push(reference(pod));
        }
        Some(wanted)
    }
}

/// A plain (not controlling) owner reference to `owner`.
fn reference<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: owner.meta().name.clone().unwrap_or_default(),
        uid: owner.meta().uid.clone().unwrap_or_default(),
        controller: None,
        block_owner_deletion: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(when_deleted: &str, when_scaled: &str) -> StatefulSet {
        serde_json::from_value(json!({
            "metadata": {"name": "db", "uid": "set-uid"},
            "spec": {"selector": {}, "serviceName": "db", "template": {},
                "persistentVolumeClaimRetentionPolicy":
                    {"whenDeleted": when_deleted, "whenScaled": when_scaled}}
        }))
        .expect("set")
    }

    fn pod() -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "db-1", "uid": "pod-uid"}}))
            .expect("pod")
    }

    fn claim(owners: &[&str]) -> PersistentVolumeClaim {
        let refs: Vec<_> = owners
            .iter()
            .map(|uid| json!({"apiVersion": "v1", "kind": "X", "name": "x", "uid": uid}))
            .collect();
        serde_json::from_value(json!({"metadata": {"name": "data-db-1", "ownerReferences": refs}}))
            .expect("claim")
    }

    fn uids(refs: Option<Vec<OwnerReference>>) -> Option<Vec<String>> {
        refs.map(|r| r.into_iter().map(|r| r.uid).collect())
    }

    #[test]
    fn the_policy_says_which_of_set_and_pod_own_a_claim() {
        let pod = pod();
        // (whenDeleted, whenScaled, scaled down) → owners wanted.
        let cases: [(&str, &str, bool, &[&str]); 8] = [
            ("Retain", "Retain", false, &[]),
            ("Retain", "Retain", true, &[]),
            ("Delete", "Retain", false, &["set-uid"]),
            ("Delete", "Retain", true, &["set-uid"]),
            ("Retain", "Delete", false, &[]),
            ("Retain", "Delete", true, &["pod-uid"]),
            ("Delete", "Delete", false, &["set-uid"]),
            ("Delete", "Delete", true, &["pod-uid"]),
        ];
        for (deleted, scaled, down, want) in cases {
            let set = set(deleted, scaled);
            let policy = Retention::of(&set);
            let from_nothing = policy.owners_to_write(&claim(&[]), &set, Some(&pod), down);
            let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
            if want.is_empty() {
                assert_eq!(uids(from_nothing), None, "{deleted}/{scaled}/{down}");
            } else {
                assert_eq!(
                    uids(from_nothing),
                    Some(want.clone()),
                    "{deleted}/{scaled}/{down}"
                );
            }
            // Once written, nothing more to write.
            let owned: Vec<&str> = want.iter().map(String::as_str).collect();
            assert_eq!(
                policy.owners_to_write(&claim(&owned), &set, Some(&pod), down),
                None
            );
        }
    }

    #[test]
    fn other_owners_stay_and_scaling_back_up_lets_the_pod_go() {
        let set = set("Delete", "Delete");
        let policy = Retention::of(&set);
        let refs = policy.owners_to_write(&claim(&["other", "pod-uid"]), &set, Some(&pod()), false);
        assert_eq!(
            uids(refs),
            Some(vec!["other".to_string(), "set-uid".to_string()])
        );
        let retained = set_default();
        assert_eq!(
            uids(Retention::of(&retained).owners_to_write(
                &claim(&["set-uid"]),
                &retained,
                None,
                false
            )),
            Some(vec![]),
            "a policy changed back to Retain drops the set's reference"
        );
    }

    fn set_default() -> StatefulSet {
        serde_json::from_value(json!({
            "metadata": {"name": "db", "uid": "set-uid"},
            "spec": {"selector": {}, "serviceName": "db", "template": {}}
        }))
        .expect("set")
    }
}
