//! Helpers shared by the store tests.

use std::path::Path;
use std::time::Duration;

use skiff_store::{SledConfig, SledStore};

/// A store in `dir` without background compaction, so tests control history.
pub fn open(dir: &Path) -> SledStore {
    SledStore::open(config(dir)).expect("open store")
}

/// sled's own database in `dir`, opened behind the store's back. sled's
/// background threads keep the file lock for a moment after a close, as the
/// store's own open knows; retry the same way.
pub fn raw_sled(dir: &Path) -> sled::Db {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match sled::open(dir) {
            Err(err)
                if err.to_string().contains("could not acquire lock")
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return other.expect("open sled"),
        }
    }
}

pub fn config(dir: &Path) -> SledConfig {
    SledConfig::new(dir).compaction(None)
}

pub use crate::tmpfs::tmp;

pub use skiff_store::testing::{next_event as next, take_events as take};
