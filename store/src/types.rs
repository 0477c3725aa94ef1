//! Value types shared by every backend.

use bytes::Bytes;
use futures::stream::BoxStream;

/// A global store revision. Revisions start at 1 and strictly increase, also
/// across restarts.
pub type Revision = u64;

/// One key with its value and etcd-style revision metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// The key, as the caller wrote it.
    pub key: String,
    /// The value's bytes; empty for a deletion.
    pub value: Bytes,
    /// Revision of the write that created this incarnation of the key.
    pub create_revision: Revision,
    /// Revision of the latest write to the key (for a delete: the deletion's).
    pub mod_revision: Revision,
    /// Number of writes since creation (1 after create).
    pub version: u64,
}

/// The result of a (possibly partial) list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListResult {
    /// The keys found, in key order.
    pub items: Vec<KeyValue>,
    /// The store revision the list was read at.
    pub revision: Revision,
    /// Whether keys beyond `limit` remain under the prefix.
    pub more: bool,
}

/// What a change did to its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// Create or update; a create has no `prev`.
    Put,
    /// The key was deleted.
    Delete,
}

/// One change, as delivered by a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Whether the key was written or deleted.
    pub kind: EventKind,
    /// The key after the change. For a delete: the key, an empty value and the
    /// deletion's revision as `mod_revision`.
    pub kv: KeyValue,
    /// The key's value before the change, if it existed.
    pub prev: Option<KeyValue>,
}

impl Event {
    /// The revision at which this change happened.
    pub fn revision(&self) -> Revision {
        self.kv.mod_revision
    }
}

/// A stream of watch events; it ends only when the store closes or on error.
pub type WatchStream = BoxStream<'static, Result<Event, StoreError>>;

/// Everything that can go wrong in a store operation.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An update or delete of a key that does not exist.
    #[error("key {key:?} not found")]
    NotFound {
        /// The key.
        key: String,
    },
    /// A create of a key that exists.
    #[error("key {key:?} already exists")]
    AlreadyExists {
        /// The key.
        key: String,
    },
    /// A compare-and-swap whose expected revision is no longer the key's.
    #[error("conflict on key {key:?}: expected mod revision {expected}, found {actual}")]
    Conflict {
        /// The key.
        key: String,
        /// The mod revision the caller expected.
        expected: Revision,
        /// The key's mod revision now (0: the key is gone).
        actual: Revision,
    },
    /// A read or watch at a revision whose history was dropped.
    #[error("revision {requested} has been compacted (compact revision {compact_revision})")]
    Compacted {
        /// The revision asked for.
        requested: Revision,
        /// The oldest revision still kept.
        compact_revision: Revision,
    },
    /// Stored bytes that do not decode: nothing is guessed from them.
    #[error("corrupt store data at {what}: {detail}")]
    Corrupt {
        /// Where: a key, an index entry, a file.
        what: String,
        /// What is wrong.
        detail: String,
    },
    /// The backend (sled, the disk, etcd) failed.
    #[error("store backend I/O failed while {context}: {source}")]
    Backend {
        /// What the store was doing.
        context: &'static str,
        /// The backend's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The store was closed; nothing more is answered.
    #[error("store is closed")]
    Closed,
    /// The store is out of space: the write was refused before it reached
    /// the backend, and the store is otherwise intact.
    #[error("{exhausted}; {}", refusal(exhausted, *deletes_refused))]
    NoSpace {
        /// What ran out.
        exhausted: Exhausted,
        /// Whether even deletes are refused (the delete reserve is reached).
        deletes_refused: bool,
    },
}

/// The space a [`StoreError::NoSpace`] ran out of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exhausted {
    /// The disk of the embedded store's data directory is below its reserve.
    Disk {
        /// The store's data directory.
        dir: std::path::PathBuf,
        /// Free bytes on its file system when the write was refused.
        free: u64,
        /// The reserve the write would have eaten into.
        reserve: u64,
    },
    /// etcd raised its NOSPACE alarm: its backend reached its quota
    /// (`--quota-backend-bytes`). It stays refusing writes until an operator
    /// compacts, defragments and disarms the alarm.
    EtcdQuota {
        /// The endpoints of the etcd cluster.
        endpoints: String,
    },
}

impl std::fmt::Display for Exhausted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exhausted::Disk { dir, free, reserve } => write!(
                f,
                "storage space exhausted: the disk of the data directory {} has {} free, below the {} reserve",
                dir.display(),
                mib(*free),
                mib(*reserve),
            ),
            Exhausted::EtcdQuota { endpoints } => write!(
                f,
                "storage space exhausted: etcd at {endpoints} raised its NOSPACE alarm (its database reached its quota)"
            ),
        }
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn refusal(exhausted: &Exhausted, deletes: bool) -> &'static str {
    match exhausted {
        _ if deletes => "all writes, deletes included, are refused",
        Exhausted::Disk { .. } => {
            "writes are refused; reads, watches and deletes still work, and writes resume once space is freed"
        }
        Exhausted::EtcdQuota { .. } => {
            "writes are refused until the alarm is disarmed (after compaction and defragmentation); reads, watches and deletes still work"
        }
    }
}
