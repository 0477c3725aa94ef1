//! Container log rotation, as the kubelet's container log manager does it:
//! a running container's log file that has reached the size limit
//! (`--container-log-max-size`, 10 MiB) is renamed aside with a timestamp
//! and the runtime is asked to reopen the log at its path
//! (`ReopenContainerLog`), so it goes on in a new file. Rotated files but
//! the newest are gzip-compressed, and the oldest are removed so a
//! container keeps at most `--container-log-max-files` files (5) in all.
//!
//! Without it a container that writes a lot fills the node's disk: on an
//! edge device that is the disk everything else lives on. `kubectl logs`
//! reads the current file (as upstream does); a follower moves on to the
//! new file when the old one is rotated away.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use crate::runtime::{Runtime, cri_api};

/// When and how far container logs are rotated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRotation {
    /// A log file this large (bytes) or larger is rotated.
    pub max_size: u64,
    /// The most files one container's log may take, the current one
    /// included (at least 2).
    pub max_files: usize,
    /// How often running containers' logs are looked at.
    pub interval: Duration,
}

impl Default for LogRotation {
    /// The kubelet's defaults.
    fn default() -> Self {
        LogRotation {
            max_size: 10 << 20,
            max_files: 5,
            interval: Duration::from_secs(10),
        }
    }
}

/// The suffix of a rotated file that is still being compressed.
const TMP_SUFFIX: &str = ".tmp";
/// The suffix of a compressed rotated file.
const GZ_SUFFIX: &str = ".gz";

/// Looks at every running container's log each interval and rotates those that
/// reached the limit, until `stop` is raised.
pub(crate) async fn keep_rotated(
    runtime: Arc<dyn Runtime>,
    policy: LogRotation,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut ticks = skiff_common::wakeups::Ticks::new(policy.interval, stop);
    while ticks.next().await {
        let running = cri_api::ContainerFilter {
            state: Some(cri_api::ContainerStateValue {
                state: cri_api::ContainerState::ContainerRunning as i32,
            }),
            ..Default::default()
        };
        let containers = match runtime.list_containers(Some(running)).await {
            Ok(containers) => containers,
            Err(error) => {
                tracing::debug!(%error, "listing containers for log rotation");
                continue;
            }
        };
        for container in containers {
            let Ok(status) = runtime.container_status(&container.id).await else {
                continue;
            };
            if status.log_path.is_empty() {
                continue;
            }
            rotate_if_grown(
                runtime.as_ref(),
                &container.id,
                Path::new(&status.log_path),
                &policy,
            )
            .await;
        }
    }
}

/// Rotates `log` of `container_id` once it has reached the limit.
async fn rotate_if_grown(
    runtime: &dyn Runtime,
    container_id: &str,
    log: &Path,
    policy: &LogRotation,
) {
    let size = match std::fs::metadata(log) {
        Ok(meta) => meta.len(),
        Err(_) => return,
    };
    if size < policy.max_size {
        return;
    }
    let span = tracing::info_span!("log_rotation", container = %container_id, log = %log.display());
    rotate(runtime, container_id, log, size, policy.max_files)
        .instrument(span)
        .await;
}

/// Renames `log` aside (after making room) and has the runtime reopen it.
async fn rotate(
    runtime: &dyn Runtime,
    container_id: &str,
    log: &Path,
    size: u64,
    max_files: usize,
) {
    // Removing and compressing files is disk work: off the async workers.
    let owned = log.to_path_buf();
    let span = tracing::Span::current();
    let pruned = tokio::task::spawn_blocking(move || {
        span.in_scope(|| prune_and_compress(&owned, max_files))
    })
    .await;
    if let Err(error) = pruned {
        tracing::warn!(%error, "pruning rotated logs");
    }
    let stamp = k8s_openapi::jiff::Timestamp::now().strftime("%Y%m%d-%H%M%S");
    let aside = rotated_name(log, &stamp.to_string());
    if let Err(error) = std::fs::rename(log, &aside) {
        tracing::warn!(%error, "renaming the log aside");
        return;
    }
    if let Err(error) = runtime.reopen_container_log(container_id).await {
        // The runtime still writes to the renamed file: put it back.
        tracing::warn!(%error, "the runtime did not reopen the log; rotation undone");
        if let Err(error) = std::fs::rename(&aside, log) {
            tracing::error!(%error, "putting the log back after a failed rotation");
        }
        return;
    }
    tracing::info!(size, rotated = %aside.display(), "container log rotated");
}

