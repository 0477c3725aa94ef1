//! The embedded sled backend: [`SledStore`].

mod codec;
mod committer;
mod compactor;
mod config;
mod defrag;
mod durability;
mod flusher;
#[doc(hidden)]
pub mod fuzzing;
mod layout;
mod reader;
mod reclaim;
mod restore;
mod ring;
mod space;
mod state;
mod watch;

pub use config::{
    DEFAULT_CACHE_CAPACITY, DEFAULT_RING_BYTES, DEFAULT_RING_EVENTS, DefragPolicy, SledConfig,
};
pub use space::{DEFAULT_WRITE_RESERVE, SpaceReserve};

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;

use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use tokio::sync::oneshot;

use crate::{KeyValue, ListResult, Revision, Store, StoreError, WatchProgress, WatchStream};
use codec::decode_u64;
use committer::{Committer, Recovered, Request, WriteOp};
use compactor::Compactor;
use durability::Durability;
use ring::EventRing;
use state::{Counters, Generation, Shared, io_error, sled_error};

/// A [`Store`] kept in a sled database in one directory.
///
/// Cloning is cheap and shares the store. Writes go through one committer
/// thread that groups concurrent writes into one flush; reads run on the
/// caller's task. The directory can be opened by one store at a time; it is
/// released when every clone and every watch stream is dropped. Dropping the
/// last clone waits for the committer to flush what it has applied.
#[derive(Clone)]
pub struct SledStore {
    handle: Arc<Handle>,
}

struct Handle {
    path: std::path::PathBuf,
    shared: Arc<Shared>,
    requests: Mutex<Option<mpsc::Sender<Request>>>,
    compactor: Mutex<Option<Compactor>>,
    committer: Mutex<Option<JoinHandle<()>>>,
}

/// Figures about a store's resource use, for benchmarks and operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreStats {
    /// The newest published (durable, visible) revision.
    pub current_revision: Revision,
    /// The revision at or below which history is gone.
    pub compact_revision: Revision,
    /// Bytes of sled's files (log and blobs) by their length.
    pub size_on_disk: u64,
    /// Bytes the store directory occupies on disk (allocated blocks).
    pub disk_usage: u64,
    /// The sled page-cache budget in bytes.
    pub cache_capacity: u64,
    /// Flushes (each one `fsync`-class sync) since open.
    pub flushes: u64,
    /// Commit groups that wrote something since open.
    pub commit_groups: u64,
    /// Writes committed since open.
    pub writes: u64,
    /// Times a watcher had to read history from disk.
    pub history_reads: u64,
    /// Defragmentations (rewrites into a fresh file) since open.
    pub defragmentations: u64,
    /// Time spent in sled's flush (write + `sync_file_range`) since open.
    pub flush_time: std::time::Duration,
    /// Time spent in the extra `fdatasync` after each flush since open.
    pub sync_time: std::time::Duration,
    /// Time the committer spent applying writes to sled since open.
    pub apply_time: std::time::Duration,
    /// Events in the in-memory watch ring.
    pub ring_events: usize,
    /// Approximate bytes held by the in-memory watch ring.
    pub ring_bytes: usize,
}

fn read_meta(db: &sled::Db, name: &'static [u8], what: &str) -> Result<Option<u64>, StoreError> {
    db.get(name)
        .map_err(|e| sled_error("reading store metadata", e))?
        .map(|raw| decode_u64(what, &raw))
        .transpose()
}

