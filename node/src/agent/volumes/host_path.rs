//! A hostPath volume's `type`, checked as the kubelet checks it before the
//! pod starts: `DirectoryOrCreate` and `FileOrCreate` make what is missing,
//! the other types require the path to be that kind of file already
//! (symbolic links followed), and an unset type checks nothing. A failed
//! check is the pod's `FailedMount` in the kubelet's words.

use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// Why a hostPath volume's path does not do.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HostPathError {
    /// The path is not the kind of file its type asks for.
    #[error("hostPath type check failed: {} is not a {what}", path.display())]
    WrongType {
        /// The path.
        path: PathBuf,
        /// What it should be (`directory`, `socket file`, …).
        what: &'static str,
    },
    /// A type upstream does not know (validation refuses it first).
    #[error("{0} is an invalid volume type")]
    UnknownType(String),
    /// Making a missing directory or file failed.
    #[error("{}: {source}", path.display())]
    Create {
        /// What was being made.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// Checks (and for the `…OrCreate` types, makes) `path` as hostPath `kind`.
pub(crate) fn prepare(path: &Path, kind: Option<&str>) -> Result<(), HostPathError> {
    let create = |result: io::Result<()>, at: &Path| {
        result.map_err(|source| HostPathError::Create {
            path: at.to_path_buf(),
            source,
        })
    };
    let kind = kind.unwrap_or_default();
    let meta = std::fs::metadata(path).ok();
    let (required, what): (fn(&std::fs::FileType) -> bool, &str) = match kind {
        "" => return Ok(()),
        "DirectoryOrCreate" if meta.is_none() => {
            return create(std::fs::create_dir_all(path), path);
        }
        "FileOrCreate" if meta.is_none() => {
            if let Some(parent) = path.parent() {
                create(std::fs::create_dir_all(parent), parent)?;
            }
            return create(
                std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(path)
                    .map(drop),
                path,
            );
        }
        "Directory" | "DirectoryOrCreate" => (std::fs::FileType::is_dir, "directory"),
        // Anything but a directory, as the kubelet's check reads it.
        "File" | "FileOrCreate" => (|t| !t.is_dir(), "file"),
        "Socket" => (FileTypeExt::is_socket, "socket file"),
        "CharDevice" => (FileTypeExt::is_char_device, "character device"),
        "BlockDevice" => (FileTypeExt::is_block_device, "block device"),
        other => return Err(HostPathError::UnknownType(other.to_string())),
    };
    match meta {
        Some(meta) if required(&meta.file_type()) => Ok(()),
        _ => Err(HostPathError::WrongType {
            path: path.to_path_buf(),
            what,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_type_accepts_its_kind_of_file_and_refuses_the_rest_in_the_kubelets_words() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("dir");
        let file = root.path().join("file");
        let socket = root.path().join("sock");
        let missing = root.path().join("missing");
        std::fs::create_dir(&dir).expect("dir");
        std::fs::write(&file, b"x").expect("file");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("socket");
        let null = Path::new("/dev/null");
        let refused = |path: &Path, kind: &str| {
            prepare(path, Some(kind))
                .expect_err(&format!("{} as {kind}", path.display()))
                .to_string()
        };

        for (path, kind) in [
            (&dir, "Directory"),
            (&dir, "DirectoryOrCreate"),
            (&file, "File"),
            (&file, "FileOrCreate"),
            (&socket, "File"),
            (&socket, "Socket"),
            (&missing, ""),
        ] {
            prepare(path, Some(kind)).unwrap_or_else(|e| panic!("{kind}: {e}"));
        }
        prepare(null, Some("CharDevice")).expect("a character device");
        let say = |path: &Path, what: &str| {
            format!(
                "hostPath type check failed: {} is not a {what}",
                path.display()
            )
        };
        assert_eq!(refused(&file, "Directory"), say(&file, "directory"));
        assert_eq!(refused(&missing, "Directory"), say(&missing, "directory"));
        assert_eq!(refused(&dir, "File"), say(&dir, "file"));
        assert_eq!(refused(&file, "Socket"), say(&file, "socket file"));
        assert_eq!(refused(&file, "CharDevice"), say(&file, "character device"));
        assert_eq!(refused(null, "BlockDevice"), say(null, "block device"));
        assert_eq!(refused(&file, "DirectoryOrCreate"), say(&file, "directory"));
        assert_eq!(refused(&dir, "FileOrCreate"), say(&dir, "file"));
        assert_eq!(refused(&dir, "Pipe"), "Pipe is an invalid volume type");
        assert!(!missing.exists(), "a failed check makes nothing");

        let made_dir = root.path().join("made/dir");
        prepare(&made_dir, Some("DirectoryOrCreate")).expect("made");
        assert!(made_dir.is_dir());
        let made_file = root.path().join("made/file");
        prepare(&made_file, Some("FileOrCreate")).expect("made");
        assert!(made_file.is_file());
        prepare(&file, Some("FileOrCreate")).expect("kept");
        assert_eq!(std::fs::read(&file).expect("read"), b"x", "not truncated");
    }
}
