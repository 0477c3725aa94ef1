//! skiff's `local-path` volumes as the two halves that handle them name
//! them: the provisioner in the controller manager, which makes a
//! PersistentVolume for a claim the scheduler placed on a node and binds
//! the two, and the node agent, which owns the directory on its host
//! (makes it on first mount, removes it once the volume is Released).
//!
//! The provisioner never touches a host: it learns where a node keeps its
//! volumes from the node's [`STORAGE_DIR_ANNOTATION`], which only that
//! node writes. A volume is a node's to clean up when it carries
//! [`PROVISIONED_BY_ANNOTATION`] with [`PROVISIONER`] and its node
//! affinity pins it to that node alone ([`pinned_node`]); the Node
//! authorizer lets a node read and delete exactly those.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ObjectReference,
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec, VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The default StorageClass every skiff cluster gets (k3s's name).
pub const CLASS: &str = "local-path";
/// The provisioner name of that class.
pub const PROVISIONER: &str = "skiff.io/local-path";
/// Names the provisioner that made a volume (nodes remove only these).
pub const PROVISIONED_BY_ANNOTATION: &str = "pv.kubernetes.io/provisioned-by";
/// Set by the scheduler on delayed claims once their pod has a node.
pub const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";
/// Where a node keeps its local-path volumes: an absolute host path the
/// node's agent writes on its own Node object at every start.
pub const STORAGE_DIR_ANNOTATION: &str = "skiff.io/local-path-dir";
/// The label key the volumes' node affinity pins them by.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// The name of the volume provisioned for the claim with `uid`.
pub fn volume_name(claim_uid: &str) -> String {
    format!("pvc-{claim_uid}")
}

/// The directory of a provisioned claim under `storage_dir` (k3s's naming:
/// unique and readable): `pvc-<uid>_<namespace>_<name>`.
pub fn claim_dir(storage_dir: &Path, claim: &PersistentVolumeClaim) -> PathBuf {
    let meta = &claim.metadata;
    storage_dir.join(format!(
        "pvc-{}_{}_{}",
        meta.uid.as_deref().unwrap_or_default(),
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default()
    ))
}

/// The volume a directory named by [`claim_dir`] belongs to.
pub fn volume_of_dir(dir_name: &str) -> Option<String> {
    let uid = dir_name.strip_prefix("pvc-")?.split('_').next()?;
    (!uid.is_empty()).then(|| volume_name(uid))
}

/// The PersistentVolume that backs `claim` at `dir` on `node`, pre-bound
/// to the claim.
pub fn volume_for(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    dir: &Path,
    node: &str,
) -> PersistentVolume {
    let uid = claim.metadata.uid.clone().unwrap_or_default();
    let spec = claim.spec.clone().unwrap_or_default();
    let capacity = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.clone())
        .and_then(|r| r.get("storage").cloned())
        .map(|q| BTreeMap::from([("storage".to_string(), q)]));
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(volume_name(&uid)),
            annotations: Some(BTreeMap::from([(
                PROVISIONED_BY_ANNOTATION.to_string(),
                PROVISIONER.to_string(),
            )])),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity,
            access_modes: spec.access_modes.clone(),
            persistent_volume_reclaim_policy: Some(
                class
                    .reclaim_policy
                    .clone()
                    .unwrap_or_else(|| "Delete".into()),
            ),
            storage_class_name: class.metadata.name.clone(),
            volume_mode: spec.volume_mode.clone(),
            host_path: Some(HostPathVolumeSource {
                path: dir.to_string_lossy().into_owned(),
                type_: Some("DirectoryOrCreate".into()),
            }),
            node_affinity: Some(VolumeNodeAffinity {
                required: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: Some(vec![NodeSelectorRequirement {
                            key: HOSTNAME_LABEL.into(),
                            operator: "In".into(),
                            values: Some(vec![node.to_string()]),
                        }]),
                        match_fields: None,
                    }],
                }),
            }),
            claim_ref: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("PersistentVolumeClaim".into()),
                name: claim.metadata.name.clone(),
                namespace: claim.metadata.namespace.clone(),
                uid: Some(uid),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: None,
    }
}

/// The default `local-path` StorageClass every skiff cluster gets (k3s
/// ships the same): WaitForFirstConsumer, reclaim Delete.
pub fn default_class() -> StorageClass {
    StorageClass {
        metadata: ObjectMeta {
            name: Some(CLASS.into()),
            annotations: Some(BTreeMap::from([(
                crate::default_class::STORAGE_CLASS_MARKER.to_string(),
                "true".to_string(),
            )])),
            ..Default::default()
        },
        provisioner: PROVISIONER.into(),
        reclaim_policy: Some("Delete".into()),
        volume_binding_mode: Some("WaitForFirstConsumer".into()),
        ..Default::default()
    }
}

