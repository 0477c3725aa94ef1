//! Pod volumes as host directories under `AGENT_DIR/pods/<uid>/volumes`:
//! emptyDir, hostPath, configMap, secret, downwardAPI, projected (configMap,
//! secret, downwardAPI and service-account tokens bound to the pod) and
//! persistentVolumeClaim (the bound PV's host directory, see [`claims`]; a
//! released local-path volume is removed by [`reclaim`]).
//! API-sourced volumes (configMap, secret, downwardAPI, projected) are
//! written when the worker starts, then read again every `content_resync`
//! (and when a token is due for renewal, at 80 % of its lifetime); a change
//! replaces their content at once through [`atomic_writer`]'s `..data`
//! link, so running containers see updates as upstream's do. Secret and
//! projected volumes, and emptyDirs of medium `Memory`, are tmpfs mounts,
//! as upstream's. A pod's `fsGroup` is given to the volumes upstream gives
//! it to ([`ownership`]).

pub(crate) mod atomic_writer;
pub(crate) mod claims;
pub(crate) mod host_path;
pub(crate) mod mounts;
pub(crate) mod ownership;
pub(crate) mod reclaim;
pub(crate) mod sa_token;
pub(crate) mod sub_path;

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{
    ConfigMap, DownwardAPIVolumeFile, KeyToPath, Pod, Secret, Volume,
};
use kube::Api;

use crate::agent::pod::downward::{self, NodeAllocatable};
use crate::agent::pod::env::{self, EnvError};
use atomic_writer::VolumeFile;
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
    /// `AGENT_DIR`.
    pub agent_dir: &'a Path,
    /// The node's address.
    pub host_ip: &'a str,
    /// Allocatable resources (defaults of unset limits).
    pub allocatable: &'a NodeAllocatable,
    /// This node's name (the local-path volumes pinned here are its own).
    pub node_name: &'a str,
    /// Where local-path volumes live (`DATA_DIR/storage`).
    pub storage_dir: &'a Path,
    /// How often the content of configMap, secret, downwardAPI and projected
    /// volumes is read again (the kubelet's `--sync-frequency`).
    pub content_resync: Duration,
}

/// A pod's volumes, ready to mount.
#[derive(Debug, Clone, Default)]
pub(crate) struct PreparedVolumes {
    /// Each volume's host path.
    pub paths: HashMap<String, PathBuf>,
    /// When the content must be read again: the next resync of API-sourced
    /// content or the earliest token renewal.
    pub refresh_at: Option<Instant>,
    /// The service-account tokens written, by volume and path: reused by a
    /// refresh until due, so a resync asks for no new token.
    tokens: HashMap<(String, String), sa_token::IssuedToken>,
}

/// Whether the volume's content comes from the API, and so is kept current
/// while the pod runs (as upstream's kubelet keeps it).
fn api_sourced(volume: &Volume) -> bool {
    volume.config_map.is_some()
        || volume.secret.is_some()
        || volume.downward_api.is_some()
        || volume.projected.is_some()
}

fn earliest(a: Option<Instant>, b: Instant) -> Option<Instant> {
    Some(a.map_or(b, |a| a.min(b)))
}

/// Where local-path volumes live for an agent in `agent_dir`
/// (`DATA_DIR/agent` → `DATA_DIR/storage`, as k3s keeps them), as an
/// absolute path: the node publishes it and the volumes name it.
pub(crate) fn storage_dir(agent_dir: &Path) -> PathBuf {
    let dir = agent_dir.parent().unwrap_or(agent_dir).join("storage");
    std::path::absolute(&dir).unwrap_or(dir)
}

/// Sets up every volume of `pod`, returning each volume's host path.
/// Given what an earlier call prepared, it refreshes: only API-sourced
/// volumes are read and written again (an update appears in the running
/// containers), every other volume keeps its path.
pub(crate) async fn prepare(
    ctx: &VolumeContext<'_>,
    pod: &Pod,
    previous: Option<&PreparedVolumes>,
) -> Result<PreparedVolumes, VolumeError> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let base = pod_dir(ctx.agent_dir, uid).join("volumes");
    let mut prepared = PreparedVolumes::default();
    for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let kept = previous
            .filter(|_| !api_sourced(volume))
            .and_then(|p| p.paths.get(&volume.name));
        let path = match kept {
            Some(path) => path.clone(),
            None => prepare_one(ctx, pod, &base, volume, previous, &mut prepared).await?,
        };
        if api_sourced(volume) {
            prepared.refresh_at =
                earliest(prepared.refresh_at, Instant::now() + ctx.content_resync);
        }
        prepared.paths.insert(volume.name.clone(), path);
    }
    Ok(prepared)
}

