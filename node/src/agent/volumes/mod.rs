//! Pod volumes as host directories under `AGENT_DIR/pods/<uid>/volumes`:
//! emptyDir, hostPath, configMap, secret, downwardAPI, projected (configMap,
//! secret, downwardAPI and service-account tokens bound to the pod) and
//! persistentVolumeClaim (the bound PV's host directory, see [`claims`]; a
//! released local-path volume is removed by [`reclaim`]).
//! Content volumes are written when the worker starts and rewritten when a
//! token is due for renewal (80 % of its lifetime). Secret and projected
//! volumes, and emptyDirs of medium `Memory`, are tmpfs mounts, as upstream's.

pub(crate) mod claims;
pub(crate) mod host_path;
pub(crate) mod mounts;
pub(crate) mod reclaim;
pub(crate) mod sa_token;
pub(crate) mod sub_path;

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::time::Instant;

use k8s_openapi::api::core::v1::{
    ConfigMap, DownwardAPIVolumeFile, KeyToPath, Pod, Secret, Volume,
};
use kube::Api;

use crate::agent::pod::downward::{self, NodeAllocatable};
use crate::agent::pod::env::{self, EnvError};
use claims::{ClaimContext, ClaimError};

/// Why a pod's volumes could not be set up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum VolumeError {
    /// A file or directory could not be written.
    #[error("volume {volume}: {path}: {source}")]
    Io {
        /// The volume.
        volume: String,
        /// The path.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A ConfigMap, Secret or field the volume needs is not available.
    #[error("volume {volume}: {source}")]
    Source {
        /// The volume.
        volume: String,
        /// Why.
        source: Box<EnvError>,
    },
    /// An item path escapes the volume.
    #[error("volume {volume}: invalid path {path:?}")]
    InvalidPath {
        /// The volume.
        volume: String,
        /// The item path.
        path: String,
    },
    /// A persistentVolumeClaim has no usable volume (yet).
    #[error("volume {volume}: {source}")]
    Claim {
        /// The volume.
        volume: String,
        /// Why.
        source: ClaimError,
    },
    /// The service-account token could not be issued.
    #[error("volume {volume}: requesting a service account token: {source}")]
    Token {
        /// The volume.
        volume: String,
        /// Why.
        source: kube::Error,
    },
    /// A hostPath volume's path is not of its type.
    #[error("volume {volume}: {source}")]
    HostPath {
        /// The volume.
        volume: String,
        /// Why.
        source: host_path::HostPathError,
    },
    /// The volume type is not supported by this agent.
    #[error("volume {0}: unsupported volume type")]
    Unsupported(String),
}

/// Where every pod's state directory is: a shared mount (see `mounts`).
pub(crate) fn pods_dir(agent_dir: &Path) -> PathBuf {
    agent_dir.join("pods")
}

/// The pod's state directory.
pub(crate) fn pod_dir(agent_dir: &Path, uid: &str) -> PathBuf {
    pods_dir(agent_dir).join(uid)
}

/// What volume contents may refer to.
pub(crate) struct VolumeContext<'a> {
    /// API access for ConfigMaps and Secrets, as the node.
    pub client: &'a kube::Client,
    /// API access as the local-path provisioner.
    pub provisioner: &'a kube::Client,
    /// `AGENT_DIR`.
    pub agent_dir: &'a Path,
    /// The node's address.
    pub host_ip: &'a str,
    /// Allocatable resources (defaults of unset limits).
    pub allocatable: &'a NodeAllocatable,
    /// This node's name (local-path claims placed here are provisioned).
    pub node_name: &'a str,
    /// Where provisioned volumes live (`DATA_DIR/storage`).
    pub storage_dir: &'a Path,
}

/// A pod's volumes, ready to mount.
#[derive(Debug, Clone, Default)]
pub(crate) struct PreparedVolumes {
    /// Each volume's host path.
    pub paths: HashMap<String, PathBuf>,
    /// When the content must be written again (the earliest token renewal).
    pub refresh_at: Option<Instant>,
}

/// Where provisioned volumes live for an agent in `agent_dir`
/// (`DATA_DIR/agent` → `DATA_DIR/storage`, as k3s keeps them).
pub(crate) fn storage_dir(agent_dir: &Path) -> PathBuf {
    agent_dir.parent().unwrap_or(agent_dir).join("storage")
}

