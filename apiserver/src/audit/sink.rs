//! Where events go: a bounded queue drained by one writer thread into
//! standard output or a file rotated as upstream's (lumberjack): past the
//! size limit the file is renamed `<name>-<UTC time>.<ext>` and a new one
//! started; backups beyond the count or older than the age are removed.
//!
//! A request never waits for the disk: events are queued with `try_send`,
//! and when the queue is full they are dropped and counted (with a
//! warning), as upstream's batching backend does. The writer flushes once
//! the queue has stayed dry for a short batch window (so a busy server
//! wakes it a few dozen times a second, not twice per request), and
//! everything queued is written before [`Sink::close`] returns.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;

use super::event::Event;

/// Events waiting for the writer before new ones are dropped (upstream's
/// default buffer).
pub(super) const QUEUE: usize = 10_000;

/// Where the log goes and how it is rotated (upstream's `--audit-log-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One JSON line per event on standard output (`--audit-log-path -`).
    Stdout,
    /// A file, rotated by size and age.
    File {
        /// The log file.
        path: PathBuf,
        /// When it is rotated and how many old files are kept.
        rotation: Rotation,
    },
}

/// Upstream's rotation settings; zero means no limit, except for the size,
/// where zero means lumberjack's default of 100 MB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rotation {
    /// Largest file before it is rotated, in bytes (0: 100 MB).
    pub max_bytes: u64,
    /// Backups kept (0: all).
    pub max_backups: usize,
    /// Days a backup is kept (0: forever).
    pub max_age_days: u64,
}

impl Rotation {
    fn limit(&self) -> u64 {
        if self.max_bytes == 0 {
            100 * 1024 * 1024
        } else {
            self.max_bytes
        }
    }
}

/// Why the log could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The log file could not be opened.
    #[error("opening the audit log {path}: {source}")]
    Open {
        /// The log file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The writer thread could not be started.
    #[error("starting the audit log writer: {0}")]
    Thread(#[source] io::Error),
}

enum Message {
    Event(Box<Event>),
    /// Write what is queued, flush, and stop.
    Close,
}

/// The queue in front of the writer thread.
pub(crate) struct Sink {
    queue: mpsc::Sender<Message>,
    dropped: AtomicU64,
    writer: parking_lot::Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sink")
            .field("dropped", &self.dropped.load(Ordering::Relaxed))
            .finish()
    }
}

impl Sink {
    /// Opens the target (creating the file 0600 and its directory) and
    /// starts the writer.
    pub(crate) fn start(target: &Target, queue: usize) -> Result<Arc<Self>, SinkError> {
        let output: Box<dyn Output> = match target {
            Target::Stdout => Box::new(Stdout),
            Target::File { path, rotation } => Box::new(
                RotatingFile::open(path, *rotation).map_err(|source| SinkError::Open {
                    path: path.clone(),
                    source,
                })?,
            ),
        };
        let (tx, rx) = mpsc::channel(queue.max(1));
        let writer = std::thread::Builder::new()
            .name("audit-log".into())
            .spawn(move || write_events(rx, output))
            .map_err(SinkError::Thread)?;
        Ok(Arc::new(Self {
            queue: tx,
            dropped: AtomicU64::new(0),
            writer: parking_lot::Mutex::new(Some(writer)),
        }))
    }

    /// Queues an event, or drops and counts it when the writer is behind
    /// (or closed).
    pub(crate) fn send(&self, event: Event) {
        if self
            .queue
            .try_send(Message::Event(Box::new(event)))
            .is_err()
        {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if dropped == 1 || dropped.is_multiple_of(1000) {
                tracing::warn!(
                    dropped,
                    "the audit log writer is behind; audit events were dropped"
                );
            }
        }
    }