async fn prepare_one(
    ctx: &VolumeContext<'_>,
    pod: &Pod,
    base: &Path,
    volume: &Volume,
    previous: Option<&PreparedVolumes>,
    prepared: &mut PreparedVolumes,
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
        give_fs_group(&name, pod, &dir, false)?;
        return Ok(dir);
    }
    if volume.secret.is_some() || volume.projected.is_some() {
        // Secrets and service-account tokens never reach the disk, as
        // upstream keeps them on a tmpfs.
        mounts::tmpfs(&dir, None).map_err(mount_err)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
            .map_err(io_err(&dir))?;
    }
    let mut files: Vec<VolumeFile> = Vec::new();
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
                let key = (name.clone(), projection.path.clone());
                let still_fresh = previous
                    .and_then(|p| p.tokens.get(&key))
                    .filter(|t| t.refresh_at > Instant::now())
                    .cloned();
                let issued = match still_fresh {
                    Some(token) => token,
                    None => sa_token::request(ctx.client, pod, projection)
                        .await
                        .map_err(|source| VolumeError::Token {
                            volume: name.clone(),
                            source,
                        })?,
                };
                prepared.refresh_at = earliest(prepared.refresh_at, issued.refresh_at);
                files.push((
                    projection.path.clone(),
                    issued.token.clone().into_bytes(),
                    default_mode,
                ));
                prepared.tokens.insert(key, issued);
            }
        }
    } else {
        return Err(VolumeError::Unsupported(name));
    }
    write_files(&name, &dir, &files)?;
    give_fs_group(&name, pod, &dir, true)?;
    Ok(dir)
}

/// Gives the volume `name` at `dir` the pod's `fsGroup`, if it sets one.
fn give_fs_group(name: &str, pod: &Pod, dir: &Path, read_only: bool) -> Result<(), VolumeError> {
    let Some(group) = ownership::fs_group(pod) else {
        return Ok(());
    };
    ownership::apply(dir, group, read_only).map_err(|e| VolumeError::Io {
        volume: name.to_string(),
        path: e.path,
        source: e.source,
    })
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
    ) -> Result<Vec<VolumeFile>, EnvError> {
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
) -> Vec<VolumeFile> {
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
) -> Result<Vec<VolumeFile>, EnvError> {
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

/// Makes `files` the volume's content (see [`atomic_writer`]).
fn write_files(volume: &str, dir: &Path, files: &[VolumeFile]) -> Result<(), VolumeError> {
    atomic_writer::write(dir, files)
        .map(|_| ())
        .map_err(|e| match e {
            atomic_writer::WriteError::InvalidPath(path) => VolumeError::InvalidPath {
                volume: volume.to_string(),
                path,
            },
            atomic_writer::WriteError::Io { path, source } => VolumeError::Io {
                volume: volume.to_string(),
                path,
                source,
            },
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An emptyDir and a downwardAPI volume of a pod with `fsGroup` carry
    /// the group (neither needs the API: the client is never reached).
    #[tokio::test]
    async fn a_pods_fs_group_is_given_to_its_volumes() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let allocatable = NodeAllocatable {
            cpu: 2.0,
            memory: 1e9,
            ephemeral_storage: 1e10,
            pods: 110,
        };
        let ctx = VolumeContext {
            client: &client,
            agent_dir: dir.path(),
            host_ip: "192.0.2.1",
            allocatable: &allocatable,
            node_name: "n1",
            storage_dir: &dir.path().join("storage"),
            content_resync: Duration::from_secs(60),
        };
        let pod = |fs_group: Option<i64>| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "namespace": "default", "uid": format!("u{fs_group:?}"),
                    "labels": {"app": "x"}},
                "spec": {"securityContext": {"fsGroup": fs_group}, "containers": [], "volumes": [
                    {"name": "scratch", "emptyDir": {}},
                    {"name": "info", "downwardAPI": {"defaultMode": 0o400, "items": [
                        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}]}
            }))
            .unwrap()
        };
        let prepared = prepare(&ctx, &pod(Some(2000)), None).await.unwrap();
        let scratch = std::fs::metadata(&prepared.paths["scratch"]).unwrap();
        assert_eq!((scratch.gid(), scratch.mode() & 0o7777), (2000, 0o2777));
        let labels = std::fs::metadata(prepared.paths["info"].join("labels")).unwrap();
        assert_eq!((labels.gid(), labels.mode() & 0o777), (2000, 0o440));
        // Without fsGroup nothing changes hands.
        let prepared = prepare(&ctx, &pod(None), None).await.unwrap();
        let labels = std::fs::metadata(prepared.paths["info"].join("labels")).unwrap();
        assert_eq!(labels.mode() & 0o777, 0o400);
        assert_eq!(labels.gid(), 0);
    }

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
    fn paths_that_escape_are_refused_in_the_volumes_words() {
        let dir = tempfile::tempdir().unwrap();
        let vol = dir.path().join("cfg");
        let err = write_files("cfg", &vol, &[("../evil".into(), Vec::new(), 0o644)]);
        assert!(
            matches!(err, Err(VolumeError::InvalidPath { ref volume, ref path }) if volume == "cfg" && path == "../evil")
        );
        assert!(!dir.path().join("evil").exists());
    }
}