/// Sets up every volume of `pod`, returning each volume's host path.
pub(crate) async fn prepare(
    ctx: &VolumeContext<'_>,
    pod: &Pod,
) -> Result<PreparedVolumes, VolumeError> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let base = pod_dir(ctx.agent_dir, uid).join("volumes");
    let mut prepared = PreparedVolumes::default();
    for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let path = prepare_one(ctx, pod, &base, volume, &mut prepared.refresh_at).await?;
        prepared.paths.insert(volume.name.clone(), path);
    }
    Ok(prepared)
}

async fn prepare_one(
    ctx: &VolumeContext<'_>,
    pod: &Pod,
    base: &Path,
    volume: &Volume,
    refresh_at: &mut Option<Instant>,
) -> Result<PathBuf, VolumeError> {
    let name = volume.name.clone();
    let io_err = |path: &Path| {
        let name = name.clone();
        let path = path.to_path_buf();
        move |source| VolumeError::Io {
            volume: name,
            path,
            source,
        }
    };
    let source_err = |source| VolumeError::Source {
        volume: name.clone(),
        source: Box::new(source),
    };
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    if let Some(host) = &volume.host_path {
        let path = PathBuf::from(&host.path);
        host_path::prepare(&path, host.type_.as_deref()).map_err(|source| {
            VolumeError::HostPath {
                volume: name.clone(),
                source,
            }
        })?;
        return Ok(path);
    }
    if let Some(claim) = &volume.persistent_volume_claim {
        let cctx = ClaimContext {
            client: ctx.client,
            provisioner: ctx.provisioner,
            node_name: ctx.node_name,
            storage_dir: ctx.storage_dir,
        };
        return claims::resolve(&cctx, namespace, &claim.claim_name)
            .await
            .map_err(|source| VolumeError::Claim {
                volume: name.clone(),
                source,
            });
    }
    let dir = base.join(&name);
    let mount_err = |e: mounts::MountError| VolumeError::Io {
        volume: name.clone(),
        path: e.path,
        source: e.source,
    };
    if let Some(empty) = &volume.empty_dir {
        if empty.medium.as_deref() == Some("Memory") {
            // As upstream's: on a tmpfs, capped at its sizeLimit.
            let size = empty
                .size_limit
                .as_ref()
                .and_then(|q| skiff_common::quantity::parse_scaled(&q.0, 1))
                .and_then(|bytes| u64::try_from(bytes).ok())
                .filter(|bytes| *bytes > 0);
            mounts::tmpfs(&dir, size).map_err(mount_err)?;
        }
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777))
            .map_err(io_err(&dir))?;
        return Ok(dir);
    }
    if volume.secret.is_some() || volume.projected.is_some() {
        // Secrets and service-account tokens never reach the disk, as
        // upstream keeps them on a tmpfs.
        mounts::tmpfs(&dir, None).map_err(mount_err)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
            .map_err(io_err(&dir))?;
    }
    let mut files: Vec<(String, Vec<u8>, u32)> = Vec::new();
    let single = if let Some(cm) = &volume.config_map {
        Some((
            cm.default_mode,
            Files::config_map(&cm.name, cm.optional, &cm.items),
        ))
    } else if let Some(secret) = &volume.secret {
        let secret_name = secret.secret_name.as_deref().unwrap_or_default();
        Some((
            secret.default_mode,
            Files::secret(secret_name, secret.optional, &secret.items),
        ))
    } else {
        volume
            .downward_api
            .as_ref()
            .map(|d| (d.default_mode, Files::downward(&d.items)))
    };
    if let Some((default_mode, source)) = single {
        let default_mode = mode(default_mode, 0o644);
        files = source
            .read(ctx, namespace, pod, default_mode)
            .await
            .map_err(source_err)?;
    } else if let Some(projected) = &volume.projected {
        let default_mode = mode(projected.default_mode, 0o644);
        for source in projected.sources.iter().flatten() {
            let parts = [
                (source.config_map.as_ref())
                    .map(|cm| Files::config_map(&cm.name, cm.optional, &cm.items)),
                (source.secret.as_ref()).map(|s| Files::secret(&s.name, s.optional, &s.items)),
                (source.downward_api.as_ref()).map(|d| Files::downward(&d.items)),
            ];
            for part in parts.into_iter().flatten() {
                files.extend(
                    part.read(ctx, namespace, pod, default_mode)
                        .await
                        .map_err(source_err)?,
                );
            }
            if let Some(projection) = &source.service_account_token {
                let issued = sa_token::request(ctx.client, pod, projection)
                    .await
                    .map_err(|source| VolumeError::Token {
                        volume: name.clone(),
                        source,
                    })?;
                *refresh_at =
                    Some(refresh_at.map_or(issued.refresh_at, |r| r.min(issued.refresh_at)));
                files.push((
                    projection.path.clone(),
                    issued.token.into_bytes(),
                    default_mode,
                ));
            }
        }
    } else {
        return Err(VolumeError::Unsupported(name));
    }
    write_files(&name, &dir, &files)?;
    Ok(dir)
}

