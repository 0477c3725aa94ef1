//! persistentVolumeClaim volumes: claim → bound PersistentVolume → a host
//! directory (hostPath and local PVs). A claim not bound yet waits: the
//! controller manager's local-path provisioner binds claims of skiff's
//! `local-path` class once the scheduler placed them, to a volume in this
//! node's storage directory (`DATA_DIR/storage`), which this node makes
//! on first mount; what the node may remove later is judged here too
//! ([`own_directory`]).

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use skiff_common::local_path;

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
    /// A local-path volume's directory could not be made.
    #[error("making the volume directory {path}: {source}")]
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
    /// This node (makes only the directories of volumes pinned here).
    pub node_name: &'a str,
    /// Where local-path volumes live (`DATA_DIR/storage`).
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

/// The host directory behind claim `name` in `namespace`; a local-path
/// volume's directory on this node is made on first use.
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
    let volume_name = bound_volume(&claim)
        .ok_or_else(|| ClaimError::Unbound(name.to_string()))?
        .to_string();
    let volumes: Api<PersistentVolume> = Api::all(ctx.client.clone());
    let volume = get_opt(&volumes, &volume_name)
        .await
        .map_err(api_err(name))?
        .ok_or_else(|| ClaimError::MissingVolume {
            claim: name.to_string(),
            volume: volume_name.clone(),
        })?;
    if let Some(dir) = own_directory(&volume, ctx.node_name, ctx.storage_dir) {
        make_volume_dir(&dir)?;
        return Ok(dir);
    }
    volume_path(&volume).ok_or(ClaimError::UnsupportedVolume(volume_name))
}

/// Makes a local-path volume's directory, writable by any pod user as
/// k3s's provisioner makes it.
fn make_volume_dir(dir: &Path) -> Result<(), ClaimError> {
    use std::os::unix::fs::PermissionsExt;
    if dir.is_dir() {
        return Ok(());
    }
    let io_err = |source| ClaimError::Io {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io_err)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).map_err(io_err)
}

/// The PV a claim is bound to (a claim naming its volume counts as bound,
/// as the scheduler also sees it).
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

/// The directory of `volume` when it is this node's to make and remove: a
/// local-path volume pinned to `node` alone, naming a direct child of
/// `storage_dir` with the provisioner's `pvc-` naming that is a real
/// directory (or not there yet). A volume object written to point anywhere
/// else gets nothing made or removed, whatever it says.
pub(crate) fn own_directory(
    volume: &PersistentVolume,
    node: &str,
    storage_dir: &Path,
) -> Option<PathBuf> {
    if !local_path::provisioned_by_us(volume) || local_path::pinned_node(volume) != Some(node) {
        return None;
    }
    let path = volume_path(volume)?;
    let name = path.file_name()?.to_str()?;
    let direct_child = path.parent() == Some(storage_dir) && name.starts_with("pvc-");
    let not_a_link = match std::fs::symlink_metadata(&path) {
        Ok(meta) => meta.is_dir(),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    };
    (direct_child && not_a_link).then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PersistentVolumeClaimSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn claim() -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                namespace: Some("default".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec::default()),
            status: None,
        }
    }

    fn volume_at(path: &Path, node: &str) -> PersistentVolume {
        local_path::volume_for(&claim(), &local_path::default_class(), path, node)
    }

    #[test]
    fn only_a_pvc_directory_directly_under_storage_of_a_volume_pinned_here_is_ours() {
        let root = tempfile::tempdir().expect("tempdir");
        let storage = root.path().join("storage");
        std::fs::create_dir_all(storage.join("pvc-u1_default_data")).expect("dir");
        let outside = root.path().join("precious");
        std::fs::create_dir_all(&outside).expect("dir");
        std::os::unix::fs::symlink(&outside, storage.join("pvc-link")).expect("link");
        let ours = |p: &Path| own_directory(&volume_at(p, "n1"), "n1", &storage);

        let dir = storage.join("pvc-u1_default_data");
        assert_eq!(ours(&dir), Some(dir.clone()));
        assert_eq!(
            ours(&storage.join("pvc-gone")),
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
            assert_eq!(ours(&refused), None, "{}", refused.display());
        }
        assert_eq!(
            own_directory(&volume_at(&dir, "n2"), "n1", &storage),
            None,
            "another node's volume"
        );
        let mut foreign = volume_at(&dir, "n1");
        foreign.metadata.annotations = None;
        assert_eq!(
            own_directory(&foreign, "n1", &storage),
            None,
            "not provisioned by skiff"
        );
    }

    #[test]
    fn a_volume_directory_is_made_writable_by_any_pod_user() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("storage/pvc-u1_default_data");
        make_volume_dir(&dir).expect("made");
        let mode = std::fs::metadata(&dir).expect("dir").permissions().mode();
        assert_eq!(mode & 0o777, 0o777);
    }

    #[test]
    fn a_claim_naming_its_volume_counts_as_bound() {
        let mut c = claim();
        assert_eq!(bound_volume(&c), None);
        if let Some(spec) = c.spec.as_mut() {
            spec.volume_name = Some("pv1".into());
        }
        assert_eq!(bound_volume(&c), Some("pv1"));
    }
}
