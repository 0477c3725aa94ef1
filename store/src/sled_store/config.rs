//! How a [`SledStore`](super::SledStore) is opened: where, with how much memory,
//! and how much history it keeps.

use std::path::PathBuf;

use super::space::{Probe, SpaceReserve};
use crate::retention::CompactionPolicy;

/// Default sled page-cache size. sled's own default (1 GiB) is far too much for
/// the edge devices skiff targets; cluster state is usually a few MiB.
pub const DEFAULT_CACHE_CAPACITY: u64 = 16 * 1024 * 1024;

/// Default number of recent events kept in memory for watchers.
pub const DEFAULT_RING_EVENTS: usize = 4096;

/// Default byte budget of the in-memory event ring (keys, values, prev values).
pub const DEFAULT_RING_BYTES: usize = 8 * 1024 * 1024;

/// When the store rewrites its live data into a fresh file after a
/// compaction, to give back the space sled keeps at its high-water mark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefragPolicy {
    /// Files smaller than this are left alone.
    pub min_size: u64,
    /// Defragment when the file is more than this many times the live data
    /// (current values plus retained history).
    pub max_amplification: u64,
}

impl Default for DefragPolicy {
    fn default() -> Self {
        Self {
            min_size: 64 * 1024 * 1024,
            max_amplification: 4,
        }
    }
}

/// Configuration of a sled-backed store, built in builder style:
///
/// ```no_run
/// # use skiff_store::{SledConfig, SledStore};
/// let store = SledStore::open(SledConfig::new("/var/lib/skiff/store").cache_capacity(8 << 20))?;
/// # Ok::<(), skiff_store::StoreError>(())
/// ```
#[derive(Debug, Clone)]
pub struct SledConfig {
    pub(crate) path: PathBuf,
    pub(crate) cache_capacity: u64,
    pub(crate) compaction: Option<CompactionPolicy>,
    pub(crate) defragmentation: Option<DefragPolicy>,
    pub(crate) ring_events: usize,
    pub(crate) ring_bytes: usize,
    pub(crate) max_group: usize,
    pub(crate) reserve: Option<SpaceReserve>,
    pub(crate) probe: Option<ProbeOverride>,
}

/// A replacement of the free-space measurement, for tests.
#[derive(Clone)]
pub(crate) struct ProbeOverride(pub Probe);

impl std::fmt::Debug for ProbeOverride {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProbeOverride")
    }
}

impl SledConfig {
    /// A configuration for a store kept in the directory `path` (created if missing).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            cache_capacity: DEFAULT_CACHE_CAPACITY,
            compaction: Some(CompactionPolicy::default()),
            defragmentation: Some(DefragPolicy::default()),
            ring_events: DEFAULT_RING_EVENTS,
            ring_bytes: DEFAULT_RING_BYTES,
            max_group: 1024,
            reserve: Some(SpaceReserve::default()),
            probe: None,
        }
    }

    /// The free disk space the store keeps back (default
    /// [`SpaceReserve::default`]: 64 MiB for creates and updates, 8 MiB
    /// for deletes); `None` writes until the disk is full, when sled's own
    /// failure stops every write until restart.
    pub fn space_reserve(mut self, reserve: Option<SpaceReserve>) -> Self {
        self.reserve = reserve;
        self
    }

    /// Measures free space with `probe` instead of `statvfs` (tests).
    #[cfg(test)]
    pub(crate) fn space_probe(mut self, probe: Probe) -> Self {
        self.probe = Some(ProbeOverride(probe));
        self
    }

    /// Bytes of sled page cache (default [`DEFAULT_CACHE_CAPACITY`]).
    pub fn cache_capacity(mut self, bytes: u64) -> Self {
        self.cache_capacity = bytes;
        self
    }

    /// The automatic compaction policy; `None` keeps all history until
    /// [`Store::compact`](crate::Store::compact) is called.
    pub fn compaction(mut self, policy: Option<CompactionPolicy>) -> Self {
        self.compaction = policy;
        self
    }

    /// When to defragment after a compaction; `None` only defragments on
    /// [`SledStore::defragment`](super::SledStore::defragment).
    pub fn defragmentation(mut self, policy: Option<DefragPolicy>) -> Self {
        self.defragmentation = policy;
        self
    }

    /// Bounds of the in-memory ring of recent events that serves watchers
    /// without touching disk. Watchers that fall further behind read history
    /// from disk instead, so these bound memory, not correctness.
    pub fn event_ring(mut self, max_events: usize, max_bytes: usize) -> Self {
        self.ring_events = max_events.max(1);
        self.ring_bytes = max_bytes;
        self
    }

    /// The most writes committed together by one flush (default 1024).
    pub fn max_group(mut self, writes: usize) -> Self {
        self.max_group = writes.max(1);
        self
    }

    /// The directory holding the store.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}