/// Where a volume's files, or one projected source's, come from.
enum Files<'v> {
    /// The keys of a ConfigMap or a Secret, all or the listed items.
    Keys {
        of: KeysOf,
        name: &'v str,
        optional: Option<bool>,
        items: Option<&'v [KeyToPath]>,
    },
    Downward(&'v [DownwardAPIVolumeFile]),
}

/// Which kind of object [`Files::Keys`] reads.
#[derive(Clone, Copy)]
enum KeysOf {
    ConfigMap,
    Secret,
}

impl<'v> Files<'v> {
    fn config_map(
        name: &'v str,
        optional: Option<bool>,
        items: &'v Option<Vec<KeyToPath>>,
    ) -> Self {
        Self::Keys {
            of: KeysOf::ConfigMap,
            name,
            optional,
            items: items.as_deref(),
        }
    }

    fn secret(name: &'v str, optional: Option<bool>, items: &'v Option<Vec<KeyToPath>>) -> Self {
        Self::Keys {
            of: KeysOf::Secret,
            name,
            optional,
            items: items.as_deref(),
        }
    }

    fn downward(items: &'v Option<Vec<DownwardAPIVolumeFile>>) -> Self {
        Self::Downward(items.as_deref().unwrap_or(&[]))
    }

    /// The files, each with its mode (`default_mode` unless an item sets one).
    async fn read(
        self,
        ctx: &VolumeContext<'_>,
        namespace: &str,
        pod: &Pod,
        default_mode: u32,
    ) -> Result<Vec<(String, Vec<u8>, u32)>, EnvError> {
        match self {
            Self::Keys {
                of,
                name,
                optional,
                items,
            } => {
                let optional = optional.unwrap_or(false);
                let client = ctx.client.clone();
                let data = match of {
                    KeysOf::ConfigMap => {
                        let api: Api<ConfigMap> = Api::namespaced(client, namespace);
                        text_to_bytes(env::config_map_data(&api, name, optional).await?)
                    }
                    KeysOf::Secret => {
                        let api: Api<Secret> = Api::namespaced(client, namespace);
                        env::secret_bytes(&api, name, optional).await?
                    }
                };
                Ok(select_items(data, items, default_mode))
            }
            Self::Downward(items) => downward_files(ctx, pod, items, default_mode),
        }
    }
}

fn mode(mode: Option<i32>, default: u32) -> u32 {
    mode.and_then(|m| u32::try_from(m).ok()).unwrap_or(default) & 0o7777
}

fn text_to_bytes(data: Option<BTreeMap<String, String>>) -> Option<BTreeMap<String, Vec<u8>>> {
    data.map(|d| d.into_iter().map(|(k, v)| (k, v.into_bytes())).collect())
}

/// Every key as a file, or only the listed items under their paths.
fn select_items(
    data: Option<BTreeMap<String, Vec<u8>>>,
    items: Option<&[KeyToPath]>,
    default_mode: u32,
) -> Vec<(String, Vec<u8>, u32)> {
    let Some(data) = data else {
        return Vec::new();
    };
    match items {
        Some(items) => items
            .iter()
            .filter_map(|item| {
                data.get(&item.key)
                    .map(|v| (item.path.clone(), v.clone(), mode(item.mode, default_mode)))
            })
            .collect(),
        None => data
            .into_iter()
            .map(|(k, v)| (k, v, default_mode))
            .collect(),
    }
}

