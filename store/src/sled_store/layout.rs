//! The store directory: sled keeps one database per *generation* in
//! `<dir>/gen-<n>`, and `<dir>/CURRENT` names the live one. Defragmentation
//! copies the live data into the next generation, makes it durable, then
//! switches `CURRENT` with an atomic rename, so a crash at any point leaves
//! either the old or the new generation whole. Any other generation found at
//! open is a leftover and is removed.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::codec;
use super::config::SledConfig;
use super::state::{io_error, sled_error};
use crate::StoreError;

const CURRENT: &str = "CURRENT";
const CURRENT_TMP: &str = "CURRENT.tmp";
const PREFIX: &str = "gen-";

/// How long opening waits for another handle of the same files to let go.
const LOCK_WAIT: Duration = Duration::from_secs(5);

/// The directory of generation `number`.
pub(crate) fn generation_dir(base: &Path, number: u64) -> PathBuf {
    base.join(format!("{PREFIX}{number}"))
}

/// The live generation (0 for a new store), creating the directory and
/// `CURRENT` when missing.
pub(crate) fn current(base: &Path) -> Result<u64, StoreError> {
    create_private_dir(base)?;
    match recorded(base)? {
        Some(number) => Ok(number),
        None => {
            switch(base, 0)?;
            Ok(0)
        }
    }
}

/// The generation `CURRENT` names, if there is one.
fn recorded(base: &Path) -> Result<Option<u64>, StoreError> {
    match fs::read_to_string(base.join(CURRENT)) {
        Ok(text) => text
            .trim()
            .strip_prefix(PREFIX)
            .and_then(|n| n.parse().ok())
            .map(Some)
            .ok_or_else(|| {
                codec::corrupt("store CURRENT file", format!("unreadable content {text:?}"))
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error("reading the store CURRENT file", e)),
    }
}

/// Whether a store is open on `base` now, in this process or another:
/// sled holds an exclusive `flock` on its file while open.
pub(crate) fn in_use(base: &Path) -> Result<bool, StoreError> {
    use std::os::fd::AsRawFd;
    let Some(number) = recorded(base)? else {
        return Ok(false);
    };
    let file = match File::open(generation_dir(base, number).join("db")) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io_error("opening the store's file", e)),
    };
    // SAFETY: flock on a descriptor this function owns for its duration.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        // Dropping the file releases the lock.
        return Ok(false);
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Ok(true),
        _ => Err(io_error("checking the store's lock", err)),
    }
}

/// Whether `base` holds a store already (its `CURRENT` file).
pub(crate) fn exists(base: &Path) -> bool {
    base.join(CURRENT).exists()
}

/// Creates the store directory readable by its owner only (0700): the
/// store holds every Secret. An existing directory is made private too.
fn create_private_dir(base: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(base)
        .map_err(|e| io_error("creating the store directory", e))?;
    fs::set_permissions(base, fs::Permissions::from_mode(0o700))
        .map_err(|e| io_error("making the store directory private", e))
}

/// Makes `number` the live generation, durably and atomically.
pub(crate) fn switch(base: &Path, number: u64) -> Result<(), StoreError> {
    let tmp = base.join(CURRENT_TMP);
    let mut file = File::create(&tmp).map_err(|e| io_error("writing the store CURRENT file", e))?;
    file.write_all(format!("{PREFIX}{number}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| io_error("writing the store CURRENT file", e))?;
    fs::rename(&tmp, base.join(CURRENT))
        .map_err(|e| io_error("switching the store generation", e))?;
    File::open(base)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error("syncing the store directory", e))
}

/// Removes every generation but `keep` (leftovers of an interrupted or
/// retired defragmentation). Failures are logged: they only cost space.
pub(crate) fn remove_others(base: &Path, keep: u64) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    let keep = format!("{PREFIX}{keep}");
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with(PREFIX)
            && name != keep
            && let Err(err) = fs::remove_dir_all(entry.path())
        {
            tracing::warn!(dir = %entry.path().display(), error = %err, "cannot remove an old store generation");
        }
    }
}

/// Opens the sled database of one generation.
pub(crate) fn open_sled(dir: &Path, config: &SledConfig) -> Result<sled::Db, StoreError> {
    // sled writes log buffers on background threads that keep the file (and
    // its lock) open briefly after the database is dropped, so a quick reopen
    // in the same process may find the lock still held: retry for a while.
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        match open_sled_once(dir, config) {
            Err(StoreError::Backend { source, .. })
                if source.to_string().contains("could not acquire lock")
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

fn open_sled_once(dir: &Path, config: &SledConfig) -> Result<sled::Db, StoreError> {
    let sled_config = sled::Config::new()
        .path(dir)
        .cache_capacity(config.cache_capacity)
        .mode(sled::Mode::LowSpace)
        // The committer flushes every group itself; a timer flush adds nothing.
        .flush_every_ms(None);
    // sled 0.34 panics on some forms of damaged files; a damaged store must
    // be an error the caller can report, not a crash.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sled_config.open())) {
        Ok(result) => result.map_err(|e| sled_error("opening the database", e)),
        Err(panic) => {
            let detail = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "sled panicked while opening".to_owned());
            Err(codec::corrupt(
                format!("sled database at {}", dir.display()),
                detail,
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn the_store_directory_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("db");
        current(&base).unwrap();
        let mode = fs::metadata(&base).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        // One left open by an older version is closed on the next start.
        fs::set_permissions(&base, fs::Permissions::from_mode(0o755)).unwrap();
        current(&base).unwrap();
        let mode = fs::metadata(&base).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }
}
