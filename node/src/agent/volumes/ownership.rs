//! A pod's `fsGroup` on its volumes, as upstream's volume ownership
//! management applies it to the volume kinds that support it (emptyDir,
//! configMap, secret, downwardAPI, projected): every file and directory gets
//! the group, group read (and write, for a writable volume) is added to its
//! mode, and directories get execute and the setgid bit so what is created
//! in them later has the group too. So a container running as another user
//! but in the pod's `fsGroup` can read a Secret written `0400`, and share
//! an emptyDir with its neighbours. Symbolic links (the atomic writer's
//! `..data` and top-level names) get the group and keep their own mode.
//! `fsGroupChangePolicy` does not apply to these kinds: upstream's plugins
//! for them walk the whole volume every time, whatever the pod asks.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Group bits added to a writable volume's files.
const READ_WRITE: u32 = 0o660;
/// Group bits added to a read-only volume's files.
const READ_ONLY: u32 = 0o440;
/// Added to directories besides: search for owner and group, and setgid.
const DIRECTORY: u32 = 0o110 | 0o2000;

/// A file that could not be given the group.
#[derive(Debug, thiserror::Error)]
#[error("setting the fsGroup of {path}: {source}")]
pub(crate) struct OwnershipError {
    /// The file.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: io::Error,
}

/// Gives everything under `dir` (itself included) the group `fs_group`, as
/// upstream's `SetVolumeOwnership` does for a volume mounted `read_only`
/// or not.
pub(crate) fn apply(dir: &Path, fs_group: u32, read_only: bool) -> Result<(), OwnershipError> {
    let mask = if read_only { READ_ONLY } else { READ_WRITE };
    let mut pending = vec![dir.to_path_buf()];
    while let Some(path) = pending.pop() {
        let fail = |source| OwnershipError {
            path: path.clone(),
            source,
        };
        let meta = std::fs::symlink_metadata(&path).map_err(fail)?;
        std::os::unix::fs::lchown(&path, None, Some(fs_group)).map_err(fail)?;
        if meta.file_type().is_symlink() {
            continue;
        }
        let mut wanted = meta.permissions().mode() | mask;
        if meta.is_dir() {
            wanted |= DIRECTORY;
            for entry in std::fs::read_dir(&path).map_err(fail)? {
                pending.push(entry.map_err(fail)?.path());
            }
        }
        if wanted != meta.permissions().mode() {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(wanted))
                .map_err(fail)?;
        }
    }
    Ok(())
}

/// The pod's `securityContext.fsGroup`, when it sets one.
pub(crate) fn fs_group(pod: &k8s_openapi::api::core::v1::Pod) -> Option<u32> {
    let group = pod.spec.as_ref()?.security_context.as_ref()?.fs_group?;
    u32::try_from(group).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    }

    #[test]
    fn files_get_the_group_and_group_access_directories_setgid() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("vol");
        std::fs::create_dir(&root).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        let data = root.join("..2026_12_06");
        std::fs::create_dir(&data).unwrap();
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
        let secret = data.join("key");
        std::fs::write(&secret, "v").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o400)).unwrap();
        std::os::unix::fs::symlink("..2026_12_06/key", root.join("key")).unwrap();

        apply(&root, 2000, true).unwrap();
        for path in [&root, &data, &secret, &root.join("key")] {
            assert_eq!(
                std::fs::symlink_metadata(path).unwrap().gid(),
                2000,
                "{path:?}"
            );
        }
        assert_eq!(mode(&secret), 0o440, "group may read what its owner may");
        assert_eq!(mode(&data), 0o2755);
        assert_eq!(mode(&root), 0o2755);
        assert_eq!(mode(&root.join("key")), 0o777, "a link keeps its own mode");

        // Writable (an emptyDir): group read and write.
        let scratch = dir.path().join("scratch");
        std::fs::create_dir(&scratch).unwrap();
        std::fs::set_permissions(&scratch, std::fs::Permissions::from_mode(0o777)).unwrap();
        let file = scratch.join("f");
        std::fs::write(&file, "x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        apply(&scratch, 3000, false).unwrap();
        assert_eq!(mode(&scratch), 0o2777);
        assert_eq!(mode(&file), 0o660);
        assert_eq!(std::fs::metadata(&file).unwrap().gid(), 3000);
    }
}
