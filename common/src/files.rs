//! Files of a data directory that must never be seen half-written or by
//! the wrong user: keys, certificates, tokens, kubeconfigs, the encryption
//! configuration. A write goes to a temporary file beside the target,
//! created with the final mode (so a private file is never readable by
//! others, not even for a moment), synced, renamed over the target, and
//! the directory synced, so that after a crash the file is the old one or
//! the new one, never a part.

use std::fs;
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

/// A data-directory file that could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {path}: {source}")]
pub struct FileError {
    /// What was tried (`read`, `create`, `write`, `replace`, …).
    pub action: &'static str,
    /// The file or directory.
    pub path: PathBuf,
    /// Why it failed.
    #[source]
    pub source: io::Error,
}

impl FileError {
    fn at(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> Self {
        let path = path.to_path_buf();
        move |source| Self {
            action,
            path,
            source,
        }
    }
}

/// Writes `contents` to `path` readable by its owner only (mode 0600).
pub fn write_private(path: &Path, contents: &[u8]) -> Result<(), FileError> {
    write(path, contents, 0o600)
}

/// Writes `contents` to `path` readable by everyone (mode 0644):
/// certificates and other public files.
pub fn write_public(path: &Path, contents: &[u8]) -> Result<(), FileError> {
    write(path, contents, 0o644)
}

/// Writes `contents` to `path` with the file mode the user chose (a
/// kubeconfig written for others to read, say); missing directories above
/// it are created as `mkdir -p` does (0755), so that the mode is not
/// undone by a private directory.
pub fn write_with_mode(path: &Path, contents: &[u8], mode: u32) -> Result<(), FileError> {
    write_in(path, contents, mode, 0o755)
}

fn write(path: &Path, contents: &[u8], mode: u32) -> Result<(), FileError> {
    write_in(path, contents, mode, 0o700)
}

/// Replaces `path` with `contents`, mode `mode`, whole or not at all;
/// missing directories above it are created with `dir_mode`.
fn write_in(path: &Path, contents: &[u8], mode: u32, dir_mode: u32) -> Result<(), FileError> {
    let name = path
        .file_name()
        .ok_or_else(|| FileError::at("name", path)(io::ErrorKind::InvalidInput.into()))?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    fs::DirBuilder::new()
        .recursive(true)
        .mode(dir_mode)
        .create(dir)
        .map_err(FileError::at("create the directory of", path))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(".tmp");
    let tmp = dir.join(tmp_name);
    // A temporary file left by a crash is stale; its mode may not be ours.
    let _ = fs::remove_file(&tmp);
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(FileError::at("create", &tmp))?;
    // The umask may have narrowed the mode at creation; a public file must
    // still be readable by others.
    file.set_permissions(fs::Permissions::from_mode(mode))
        .and_then(|()| file.write_all(contents))
        .and_then(|()| file.sync_all())
        .map_err(FileError::at("write", &tmp))?;
    drop(file);
    fs::rename(&tmp, path).map_err(FileError::at("replace", path))?;
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(FileError::at("sync the directory of", path))
}

/// The text of `path`, or `None` when there is no such file.
pub fn read_optional(path: &Path) -> Result<Option<String>, FileError> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(FileError::at("read", path)(e)),
    }
}

/// Creates `dir` (and its parents) and makes it private to its owner,
/// whether or not it existed.
pub fn create_private_dir(dir: &Path) -> Result<(), FileError> {
    fs::create_dir_all(dir).map_err(FileError::at("create", dir))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
        .map_err(FileError::at("restrict", dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn private_and_public_files_get_their_modes_in_owner_only_directories() {
        let root = tempfile::tempdir().unwrap();
        let key = root.path().join("new/dir/ca.key");
        let cert = root.path().join("new/dir/ca.crt");
        write_private(&key, b"KEY").unwrap();
        write_public(&cert, b"CERT").unwrap();
        assert_eq!(fs::read(&key).unwrap(), b"KEY");
        assert_eq!(mode(&key), 0o600);
        assert_eq!(mode(&cert), 0o644);
        assert_eq!(mode(&root.path().join("new")), 0o700);
        assert_eq!(mode(&root.path().join("new/dir")), 0o700);
        // Nothing is left beside them.
        let mut names: Vec<_> = fs::read_dir(root.path().join("new/dir"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["ca.crt", "ca.key"]);
    }

    #[test]
    fn a_rewrite_replaces_the_file_and_narrows_a_widened_mode() {
        let root = tempfile::tempdir().unwrap();
        let token = root.path().join("token");
        fs::write(&token, "old and longer").unwrap();
        fs::set_permissions(&token, fs::Permissions::from_mode(0o666)).unwrap();
        // A stale temporary file from a crash, readable by everyone.
        let stale = root.path().join(".token.tmp");
        fs::write(&stale, "stale").unwrap();
        fs::set_permissions(&stale, fs::Permissions::from_mode(0o666)).unwrap();
        write_private(&token, b"new").unwrap();
        assert_eq!(fs::read_to_string(&token).unwrap(), "new");
        assert_eq!(mode(&token), 0o600);
        assert!(!stale.exists());
    }

    #[test]
    fn a_file_written_with_a_chosen_mode_gets_it_in_reachable_directories() {
        let root = tempfile::tempdir().unwrap();
        let config = root.path().join("etc/skiff/admin.yaml");
        write_with_mode(&config, b"shared", 0o644).unwrap();
        assert_eq!(mode(&config), 0o644);
        // `mkdir -p` modes, so the file's readers can reach it.
        assert_eq!(mode(&root.path().join("etc/skiff")) & 0o005, 0o005);
        // Rewritten narrower, it is narrower at once.
        write_with_mode(&config, b"owner only", 0o600).unwrap();
        assert_eq!(mode(&config), 0o600);
        assert_eq!(fs::read_to_string(&config).unwrap(), "owner only");
    }

    #[test]
    fn errors_name_the_action_and_the_file() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(read_optional(&root.path().join("absent")).unwrap(), None);
        let blocker = root.path().join("file");
        fs::write(&blocker, "x").unwrap();
        let err = write_private(&blocker.join("below"), b"x").unwrap_err();
        assert_eq!(err.action, "create the directory of");
        assert!(err.to_string().contains("below"), "{err}");
        let err = read_optional(root.path()).unwrap_err();
        assert_eq!(err.action, "read");
        create_private_dir(&root.path().join("a/b")).unwrap();
        assert_eq!(mode(&root.path().join("a/b")), 0o700);
    }
}
