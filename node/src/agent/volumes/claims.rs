//! persistentVolumeClaim volumes: claim → bound PersistentVolume → a host
//! directory (hostPath and local PVs). Claims of the `local-path` class
//! (k3s's default) that wait for their first consumer are provisioned here,
//! on the node the scheduler selected: a directory under `DATA_DIR/storage`
//! becomes a hostPath PV pinned to this node, and the claim is bound to it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ObjectReference,
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec, VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

/// The default StorageClass every skiff cluster gets.
pub(crate) const LOCAL_PATH_CLASS: &str = "local-path";
/// The provisioner name of that class.
pub(crate) const LOCAL_PATH_PROVISIONER: &str = "skiff.io/local-path";
/// Names the provisioner that made a volume (the reclaimer removes only
/// its own).
pub(crate) const PROVISIONED_BY_ANNOTATION: &str = "pv.kubernetes.io/provisioned-by";
/// Set by the scheduler on delayed claims once their pod has a node.
pub(crate) const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";

/// Why a claim gives no directory (yet).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClaimError {
    /// No such claim.
    #[error("persistentvolumeclaim \"{0}\" not found")]
    NotFound(String),
    /// The claim has no volume yet.
    #[error("persistentvolumeclaim \"{0}\" is not bound")]
    Unbound(String),
    /// The claim is being deleted: no new pod may start with it.
    #[error("persistentvolumeclaim \"{0}\" is being deleted")]
    Deleting(String),
    /// The claim names a PersistentVolume that does not exist.
    #[error(
        "persistentvolumeclaim \"{claim}\" is bound to non-existent persistentvolume \"{volume}\""
    )]
    MissingVolume {
        /// The claim.
        claim: String,
        /// The volume it names.
        volume: String,
    },
    /// The PersistentVolume is of a kind this node cannot mount.
    #[error("persistentvolume \"{0}\": only hostPath and local volumes are supported")]
    UnsupportedVolume(String),
    /// The API failed.
    #[error("persistentvolumeclaim \"{claim}\": {source}")]
    Api {
        /// The claim.
        claim: String,
        /// Why.
        source: kube::Error,
    },
    /// The provisioned directory could not be made.
    #[error("provisioning {path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// What resolving a claim needs.
pub(crate) struct ClaimContext<'a> {
    /// API access as the node: reads of the pod's claims and their volumes.
    pub client: &'a kube::Client,
    /// API access as the local-path provisioner: creating and binding volumes.
    pub provisioner: &'a kube::Client,
    /// This node (provisions only claims the scheduler placed here).
    pub node_name: &'a str,
    /// Where provisioned volumes live (`DATA_DIR/storage`).
    pub storage_dir: &'a Path,
}

fn api_err(claim: &str) -> impl FnOnce(kube::Error) -> ClaimError + '_ {
    move |source| ClaimError::Api {
        claim: claim.to_string(),
        source,
    }
}

async fn get_opt<K>(api: &Api<K>, name: &str) -> Result<Option<K>, kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.get(name).await {
        Ok(object) => Ok(Some(object)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(e),
    }
}

/// The host directory behind claim `name` in `namespace`, provisioning it
/// first when it is a local-path claim placed on this node.
pub(crate) async fn resolve(
    ctx: &ClaimContext<'_>,
    namespace: &str,
    name: &str,
) -> Result<PathBuf, ClaimError> {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), namespace);
    let claim = get_opt(&claims, name)
        .await
        .map_err(api_err(name))?
        .ok_or_else(|| ClaimError::NotFound(name.to_string()))?;
    if claim.metadata.deletion_timestamp.is_some() {
        return Err(ClaimError::Deleting(name.to_string()));
    }
    let volume_name = match bound_volume(&claim) {
        Some(v) => v.to_string(),
        None => provision(ctx, &claim)
            .await?
            .ok_or_else(|| ClaimError::Unbound(name.to_string()))?,
    };
    let volumes: Api<PersistentVolume> = Api::all(ctx.client.clone());
    let volume = get_opt(&volumes, &volume_name)
        .await
        .map_err(api_err(name))?
        .ok_or_else(|| ClaimError::MissingVolume {
            claim: name.to_string(),
            volume: volume_name.clone(),
        })?;
    volume_path(&volume).ok_or(ClaimError::UnsupportedVolume(volume_name))
}

