//! State shared by the store handle, the committer thread and watchers.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;
use tokio::sync::watch;

use super::durability::Durability;
use super::ring::EventRing;
use super::space::Space;
use crate::{Revision, StoreError};

/// Counters a benchmark or operator can read through `SledStore::stats`.
#[derive(Default)]
pub(crate) struct Counters {
    pub flushes: AtomicU64,
    pub commit_groups: AtomicU64,
    pub writes: AtomicU64,
    pub history_reads: AtomicU64,
    pub defragmentations: AtomicU64,
    /// Nanoseconds spent in sled's flush and in the extra sync, and applying writes.
    pub flush_nanos: AtomicU64,
    pub sync_nanos: AtomicU64,
    pub apply_nanos: AtomicU64,
}

/// One sled database of the store (see `layout`); replaced as a whole by
/// defragmentation.
pub(crate) struct Generation {
    pub number: u64,
    pub dir: PathBuf,
    pub db: sled::Db,
    pub durability: parking_lot::Mutex<Durability>,
}

pub(crate) struct Shared {
    /// The live generation. Operations take a handle for their duration.
    pub generation: RwLock<Arc<Generation>>,
    /// Newest revision that is durable and visible to readers. Records above
    /// it may already be in sled (applied, not yet flushed) and are skipped.
    pub published: AtomicU64,
    /// Revision at or below which history may be gone.
    pub compact: AtomicU64,
    pub ring: RwLock<EventRing>,
    /// Wakes watchers when `published` moves; closed when the committer stops.
    pub notify: watch::Receiver<Revision>,
    pub counters: Counters,
    pub cache_capacity: u64,
    /// Set when a write or flush failed: what is on disk is then unknown, so
    /// every later write fails rather than guessing.
    pub poisoned: parking_lot::Mutex<Option<String>>,
    /// The free-space reserve, measured by the committer per group and by
    /// health checks.
    pub space: Space,
}

impl Shared {
    pub(crate) fn generation(&self) -> Arc<Generation> {
        self.generation.read().clone()
    }

    pub(crate) fn published(&self) -> Revision {
        self.published.load(Ordering::Acquire)
    }

    pub(crate) fn compact_revision(&self) -> Revision {
        self.compact.load(Ordering::Acquire)
    }

    /// Why writes are refused, once a write, flush or generation switch
    /// has failed.
    pub(crate) fn poisoned(&self) -> Option<String> {
        self.poisoned.lock().clone()
    }

    /// Refuses every later write because of `err`; the first failure stays
    /// the reason given, since what came after it may only be its echo.
    pub(crate) fn poison(&self, err: &StoreError) {
        let mut poisoned = self.poisoned.lock();
        if poisoned.is_none() {
            *poisoned = Some(err.to_string());
        }
    }
}

/// An I/O failure of the store's own files, with what the store was doing.
pub(crate) fn io_error(context: &'static str, err: std::io::Error) -> StoreError {
    StoreError::Backend {
        context,
        source: Box::new(err),
    }
}

/// Maps a sled failure to the store's error: sled's own corruption report
/// becomes [`StoreError::Corrupt`], everything else an I/O failure.
pub(crate) fn sled_error(context: &'static str, err: sled::Error) -> StoreError {
    match err {
        sled::Error::Corruption { at, .. } => StoreError::Corrupt {
            what: format!("sled data while {context}"),
            detail: format!("sled reported corruption at {at:?}"),
        },
        other => StoreError::Backend {
            context,
            source: Box::new(other),
        },
    }
}
