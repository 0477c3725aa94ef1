//! skiff-store owns the cluster's memory: a revisioned, watchable key-value store
//! with etcd v3 semantics (one global revision, per-key create/mod revision and
//! version, compare-and-swap updates, ordered watch with history, compaction).
//! The embedded sled backend ([`SledStore`]) is the default; [`EtcdStore`]
//! puts the same trait on an external etcd v3 cluster, whose revisions,
//! watches and compaction it uses as they are.
//!
//! It must never know about Kubernetes objects: keys are strings, values are
//! opaque bytes. A write is acknowledged only once it is durable on disk.
//!
//! In the embedded store a full disk is refused, not met: below a free-space reserve
//! ([`SpaceReserve`]) creates and updates fail with [`StoreError::NoSpace`]
//! before they reach sled, deletes only below a smaller reserve, and reads
//! and watches never. A refused write changed nothing and got no revision;
//! once space is back writes go on by themselves, and after deletes on a
//! short disk the store gives their space back itself, rewriting its live
//! data without history into a fresh file. etcd's NOSPACE alarm is the
//! same error there.
//! [`Store::health`] says whether writes are being refused.
//!
//! Opening the embedded store:
//!
//! ```no_run
//! # async fn demo() -> Result<(), skiff_store::StoreError> {
//! use skiff_store::{SledConfig, SledStore, Store};
//! let store = SledStore::open(SledConfig::new("/var/lib/skiff/store"))?;
//! let kv = store.create("/registry/configmaps/default/a", "{}".into()).await?;
//! let mut events = store.watch("/registry/configmaps/", kv.mod_revision)?;
//! # Ok(()) }
//! ```
//!
//! Or an etcd cluster:
//!
//! ```no_run
//! # async fn demo() -> Result<(), skiff_store::StoreError> {
//! use skiff_store::{EtcdConfig, EtcdStore, Store};
//! let store = EtcdStore::connect(EtcdConfig::new(["http://127.0.0.1:2379"])).await?;
//! let listed = store.list("/registry/configmaps/", None, 500).await?;
//! # Ok(()) }
//! ```
//!
//! A backup is a [`snapshot::Snapshot`]: every key at one revision, taken
//! while the store serves writes, written to a checksummed file and
//! restored into a new embedded store with [`SledStore::restore`].

mod etcd_store;
mod retention;
mod sled_store;
pub mod snapshot;
#[doc(hidden)]
pub mod testing;
mod types;
mod watch_progress;

#[doc(hidden)]
pub use sled_store::fuzzing;

pub use etcd_store::{ConfigError as EtcdConfigError, EtcdConfig, EtcdStore};
pub use retention::CompactionPolicy;
pub use sled_store::{
    DEFAULT_CACHE_CAPACITY, DEFAULT_RING_BYTES, DEFAULT_RING_EVENTS, DEFAULT_WRITE_RESERVE,
    DefragPolicy, SledConfig, SledStore, SpaceReserve, StoreStats,
};
pub use types::{
    Event, EventKind, Exhausted, KeyValue, ListResult, Revision, StoreError, WatchStream,
};
pub use watch_progress::WatchProgress;

use async_trait::async_trait;
use bytes::Bytes;

/// The operations the API server needs from its storage, with etcd v3 semantics.
///
/// Every successful write gets the next global revision. Implementations must
/// return from a write only after it is durable.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// The newest revision written (1 on an empty store that was never written).
    fn current_revision(&self) -> Revision;

    /// The revision at or below which history has been dropped (0 when none was).
    fn compact_revision(&self) -> Revision;

    /// Reads one key at the current revision.
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError>;

    /// The `mod_revision` that [`Store::get`] would return for `key` now (none
    /// when the key does not exist), without reading its value where the
    /// backend can avoid that: a reader that already holds the object at
    /// some revision (the API server's watch cache) learns whether it is
    /// current without copying it out of the store again.
    async fn mod_revision(&self, key: &str) -> Result<Option<Revision>, StoreError> {
        Ok(self.get(key).await?.map(|kv| kv.mod_revision))
    }

    /// Lists keys beginning with `prefix` in key order, strictly after
    /// `start_after` when given, at most `limit` of them (0 means no limit).
    /// The result says at which revision it was read and whether more remain.
    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<ListResult, StoreError>;

    /// Lists every key beginning with `prefix` as it was at `revision`, in
    /// key order: a past revision whose history the store still keeps, up to
    /// the current one (what upstream serves a list with
    /// `resourceVersionMatch=Exact` from). [`StoreError::Compacted`] when that
    /// history is gone; a revision the store has not reached is refused.
    async fn list_at(&self, prefix: &str, revision: Revision) -> Result<ListResult, StoreError>;

    /// Creates `key`; fails with [`StoreError::AlreadyExists`] when it exists.
    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue, StoreError>;

    /// Replaces the value of an existing key. With `expected_mod_revision` the
    /// write happens only when the key's mod revision equals it
    /// ([`StoreError::Conflict`] otherwise); [`StoreError::NotFound`] when absent.
    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected_mod_revision: Option<Revision>,
    ) -> Result<KeyValue, StoreError>;

    /// Deletes `key`, optionally only at `expected_mod_revision`, and returns the
    /// value it held. The returned [`KeyValue`]'s `mod_revision` is the revision of
    /// the deletion itself.
    async fn delete(
        &self,
        key: &str,
        expected_mod_revision: Option<Revision>,
    ) -> Result<KeyValue, StoreError>;

    /// Streams every change to keys under `prefix` with revision greater than
    /// `from_revision`, in revision order, without gap or duplicate, each with
    /// the previous value. Fails with [`StoreError::Compacted`] (immediately or
    /// later in the stream) when that history is gone.
    fn watch(&self, prefix: &str, from_revision: Revision) -> Result<WatchStream, StoreError> {
        Ok(self.watch_with_progress(prefix, from_revision)?.0)
    }

    /// [`Store::watch`], with the stream's [`WatchProgress`] when the
    /// backend keeps one (`None`: it cannot tell, and a consumer must not
    /// assume it is current past the last change it got). A watch cache
    /// uses it to serve a consistent read without reading the store.
    fn watch_with_progress(
        &self,
        prefix: &str,
        from_revision: Revision,
    ) -> Result<(WatchStream, Option<WatchProgress>), StoreError>;

    /// Drops history at and below `revision` (the latest value of each live key
    /// is kept) and lets the backend reclaim the space.
    async fn compact(&self, revision: Revision) -> Result<(), StoreError>;

    /// Gives the space compaction freed back to the file system, so values
    /// dropped from history no longer linger in the backend's files (etcd's
    /// defragment). Returns once the live data is in its new place and,
    /// unless a reader still holds the old files after a short wait, once
    /// those are deleted.
    async fn defragment(&self) -> Result<(), StoreError>;

    /// Every live key at one revision, for a backup ([`snapshot`]): no
    /// write after that revision is in it and none at or before it is
    /// missing, while writes go on. The default is one unlimited
    /// [`Store::list`] of every key, which both backends read at one
    /// revision; it holds the whole store in memory.
    async fn read_all(&self) -> Result<ListResult, StoreError> {
        self.list("", None, 0).await
    }

    /// Makes everything acknowledged so far durable and stops background work.
    async fn close(&self) -> Result<(), StoreError>;

    /// Whether the store can take writes now: an error says why not (the
    /// disk below its reserve, an earlier failed write). Reads may still
    /// work; readiness checks report this.
    fn health(&self) -> Result<(), StoreError> {
        Ok(())
    }
}