    /// Events dropped so far.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Writes everything queued, flushes and stops the writer; events sent
    /// afterwards are dropped.
    pub(crate) async fn close(&self) {
        let _ = self.queue.send(Message::Close).await;
        let writer = self.writer.lock().take();
        if let Some(writer) = writer {
            let joined = tokio::task::spawn_blocking(move || writer.join()).await;
            if !matches!(joined, Ok(Ok(()))) {
                tracing::warn!("the audit log writer ended abnormally");
            }
        }
    }
}

/// How long the writer waits for more events once the queue has run dry,
/// before it flushes and sleeps until the next one. While it waits it is
/// not parked on the queue, so requests queue events without waking it:
/// under load it wakes about this often instead of once per event.
pub(super) const BATCH_WINDOW: std::time::Duration = std::time::Duration::from_millis(20);

/// The writer thread: one JSON line per event, a flush once nothing more
/// came for a [`BATCH_WINDOW`].
fn write_events(mut rx: mpsc::Receiver<Message>, mut output: Box<dyn Output>) {
    let mut line = Vec::with_capacity(4096);
    let mut failing = false;
    while let Some(message) = rx.blocking_recv() {
        let mut next = Some(message);
        loop {
            let Some(message) = next.take() else {
                std::thread::sleep(BATCH_WINDOW);
                match rx.try_recv() {
                    Ok(message) => {
                        next = Some(message);
                        continue;
                    }
                    Err(_) => break,
                }
            };
            let Message::Event(event) = message else {
                output.flush_quietly();
                return;
            };
            line.clear();
            if let Err(error) = serde_json::to_writer(&mut line, &event) {
                tracing::warn!(%error, "an audit event could not be encoded");
                next = rx.try_recv().ok();
                continue;
            }
            line.push(b'\n');
            match output.write_line(&line) {
                Ok(()) => failing = false,
                Err(error) => {
                    // Said once per failing spell, not once per event.
                    if !failing {
                        tracing::error!(%error, "writing the audit log failed");
                    }
                    failing = true;
                }
            }
            next = rx.try_recv().ok();
        }
        output.flush_quietly();
    }
    output.flush_quietly();
}

trait Output: Send {
    fn write_line(&mut self, line: &[u8]) -> io::Result<()>;
    fn flush(&mut self) -> io::Result<()>;

    fn flush_quietly(&mut self) {
        if let Err(error) = self.flush() {
            tracing::error!(%error, "flushing the audit log failed");
        }
    }
}

struct Stdout;

impl Output for Stdout {
    fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        io::stdout().lock().write_all(line)
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stdout().lock().flush()
    }
}

/// A file rotated by size, as lumberjack rotates it.
struct RotatingFile {
    path: PathBuf,
    rotation: Rotation,
    file: BufWriter<File>,
    size: u64,
}

impl RotatingFile {
    fn open(path: &Path, rotation: Rotation) -> io::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir)?;
        }
        let file = open_private(path)?;
        let size = file.metadata()?.len();
        Ok(Self {
            path: path.to_path_buf(),
            rotation,
            file: BufWriter::new(file),
            size,
        })
    }

    /// Renames the current file to a timestamped backup, starts a new one
    /// and removes the backups the settings no longer keep.
    fn rotate(&mut self) -> io::Result<()> {
        self.file.flush()?;
        let now = k8s_openapi::jiff::Timestamp::now();
        let backup = backup_name(&self.path, now);
        fs::rename(&self.path, &backup)?;
        self.file = BufWriter::new(open_private(&self.path)?);
        self.size = 0;
        self.remove_old_backups(now);
        Ok(())
    }

    fn remove_old_backups(&self, now: k8s_openapi::jiff::Timestamp) {
        let Some(dir) = self.path.parent() else {
            return;
        };
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let (prefix, ext) = name_parts(&self.path);
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        let mut backups: Vec<(k8s_openapi::jiff::Timestamp, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                let stamp = name.strip_prefix(&prefix)?.strip_suffix(&ext)?;
                Some((parse_stamp(stamp)?, entry.path()))
            })
            .collect();
        // Newest first.
        backups.sort_by_key(|b| std::cmp::Reverse(b.0));
        let max_age = (self.rotation.max_age_days > 0).then(|| {
            k8s_openapi::jiff::SignedDuration::from_hours(24 * self.rotation.max_age_days as i64)
        });
        for (index, (stamp, path)) in backups.iter().enumerate() {
            let too_many = self.rotation.max_backups > 0 && index >= self.rotation.max_backups;
            let too_old = max_age.is_some_and(|age| now.duration_since(*stamp) > age);
            if (too_many || too_old)
                && let Err(error) = fs::remove_file(path)
            {
                tracing::warn!(%error, path = %path.display(), "removing an old audit log failed");
            }
        }
    }
}

