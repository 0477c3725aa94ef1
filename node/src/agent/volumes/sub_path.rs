//! Mounts of part of a volume (`subPath`, `subPathExpr`), made so the pod
//! cannot point them elsewhere on the host. A container can write a
//! symbolic link into a volume it shares (`ln -s / /data/escape`); a later
//! container mounting `subPath: escape` must not get the host's root. So
//! the path is resolved, checked to lie inside the volume, then opened one
//! component at a time without following links (a link swapped in
//! meanwhile is refused), and what was opened is bind-mounted by its file
//! descriptor onto a mount point under the pod's directory. The runtime
//! mounts that pinned point, never the path the pod can change.
//!
//! The pinned mounts live under `<pod dir>/volume-subpaths/<container>/<n>`
//! (`n` the mount's index) until the pod's teardown detaches every mount
//! under its directory (`mounts::detach_all_under`) before removing it.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

/// Why a part of a volume could not be mounted
/// (`CreateContainerConfigError`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SubPathError {
    /// The sub path is absolute or climbs out with `..`.
    #[error("subpath {sub:?} must be a relative path without '..'")]
    NotDescending {
        /// The sub path as given.
        sub: String,
    },
    /// After following its links, the path ends outside the volume.
    #[error("subpath {path:?} not within volume path {volume:?}")]
    Outside {
        /// Where the sub path led.
        path: PathBuf,
        /// The volume's directory.
        volume: PathBuf,
    },
    /// A component changed into a symbolic link while it was opened.
    #[error("subpath {path:?}: component {component:?} is a symbolic link")]
    Link {
        /// The resolved path being opened.
        path: PathBuf,
        /// The component found to be a link.
        component: String,
    },
    /// A system call failed.
    #[error("subpath {path:?}: {action}: {source}")]
    Io {
        /// The path concerned.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// Why it failed.
        source: io::Error,
    },
}

fn io_error<'a>(
    path: &'a Path,
    action: &'static str,
) -> impl FnOnce(io::Error) -> SubPathError + 'a {
    move |source| SubPathError::Io {
        path: path.to_path_buf(),
        action,
        source,
    }
}

impl From<super::mounts::MountError> for SubPathError {
    fn from(e: super::mounts::MountError) -> Self {
        SubPathError::Io {
            path: e.path,
            action: e.action,
            source: e.source,
        }
    }
}

/// Where the pinned mounts of a pod's containers live.
fn staging_root(pod_dir: &Path) -> PathBuf {
    pod_dir.join("volume-subpaths")
}

/// Mounts `sub` of the volume at `volume` (a host directory) pinned at
/// `<pod_dir>/volume-subpaths/<container>/<index>`, creating the missing
/// directories of `sub` inside the volume (as upstream does), and returns
/// that mount point for the runtime. A mount left there by an earlier
/// instance of the container is replaced.
pub(crate) fn pin(
    volume: &Path,
    sub: &str,
    pod_dir: &Path,
    container: &str,
    index: usize,
) -> Result<PathBuf, SubPathError> {
    let relative = descending(sub)?;
    let base = volume
        .canonicalize()
        .map_err(io_error(volume, "resolving the volume"))?;
    let target = open_inside(&base, &relative)?;
    let staging = staging_root(pod_dir)
        .join(container)
        .join(index.to_string());
    super::mounts::detach(&staging)?;
    let metadata = File::from(
        target
            .try_clone()
            .map_err(io_error(&staging, "duplicating the descriptor"))?,
    )
    .metadata()
    .map_err(io_error(&staging, "reading what the sub path names"))?;
    if let Some(parent) = staging.parent() {
        std::fs::create_dir_all(parent).map_err(io_error(parent, "creating the mount point"))?;
    }
    if metadata.is_dir() {
        match std::fs::create_dir(&staging) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                return Err(io_error(&staging, "creating the mount point")(e));
            }
            _ => {}
        }
    } else {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&staging)
            .map_err(io_error(&staging, "creating the mount point"))?;
    }
    let source = c_path(Path::new(&format!("/proc/self/fd/{}", target.as_raw_fd())))?;
    let at = c_path(&staging)?;
    // SAFETY: both strings are NUL-terminated and outlive the call; a bind
    // mount reads no file system type or data.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            at.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(io_error(&staging, "bind-mounting the sub path")(
            io::Error::last_os_error(),
        ));
    }
    Ok(staging)
}

/// `sub` as relative components, refused if absolute or with `..` (the API
/// server refuses these too; a pod from before that check must not pass).
fn descending(sub: &str) -> Result<PathBuf, SubPathError> {
    let refuse = || SubPathError::NotDescending { sub: sub.into() };
    let mut relative = PathBuf::new();
    for component in Path::new(sub).components() {
        match component {
            Component::Normal(part) => relative.push(part),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) | Component::ParentDir => {
                return Err(refuse());
            }
        }
    }
    Ok(relative)
}

