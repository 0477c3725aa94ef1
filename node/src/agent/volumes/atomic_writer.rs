//! The content of API-sourced volumes (configMap, secret, downwardAPI,
//! projected), laid out as upstream's kubelet lays it out so that a running
//! container sees each update whole or not at all:
//!
//! ```text
//! <volume>/..2026_12_06_15_54_01.000000001/<every file>   the current content
//! <volume>/..data -> ..2026_12_06_15_54_01.000000001       swapped by one rename
//! <volume>/<top-level name> -> ..data/<top-level name>     what the pod reads
//! ```
//!
//! An update writes a new timestamped directory, points a fresh `..data_tmp`
//! link at it and renames that over `..data` (the one atomic step), then
//! adds and removes the top-level links and drops the old directory. Tools
//! that reload their configuration watch `..data` for exactly this rename.
//! Content equal to what is there is not written again.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

/// The link every user-visible name resolves through.
const DATA_LINK: &str = "..data";
/// Where the next `..data` is made before the rename.
const DATA_LINK_TMP: &str = "..data_tmp";

/// One file of a volume: its path below the volume, bytes and mode.
pub(crate) type VolumeFile = (String, Vec<u8>, u32);

/// Why a volume's content could not be written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteError {
    /// An item's path is empty, absolute, climbs with `..`, or starts with
    /// `..` (the names the layout keeps for itself).
    #[error("invalid path {0:?}")]
    InvalidPath(String),
    /// The file system refused.
    #[error("{path}: {source}")]
    Io {
        /// Where.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

fn at(path: &Path) -> impl FnOnce(io::Error) -> WriteError + '_ {
    move |source| WriteError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The first component of every file's path (the names the pod sees at
/// the volume's top), refusing paths that are not plain descents.
fn top_level_names(files: &[VolumeFile]) -> Result<BTreeSet<String>, WriteError> {
    let mut names = BTreeSet::new();
    for (rel, _, _) in files {
        let path = Path::new(rel);
        let plain = !rel.is_empty() && path.components().all(|c| matches!(c, Component::Normal(_)));
        let first = path.components().next().and_then(|c| match c {
            Component::Normal(name) => name.to_str(),
            _ => None,
        });
        match first {
            Some(name) if plain && !name.starts_with("..") => {
                names.insert(name.to_string());
            }
            _ => return Err(WriteError::InvalidPath(rel.clone())),
        }
    }
    Ok(names)
}

/// What the timestamped directory `dir` holds: each regular file's bytes
/// and mode by its path below `dir`.
fn read_tree(dir: &Path) -> io::Result<BTreeMap<String, (Vec<u8>, u32)>> {
    let mut found = BTreeMap::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        for entry in std::fs::read_dir(dir.join(&rel))? {
            let entry = entry?;
            let rel = rel.join(entry.file_name());
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push(rel);
            } else if kind.is_file() {
                let path = dir.join(&rel);
                let mode = entry.metadata()?.permissions().mode() & 0o7777;
                found.insert(
                    rel.to_string_lossy().into_owned(),
                    (std::fs::read(path)?, mode),
                );
            }
        }
    }
    Ok(found)
}

/// Whether the content `..data` points at is exactly `files`.
fn unchanged(dir: &Path, files: &[VolumeFile]) -> bool {
    let Ok(current) = std::fs::read_link(dir.join(DATA_LINK)) else {
        return false;
    };
    let Ok(tree) = read_tree(&dir.join(current)) else {
        return false;
    };
    tree.len() == files.len()
        && files.iter().all(|(rel, data, mode)| {
            let normal: PathBuf = Path::new(rel).components().collect();
            tree.get(normal.to_string_lossy().as_ref())
                .is_some_and(|(d, m)| d == data && m == mode)
        })
}

/// A fresh, unused name for the next content directory.
fn timestamped_name(dir: &Path) -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    let base = format!(
        "..{}.{:09}",
        now.strftime("%Y_%m_%d_%H_%M_%S"),
        now.subsec_nanosecond()
    );
    let mut name = base.clone();
    let mut n = 0;
    while dir.join(&name).exists() {
        n += 1;
        name = format!("{base}{n}");
    }
    name
}