impl Output for RotatingFile {
    fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        let length = line.len() as u64;
        if length > self.rotation.limit() {
            return Err(io::Error::other(format!(
                "an event of {length} bytes exceeds the audit log's maximum file size"
            )));
        }
        if self.size + length > self.rotation.limit() {
            self.rotate()?;
        }
        self.file.write_all(line)?;
        self.size += length;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

fn open_private(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

/// `audit.log` → (`audit-`, `.log`): a backup is `audit-<stamp>.log`.
fn name_parts(path: &Path) -> (String, String) {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    (format!("{stem}-"), ext)
}

/// lumberjack's backup stamp: UTC, `2006-01-02T15-04-05.000`.
const STAMP: &str = "%Y-%m-%dT%H-%M-%S%.3f";

fn backup_name(path: &Path, at: k8s_openapi::jiff::Timestamp) -> PathBuf {
    let (prefix, ext) = name_parts(path);
    let stamp = k8s_openapi::jiff::fmt::strtime::format(STAMP, at)
        .unwrap_or_else(|_| at.as_millisecond().to_string());
    path.with_file_name(format!("{prefix}{stamp}{ext}"))
}

fn parse_stamp(stamp: &str) -> Option<k8s_openapi::jiff::Timestamp> {
    // jiff parses a civil time; the stamp is UTC.
    let civil = k8s_openapi::jiff::civil::DateTime::strptime(STAMP, stamp).ok()?;
    civil
        .to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC)
        .ok()
        .map(|z| z.timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(n: usize) -> Event {
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            k8s_openapi::jiff::Timestamp::now(),
        );
        Event {
            kind: "Event".into(),
            api_version: "audit.k8s.io/v1".into(),
            level: super::super::Level::Metadata,
            audit_id: format!("id-{n}"),
            stage: super::super::Stage::ResponseComplete,
            request_uri: "/api".into(),
            verb: "get".into(),
            user: Default::default(),
            impersonated_user: None,
            source_ips: Vec::new(),
            user_agent: String::new(),
            object_ref: None,
            response_status: None,
            request_object: None,
            response_object: None,
            request_received_timestamp: now.clone(),
            stage_timestamp: now,
            annotations: Default::default(),
        }
    }

    fn lines(path: &Path) -> Vec<Event> {
        fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// A sink writing to `path`, rotated by default, queueing `queue` events.
    fn file_sink(path: &Path, queue: usize) -> Arc<Sink> {
        let target = Target::File {
            path: path.to_path_buf(),
            rotation: Rotation::default(),
        };
        Sink::start(&target, queue).unwrap()
    }

    fn backups(dir: &Path) -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap() != "audit.log")
            .collect();
        found.sort();
        found
    }