/// The PV a claim is bound to (skiff has no binder controller: a claim
/// naming its volume counts as bound, as the scheduler also sees it).
pub(crate) fn bound_volume(claim: &PersistentVolumeClaim) -> Option<&str> {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .filter(|v| !v.is_empty())
}

/// The host directory of a hostPath or local PV.
pub(crate) fn volume_path(volume: &PersistentVolume) -> Option<PathBuf> {
    let spec = volume.spec.as_ref()?;
    spec.host_path
        .as_ref()
        .map(|h| PathBuf::from(&h.path))
        .or_else(|| spec.local.as_ref().map(|l| PathBuf::from(&l.path)))
}

/// Whether this node should provision `claim` now: a local-path claim the
/// scheduler placed here.
fn ours_to_provision(claim: &PersistentVolumeClaim, class: &StorageClass, node: &str) -> bool {
    let selected = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SELECTED_NODE_ANNOTATION));
    class.provisioner == LOCAL_PATH_PROVISIONER && selected.is_some_and(|n| n == node)
}

/// The directory of a provisioned claim (k3s's naming: unique and readable).
pub(crate) fn provisioned_dir(storage_dir: &Path, claim: &PersistentVolumeClaim) -> PathBuf {
    let meta = &claim.metadata;
    storage_dir.join(format!(
        "pvc-{}_{}_{}",
        meta.uid.as_deref().unwrap_or_default(),
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default()
    ))
}