fn downward_files(
    ctx: &VolumeContext<'_>,
    pod: &Pod,
    items: &[DownwardAPIVolumeFile],
    default_mode: u32,
) -> Result<Vec<(String, Vec<u8>, u32)>, EnvError> {
    let mut files = Vec::new();
    for item in items {
        let value = if let Some(field) = &item.field_ref {
            downward::field_value(pod, &field.field_path, ctx.host_ip, "")?
        } else if let Some(resource) = &item.resource_field_ref {
            let container = pod.spec.as_ref().and_then(|s| {
                s.containers
                    .iter()
                    .find(|c| Some(&c.name) == resource.container_name.as_ref())
            });
            match container {
                Some(c) => downward::resource_value(c, resource, ctx.allocatable)?,
                None => continue,
            }
        } else {
            continue;
        };
        files.push((
            item.path.clone(),
            value.into_bytes(),
            mode(item.mode, default_mode),
        ));
    }
    Ok(files)
}

/// Replaces the volume's content with `files` (paths relative to `dir`).
fn write_files(
    volume: &str,
    dir: &Path,
    files: &[(String, Vec<u8>, u32)],
) -> Result<(), VolumeError> {
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| VolumeError::Io {
            volume: volume.to_string(),
            path,
            source,
        }
    };
    // Written beside the files and swapped in, so a running container
    // never sees half of them: inside the volume once it exists (on its
    // own file system, a tmpfs for secrets; `..`-names are no item's),
    // else next to it.
    let staging = if dir.is_dir() {
        dir.join("..staging")
    } else {
        dir.with_extension("new")
    };
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(io_err(&staging))?;
    for (rel, data, file_mode) in files {
        let relative = Path::new(rel);
        let safe = !rel.is_empty()
            && relative
                .components()
                .all(|c| matches!(c, Component::Normal(_)));
        if !safe {
            return Err(VolumeError::InvalidPath {
                volume: volume.to_string(),
                path: rel.clone(),
            });
        }
        let path = staging.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        std::fs::write(&path, data).map_err(io_err(&path))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*file_mode))
            .map_err(io_err(&path))?;
    }
    if dir.exists() {
        // Replace the content in place: the directory itself may be bind
        // mounted into a running container.
        for entry in std::fs::read_dir(dir).map_err(io_err(dir))?.flatten() {
            let p = entry.path();
            if p == staging {
                continue;
            }
            let _ = if p.is_dir() {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
        }
        for entry in std::fs::read_dir(&staging)
            .map_err(io_err(&staging))?
            .flatten()
        {
            let target = dir.join(entry.file_name());
            std::fs::rename(entry.path(), &target).map_err(io_err(&target))?;
        }
        let _ = std::fs::remove_dir_all(&staging);
    } else {
        std::fs::rename(&staging, dir).map_err(io_err(dir))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_select_and_rename_keys_with_modes() {
        let data = BTreeMap::from([
            ("a".to_string(), b"1".to_vec()),
            ("b".to_string(), b"2".to_vec()),
        ]);
        let items = [KeyToPath {
            key: "b".into(),
            path: "sub/bee".into(),
            mode: Some(0o600),
        }];
        let files = select_items(Some(data.clone()), Some(&items), 0o644);
        assert_eq!(files, vec![("sub/bee".to_string(), b"2".to_vec(), 0o600)]);
        assert_eq!(select_items(Some(data), None, 0o644).len(), 2);
    }

    #[test]
    fn files_are_written_and_replaced_and_paths_cannot_escape() {
        let dir = tempfile::tempdir().unwrap();
        let vol = dir.path().join("cfg");
        write_files("cfg", &vol, &[("x/y".into(), b"one".to_vec(), 0o640)]).unwrap();
        assert_eq!(std::fs::read(vol.join("x/y")).unwrap(), b"one");
        let m = std::fs::metadata(vol.join("x/y"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(m & 0o777, 0o640);
        write_files("cfg", &vol, &[("z".into(), b"two".to_vec(), 0o644)]).unwrap();
        assert!(!vol.join("x").exists());
        assert_eq!(std::fs::read(vol.join("z")).unwrap(), b"two");
        let err = write_files("cfg", &vol, &[("../evil".into(), Vec::new(), 0o644)]);
        assert!(matches!(err, Err(VolumeError::InvalidPath { .. })));
    }
}