/// Reads (or, on a new store, writes) the metadata the committer starts from.
fn recover(db: &sled::Db, existed: bool) -> Result<Recovered, StoreError> {
    match read_meta(db, codec::META_FORMAT, "store format")? {
        Some(codec::FORMAT_VERSION) => {}
        Some(other) => {
            return Err(codec::corrupt(
                "store format",
                format!("unknown format version {other}"),
            ));
        }
        None if db.is_empty() && existed => {
            return Err(codec::corrupt(
                "store format",
                "the database file exists but holds no readable data",
            ));
        }
        None if db.is_empty() => {
            db.insert(codec::META_FORMAT, &codec::FORMAT_VERSION.to_be_bytes())
                .map_err(|e| sled_error("initialising the store", e))?;
        }
        None => {
            return Err(codec::corrupt(
                "store format",
                "data present but no format marker",
            ));
        }
    }
    let compact = read_meta(db, codec::META_COMPACT, "compact revision")?.unwrap_or(0);
    let compacted_through =
        read_meta(db, codec::META_COMPACTED_THROUGH, "compaction progress")?.unwrap_or(0);
    // The current revision is the newest record's, or what compaction noted
    // when it may have removed the newest record; 1 on a new store.
    let noted = read_meta(db, codec::META_REVISION, "current revision")?.unwrap_or(1);
    let newest = match db.scan_prefix(codec::RECORDS).next_back() {
        Some(last) => {
            let (raw_key, _) = last.map_err(|e| sled_error("reading the newest record", e))?;
            codec::revision_of_record(&raw_key)?
        }
        None => 0,
    };
    let revision = noted.max(newest);
    if compact > revision {
        return Err(codec::corrupt(
            "compact revision",
            format!("{compact} is newer than the current revision {revision}"),
        ));
    }
    Ok(Recovered {
        revision,
        compact,
        compacted_through: compacted_through.min(compact),
    })
}

