//! The node's half of skiff's local-path volumes after use: a volume
//! whose directory this node holds, whose claim is gone (the controller
//! manager marks it `Released`) and whose reclaim policy is `Delete` loses
//! its directory, then its PersistentVolume, as k3s's local-path
//! provisioner deletes them. A `Retain` volume is left Released, its data
//! in place.
//!
//! The node finds its volumes in its own storage directory: each
//! `pvc-<uid>_…` directory there belongs to the volume `pvc-<uid>`, which
//! it reads by name. The Node authorizer lets a node read and delete the
//! local-path volumes pinned to it and no others, so every node, the
//! server's own or a joined agent, reclaims the same way. Only what
//! [`own_directory`] accepts is ever removed: a volume object written to
//! point anywhere else is refused, whatever it says.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolume;
use kube::Api;
use kube::api::{DeleteParams, Preconditions};
use skiff_common::local_path;
use tokio::sync::watch;

use super::claims::{own_directory, volume_path};

/// How often the storage directory's volumes are looked at.
const RESYNC: Duration = Duration::from_secs(5);

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
    client: kube::Client,
    node_name: String,
    storage_dir: PathBuf,
    mut stop: watch::Receiver<bool>,
) {
    let api: Api<PersistentVolume> = Api::all(client);
    loop {
        for volume in released_here(&api, &storage_dir).await {
            let name = volume.metadata.name.clone().unwrap_or_default();
            match reclaim(&api, &volume, &node_name, &storage_dir).await {
                Ok(dir) => {
                    tracing::info!(volume = %name, dir = %dir.display(), "released local-path volume deleted")
                }
                Err(error) => tracing::warn!(%error, "local-path volume not reclaimed"),
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(RESYNC) => {}
            _ = stop.wait_for(|s| *s) => break,
        }
    }
}

/// The volumes of the directories in `storage_dir` that are Released with
/// reclaim policy `Delete`.
async fn released_here(api: &Api<PersistentVolume>, storage_dir: &Path) -> Vec<PersistentVolume> {
    let entries = match std::fs::read_dir(storage_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(error) => {
            tracing::warn!(%error, dir = %storage_dir.display(), "reading the local-path storage directory");
            return Vec::new();
        }
    };
    let names: Vec<String> = entries
        .flatten()
        .filter_map(|entry| local_path::volume_of_dir(entry.file_name().to_str()?))
        .collect();
    let mut released = Vec::new();
    for name in names {
        match api.get_opt(&name).await {
            Ok(Some(volume)) if local_path::to_reclaim(&volume) => released.push(volume),
            // Gone (deleted by hand: its data stays) or still in use.
            Ok(_) => {}
            Err(error) => tracing::debug!(%error, volume = %name, "reading a local-path volume"),
        }
    }
    released
}

/// Removes `volume`'s directory, then the volume (only the one judged).
async fn reclaim(
    api: &Api<PersistentVolume>,
    volume: &PersistentVolume,
    node: &str,
    storage_dir: &Path,
) -> Result<PathBuf, ReclaimError> {
    let name = volume.metadata.name.clone().unwrap_or_default();
    let dir = own_directory(volume, node, storage_dir).ok_or_else(|| ReclaimError::Foreign {
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
