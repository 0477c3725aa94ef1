//! The local-path provisioner's other half: a volume it provisioned on this
//! node whose claim is gone (the controller marks it `Released`) and whose
//! reclaim policy is `Delete` loses its directory, then its
//! PersistentVolume, as k3s's local-path provisioner deletes them. A
//! `Retain` volume is left Released, its data in place.
//!
//! Only what this node made is ever removed: the volume must carry the
//! provisioner's annotation, be pinned to this node, and name a directory
//! that is a direct child of `DATA_DIR/storage` with the provisioner's
//! `pvc-` naming, not a symbolic link. A volume object written to point
//! anywhere else is refused, whatever it says. Runs where the agent's
//! provisioner identity may list volumes (`skiff server`'s node); elsewhere
//! it says so once and stops.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolume;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Preconditions};
use skiff_informer::SharedInformerFactory;
use tokio::sync::{Notify, watch};

use super::claims::{LOCAL_PATH_PROVISIONER, PROVISIONED_BY_ANNOTATION, volume_path};

/// How often Released volumes are looked at again without a change (a
/// removal that failed is retried then).
const RESYNC: Duration = Duration::from_secs(60);

/// Why one volume was not reclaimed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReclaimError {
    /// The volume names a directory this node did not provision.
    #[error("volume {volume}: {path} is not a directory the local-path provisioner made here")]
    Foreign {
        /// The volume.
        volume: String,
        /// The path it names.
        path: PathBuf,
    },
    /// Removing the directory failed.
    #[error("volume {volume}: removing {path}: {source}")]
    Remove {
        /// The volume.
        volume: String,
        /// Its directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Deleting the PersistentVolume failed.
    #[error("volume {volume}: deleting it: {source}")]
    Delete {
        /// The volume.
        volume: String,
        /// The API's error.
        source: kube::Error,
    },
}

/// Reclaims this node's Released local-path volumes until `stop`.
pub(crate) async fn run(
    provisioner: kube::Client,
    node_name: String,
    storage_dir: PathBuf,
    mut stop: watch::Receiver<bool>,
) {
    let api: Api<PersistentVolume> = Api::all(provisioner.clone());
    if let Err(error) = api.list(&ListParams::default().limit(1)).await {
        tracing::info!(%error, "local-path volumes are not reclaimed by this node: it may not list PersistentVolumes");
        return;
    }
    let factory = SharedInformerFactory::new(provisioner);
    let changed = Arc::new(Notify::new());
    let volumes = match factory.notifying_informer::<PersistentVolume>(&changed) {
        Ok(informer) => informer,
        Err(error) => {
            tracing::warn!(%error, "local-path volumes: watching PersistentVolumes failed");
            return;
        }
    };
    if let Err(error) = factory.start() {
        tracing::warn!(%error, "local-path volumes: starting the informer failed");
        return;
    }
    loop {
        tokio::select! {
            _ = changed.notified() => {}
            _ = tokio::time::sleep(RESYNC) => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        if !volumes.has_synced() {
            continue;
        }
        for volume in volumes.cache().list() {
            if !releasable(&volume, &node_name) {
                continue;
            }
            let name = volume.metadata.name.clone().unwrap_or_default();
            match reclaim(&api, &volume, &storage_dir).await {
                Ok(dir) => {
                    tracing::info!(volume = %name, dir = %dir.display(), "released local-path volume deleted")
                }
                Err(error) => tracing::warn!(%error, "local-path volume not reclaimed"),
            }
        }
    }
    factory.shutdown();
}

/// Whether `volume` is a Released, reclaim-Delete local-path volume pinned
/// to `node`.
fn releasable(volume: &PersistentVolume, node: &str) -> bool {
    let ours = volume
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PROVISIONED_BY_ANNOTATION))
        .is_some_and(|p| p == LOCAL_PATH_PROVISIONER);
    let Some(spec) = volume.spec.as_ref() else {
        return false;
    };
    let released = volume.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released");
    let pinned_here = spec
        .node_affinity
        .as_ref()
        .and_then(|a| a.required.as_ref())
        .is_some_and(|selector| {
            selector.node_selector_terms.iter().any(|term| {
                term.match_expressions.iter().flatten().any(|e| {
                    e.key == "kubernetes.io/hostname"
                        && e.operator == "In"
                        && e.values.as_deref() == Some(&[node.to_string()][..])
                })
            })
        });
    ours && released
        && pinned_here
        && spec.persistent_volume_reclaim_policy.as_deref() == Some("Delete")
}