/// Bytes `dir` occupies on disk (allocated blocks, as `du` counts them).
pub(crate) fn disk_usage(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => disk_usage(&entry.path()),
            Ok(meta) => meta.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

fn spawn_error(err: std::io::Error) -> StoreError {
    io_error("starting the store's threads", err)
}

impl SledStore {
    /// Runs a long read of the keys under `prefix` on a blocking thread, so
    /// a big list does not hold up the async workers.
    async fn read_off_thread<T: Send + 'static>(
        &self,
        context: &'static str,
        prefix: &str,
        read: impl FnOnce(&Shared, &str) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let shared = self.handle.shared.clone();
        let prefix = prefix.to_owned();
        tokio::task::spawn_blocking(move || read(&shared, &prefix))
            .await
            .map_err(|e| StoreError::Backend {
                context,
                source: Box::new(e),
            })?
    }

    /// Opens (creating if needed) the store in `config.path`, recovering the
    /// revision, history and any compaction that was interrupted.
    ///
    /// This blocks (disk reads, and up to a few seconds when the same
    /// directory was just released by another handle in this process); call
    /// it at start-up or from a blocking task.
    pub fn open(config: SledConfig) -> Result<Self, StoreError> {
        let number = layout::current(&config.path)?;
        layout::remove_others(&config.path, number);
        let dir = layout::generation_dir(&config.path, number);
        // sled may open an unreadable log as an empty database; an existing,
        // non-empty file without our data is damage, not a new store.
        let existed = std::fs::metadata(dir.join("db")).is_ok_and(|m| m.len() > 0);
        let db = layout::open_sled(&dir, &config)?;
        let recovered = recover(&db, existed)?;
        db.flush()
            .map_err(|e| sled_error("initialising the store", e))?;
        let durability = Durability::open(&dir)?;
        let (notify_tx, notify_rx) = tokio::sync::watch::channel(recovered.revision);
        let shared = Arc::new(Shared {
            generation: RwLock::new(Arc::new(Generation {
                number,
                dir,
                db,
                durability: Mutex::new(durability),
            })),
            published: AtomicU64::new(recovered.revision),
            compact: AtomicU64::new(recovered.compact),
            ring: RwLock::new(EventRing::new(config.ring_events, config.ring_bytes)),
            notify: notify_rx,
            counters: Counters::default(),
            cache_capacity: config.cache_capacity,
            poisoned: Mutex::new(None),
            space: space::Space::new(
                config.path.clone(),
                config.reserve,
                config.probe.clone().map(|p| p.0),
            ),
        });
        let (requests, incoming) = mpsc::channel();
        let committer = Committer::start(
            shared.clone(),
            incoming,
            notify_tx,
            recovered,
            config.clone(),
        )
        .map_err(spawn_error)?;
        let committer = std::thread::Builder::new()
            .name("skiff-store-committer".into())
            .spawn(move || committer.run())
            .map_err(spawn_error)?;
        let compactor = match config.compaction.clone() {
            Some(policy) => Some(
                Compactor::spawn(policy, shared.clone(), requests.clone()).map_err(spawn_error)?,
            ),
            None => None,
        };
        Ok(Self {
            handle: Arc::new(Handle {
                path: config.path,
                shared,
                requests: Mutex::new(Some(requests)),
                compactor: Mutex::new(compactor),
                committer: Mutex::new(Some(committer)),
            }),
        })
    }

    /// Creates a store in `config.path` holding what `snapshot` holds, at
    /// its revision; open it with [`SledStore::open`] afterwards. Refuses a
    /// directory that holds a store already. Blocks (disk writes).
    pub fn restore(
        config: &SledConfig,
        snapshot: &crate::snapshot::Snapshot,
    ) -> Result<(), StoreError> {
        restore::restore(config, snapshot)
    }

    /// Whether `dir` holds an embedded store.
    pub fn exists(dir: &Path) -> bool {
        layout::exists(dir)
    }

    /// Whether the store in `dir` is open now (a running server holds it),
    /// in this process or another.
    pub fn in_use(dir: &Path) -> Result<bool, StoreError> {
        layout::in_use(dir)
    }

    /// Resource figures of the store (disk, cache budget, flush counters).
    pub fn stats(&self) -> Result<StoreStats, StoreError> {
        let shared = &self.handle.shared;
        let size_on_disk = shared
            .generation()
            .db
            .size_on_disk()
            .map_err(|e| sled_error("measuring the database", e))?;
        let (ring_events, ring_bytes) = shared.ring.read().usage();
        let counters = &shared.counters;
        Ok(StoreStats {
            current_revision: shared.published(),
            compact_revision: shared.compact_revision(),
            size_on_disk,
            disk_usage: disk_usage(self.path()),
            cache_capacity: shared.cache_capacity,
            flushes: counters.flushes.load(Ordering::Relaxed),
            commit_groups: counters.commit_groups.load(Ordering::Relaxed),
            writes: counters.writes.load(Ordering::Relaxed),
            history_reads: counters.history_reads.load(Ordering::Relaxed),
            defragmentations: counters.defragmentations.load(Ordering::Relaxed),
            flush_time: std::time::Duration::from_nanos(
                counters.flush_nanos.load(Ordering::Relaxed),
            ),
            sync_time: std::time::Duration::from_nanos(counters.sync_nanos.load(Ordering::Relaxed)),
            apply_time: std::time::Duration::from_nanos(
                counters.apply_nanos.load(Ordering::Relaxed),
            ),
            ring_events,
            ring_bytes,
        })
    }

    /// The directory holding the store.
    pub fn path(&self) -> &Path {
        &self.handle.path
    }

    /// Rewrites the live data (current values and retained history) into a
    /// fresh file and removes the old one, giving back the space sled keeps
    /// after compaction. Writes wait while it runs; reads and watches go on.
    /// Usually run automatically after a compaction (see
    /// [`SledConfig::defragmentation`]).
    pub async fn defragment(&self) -> Result<(), StoreError> {
        let (reply, answer) = oneshot::channel();
        self.send(Request::Defragment { reply })?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    fn send(&self, request: Request) -> Result<(), StoreError> {
        let requests = self.handle.requests.lock();
        let sender = requests.as_ref().ok_or(StoreError::Closed)?;
        sender.send(request).map_err(|_| StoreError::Closed)
    }

    async fn write(&self, op: WriteOp) -> Result<KeyValue, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.send(Request::Write { op, reply })?;
        answer.await.map_err(|_| StoreError::Closed)?
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // Stop the policy first (it holds a sender), then let the committer
        // drain, flush and exit so the directory is released on return.
        drop(self.compactor.lock().take());
        drop(self.requests.lock().take());
        if let Some(thread) = self.committer.lock().take() {
            let _ = thread.join();
        }
    }
}