/// Whether `volume` is to be reclaimed now: its claim is gone (Released)
/// and its reclaim policy is `Delete`.
pub fn to_reclaim(volume: &PersistentVolume) -> bool {
    let released = volume.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released");
    let delete = volume
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
        == Some("Delete");
    released && delete
}

/// Whether the local-path provisioner made `volume`.
pub fn provisioned_by_us(volume: &PersistentVolume) -> bool {
    volume
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PROVISIONED_BY_ANNOTATION))
        .is_some_and(|p| p == PROVISIONER)
}

/// The one node `volume`'s affinity pins it to, as the provisioner writes
/// it: a single term of `kubernetes.io/hostname In [node]`. Any other
/// shape pins it to no single node.
pub fn pinned_node(volume: &PersistentVolume) -> Option<&str> {
    let terms = &volume
        .spec
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required
        .as_ref()?
        .node_selector_terms;
    let [term] = terms.as_slice() else {
        return None;
    };
    if term.match_fields.as_ref().is_some_and(|f| !f.is_empty()) {
        return None;
    }
    let [requirement] = term.match_expressions.as_deref()? else {
        return None;
    };
    let [node] = requirement.values.as_deref()? else {
        return None;
    };
    (requirement.key == HOSTNAME_LABEL && requirement.operator == "In").then_some(node.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PersistentVolumeClaimSpec;

    fn claim() -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                namespace: Some("ns".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                storage_class_name: Some(CLASS.into()),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn class() -> StorageClass {
        default_class()
    }

    #[test]
    fn a_provisioned_volume_is_a_host_directory_pinned_to_the_node_and_bound_to_the_claim() {
        let c = claim();
        let dir = claim_dir(Path::new("/data/storage"), &c);
        assert_eq!(dir, Path::new("/data/storage/pvc-u1_ns_data"));
        assert_eq!(volume_of_dir("pvc-u1_ns_data").as_deref(), Some("pvc-u1"));
        let pv = volume_for(&c, &class(), &dir, "n1");
        assert_eq!(pv.metadata.name.as_deref(), Some("pvc-u1"));
        assert!(provisioned_by_us(&pv));
        assert_eq!(pinned_node(&pv), Some("n1"));
        let spec = pv.spec.expect("spec");
        assert_eq!(
            spec.host_path.map(|h| h.path).as_deref(),
            Some("/data/storage/pvc-u1_ns_data")
        );
        let claim_ref = spec.claim_ref.expect("claimRef");
        assert_eq!(claim_ref.uid.as_deref(), Some("u1"));
        assert_eq!(
            spec.persistent_volume_reclaim_policy.as_deref(),
            Some("Delete")
        );
    }

    #[test]
    fn only_a_released_volume_whose_policy_is_delete_is_reclaimed() {
        let mut pv = volume_for(&claim(), &class(), Path::new("/s/pvc-u1"), "n1");
        let with = |pv: &mut PersistentVolume, phase: &str, policy: &str| {
            pv.status = Some(k8s_openapi::api::core::v1::PersistentVolumeStatus {
                phase: Some(phase.into()),
                ..Default::default()
            });
            if let Some(spec) = pv.spec.as_mut() {
                spec.persistent_volume_reclaim_policy = Some(policy.into());
            }
            to_reclaim(pv)
        };
        assert!(with(&mut pv, "Released", "Delete"));
        assert!(!with(&mut pv, "Bound", "Delete"));
        assert!(!with(&mut pv, "Released", "Retain"));
        assert!(!with(&mut pv, "Failed", "Delete"));
    }

    #[test]
    fn a_volume_is_pinned_to_one_node_only_by_one_hostname_term() {
        let mut pv = volume_for(&claim(), &class(), Path::new("/s/pvc-u1"), "n1");
        fn terms(pv: &mut PersistentVolume) -> &mut Vec<NodeSelectorTerm> {
            &mut pv
                .spec
                .as_mut()
                .and_then(|s| s.node_affinity.as_mut())
                .and_then(|a| a.required.as_mut())
                .expect("affinity")
                .node_selector_terms
        }
        let second = terms(&mut pv)[0].clone();
        terms(&mut pv).push(second);
        assert_eq!(pinned_node(&pv), None, "two terms pin to either");
        terms(&mut pv).pop();
        if let Some(e) = terms(&mut pv)[0].match_expressions.as_mut() {
            e[0].values = Some(vec!["n1".into(), "n2".into()]);
        }
        assert_eq!(pinned_node(&pv), None, "two nodes");
        if let Some(e) = terms(&mut pv)[0].match_expressions.as_mut() {
            e[0].values = Some(vec!["n1".into()]);
            e[0].operator = "NotIn".into();
        }
        assert_eq!(pinned_node(&pv), None, "NotIn");
        assert_eq!(volume_of_dir("other"), None);
        assert_eq!(volume_of_dir("pvc-_x"), None);
    }
}
