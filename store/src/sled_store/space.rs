//! The disk-space reserve: the committer asks here, once per commit group,
//! how much room the store's file system has left, and refuses writes
//! before sled itself runs into `ENOSPC` (after which sled's state is
//! unknown and the store is poisoned until restart). Creates and updates
//! stop at the write reserve; deletes, which are what frees space, go on
//! until the smaller delete reserve, and compaction and defragmentation are
//! never refused here. Like etcd's NOSPACE alarm, but it clears itself:
//! every group measures again, so writes resume once space is back.
//!
//! It only measures and decides; it never writes or removes anything.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::{Exhausted, StoreError};

/// Default free space below which creates and updates are refused.
pub const DEFAULT_WRITE_RESERVE: u64 = 64 * 1024 * 1024;

/// How much free space the store keeps back, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpaceReserve {
    /// Creates and updates are refused while less than this is free.
    pub writes: u64,
    /// Deletes are refused while less than this is free (kept smaller than
    /// `writes`, so deletes can still free space on a disk writes filled).
    pub deletes: u64,
}

impl SpaceReserve {
    /// A reserve of `writes` bytes for creates and updates, an eighth of it
    /// for deletes (a delete writes too: sled is log-structured, and a
    /// tombstone rewrites the page it lands on).
    pub fn new(writes: u64) -> Self {
        Self {
            writes,
            deletes: writes / 8,
        }
    }
}

impl Default for SpaceReserve {
    fn default() -> Self {
        Self::new(DEFAULT_WRITE_RESERVE)
    }
}

/// Measures the free bytes of the file system holding the store (for
/// tests: any function).
pub(crate) type Probe = Arc<dyn Fn(&Path) -> std::io::Result<u64> + Send + Sync>;

/// Free bytes for an unprivileged writer on the file system of `path`.
pub(crate) fn free_bytes(path: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut stats = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c_path` is a valid NUL-terminated string and `stats` points
    // at writable memory of the right type; statvfs fills it on success.
    let result = unsafe { libc::statvfs(c_path.as_ptr(), stats.as_mut_ptr()) };
    if result != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it initialised the struct.
    let stats = unsafe { stats.assume_init() };
    #[allow(clippy::unnecessary_cast)] // the field types differ by platform
    Ok((stats.f_bavail as u64).saturating_mul(stats.f_frsize as u64))
}

/// What a write needs of the reserve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// A create or update.
    Write,
    /// A delete.
    Delete,
}

/// The committer's view of the disk: the last measurement and the limits.
pub(crate) struct Space {
    dir: PathBuf,
    reserve: Option<SpaceReserve>,
    probe: Probe,
}

/// One measurement, good for one commit group.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Measured {
    /// Free bytes, or `None` when unmeasured (no reserve, or the probe failed).
    pub free: Option<u64>,
    reserve: Option<SpaceReserve>,
}

impl Space {
    pub(crate) fn new(dir: PathBuf, reserve: Option<SpaceReserve>, probe: Option<Probe>) -> Self {
        Self {
            dir,
            reserve,
            probe: probe.unwrap_or_else(|| Arc::new(free_bytes)),
        }
    }

    /// Measures the free space now. A failing probe lets writes through
    /// (sled's own error then decides): refusing every write because a
    /// statistic could not be read would be worse.
    pub(crate) fn measure(&self) -> Measured {
        let free = match self.reserve {
            None => None,
            Some(_) => match (self.probe)(&self.dir) {
                Ok(free) => Some(free),
                Err(error) => {
                    tracing::warn!(%error, dir = %self.dir.display(), "cannot measure free disk space");
                    None
                }
            },
        };
        Measured {
            free,
            reserve: self.reserve,
        }
    }

    /// The directory measured.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Measured {
    /// The reserve `need` would eat into, if it would.
    fn refusal_limit(&self, need: Need) -> Option<u64> {
        let (free, reserve) = (self.free?, self.reserve?);
        let limit = match need {
            Need::Write => reserve.writes,
            Need::Delete => reserve.deletes,
        };
        (free < limit).then_some(limit)
    }

    /// Whether creates and updates are refused: the disk is short, and only
    /// deletes (and reclaiming, see `reclaim`) go on.
    pub(crate) fn short(&self) -> bool {
        self.refusal_limit(Need::Write).is_some()
    }

    /// `Ok` when a write of kind `need` may go ahead, else the error naming
    /// the disk, the directory and the figures.
    pub(crate) fn admit(&self, need: Need, dir: &Path) -> Result<(), StoreError> {
        match (self.refusal_limit(need), self.free) {
            (Some(reserve), Some(free)) => Err(StoreError::NoSpace {
                exhausted: Exhausted::Disk {
                    dir: dir.to_path_buf(),
                    free,
                    reserve,
                },
                deletes_refused: need == Need::Delete,
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(free: u64) -> Measured {
        Measured {
            free: Some(free),
            reserve: Some(SpaceReserve::new(8 << 20)),
        }
    }

    #[test]
    fn writes_stop_at_the_reserve_deletes_at_an_eighth_of_it() {
        let dir = Path::new("/data/db");
        assert!(measured(9 << 20).admit(Need::Write, dir).is_ok());
        let refused = measured(7 << 20).admit(Need::Write, dir).unwrap_err();
        assert!(matches!(refused, StoreError::NoSpace { .. }));
        assert!(refused.to_string().contains("/data/db"), "{refused}");
        assert!(measured(7 << 20).admit(Need::Delete, dir).is_ok());
        assert!(measured(3 << 20).admit(Need::Delete, dir).is_ok());
        assert!(matches!(
            measured(1 << 19).admit(Need::Delete, dir),
            Err(StoreError::NoSpace {
                deletes_refused: true,
                ..
            })
        ));
    }

    #[test]
    fn without_a_reserve_or_a_measurement_nothing_is_refused() {
        let dir = Path::new("/data/db");
        let unmeasured = Measured {
            free: None,
            reserve: Some(SpaceReserve::default()),
        };
        assert!(unmeasured.admit(Need::Write, dir).is_ok());
        let unlimited = Measured {
            free: Some(0),
            reserve: None,
        };
        assert!(unlimited.admit(Need::Write, dir).is_ok());
    }

    #[test]
    fn the_real_probe_reads_this_file_system() {
        let dir = tempfile::tempdir().unwrap();
        assert!(free_bytes(dir.path()).unwrap() > 0);
        assert!(free_bytes(&dir.path().join("missing")).is_err());
    }
}