    #[tokio::test]
    async fn events_become_lines_in_order_and_close_flushes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/audit.log");
        let sink = file_sink(&path, QUEUE);
        for n in 0..50 {
            sink.send(event(n));
        }
        sink.close().await;
        let ids: Vec<String> = lines(&path).into_iter().map(|e| e.audit_id).collect();
        assert_eq!(ids, (0..50).map(|n| format!("id-{n}")).collect::<Vec<_>>());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // Closed: later events are dropped and counted, not written.
        sink.send(event(99));
        assert_eq!(sink.dropped(), 1);
        assert_eq!(lines(&path).len(), 50);
    }

    #[tokio::test]
    async fn a_full_queue_drops_and_counts_instead_of_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let sink = file_sink(&path, 1);
        // The writer may take some events as they come; a burst larger than
        // the queue cannot all fit.
        for n in 0..2000 {
            sink.send(event(n));
        }
        let dropped = sink.dropped();
        assert!(dropped > 0, "nothing dropped");
        sink.close().await;
        assert_eq!(lines(&path).len() as u64 + dropped, 2000);
    }

    #[test]
    fn rotation_by_size_keeps_the_configured_backups() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let line = vec![b'x'; 99];
        let mut file = RotatingFile::open(
            &path,
            Rotation {
                max_bytes: 1000,
                max_backups: 2,
                max_age_days: 0,
            },
        )
        .unwrap();
        let mut written = 0;
        for _ in 0..4 {
            // Ten lines of 100 bytes fill a file; the eleventh rotates it.
            for _ in 0..10 {
                let mut l = line.clone();
                l.push(b'\n');
                file.write_line(&l).unwrap();
                written += 1;
            }
            // Backups are named to the millisecond; keep them apart.
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        file.flush().unwrap();
        let kept = backups(dir.path());
        assert_eq!(kept.len(), 2, "{kept:?}");
        for backup in &kept {
            let name = backup.file_name().unwrap().to_string_lossy().into_owned();
            let stamp = name
                .strip_prefix("audit-")
                .and_then(|s| s.strip_suffix(".log"))
                .unwrap_or_else(|| panic!("{name}"));
            assert!(parse_stamp(stamp).is_some(), "{name}");
            assert_eq!(fs::metadata(backup).unwrap().len(), 1000);
        }
        assert_eq!(fs::metadata(&path).unwrap().len(), 1000);
        assert_eq!(written, 40);
        // Too large for any file: refused rather than rotated forever.
        assert!(file.write_line(&vec![b'y'; 1001]).is_err());
    }

    #[test]
    fn backups_older_than_the_age_are_removed_at_the_next_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let old = k8s_openapi::jiff::Timestamp::now()
            - k8s_openapi::jiff::SignedDuration::from_hours(24 * 3);
        let recent =
            k8s_openapi::jiff::Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_hours(12);
        fs::write(backup_name(&path, old), "old\n").unwrap();
        fs::write(backup_name(&path, recent), "recent\n").unwrap();
        fs::write(dir.path().join("unrelated.log"), "keep\n").unwrap();
        let mut file = RotatingFile::open(
            &path,
            Rotation {
                max_bytes: 10,
                max_backups: 0,
                max_age_days: 2,
            },
        )
        .unwrap();
        file.write_line(b"123456789\n").unwrap();
        file.write_line(b"abcdefghi\n").unwrap();
        file.flush().unwrap();
        let left: Vec<String> = backups(dir.path())
            .iter()
            .map(|p| fs::read_to_string(p).unwrap())
            .collect();
        assert_eq!(left.len(), 3, "{left:?}");
        assert!(!left.contains(&"old\n".to_string()));
        assert!(left.contains(&"recent\n".to_string()));
        assert!(left.contains(&"keep\n".to_string()));
        assert!(left.contains(&"123456789\n".to_string()));
    }

    #[test]
    fn an_existing_file_is_appended_to_and_counts_towards_the_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit");
        fs::write(&path, "12345678\n").unwrap();
        let mut file = RotatingFile::open(
            &path,
            Rotation {
                max_bytes: 12,
                ..Default::default()
            },
        )
        .unwrap();
        file.write_line(b"ab\n").unwrap();
        file.write_line(b"cd\n").unwrap();
        file.flush().unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "cd\n");
        let rotated: Vec<PathBuf> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p != &path)
            .collect();
        assert_eq!(rotated.len(), 1);
        assert_eq!(fs::read_to_string(&rotated[0]).unwrap(), "12345678\nab\n");
        assert!(
            rotated[0]
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("audit-")
        );
    }
}