/// Makes `files` the content of the volume at `dir` (created if missing).
/// Returns whether anything was written.
pub(crate) fn write(dir: &Path, files: &[VolumeFile]) -> Result<bool, WriteError> {
    let names = top_level_names(files)?;
    std::fs::create_dir_all(dir).map_err(at(dir))?;
    if unchanged(dir, files) {
        return Ok(false);
    }
    let old = std::fs::read_link(dir.join(DATA_LINK)).ok();

    // 1. The new content, complete, in a directory nothing points at yet.
    let name = timestamped_name(dir);
    let fresh = dir.join(&name);
    std::fs::create_dir(&fresh).map_err(at(&fresh))?;
    std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(0o755)).map_err(at(&fresh))?;
    for (rel, data, mode) in files {
        let path = fresh.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(at(parent))?;
        }
        std::fs::write(&path, data).map_err(at(&path))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*mode))
            .map_err(at(&path))?;
    }

    // 2. The swap: one rename moves every name to the new content at once.
    let tmp = dir.join(DATA_LINK_TMP);
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&name, &tmp).map_err(at(&tmp))?;
    let data = dir.join(DATA_LINK);
    std::fs::rename(&tmp, &data).map_err(at(&data))?;

    // 3. The top-level names: new ones linked, stale ones (and anything of
    // an older layout in their place) removed.
    for entry in std::fs::read_dir(dir).map_err(at(dir))?.flatten() {
        let file_name = entry.file_name();
        let Some(entry_name) = file_name.to_str() else {
            continue;
        };
        let path = entry.path();
        let is_ours = entry_name.starts_with("..");
        let linked_right = std::fs::read_link(&path)
            .is_ok_and(|target| target == Path::new(DATA_LINK).join(entry_name));
        if is_ours || (names.contains(entry_name) && linked_right) {
            continue;
        }
        let removed = if path.is_dir() && !path.is_symlink() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.map_err(at(&path))?;
    }
    for top in &names {
        let link = dir.join(top);
        if link.symlink_metadata().is_err() {
            std::os::unix::fs::symlink(Path::new(DATA_LINK).join(top), &link).map_err(at(&link))?;
        }
    }

    // 4. The old content (and leftovers of an interrupted update).
    for entry in std::fs::read_dir(dir).map_err(at(dir))?.flatten() {
        let file_name = entry.file_name();
        let Some(entry_name) = file_name.to_str() else {
            continue;
        };
        let stale = entry_name.starts_with("..")
            && entry_name != DATA_LINK
            && entry_name != name
            && (old.as_deref() == Some(Path::new(entry_name))
                || entry.file_type().is_ok_and(|t| t.is_dir()));
        if stale {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(rel: &str, data: &str, mode: u32) -> VolumeFile {
        (rel.to_string(), data.as_bytes().to_vec(), mode)
    }

    fn content_dirs(dir: &Path) -> Vec<String> {
        let mut dirs: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_type().unwrap().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        dirs.sort();
        dirs
    }

    #[test]
    fn content_is_reached_through_the_data_link_and_swapped_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cfg");
        let first = [file("a", "1", 0o644), file("sub/b.txt", "2", 0o600)];
        assert!(write(&dir, &first).unwrap());
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "1");
        assert_eq!(std::fs::read_to_string(dir.join("sub/b.txt")).unwrap(), "2");
        assert_eq!(
            std::fs::read_link(dir.join("a")).unwrap(),
            Path::new("..data/a")
        );
        assert_eq!(
            std::fs::read_link(dir.join("sub")).unwrap(),
            Path::new("..data/sub")
        );
        let mode = std::fs::metadata(dir.join("sub/b.txt"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let before = std::fs::read_link(dir.join(DATA_LINK)).unwrap();

        // The same content again writes nothing.
        assert!(!write(&dir, &first).unwrap());
        assert_eq!(std::fs::read_link(dir.join(DATA_LINK)).unwrap(), before);

        // A changed key, a new one, one gone: one new directory, the old
        // one removed, the gone name no longer there.
        let second = [file("a", "NEW", 0o644), file("c", "3", 0o644)];
        assert!(write(&dir, &second).unwrap());
        assert_ne!(std::fs::read_link(dir.join(DATA_LINK)).unwrap(), before);
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "NEW");
        assert_eq!(std::fs::read_to_string(dir.join("c")).unwrap(), "3");
        assert!(dir.join("sub").symlink_metadata().is_err());
        assert_eq!(content_dirs(&dir).len(), 1, "{:?}", content_dirs(&dir));
        assert!(!dir.join(DATA_LINK_TMP).exists());

        // A mode change alone is a change.
        assert!(write(&dir, &[file("a", "NEW", 0o400), file("c", "3", 0o644)]).unwrap());
    }

    #[test]
    fn files_of_the_flat_layout_are_replaced_by_links() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cfg");
        std::fs::create_dir_all(dir.join("old-dir")).unwrap();
        std::fs::write(dir.join("a"), "flat").unwrap();
        std::fs::write(dir.join("gone"), "flat").unwrap();
        assert!(write(&dir, &[file("a", "linked", 0o644)]).unwrap());
        assert!(dir.join("a").is_symlink());
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "linked");
        assert!(!dir.join("gone").exists());
        assert!(!dir.join("old-dir").exists());
    }

    #[test]
    fn paths_that_leave_the_volume_or_take_its_own_names_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("v");
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "..data", "..2026/x"] {
            let err = write(&dir, &[file(bad, "x", 0o644)]).unwrap_err();
            assert!(
                matches!(err, WriteError::InvalidPath(ref p) if p == bad),
                "{bad}: {err}"
            );
        }
        assert!(!tmp.path().join("x").exists());
    }

    #[test]
    fn an_empty_volume_has_only_its_data_link() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("v");
        assert!(write(&dir, &[]).unwrap());
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with("..2"))
            .collect();
        assert_eq!(names, vec![DATA_LINK.to_string()]);
        assert!(!write(&dir, &[]).unwrap());
    }
}