/// The directory `volume` names, if the provisioner made it under
/// `storage_dir`: a direct child named `pvc-…`, a real directory (or gone).
fn provisioned_here(volume: &PersistentVolume, storage_dir: &Path) -> Option<PathBuf> {
    let path = volume_path(volume)?;
    let name = path.file_name()?.to_str()?;
    let direct_child = path.parent() == Some(storage_dir) && name.starts_with("pvc-");
    let not_a_link = match std::fs::symlink_metadata(&path) {
        Ok(meta) => meta.is_dir(),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    };
    (direct_child && not_a_link).then_some(path)
}

/// Removes `volume`'s directory, then the volume (only the one judged).
async fn reclaim(
    api: &Api<PersistentVolume>,
    volume: &PersistentVolume,
    storage_dir: &Path,
) -> Result<PathBuf, ReclaimError> {
    let name = volume.metadata.name.clone().unwrap_or_default();
    let dir = provisioned_here(volume, storage_dir).ok_or_else(|| ReclaimError::Foreign {
        volume: name.clone(),
        path: volume_path(volume).unwrap_or_default(),
    })?;
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(ReclaimError::Remove {
                volume: name,
                path: dir,
                source,
            });
        }
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: volume.metadata.uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(&name, &params).await {
        Ok(_) => Ok(dir),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(dir),
        Err(source) => Err(ReclaimError::Delete {
            volume: name,
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn volume(path: &str, phase: &str, policy: &str, node: &str) -> PersistentVolume {
        serde_json::from_value(json!({
            "metadata": {"name": "pvc-u1", "annotations": {
                "pv.kubernetes.io/provisioned-by": LOCAL_PATH_PROVISIONER}},
            "spec": {
                "hostPath": {"path": path},
                "persistentVolumeReclaimPolicy": policy,
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}
            },
            "status": {"phase": phase}
        }))
        .expect("volume")
    }

    #[test]
    fn only_released_delete_volumes_pinned_here_are_reclaimed() {
        let path = "/data/storage/pvc-u1_default_data";
        assert!(releasable(&volume(path, "Released", "Delete", "n1"), "n1"));
        assert!(!releasable(&volume(path, "Bound", "Delete", "n1"), "n1"));
        assert!(!releasable(&volume(path, "Released", "Retain", "n1"), "n1"));
        assert!(!releasable(&volume(path, "Released", "Delete", "n2"), "n1"));
        let mut foreign = volume(path, "Released", "Delete", "n1");
        foreign.metadata.annotations = None;
        assert!(!releasable(&foreign, "n1"), "not provisioned by skiff");
    }

    #[test]
    fn only_a_pvc_directory_directly_under_storage_is_removed() {
        let root = tempfile::tempdir().expect("tempdir");
        let storage = root.path().join("storage");
        std::fs::create_dir_all(storage.join("pvc-u1_default_data")).expect("dir");
        let outside = root.path().join("precious");
        std::fs::create_dir_all(&outside).expect("dir");
        std::os::unix::fs::symlink(&outside, storage.join("pvc-link")).expect("link");
        let at = |p: &Path| volume(&p.to_string_lossy(), "Released", "Delete", "n1");

        let dir = storage.join("pvc-u1_default_data");
        assert_eq!(provisioned_here(&at(&dir), &storage), Some(dir));
        assert_eq!(
            provisioned_here(&at(&storage.join("pvc-gone")), &storage),
            Some(storage.join("pvc-gone"))
        );
        for refused in [
            outside.clone(),
            storage.join("pvc-link"),
            storage.join("pvc-u1_default_data/.."),
            storage.join("other"),
            storage.clone(),
            PathBuf::from("/"),
        ] {
            assert_eq!(
                provisioned_here(&at(&refused), &storage),
                None,
                "{}",
                refused.display()
            );
        }
    }
}
