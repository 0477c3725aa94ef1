//! Value types shared by every backend.

use bytes::Bytes;
use futures::stream::BoxStream;

/// A global store revision. Revisions start at 1 and strictly increase, also
/// across restarts.
pub type Revision = u64;

/// One key with its value and etcd-style revision metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
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
    Delete,
}

/// One change, as delivered by a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
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
    #[error("key {key:?} not found")]
    NotFound { key: String },
    #[error("key {key:?} already exists")]
    AlreadyExists { key: String },
    #[error("conflict on key {key:?}: expected mod revision {expected}, found {actual}")]
    Conflict {
        key: String,
        expected: Revision,
        actual: Revision,
    },
    #[error("revision {requested} has been compacted (compact revision {compact_revision})")]
    Compacted {
        requested: Revision,
        compact_revision: Revision,
    },
    #[error("corrupt store data at {what}: {detail}")]
    Corrupt { what: String, detail: String },
    #[error("store backend I/O failed while {context}: {source}")]
    Backend {
        context: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
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