/// The PV that backs a provisioned claim on `node`.
pub(crate) fn provisioned_volume(
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
            name: Some(format!("pvc-{uid}")),
            annotations: Some(BTreeMap::from([(
                PROVISIONED_BY_ANNOTATION.to_string(),
                LOCAL_PATH_PROVISIONER.to_string(),
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
                            key: "kubernetes.io/hostname".into(),
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

/// Provisions and binds `claim` when it is ours; returns the PV's name.
async fn provision(
    ctx: &ClaimContext<'_>,
    claim: &PersistentVolumeClaim,
) -> Result<Option<String>, ClaimError> {
    let name = claim.metadata.name.clone().unwrap_or_default();
    let namespace = claim
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let Some(class_name) = claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
    else {
        return Ok(None);
    };
    let classes: Api<StorageClass> = Api::all(ctx.provisioner.clone());
    let Some(class) = get_opt(&classes, class_name)
        .await
        .map_err(api_err(&name))?
    else {
        return Ok(None);
    };
    if !ours_to_provision(claim, &class, ctx.node_name) {
        return Ok(None);
    }
    let dir = provisioned_dir(ctx.storage_dir, claim);
    let io_err = |source| ClaimError::Io {
        path: dir.clone(),
        source,
    };
    std::fs::create_dir_all(&dir).map_err(io_err)?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).map_err(io_err)?;
    }
    let volume = provisioned_volume(claim, &class, &dir, ctx.node_name);
    let volume_name = volume.metadata.name.clone().unwrap_or_default();
    let volumes: Api<PersistentVolume> = Api::all(ctx.provisioner.clone());
    match volumes.create(&PostParams::default(), &volume).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(api_err(&name)(e)),
    }
    let params = PatchParams::default();
    let bound = serde_json::json!({"status": {"phase": "Bound"}});
    volumes
        .patch_status(&volume_name, &params, &Patch::Merge(&bound))
        .await
        .map_err(api_err(&name))?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.provisioner.clone(), &namespace);
    let binding = serde_json::json!({
        "metadata": {"annotations": {
            "pv.kubernetes.io/bind-completed": "yes",
            "pv.kubernetes.io/bound-by-controller": "yes",
            "volume.kubernetes.io/storage-provisioner": LOCAL_PATH_PROVISIONER,
        }},
        "spec": {"volumeName": volume_name},
    });
    claims
        .patch(&name, &params, &Patch::Merge(&binding))
        .await
        .map_err(api_err(&name))?;
    let spec = volume.spec.unwrap_or_default();
    let status = serde_json::json!({"status": {
        "phase": "Bound",
        "accessModes": spec.access_modes,
        "capacity": spec.capacity,
    }});
    claims
        .patch_status(&name, &params, &Patch::Merge(&status))
        .await
        .map_err(api_err(&name))?;
    tracing::info!(claim = %name, %namespace, volume = %volume_name, dir = %dir.display(), "provisioned a local-path volume");
    Ok(Some(volume_name))
}

/// Makes sure the default `local-path` StorageClass exists (k3s ships the
/// same): WaitForFirstConsumer, reclaim Delete.
pub(crate) async fn ensure_default_class(client: &kube::Client) -> Result<(), kube::Error> {
    let classes: Api<StorageClass> = Api::all(client.clone());
    let class = StorageClass {
        metadata: ObjectMeta {
            name: Some(LOCAL_PATH_CLASS.into()),
            annotations: Some(BTreeMap::from([(
                skiff_common::default_class::STORAGE_CLASS_MARKER.to_string(),
                "true".to_string(),
            )])),
            ..Default::default()
        },
        provisioner: LOCAL_PATH_PROVISIONER.into(),
        reclaim_policy: Some("Delete".into()),
        volume_binding_mode: Some("WaitForFirstConsumer".into()),
        ..Default::default()
    };
    match classes.create(&PostParams::default(), &class).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PersistentVolumeClaimSpec;

    fn claim(selected: Option<&str>) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                namespace: Some("ns".into()),
                uid: Some("u1".into()),
                annotations: selected.map(|n| {
                    BTreeMap::from([(SELECTED_NODE_ANNOTATION.to_string(), n.to_string())])
                }),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                storage_class_name: Some(LOCAL_PATH_CLASS.into()),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn class(provisioner: &str) -> StorageClass {
        StorageClass {
            metadata: ObjectMeta {
                name: Some(LOCAL_PATH_CLASS.into()),
                ..Default::default()
            },
            provisioner: provisioner.into(),
            ..Default::default()
        }
    }

    #[test]
    fn only_claims_placed_on_this_node_by_the_scheduler_are_provisioned() {
        let local = class(LOCAL_PATH_PROVISIONER);
        assert!(ours_to_provision(&claim(Some("n1")), &local, "n1"));
        assert!(!ours_to_provision(&claim(Some("n2")), &local, "n1"));
        assert!(!ours_to_provision(&claim(None), &local, "n1"));
        assert!(!ours_to_provision(
            &claim(Some("n1")),
            &class("ebs.csi.aws.com"),
            "n1"
        ));
    }

    #[test]
    fn a_provisioned_volume_is_a_host_directory_pinned_to_the_node_and_bound_to_the_claim() {
        let c = claim(Some("n1"));
        let dir = provisioned_dir(Path::new("/data/storage"), &c);
        assert_eq!(dir, Path::new("/data/storage/pvc-u1_ns_data"));
        let pv = provisioned_volume(&c, &class(LOCAL_PATH_PROVISIONER), &dir, "n1");
        assert_eq!(pv.metadata.name.as_deref(), Some("pvc-u1"));
        assert_eq!(volume_path(&pv), Some(dir));
        let spec = pv.spec.expect("spec");
        let claim_ref = spec.claim_ref.expect("claimRef");
        assert_eq!(claim_ref.uid.as_deref(), Some("u1"));
        let terms = spec
            .node_affinity
            .and_then(|a| a.required)
            .expect("affinity");
        let values = terms.node_selector_terms[0]
            .match_expressions
            .as_ref()
            .expect("expr")[0]
            .values
            .clone();
        assert_eq!(values, Some(vec!["n1".to_string()]));
        assert_eq!(
            spec.persistent_volume_reclaim_policy.as_deref(),
            Some("Delete")
        );
    }

    #[test]
    fn a_claim_naming_its_volume_counts_as_bound() {
        let mut c = claim(None);
        assert_eq!(bound_volume(&c), None);
        if let Some(spec) = c.spec.as_mut() {
            spec.volume_name = Some("pv1".into());
        }
        assert_eq!(bound_volume(&c), Some("pv1"));
    }
}
