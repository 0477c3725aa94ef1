//! Makes a flushed group really durable. On Linux sled 0.34 persists its log
//! with `sync_file_range`, which neither writes the file's metadata (its
//! size, when the log grew) nor flushes the disk's write cache, and it never
//! syncs the separate blob files it writes for pages over a quarter segment.
//! After every `Db::flush` we therefore `fdatasync` the log file and `fsync`
//! every blob file not synced yet (and the blob directory when it gained some).

use std::collections::HashSet;
use std::fs::File;
use std::path::{Path, PathBuf};

use super::state::io_error;
use crate::StoreError;

pub(crate) struct Durability {
    log: File,
    blob_dir: PathBuf,
    synced_blobs: HashSet<std::ffi::OsString>,
}

impl Durability {
    /// Opens the files of the sled database in `dir` (after sled created them).
    pub(crate) fn open(dir: &Path) -> Result<Self, StoreError> {
        let log = File::open(dir.join("db")).map_err(|e| io_error("opening the sled log", e))?;
        // The directory entries sled created must survive a power cut too.
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_error("syncing the store directory", e))?;
        let mut this = Self {
            log,
            blob_dir: dir.join("blobs"),
            synced_blobs: HashSet::new(),
        };
        this.sync()?;
        Ok(this)
    }

    /// Called after `Db::flush`: what sled wrote is now on stable storage.
    pub(crate) fn sync(&mut self) -> Result<(), StoreError> {
        self.log
            .sync_data()
            .map_err(|e| io_error("syncing the sled log", e))?;
        let entries = match std::fs::read_dir(&self.blob_dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_error("listing sled blobs", e)),
        };
        let mut present = HashSet::new();
        let mut new_blobs = false;
        for entry in entries {
            let entry = entry.map_err(|e| io_error("listing sled blobs", e))?;
            let name = entry.file_name();
            if !self.synced_blobs.contains(&name) {
                match File::open(entry.path()) {
                    Ok(f) => f
                        .sync_all()
                        .map_err(|e| io_error("syncing a sled blob", e))?,
                    // sled removes blobs lazily; a vanished one needs no sync.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(io_error("opening a sled blob", e)),
                }
                new_blobs = true;
            }
            present.insert(name);
        }
        if new_blobs {
            File::open(&self.blob_dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| io_error("syncing the sled blob directory", e))?;
        }
        self.synced_blobs = present;
        Ok(())
    }
}