/// Opens `base/relative` (`base` canonical) so that what is opened is
/// inside `base` whatever links the volume holds: links are followed only
/// to find where the path leads, which must be inside `base`; the walk
/// that opens it follows none, and creates what is missing.
fn open_inside(base: &Path, relative: &Path) -> Result<OwnedFd, SubPathError> {
    let wanted = base.join(relative);
    // The longest part of the path that exists, resolved; the rest is made.
    let mut existing = wanted.clone();
    let mut missing: Vec<std::ffi::OsString> = Vec::new();
    let resolved = loop {
        match existing.canonicalize() {
            Ok(resolved) => break resolved,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let Some(name) = existing.file_name() else {
                    return Err(io_error(&wanted, "resolving the sub path")(e));
                };
                missing.push(name.to_os_string());
                if !existing.pop() {
                    return Err(io_error(&wanted, "resolving the sub path")(e));
                }
            }
            Err(e) => return Err(io_error(&wanted, "resolving the sub path")(e)),
        }
    };
    let Ok(inside) = resolved.strip_prefix(base) else {
        return Err(SubPathError::Outside {
            path: resolved,
            volume: base.to_path_buf(),
        });
    };
    let mode = std::fs::metadata(base)
        .map_err(io_error(base, "reading the volume's mode"))?
        .permissions()
        .mode()
        & 0o7777;
    let mut fd = open_path(None, base.as_os_str().as_bytes(), &wanted)?;
    for part in inside.components() {
        let Component::Normal(name) = part else {
            continue;
        };
        fd = open_path(Some(&fd), name.as_bytes(), &wanted)?;
    }
    for name in missing.iter().rev() {
        let c_name = c_bytes(name.as_bytes(), &wanted)?;
        // SAFETY: the descriptor is open and the name NUL-terminated.
        let rc = unsafe { libc::mkdirat(fd.as_raw_fd(), c_name.as_ptr(), mode) };
        if rc != 0 {
            let error = io::Error::last_os_error();
            if error.kind() != io::ErrorKind::AlreadyExists {
                return Err(io_error(&wanted, "creating the sub path")(error));
            }
        }
        fd = open_path(Some(&fd), name.as_bytes(), &wanted)?;
    }
    Ok(fd)
}

/// Opens `name` in the directory `dir` (or the absolute `name`) as a path
/// descriptor without following a final link, and refuses it if it is one.
fn open_path(dir: Option<&OwnedFd>, name: &[u8], whole: &Path) -> Result<OwnedFd, SubPathError> {
    let c_name = c_bytes(name, whole)?;
    let dir_fd = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: the descriptor is open (or AT_FDCWD) and the name NUL-terminated.
    let raw = unsafe {
        libc::openat(
            dir_fd,
            c_name.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if raw < 0 {
        return Err(io_error(whole, "opening the sub path")(
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: openat returned a new descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: an all-zero stat is a valid buffer for fstat to fill.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is open and the buffer is a stat.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } != 0 {
        return Err(io_error(whole, "inspecting the sub path")(
            io::Error::last_os_error(),
        ));
    }
    if stat.st_mode & libc::S_IFMT == libc::S_IFLNK {
        return Err(SubPathError::Link {
            path: whole.to_path_buf(),
            component: String::from_utf8_lossy(name).into_owned(),
        });
    }
    Ok(fd)
}

fn c_path(path: &Path) -> Result<CString, SubPathError> {
    c_bytes(path.as_os_str().as_bytes(), path)
}

fn c_bytes(bytes: &[u8], whole: &Path) -> Result<CString, SubPathError> {
    CString::new(bytes).map_err(|_| SubPathError::Io {
        path: whole.to_path_buf(),
        action: "naming the sub path",
        source: io::Error::from(io::ErrorKind::InvalidInput),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_descending_relative_paths_are_taken() {
        assert_eq!(descending("a/./b").unwrap(), PathBuf::from("a/b"));
        for bad in ["/etc", "../x", "a/../../b"] {
            assert!(matches!(
                descending(bad),
                Err(SubPathError::NotDescending { .. })
            ));
        }
    }

    #[test]
    fn a_link_inside_the_volume_is_followed_and_one_out_of_it_refused() {
        let dir = tempfile::tempdir().unwrap();
        let volume = dir.path().join("volume");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(volume.join("..2026/conf")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        // As a configMap volume lays out its files.
        std::os::unix::fs::symlink("..2026", volume.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/conf", volume.join("conf")).unwrap();
        std::os::unix::fs::symlink(&outside, volume.join("escape")).unwrap();
        std::os::unix::fs::symlink("../outside", volume.join("up")).unwrap();
        let base = volume.canonicalize().unwrap();

        let fd = open_inside(&base, Path::new("conf")).unwrap();
        let opened = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
        assert_eq!(opened, base.join("..2026/conf"));
        for link in ["escape", "up", "escape/new/dirs"] {
            assert!(
                matches!(
                    open_inside(&base, Path::new(link)),
                    Err(SubPathError::Outside { .. })
                ),
                "{link}"
            );
        }
        assert!(!outside.join("new").exists(), "nothing made outside");

        // Missing directories are made inside, with the volume's mode.
        let fd = open_inside(&base, Path::new("a/b")).unwrap();
        let opened = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
        assert_eq!(opened, base.join("a/b"));
        assert!(base.join("a/b").is_dir());
    }
}
