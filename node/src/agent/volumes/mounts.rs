//! The host mounts the agent makes and takes down for pods: reading this
//! process's mount table, detaching what lies under a pod's directory
//! before that directory is removed (removing files through a live mount
//! deletes what it shows: a pinned sub path's target, or what a container
//! mounted back through `Bidirectional` propagation), and making the pods
//! directory a shared mount, as the kubelet does with its root directory,
//! so `HostToContainer` and `Bidirectional` propagation work on a host
//! whose root mount is private; and the tmpfs of memory-backed volumes.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A mount operation that failed, with what and where.
#[derive(Debug, thiserror::Error)]
#[error("{action} {path:?}: {source}")]
pub(crate) struct MountError {
    /// What was being done.
    pub action: &'static str,
    /// Where.
    pub path: PathBuf,
    /// Why it failed.
    pub source: io::Error,
}

fn failed<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> MountError + 'a {
    move |source| MountError {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// One line of `/proc/self/mountinfo`: where, and whether it propagates
/// to peers (`shared:N`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    point: PathBuf,
    shared: bool,
}

fn table() -> Result<Vec<Mount>, MountError> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(failed("reading", Path::new("/proc/self/mountinfo")))?;
    Ok(parse(&text))
}

fn parse(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let point = fields.get(4)?;
            // Optional fields run from the seventh to the `-`.
            let optional = fields.get(6..)?.iter().take_while(|f| **f != "-");
            let shared = optional.clone().any(|f| f.starts_with("shared:"));
            Some(Mount {
                point: PathBuf::from(unescape(point)),
                shared,
            })
        })
        .collect()
}

/// A mountinfo field with its `\ooo` escapes (space, tab, newline,
/// backslash) decoded.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn c_path(path: &Path) -> Result<CString, MountError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| MountError {
        action: "naming",
        path: path.to_path_buf(),
        source: io::Error::from(io::ErrorKind::InvalidInput),
    })
}

/// Detaches the mount at `point`, if there is one.
pub(crate) fn detach(point: &Path) -> Result<(), MountError> {
    let c_point = c_path(point)?;
    // SAFETY: the path is NUL-terminated and outlives the call.
    if unsafe { libc::umount2(c_point.as_ptr(), libc::MNT_DETACH) } != 0 {
        let error = io::Error::last_os_error();
        // Not a mount point (EINVAL) or not there (ENOENT): nothing to do.
        if !matches!(error.raw_os_error(), Some(libc::EINVAL | libc::ENOENT)) {
            return Err(failed("detaching", point)(error));
        }
    }
    Ok(())
}

/// Detaches every mount below `dir` (deepest first) and checks none is
/// left; until this succeeds nothing may remove files under `dir`.
pub(crate) fn detach_all_under(dir: &Path) -> Result<(), MountError> {
    let below = |mounts: Vec<Mount>| -> Vec<PathBuf> {
        mounts
            .into_iter()
            .map(|m| m.point)
            .filter(|p| p.starts_with(dir) && p != dir)
            .collect()
    };
    let mut points = below(table()?);
    points.sort_by_key(|p| std::cmp::Reverse(p.as_os_str().len()));
    for point in &points {
        detach(point)?;
    }
    match below(table()?).first() {
        Some(left) => Err(failed("detaching", left)(io::Error::other("still mounted"))),
        None => Ok(()),
    }
}

/// Makes `dir` (created if missing) a shared mount unless the mount that
/// holds it already is one: bound onto itself, then marked recursively
/// shared. Idempotent across restarts of the agent.
pub(crate) fn share(dir: &Path) -> Result<(), MountError> {
    std::fs::create_dir_all(dir).map_err(failed("creating", dir))?;
    let dir = dir.canonicalize().map_err(failed("resolving", dir))?;
    let holder = table()?
        .into_iter()
        .filter(|m| dir.starts_with(&m.point))
        .max_by_key(|m| m.point.as_os_str().len());
    if holder.as_ref().is_some_and(|m| m.shared) {
        return Ok(());
    }
    let c_dir = c_path(&dir)?;
    if holder.as_ref().is_none_or(|m| m.point != dir) {
        // SAFETY: both paths are the same NUL-terminated string that
        // outlives the call; a bind mount reads no type or data.
        let rc = unsafe {
            libc::mount(
                c_dir.as_ptr(),
                c_dir.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            )
        };
        if rc != 0 {
            return Err(failed("binding onto itself", &dir)(
                io::Error::last_os_error(),
            ));
        }
    }
    // SAFETY: as above; changing propagation reads no source, type or data.
    let rc = unsafe {
        libc::mount(
            std::ptr::null(),
            c_dir.as_ptr(),
            std::ptr::null(),
            libc::MS_SHARED | libc::MS_REC,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(failed("sharing", &dir)(io::Error::last_os_error()));
    }
    Ok(())
}

/// Mounts a tmpfs at `dir` (created if missing) unless one is mounted
/// there already: memory-backed volumes, whose files never reach the disk.
/// `size` caps it in bytes (a memory emptyDir's `sizeLimit`).
pub(crate) fn tmpfs(dir: &Path, size: Option<u64>) -> Result<(), MountError> {
    std::fs::create_dir_all(dir).map_err(failed("creating", dir))?;
    let dir = dir.canonicalize().map_err(failed("resolving", dir))?;
    if table()?.iter().any(|m| m.point == dir) {
        return Ok(());
    }
    let c_dir = c_path(&dir)?;
    let options = size
        .map(|bytes| format!("size={bytes}"))
        .unwrap_or_default();
    let c_options = CString::new(options).map_err(|_| MountError {
        action: "naming the options of",
        path: dir.clone(),
        source: io::Error::from(io::ErrorKind::InvalidInput),
    })?;
    let c_tmpfs = c"tmpfs";
    // SAFETY: every string is NUL-terminated and outlives the call; the
    // data is tmpfs's option string.
    let rc = unsafe {
        libc::mount(
            c_tmpfs.as_ptr(),
            c_dir.as_ptr(),
            c_tmpfs.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            c_options.as_ptr().cast(),
        )
    };
    if rc != 0 {
        return Err(failed("mounting a tmpfs at", &dir)(
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_and_their_propagation_are_read() {
        let text = "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n\
                    90 27 254:0 /x /var/lib/a\\040b rw shared:7 master:2 - ext4 /dev/vda rw\n";
        assert_eq!(
            parse(text),
            vec![
                Mount {
                    point: "/".into(),
                    shared: false
                },
                Mount {
                    point: "/var/lib/a b".into(),
                    shared: true
                },
            ]
        );
        assert_eq!(unescape(r"/a\134c\04"), r"/a\c\04");
    }
}
