//! Giving the binary's start-up code back to the kernel once the server runs.
//!
//! Starting a server touches code all over the binary once (argument
//! parsing, certificate generation, the bootstrap policy, every component's
//! first sync), and the kernel maps code in fault-around windows, so an idle
//! server keeps most of its text resident although it runs a small part of
//! it: in the release build ~39 of its ~45 MiB of file-backed RSS. Those are
//! clean pages of the executable, so `MADV_PAGEOUT` (Linux 5.4) reclaims them
//! at no risk; whatever the server keeps running faults back in from the page
//! cache or the disk on first use. On an edge device that is memory the rest
//! of the node gets back, and RSS is what the operator and the OOM killer see.
//!
//! Only the executable's read-only file mappings are advised: writable ones
//! may hold private copies that paging out would have to swap. The kernel
//! leaves pages that another process maps too (a second `skiff` from the
//! same file) where they are.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// What one release did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Released {
    /// Mappings advised.
    pub(crate) mappings: usize,
    /// Their total length in bytes (resident or not).
    pub(crate) bytes: usize,
}

/// Why the code could not be released.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReleaseError {
    /// The process's own memory map could not be read.
    #[error("reading /proc/self/maps: {0}")]
    Maps(#[source] io::Error),
    /// The running executable's path is unknown.
    #[error("resolving the running executable: {0}")]
    Executable(#[source] io::Error),
    /// The kernel refused the advice (before Linux 5.4 `MADV_PAGEOUT` is
    /// `EINVAL`).
    #[error("madvise(MADV_PAGEOUT) on {start:#x}+{len}: {source}")]
    Advise {
        /// Start of the mapping.
        start: usize,
        /// Its length.
        len: usize,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
}

/// One line of `/proc/self/maps` that [`release`] advises.
#[derive(Debug, PartialEq, Eq)]
struct Mapping {
    start: usize,
    end: usize,
}

/// Splits a `/proc/<pid>/maps` or `smaps` header line into its address
/// range, permissions and path (which may hold spaces, as in
/// `/usr/bin/skiff (deleted)` after an upgrade replaced the file).
fn header(line: &str) -> Option<(&str, &str, &str)> {
    let mut rest = line.trim_start();
    let mut fields = [""; 5];
    for field in &mut fields {
        let (this, tail) = rest.split_once(char::is_whitespace)?;
        *field = this;
        rest = tail.trim_start();
    }
    Some((fields[0], fields[1], rest.trim_end()))
}

/// The read-only, file-backed mappings of `executable` in a
/// `/proc/<pid>/maps` text.
fn read_only_mappings_of(maps: &str, executable: &Path) -> Vec<Mapping> {
    maps.lines()
        .filter_map(|line| {
            let (range, perms, path) = header(line)?;
            if Path::new(path) != executable || perms.contains('w') || !perms.starts_with('r') {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            (end > start).then_some(Mapping { start, end })
        })
        .collect()
}

/// Advises the kernel to reclaim the resident pages of the running
/// executable's read-only mappings (its code and constants).
pub(crate) fn release() -> Result<Released, ReleaseError> {
    let executable: PathBuf = fs::read_link("/proc/self/exe").map_err(ReleaseError::Executable)?;
    let maps = fs::read_to_string("/proc/self/maps").map_err(ReleaseError::Maps)?;
    // Reclaim skips dirty page-cache pages, which a binary installed or
    // built moments before start still has: write them back first (a
    // no-op for a file long on disk).
    if let Err(error) = fs::File::open("/proc/self/exe").and_then(|f| f.sync_data()) {
        tracing::debug!(%error, "the executable's pages not written back; dirty ones stay resident");
    }
    let mut released = Released::default();
    for mapping in read_only_mappings_of(&maps, &executable) {
        let len = mapping.end - mapping.start;
        // SAFETY: the range is one whole mapping of this process, read from
        // its own maps; MADV_PAGEOUT on a clean, read-only file mapping only
        // drops pages the kernel can read back, and changes no contents.
        let answer =
            unsafe { libc::madvise(mapping.start as *mut libc::c_void, len, libc::MADV_PAGEOUT) };
        if answer != 0 {
            return Err(ReleaseError::Advise {
                start: mapping.start,
                len,
                source: io::Error::last_os_error(),
            });
        }
        released.mappings += 1;
        released.bytes += len;
    }
    Ok(released)
}

/// The number of resident bytes of the running executable's read-only
/// mappings (from `/proc/self/smaps`), for the log line after a release.
pub(crate) fn resident_bytes() -> Option<usize> {
    let executable = fs::read_link("/proc/self/exe").ok()?;
    let smaps = fs::read_to_string("/proc/self/smaps").ok()?;
    let mut counting = false;
    let mut total = 0;
    for line in smaps.lines() {
        if let Some(rss) = line.strip_prefix("Rss:") {
            if counting {
                let kib = rss.trim().trim_end_matches("kB").trim();
                total += kib.parse::<usize>().ok()? * 1024;
            }
        } else if let Some((range, perms, path)) = header(line)
            && range.contains('-')
        {
            counting =
                Path::new(path) == executable && perms.starts_with('r') && !perms.contains('w');
        }
    }
    Some(total)
}

/// Waits `settle` (or until `stop` resolves, then does nothing) and releases
/// the start-up code, logging what it did. A kernel without `MADV_PAGEOUT`
/// only costs a warning: the pages stay as they would without this.
pub(crate) async fn release_after(settle: std::time::Duration, stop: impl Future<Output = ()>) {
    tokio::select! {
        () = stop => return,
        () = tokio::time::sleep(settle) => {}
    }
    let before = resident_bytes();
    match release() {
        Ok(released) => tracing::info!(
            mappings = released.mappings,
            resident_before_kib = before.map(|b| b / 1024),
            resident_after_kib = resident_bytes().map(|b| b / 1024),
            "start-up code pages given back to the kernel"
        ),
        Err(error) => tracing::warn!(%error, "start-up code pages kept resident"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0a0000000-55d0a1000000 r--p 00000000 fd:01 123 /usr/local/bin/skiff
55d0a1000000-55d0a4000000 r-xp 01000000 fd:01 123 /usr/local/bin/skiff
55d0a4000000-55d0a4100000 r--p 04000000 fd:01 123 /usr/local/bin/skiff
55d0a4100000-55d0a4200000 rw-p 04100000 fd:01 123 /usr/local/bin/skiff
55d0a4200000-55d0a4300000 rw-p 00000000 00:00 0 [heap]
7f0000000000-7f0000100000 r-xp 00000000 fd:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000200000-7f0000300000 r-xp 00000000 fd:01 789 /usr/local/bin/skiff-other
";

    #[test]
    fn only_the_executables_read_only_mappings_are_advised() {
        let mappings = read_only_mappings_of(MAPS, Path::new("/usr/local/bin/skiff"));
        assert_eq!(
            mappings,
            vec![
                Mapping {
                    start: 0x55d0a0000000,
                    end: 0x55d0a1000000
                },
                Mapping {
                    start: 0x55d0a1000000,
                    end: 0x55d0a4000000
                },
                Mapping {
                    start: 0x55d0a4000000,
                    end: 0x55d0a4100000
                },
            ]
        );
    }

    #[test]
    fn a_replaced_executable_is_matched_by_its_whole_name() {
        // After an upgrade the kernel names the old file "(deleted)", in
        // /proc/self/exe too; its pages can still be read back.
        let maps = "55d0a1000000-55d0a4000000 r-xp 01000000 fd:01 123      /usr/local/bin/skiff (deleted)\n";
        assert_eq!(
            read_only_mappings_of(maps, Path::new("/usr/local/bin/skiff (deleted)")).len(),
            1
        );
        assert!(read_only_mappings_of(maps, Path::new("/usr/local/bin/skiff")).is_empty());
    }

    #[test]
    fn releasing_drops_resident_code_of_this_test_binary() {
        // Touch nothing special: a running test binary has resident text.
        let before = resident_bytes().expect("smaps readable");
        assert!(before > 0, "a running binary has resident code");
        let released = release().expect("madvise accepted");
        assert!(released.mappings >= 1);
        let after = resident_bytes().expect("smaps readable");
        assert!(
            after < before,
            "resident code should shrink: before {before} after {after}"
        );
    }
}