/// Makes room for the rotation about to happen: removes the oldest rotated
/// files of `log` beyond what `max_files` leaves for them, and compresses
/// the others but the newest.
fn prune_and_compress(log: &Path, max_files: usize) {
    let rotated = rotated_files(log);
    // Room for the one this rotation adds: with the current file, at most
    // `max_files` in all.
    let keep = max_files.saturating_sub(2);
    let excess = rotated.len().saturating_sub(keep);
    for old in &rotated[..excess] {
        if let Err(error) = std::fs::remove_file(old) {
            tracing::warn!(file = %old.display(), %error, "removing an old rotated log");
        }
    }
    // The newest rotated file stays plain: the runtime may still have been
    // writing to it when it was reopened.
    let kept = &rotated[excess..];
    if let Some((_, older)) = kept.split_last() {
        for file in older.iter().filter(|f| !has_suffix(f, GZ_SUFFIX)) {
            if let Err(error) = compress(file) {
                tracing::warn!(file = %file.display(), %error, "compressing a rotated log");
            }
        }
    }
}

/// Whether `file`'s name ends with `suffix`.
fn has_suffix(file: &Path, suffix: &str) -> bool {
    file.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(suffix))
}

/// The rotated files of `log` (`<log>.<timestamp>[.gz]`), oldest first; a
/// leftover of a compression cut short is removed.
fn rotated_files(log: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(base)) = (log.parent(), log.file_name().and_then(|n| n.to_str())) else {
        return Vec::new();
    };
    let prefix = format!("{base}.");
    let mut rotated: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix))
        })
        .filter(|path| {
            if has_suffix(path, TMP_SUFFIX) {
                let _ = std::fs::remove_file(path);
                return false;
            }
            true
        })
        .collect();
    // Timestamps (`20060102-150405`, Go's layout as the kubelet writes it)
    // sort as they happened.
    rotated.sort();
    rotated
}

/// `<log>.<stamp>` (the UTC time), with a counter when one was rotated in
/// the same second.
fn rotated_name(log: &Path, stamp: &str) -> PathBuf {
    let base = format!("{}.{stamp}", log.display());
    let mut candidate = PathBuf::from(&base);
    let mut n = 1;
    while candidate.exists()
        || PathBuf::from(format!("{}{GZ_SUFFIX}", candidate.display())).exists()
    {
        candidate = PathBuf::from(format!("{base}-{n}"));
        n += 1;
    }
    candidate
}

/// Gzips `file` into `<file>.gz` (through a temporary file, so a crash
/// leaves no half-written `.gz`) and removes it.
fn compress(file: &Path) -> std::io::Result<()> {
    let gz = PathBuf::from(format!("{}{GZ_SUFFIX}", file.display()));
    let tmp = PathBuf::from(format!("{}{TMP_SUFFIX}", gz.display()));
    {
        let mut input = std::fs::File::open(file)?;
        let output = std::fs::File::create(&tmp)?;
        let mut encoder = flate2::write::GzEncoder::new(output, flate2::Compression::default());
        std::io::copy(&mut input, &mut encoder)?;
        encoder.finish()?.flush()?;
    }
    std::fs::rename(&tmp, &gz)?;
    std::fs::remove_file(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn rotated_files_are_found_oldest_first_and_leftovers_removed() {
        let dir = tempfile::tempdir().expect("dir");
        let log = dir.path().join("0.log");
        for name in [
            "0.log",
            "0.log.20260101-000002",
            "0.log.20260101-000001.gz",
            "0.log.20260101-000003.gz.tmp",
            "1.log",
            "1.log.20260101-000000",
        ] {
            std::fs::write(dir.path().join(name), name).expect("file");
        }
        let names: Vec<String> = rotated_files(&log)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["0.log.20260101-000001.gz", "0.log.20260101-000002"]);
        assert!(!dir.path().join("0.log.20260101-000003.gz.tmp").exists());
    }

    #[test]
    fn a_compressed_log_reads_back_whole() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("0.log.20260101-000000");
        let text = "2026-01-01T00:00:00Z stdout F hello\n".repeat(1000);
        std::fs::write(&file, &text).expect("file");
        compress(&file).expect("compressed");
        assert!(!file.exists());
        let gz = std::fs::File::open(dir.path().join("0.log.20260101-000000.gz")).expect("gz");
        let mut back = String::new();
        flate2::read::GzDecoder::new(gz)
            .read_to_string(&mut back)
            .expect("gunzip");
        assert_eq!(back, text);
    }

    #[test]
    fn a_second_rotation_in_the_same_second_gets_a_name_of_its_own() {
        let dir = tempfile::tempdir().expect("dir");
        let log = dir.path().join("0.log");
        let first = rotated_name(&log, "20260101-000000");
        assert_eq!(first, dir.path().join("0.log.20260101-000000"));
        std::fs::write(&first, "x").expect("file");
        let second = rotated_name(&log, "20260101-000000");
        assert_eq!(second, dir.path().join("0.log.20260101-000000-1"));
    }
}