#[async_trait]
impl Store for SledStore {
    fn current_revision(&self) -> Revision {
        self.handle.shared.published()
    }

    fn compact_revision(&self) -> Revision {
        self.handle.shared.compact_revision()
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        reader::get(&self.handle.shared, key)
    }

    async fn mod_revision(&self, key: &str) -> Result<Option<Revision>, StoreError> {
        reader::mod_revision(&self.handle.shared, key)
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<ListResult, StoreError> {
        let start_after = start_after.map(str::to_owned);
        self.read_off_thread("listing keys", prefix, move |shared, prefix| {
            reader::list(shared, prefix, start_after.as_deref(), limit)
        })
        .await
    }

    async fn list_at(&self, prefix: &str, revision: Revision) -> Result<ListResult, StoreError> {
        self.read_off_thread(
            "listing keys at a revision",
            prefix,
            move |shared, prefix| reader::list_at(shared, prefix, revision),
        )
        .await
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue, StoreError> {
        self.write(WriteOp::Create {
            key: key.to_owned(),
            value,
        })
        .await
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected_mod_revision: Option<Revision>,
    ) -> Result<KeyValue, StoreError> {
        self.write(WriteOp::Update {
            key: key.to_owned(),
            value,
            expected: expected_mod_revision,
        })
        .await
    }

    async fn delete(
        &self,
        key: &str,
        expected_mod_revision: Option<Revision>,
    ) -> Result<KeyValue, StoreError> {
        self.write(WriteOp::Delete {
            key: key.to_owned(),
            expected: expected_mod_revision,
        })
        .await
    }

    fn watch_with_progress(
        &self,
        prefix: &str,
        from_revision: Revision,
    ) -> Result<(WatchStream, Option<WatchProgress>), StoreError> {
        let shared = &self.handle.shared;
        let compact = shared.compact_revision();
        if from_revision < compact {
            return Err(StoreError::Compacted {
                requested: from_revision,
                compact_revision: compact,
            });
        }
        let (stream, progress) = watch::stream(shared.clone(), prefix, from_revision);
        Ok((stream, Some(progress)))
    }

    /// Compacts up to `revision`, clamped to the current revision (history
    /// nobody has seen yet is never dropped); compacting at or below the
    /// compact revision does nothing. Returns once the records are removed.
    async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        let (reply, answer) = oneshot::channel();
        self.send(Request::Compact {
            revision,
            reply: Some(reply),
        })?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    async fn defragment(&self) -> Result<(), StoreError> {
        SledStore::defragment(self).await
    }

    /// Fails when an earlier write or flush failed (writes are refused
    /// until restart) or the disk is below the write reserve (writes are
    /// refused until space is freed).
    fn health(&self) -> Result<(), StoreError> {
        let shared = &self.handle.shared;
        if let Some(reason) = shared.poisoned() {
            return Err(flusher::poison_error(&reason));
        }
        shared
            .space
            .measure()
            .admit(space::Need::Write, shared.space.dir())
    }

    async fn close(&self) -> Result<(), StoreError> {
        drop(self.handle.compactor.lock().take());
        let (reply, answer) = oneshot::channel();
        let sent = self.send(Request::Close { reply });
        drop(self.handle.requests.lock().take());
        let result = match sent {
            Ok(()) => answer.await.map_err(|_| StoreError::Closed)?,
            // Already closed.
            Err(_) => Ok(()),
        };
        let committer = self.handle.committer.lock().take();
        if let Some(thread) = committer {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys listed under `prefix`.
    async fn keys(store: &SledStore, prefix: &str) -> Vec<String> {
        let listed = store.list(prefix, None, 0).await.unwrap();
        listed.items.into_iter().map(|kv| kv.key).collect()
    }

    fn count(store: &SledStore, prefix: &[u8]) -> usize {
        store
            .handle
            .shared
            .generation()
            .db
            .scan_prefix(prefix)
            .count()
    }

    #[tokio::test]
    async fn compaction_removes_superseded_records_and_dead_tombstones() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(SledConfig::new(dir.path()).compaction(None)).unwrap();
        let v = Bytes::from_static(b"v");
        for i in 0..10 {
            store.create(&format!("k{i}"), v.clone()).await.unwrap(); // revisions 2..=11
        }
        for i in 0..10 {
            store
                .update(&format!("k{i}"), v.clone(), None)
                .await
                .unwrap(); // 12..=21
        }
        assert_eq!(count(&store, codec::RECORDS), 20);

        // At 16, k0..k4 were updated (12..=16): their creates are superseded.
        store.compact(16).await.unwrap();
        assert_eq!(count(&store, codec::RECORDS), 15);

        store.delete("k0", None).await.unwrap(); // 22
        store.delete("k9", None).await.unwrap(); // 23
        store.compact(23).await.unwrap();
        // Only the newest value of each of the 8 live keys is left, and the
        // deleted keys are gone from the index too.
        assert_eq!(count(&store, codec::RECORDS), 8);
        assert_eq!(count(&store, b"k"), 8);
        assert_eq!(store.list("", None, 0).await.unwrap().items.len(), 8);
    }

    /// A store with an 8 MiB reserve on a disk reporting `free` bytes free
    /// (100 MiB at first, moved by the case), and the config to reopen it.
    fn open_on_small_disk() -> (tempfile::TempDir, Arc<AtomicU64>, SledConfig, SledStore) {
        let dir = tempfile::tempdir().unwrap();
        let free = Arc::new(AtomicU64::new(100 << 20));
        let probed = free.clone();
        let config = SledConfig::new(dir.path())
            .compaction(None)
            .space_reserve(Some(SpaceReserve::new(8 << 20)))
            .space_probe(Arc::new(move |_: &Path| Ok(probed.load(Ordering::Relaxed))));
        let store = SledStore::open(config.clone()).unwrap();
        (dir, free, config, store)
    }

    #[tokio::test]
    async fn a_full_disk_refuses_writes_but_not_reads_watches_or_deletes() {
        let (dir, free, config, store) = open_on_small_disk();
        let v = Bytes::from_static(b"v");
        for i in 0..4 {
            store.create(&format!("k{i}"), v.clone()).await.unwrap();
        }
        assert!(store.health().is_ok());
        let mut events = store.watch("k", store.current_revision()).unwrap();

        free.store(5 << 20, Ordering::Relaxed); // below the 8 MiB write reserve
        let refused = store.create("k9", v.clone()).await.unwrap_err();
        assert!(
            matches!(
                refused,
                StoreError::NoSpace {
                    deletes_refused: false,
                    ..
                }
            ),
            "{refused:?}"
        );
        assert!(
            refused
                .to_string()
                .contains(&dir.path().display().to_string())
        );
        assert!(matches!(
            store.update("k0", v.clone(), None).await,
            Err(StoreError::NoSpace { .. })
        ));
        assert!(matches!(store.health(), Err(StoreError::NoSpace { .. })));
        // Reads and deletes go on; the delete reaches watchers.
        assert_eq!(store.get("k1").await.unwrap().unwrap().value, v);
        assert_eq!(store.list("k", None, 0).await.unwrap().items.len(), 4);
        let deleted = store.delete("k1", None).await.unwrap();
        let event = futures::StreamExt::next(&mut events)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(event.revision(), deleted.mod_revision);

        // Below the delete reserve even deletes stop.
        free.store(1 << 19, Ordering::Relaxed);
        assert!(matches!(
            store.delete("k2", None).await,
            Err(StoreError::NoSpace {
                deletes_refused: true,
                ..
            })
        ));

        // Space is back: writes resume by themselves.
        free.store(100 << 20, Ordering::Relaxed);
        assert!(store.health().is_ok());
        store.create("k9", v.clone()).await.unwrap();

        // Everything acknowledged survives a restart; nothing refused is there.
        store.close().await.unwrap();
        drop(events);
        drop(store);
        let store = SledStore::open(config).unwrap();
        assert_eq!(keys(&store, "k").await, ["k0", "k2", "k3", "k9"]);
    }

    #[tokio::test]
    async fn a_short_disk_gives_back_the_space_of_deleted_objects() {
        let (_dir, free, config, store) = open_on_small_disk();
        let big = Bytes::from(vec![b'x'; 100 * 1024]);
        store
            .create("kept", Bytes::from_static(b"v"))
            .await
            .unwrap();
        for i in 0..60 {
            store.create(&format!("big{i}"), big.clone()).await.unwrap();
        }
        let before = store.stats().unwrap().size_on_disk;
        assert!(before > 6 << 20, "{before}");
        let old_revision = store.current_revision();

        // The disk is short: creates are refused, the big objects deleted.
        free.store(5 << 20, Ordering::Relaxed);
        assert!(matches!(
            store.create("new", Bytes::from_static(b"v")).await,
            Err(StoreError::NoSpace { .. })
        ));
        for i in 0..60 {
            store.delete(&format!("big{i}"), None).await.unwrap();
        }
        let deleted_at = store.current_revision();

        // The store rewrites what is live into a fresh file, dropping history.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while store.compact_revision() < deleted_at || count(&store, codec::RECORDS) != 1 {
            assert!(std::time::Instant::now() < deadline, "no space reclaimed");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let after = store.stats().unwrap().size_on_disk;
        assert!(after < before / 2, "{before} bytes before, {after} after");
        assert_eq!(count(&store, b"k"), 1, "deleted keys left the index");
        let kept = store.get("kept").await.unwrap().unwrap();
        assert_eq!((kept.value.as_ref(), kept.version), (&b"v"[..], 1));
        assert!(matches!(
            store.watch("", old_revision),
            Err(StoreError::Compacted { .. })
        ));
        assert!(store.watch("", deleted_at).is_ok());

        // Space back: writes resume, and it all survives a restart.
        free.store(100 << 20, Ordering::Relaxed);
        let created = store.create("new", Bytes::from_static(b"v")).await.unwrap();
        assert_eq!(created.mod_revision, deleted_at + 1);
        store.close().await.unwrap();
        drop(store);
        let store = SledStore::open(config).unwrap();
        assert_eq!(store.compact_revision(), deleted_at);
        assert_eq!(keys(&store, "").await, ["kept", "new"]);
    }

    #[tokio::test]
    async fn an_interrupted_compaction_resumes_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let config = SledConfig::new(dir.path()).compaction(None);
        {
            let store = SledStore::open(config.clone()).unwrap();
            store.create("k", Bytes::from_static(b"0")).await.unwrap();
            for _ in 0..50 {
                store
                    .update("k", Bytes::from_static(b"v"), None)
                    .await
                    .unwrap();
            }
            store.close().await.unwrap();
        }
        {
            // As if the process died right after recording the compact revision.
            let db = layout::open_sled(&layout::generation_dir(dir.path(), 0), &config).unwrap();
            db.insert(codec::META_COMPACT, &40u64.to_be_bytes())
                .unwrap();
            db.insert(codec::META_COMPACTED_THROUGH, &0u64.to_be_bytes())
                .unwrap();
            db.flush().unwrap();
        }
        let store = SledStore::open(config).unwrap();
        assert_eq!(store.compact_revision(), 40);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        // Records 2..=39 are superseded by 40; 40..=52 remain.
        while count(&store, codec::RECORDS) != 13 {
            assert!(
                std::time::Instant::now() < deadline,
                "compaction did not resume"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(store.get("k").await.unwrap().unwrap().mod_revision, 52);
    }
}
