//! Backups of a store: a [`Snapshot`] is every live key at one revision, plus
//! named opaque attachments the caller wants to travel with the data (skiff
//! puts the cluster CA, the service-account key and the encryption
//! configuration there, without which the data is of little use).
//!
//! - `format`: the file (one checksummed blob, written 0600 and renamed into
//!   place, so a reader finds a whole file or none; a damaged or truncated
//!   one is refused before anything is written anywhere);
//! - `dir`: [`SnapshotDir`], the directory of one server's snapshots, k3s's
//!   naming (`<name>-<node>-<unix time>`), listing and retention;
//! - `schedule`: [`Schedule`], the cron expression of scheduled snapshots.
//!
//! The consistent read is the backend's ([`crate::Store::read_all`]): writes
//! go on while a snapshot is taken, and it holds no write made after its
//! revision. Restoring is [`crate::SledStore::restore`].

mod dir;
pub(crate) mod format;
mod schedule;

use std::path::{Path, PathBuf};

pub use dir::{SnapshotDir, SnapshotFile, valid_name};

use crate::{KeyValue, Revision, Store, StoreError};

/// A file that travels with a snapshot, under a name the caller chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// The name it is restored under.
    pub name: String,
    /// The file's bytes.
    pub data: Vec<u8>,
}

/// Every live key of a store at one revision, with its attachments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The revision the keys were read at; a store restored from the
    /// snapshot goes on from it.
    pub revision: Revision,
    /// When the snapshot was taken, in seconds since the Unix epoch.
    pub created: u64,
    /// The keys with their values and revisions, in key order.
    pub entries: Vec<KeyValue>,
    /// Files that travel with the keys (CA and signing keys, encryption
    /// configuration), read when the snapshot was taken.
    pub attachments: Vec<Attachment>,
}

/// Why a snapshot could not be taken, read, listed or removed.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// A file or directory operation failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done, e.g. "write".
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a whole snapshot: nothing was restored from it.
    #[error("{} is not a usable snapshot: {detail}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// The store could not be read at one revision.
    #[error("reading the store for a snapshot failed: {0}")]
    Store(#[from] StoreError),
    /// A name that cannot be a snapshot file's.
    #[error(
        "invalid snapshot name {name:?}: use lower-case letters, digits, '-', '_' and '.' (at most 200), not starting with '.'"
    )]
    InvalidName {
        /// The name given.
        name: String,
    },
    /// No snapshot of that name in the directory.
    #[error("snapshot {name:?} not found in {}", dir.display())]
    NotFound {
        /// The name given.
        name: String,
        /// The directory looked in.
        dir: PathBuf,
    },
}

impl Snapshot {
    /// Reads every key of `store` at one revision (see
    /// [`Store::read_all`]) and attaches `attachments`.
    pub async fn take(
        store: &dyn Store,
        attachments: Vec<Attachment>,
    ) -> Result<Self, SnapshotError> {
        let all = store.read_all().await?;
        Ok(Self {
            revision: all.revision,
            created: unix_now(),
            entries: all.items,
            attachments,
        })
    }

    /// Writes the snapshot to `path` (mode 0600) through a temporary file
    /// renamed into place, so `path` holds the whole snapshot or nothing
    /// new. Returns the size written.
    pub fn write(&self, path: &Path) -> Result<u64, SnapshotError> {
        format::write(self, path)
    }

    /// Reads the snapshot at `path`, refusing one whose checksum or
    /// structure does not hold (a damaged or truncated file).
    pub fn read(path: &Path) -> Result<Self, SnapshotError> {
        format::read(path)
    }

    /// The attachment named `name`.
    pub fn attachment(&self, name: &str) -> Option<&Attachment> {
        self.attachments.iter().find(|a| a.name == name)
    }
}

/// Maps an I/O failure on `path` to [`SnapshotError::Io`].
fn io<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> SnapshotError + 'a {
    move |source| SnapshotError::Io {
        action,
        path: path.to_owned(),
        source,
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
