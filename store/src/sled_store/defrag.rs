//! Defragmentation: sled reuses the space compaction frees inside its file
//! but never gives it back, so the file stays at the high-water mark of the
//! history window. Rewriting the live data into a fresh generation (see
//! `layout`) returns that space. Runs on the committer thread, with nothing
//! in flight, so the copy is an exact snapshot.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::config::SledConfig;
use super::durability::Durability;
use super::layout;
use super::state::{Generation, Shared, io_error, sled_error};
use crate::StoreError;

/// Entries copied per sled batch.
const COPY_BATCH: usize = 4096;

/// How long a retired generation may stay in use by readers before its
/// removal is left to the next open.
const RETIRE_WAIT: Duration = Duration::from_secs(600);

/// How long the defragmentation itself waits for readers of the retired
/// generation before leaving its removal to a thread.
const RETIRE_NOW: Duration = Duration::from_secs(2);

/// Decides when a defragmentation pays off, measuring the live data (a full
/// scan) only when the file has grown noticeably since the last measurement.
#[derive(Default)]
pub(crate) struct Trigger {
    /// File size at the last scan that found defragmentation not worthwhile.
    measured_at: Option<u64>,
}

impl Trigger {
    /// Whether the live generation's file is large enough, and enough larger
    /// than its data, for the configured policy.
    pub(crate) fn worthwhile(
        &mut self,
        shared: &Shared,
        config: &SledConfig,
    ) -> Result<bool, StoreError> {
        let Some(policy) = &config.defragmentation else {
            return Ok(false);
        };
        let generation = shared.generation();
        let size = generation
            .db
            .size_on_disk()
            .map_err(|e| sled_error("measuring the database", e))?;
        if size < policy.min_size || self.measured_at.is_some_and(|at| size < at + at / 4) {
            return Ok(false);
        }
        let mut live = 0u64;
        for item in generation.db.iter() {
            let (key, value) = item.map_err(|e| sled_error("measuring live data", e))?;
            live += (key.len() + value.len()) as u64;
        }
        let worthwhile = size > live.max(1).saturating_mul(policy.max_amplification);
        self.measured_at = (!worthwhile).then_some(size);
        Ok(worthwhile)
    }
}

/// Copies the live generation into the next one, switches to it, and removes
/// the old one once no reader uses it any more.
pub(crate) fn rewrite(shared: &Shared, config: &SledConfig) -> Result<(), StoreError> {
    rewrite_with(shared, config, copy_all)
}

/// Writes the next generation with `copy` (from the live generation's tree
/// into an empty one), switches to it, and retires the live one. A failed
/// copy leaves the live generation as it was.
pub(crate) fn rewrite_with(
    shared: &Shared,
    config: &SledConfig,
    copy: impl FnOnce(&sled::Db, &sled::Db) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let started = Instant::now();
    let old = shared.generation();
    let number = old.number + 1;
    let dir = layout::generation_dir(&config.path, number);
    let fresh = std::fs::remove_dir_all(&dir)
        .or_else(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Ok(()),
            _ => Err(e),
        })
        .map_err(|e| io_error("clearing a leftover store generation", e))
        .and_then(|()| open_and_copy(&old.db, &dir, config, copy));
    let (db, durability) = match fresh {
        Ok(fresh) => fresh,
        Err(err) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(err);
        }
    };
    if let Err(err) = layout::switch(&config.path, number) {
        // Whether CURRENT now names the new generation is unknown; writing on
        // either could lose them at the next open.
        shared.poison(&err);
        return Err(err);
    }
    let before = old.db.size_on_disk().unwrap_or(0);
    let after = db.size_on_disk().unwrap_or(0);
    *shared.generation.write() = Arc::new(Generation {
        number,
        dir,
        db,
        durability: Mutex::new(durability),
    });
    shared
        .counters
        .defragmentations
        .fetch_add(1, Ordering::Relaxed);
    tracing::info!(
        generation = number,
        before_bytes = before,
        after_bytes = after,
        took_ms = started.elapsed().as_millis() as u64,
        "store defragmented"
    );
    retire(old);
    Ok(())
}

fn open_and_copy(
    old: &sled::Db,
    dir: &std::path::Path,
    config: &SledConfig,
    copy: impl FnOnce(&sled::Db, &sled::Db) -> Result<(), StoreError>,
) -> Result<(sled::Db, Durability), StoreError> {
    let db = layout::open_sled(dir, config)?;
    copy(old, &db)?;
    db.flush()
        .map_err(|e| sled_error("flushing the new generation", e))?;
    let durability = Durability::open(dir)?;
    Ok((db, durability))
}

/// Copies every entry, history included.
fn copy_all(old: &sled::Db, db: &sled::Db) -> Result<(), StoreError> {
    let mut batch = sled::Batch::default();
    let mut in_batch = 0;
    for item in old.iter() {
        let (key, value) = item.map_err(|e| sled_error("copying live data", e))?;
        batch.insert(key, value);
        in_batch += 1;
        if in_batch == COPY_BATCH {
            db.apply_batch(std::mem::take(&mut batch))
                .map_err(|e| sled_error("copying live data", e))?;
            in_batch = 0;
        }
    }
    db.apply_batch(batch)
        .map_err(|e| sled_error("copying live data", e))
}

/// Drops the old generation once the last reader let go, then deletes it.
/// Readers hold a generation only for one read, so the removal normally
/// happens here, before the defragmentation is answered: a caller that
/// defragments to get rid of old data (re-encryption) finds it gone from
/// disk, and a close that follows leaves no half-removed directory. A reader
/// that holds on longer hands the removal to a thread of its own.
fn retire(old: Arc<Generation>) {
    let deadline = Instant::now() + RETIRE_NOW;
    while Arc::strong_count(&old) > 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    if Arc::strong_count(&old) == 1 {
        remove(old);
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("skiff-store-retire".into())
        .spawn(move || {
            let deadline = Instant::now() + RETIRE_WAIT;
            while Arc::strong_count(&old) > 1 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if Arc::strong_count(&old) > 1 {
                tracing::warn!("old store generation still in use; it is removed at the next open");
                return;
            }
            remove(old);
        });
    if let Err(err) = spawned {
        tracing::warn!(error = %err, "cannot start the generation retirement; it is removed at the next open");
    }
}

/// Closes a generation no one uses and deletes its directory.
fn remove(old: Arc<Generation>) {
    let dir = old.dir.clone();
    drop(old);
    if let Err(err) = std::fs::remove_dir_all(&dir) {
        tracing::warn!(dir = %dir.display(), error = %err, "cannot remove an old store generation");
    }
}
