//! containerd as a supervised child of skiff: started with skiff's config,
//! health-checked over CRI `Status`, restarted with exponential backoff when
//! it dies, and stopped (SIGTERM, then SIGKILL after a grace period) when
//! skiff shuts down. Containers survive all of this: their shims are separate
//! processes that a restarted containerd reconnects to.
//!
//! `RuntimeEndpoint::External` uses a runtime someone else runs and never
//! signals it.

use std::fs::{self, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::config::ContainerdPaths;
use crate::cri::{CriError, CriRuntime, CriTimeouts};

/// How the supervisor runs containerd.
#[derive(Debug, Clone)]
pub struct SupervisorConfig {
    /// The `containerd` binary (looked up in `PATH` when relative).
    pub containerd_bin: PathBuf,
    /// Files of this containerd; `config.toml` must already be written.
    pub paths: ContainerdPaths,
    /// How long containerd may take to answer CRI `Status` after a start.
    pub ready_timeout: Duration,
    /// Time between SIGTERM and SIGKILL when stopping.
    pub stop_grace: Duration,
    /// First delay before restarting a containerd that died.
    pub backoff_initial: Duration,
    /// Upper bound of the doubling restart delay.
    pub backoff_max: Duration,
    /// A containerd that ran this long before dying is restarted after the
    /// initial delay again (the backoff resets).
    pub backoff_reset_after: Duration,
}

impl SupervisorConfig {
    /// Defaults: `containerd` from `PATH`, 60 s to become ready, 10 s grace,
    /// restarts after 0.5 s doubling to 30 s, reset after 60 s of uptime.
    pub fn new(paths: ContainerdPaths) -> Self {
        Self {
            containerd_bin: PathBuf::from("containerd"),
            paths,
            ready_timeout: Duration::from_secs(60),
            stop_grace: Duration::from_secs(10),
            backoff_initial: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            backoff_reset_after: Duration::from_secs(60),
        }
    }
}

/// Failures to start, reach or stop the runtime.
#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    /// The containerd process could not be spawned.
    #[error("starting {bin}: {source}")]
    Spawn {
        /// The binary.
        bin: PathBuf,
        /// Why exec failed.
        source: io::Error,
    },
    /// A file of the supervisor (log, pid file) could not be used.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// containerd exited before it answered CRI.
    #[error("containerd exited during start-up ({status}); last log lines:\n{log_tail}")]
    ExitedDuringStartup {
        /// Its exit status.
        status: ExitStatus,
        /// The end of its log file.
        log_tail: String,
    },
    /// The runtime did not answer CRI `Status` in time.
    #[error("CRI runtime at {socket} not ready after {after:?}: {last_error}")]
    NotReady {
        /// The socket polled.
        socket: PathBuf,
        /// How long we waited.
        after: Duration,
        /// The last failure of `Status`.
        last_error: CriError,
    },
    /// The CRI endpoint is unusable.
    #[error(transparent)]
    Cri(#[from] CriError),
}

/// What the supervisor knows about its child.
#[derive(Debug, Default)]
struct ChildState {
    pid: Option<u32>,
    restarts: u64,
}

/// A running containerd that skiff started and keeps running.
///
/// Stop it with `shutdown`. Dropping it instead makes its monitor task stop
/// containerd in the background, which only completes if the tokio runtime
/// keeps running; a containerd left behind that way (or by a crash) is
/// replaced by the next `start` on the same directory.
#[derive(Debug)]
pub struct ContainerdSupervisor {
    config: SupervisorConfig,
    state: Arc<Mutex<ChildState>>,
    stop: watch::Sender<bool>,
    monitor: JoinHandle<()>,
    cri: CriRuntime,
}

/// Poll interval of the readiness check.
const READY_POLL: Duration = Duration::from_millis(100);

impl ContainerdSupervisor {
    /// Starts containerd and returns once it answers CRI `Status`.
    ///
    /// A containerd left running by a previous skiff that crashed (found via
    /// the pid file and checked to be a containerd on the same config) is
    /// stopped first: two daemons cannot share one root.
    pub async fn start(config: SupervisorConfig) -> Result<Self, SupervisorError> {
        stop_stale_daemon(&config).await?;
        let socket = config.paths.socket();
        let cri = CriRuntime::new(&socket.to_string_lossy(), CriTimeouts::default())?;
        let probe = cri.with_timeouts(CriTimeouts {
            default: Duration::from_secs(2),
            pull: Duration::from_secs(2),
        });

        let mut child = spawn(&config)?;
        let pid = child.id();
        if let Err(e) = wait_ready(&probe, &mut child, &config).await {
            terminate(&mut child, config.stop_grace).await;
            remove_pid_file(&config.paths);
            return Err(e);
        }
        tracing::info!(pid, socket = %socket.display(), "containerd ready");

        let state = Arc::new(Mutex::new(ChildState { pid, restarts: 0 }));
        let (stop, stop_rx) = watch::channel(false);
        let monitor = tokio::spawn(monitor(
            config.clone(),
            child,
            probe,
            Arc::clone(&state),
            stop_rx,
        ));
        Ok(Self {
            config,
            state,
            stop,
            monitor,
            cri,
        })
    }

    /// PID of the current containerd process, `None` between a crash and its
    /// restart.
    pub fn pid(&self) -> Option<u32> {
        lock(&self.state).pid
    }

    /// How many times containerd was restarted after dying.
    pub fn restarts(&self) -> u64 {
        lock(&self.state).restarts
    }

    /// The CRI socket.
    pub fn socket(&self) -> PathBuf {
        self.config.paths.socket()
    }

    /// A CRI client for this containerd (it reconnects across restarts).
    pub fn cri(&self) -> CriRuntime {
        self.cri.clone()
    }

    /// Stops containerd: SIGTERM, then SIGKILL after the grace period. Waits
    /// until the process is gone.
    pub async fn shutdown(self) {
        // The monitor owns the child; it does the stopping when told.
        let _ = self.stop.send(true);
        if let Err(e) = self.monitor.await {
            tracing::error!(error = %e, "containerd monitor task failed");
        }
    }
}

/// The CRI runtime the node agent uses: one skiff supervises, or an existing
/// one (`--container-runtime-endpoint`) that skiff leaves alone.
#[derive(Debug)]
pub enum RuntimeEndpoint {
    /// containerd started and supervised by skiff.
    Supervised(ContainerdSupervisor),
    /// A runtime someone else runs.
    External {
        /// Its client.
        cri: CriRuntime,
    },
}

impl RuntimeEndpoint {
    /// Uses the runtime at `endpoint` after checking that it answers CRI
    /// `Status` within `ready_timeout`; it is never started or stopped.
    pub async fn external(
        endpoint: &str,
        ready_timeout: Duration,
    ) -> Result<Self, SupervisorError> {
        let cri = CriRuntime::new(endpoint, CriTimeouts::default())?;
        let probe = cri.with_timeouts(CriTimeouts {
            default: Duration::from_secs(2),
            pull: Duration::from_secs(2),
        });
        let deadline = Instant::now() + ready_timeout;
        loop {
            match probe.status(false).await {
                Ok(_) => return Ok(Self::External { cri }),
                Err(e) if Instant::now() >= deadline => {
                    return Err(SupervisorError::NotReady {
                        socket: cri.socket().to_path_buf(),
                        after: ready_timeout,
                        last_error: e,
                    });
                }
                Err(_) => tokio::time::sleep(READY_POLL).await,
            }
        }
    }

    /// A CRI client for the runtime.
    pub fn cri(&self) -> CriRuntime {
        match self {
            Self::Supervised(s) => s.cri(),
            Self::External { cri } => cri.clone(),
        }
    }

    /// Stops the runtime if skiff started it; an external one keeps running.
    pub async fn shutdown(self) {
        match self {
            Self::Supervised(s) => s.shutdown().await,
            Self::External { .. } => {}
        }
    }
}

fn lock(state: &Mutex<ChildState>) -> std::sync::MutexGuard<'_, ChildState> {
    // The state is two plain numbers: a panic elsewhere cannot leave it torn.
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn spawn(config: &SupervisorConfig) -> Result<Child, SupervisorError> {
    let paths = &config.paths;
    let log_path = paths.log_file();
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|source| SupervisorError::Io {
            path: log_path.clone(),
            source,
        })?;
    let log_err = log.try_clone().map_err(|source| SupervisorError::Io {
        path: log_path,
        source,
    })?;
    let child = Command::new(&config.containerd_bin)
        .arg("--config")
        .arg(paths.config_file())
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        // Its own process group: a Ctrl-C in skiff's terminal must not reach
        // containerd directly; skiff decides how it stops.
        .process_group(0)
        .kill_on_drop(false)
        .spawn()
        .map_err(|source| SupervisorError::Spawn {
            bin: config.containerd_bin.clone(),
            source,
        })?;
    if let Some(pid) = child.id() {
        // Before it creates any container: containerd clamps containers'
        // scores to its own.
        crate::oom_score::protect(&Path::new("/proc").join(pid.to_string()), "containerd");
        let pid_path = paths.pid_file();
        fs::write(&pid_path, format!("{pid}\n")).map_err(|source| SupervisorError::Io {
            path: pid_path,
            source,
        })?;
    }
    Ok(child)
}

/// Polls CRI `Status` until it answers, the child exits, or the ready
/// timeout passes.
async fn wait_ready(
    probe: &CriRuntime,
    child: &mut Child,
    config: &SupervisorConfig,
) -> Result<(), SupervisorError> {
    let deadline = Instant::now() + config.ready_timeout;
    loop {
        let last_error = match probe.status(false).await {
            Ok(_) => return Ok(()),
            Err(e) => e,
        };
        if let Ok(Some(status)) = child.try_wait() {
            return Err(SupervisorError::ExitedDuringStartup {
                status,
                log_tail: log_tail(&config.paths.log_file()),
            });
        }
        if Instant::now() >= deadline {
            return Err(SupervisorError::NotReady {
                socket: probe.socket().to_path_buf(),
                after: config.ready_timeout,
                last_error,
            });
        }
        tokio::time::sleep(READY_POLL).await;
    }
}

fn log_tail(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// Watches the child until told to stop; restarts it when it dies.
async fn monitor(
    config: SupervisorConfig,
    mut child: Child,
    probe: CriRuntime,
    state: Arc<Mutex<ChildState>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = config.backoff_initial;
    let mut started = Instant::now();
    loop {
        tokio::select! {
            exit = child.wait() => {
                lock(&state).pid = None;
                let uptime = started.elapsed();
                if uptime >= config.backoff_reset_after {
                    backoff = config.backoff_initial;
                }
                tracing::warn!(?exit, ?uptime, delay = ?backoff, "containerd died; restarting");
                // Restart, retrying with growing delays until it answers CRI
                // or we are told to stop.
                loop {
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stop.changed() => { remove_pid_file(&config.paths); return; }
                    }
                    backoff = (backoff * 2).min(config.backoff_max);
                    let mut next = match spawn(&config) {
                        Ok(next) => next,
                        Err(e) => {
                            tracing::error!(error = %e, "restarting containerd failed");
                            continue;
                        }
                    };
                    let ready = tokio::select! {
                        r = wait_ready(&probe, &mut next, &config) => r,
                        _ = stop.changed() => {
                            terminate(&mut next, config.stop_grace).await;
                            remove_pid_file(&config.paths);
                            return;
                        }
                    };
                    match ready {
                        Ok(()) => {
                            let pid = next.id();
                            {
                                let mut s = lock(&state);
                                s.pid = pid;
                                s.restarts += 1;
                            }
                            tracing::info!(pid, "containerd restarted and ready");
                            child = next;
                            started = Instant::now();
                            break;
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "restarted containerd did not become ready");
                            terminate(&mut next, config.stop_grace).await;
                        }
                    }
                }
            }
            _ = stop.changed() => {
                terminate(&mut child, config.stop_grace).await;
                lock(&state).pid = None;
                remove_pid_file(&config.paths);
                return;
            }
        }
    }
}

/// SIGTERM, wait up to `grace`, then SIGKILL; always reaps the child.
async fn terminate(child: &mut Child, grace: Duration) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    if let Some(pid) = child.id() {
        send_signal(pid, libc::SIGTERM);
        if tokio::time::timeout(grace, child.wait()).await.is_ok() {
            return;
        }
        tracing::warn!(pid, ?grace, "containerd ignored SIGTERM; killing it");
    }
    if let Err(e) = child.kill().await {
        tracing::error!(error = %e, "killing containerd failed");
    }
}

fn send_signal(pid: u32, signal: libc::c_int) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill(2) has no memory-safety preconditions; a stale pid at
    // worst signals nothing (ESRCH).
    unsafe { libc::kill(pid, signal) == 0 }
}

fn remove_pid_file(paths: &ContainerdPaths) {
    let _ = fs::remove_file(paths.pid_file());
}

/// Stops a containerd a previous, crashed skiff left running on this config.
async fn stop_stale_daemon(config: &SupervisorConfig) -> Result<(), SupervisorError> {
    let pid_path = config.paths.pid_file();
    let Ok(text) = fs::read_to_string(&pid_path) else {
        return Ok(());
    };
    let pid: Option<u32> = text.trim().parse().ok();
    if let Some(pid) = pid.filter(|&pid| is_our_containerd(pid, &config.paths.config_file())) {
        tracing::warn!(pid, "stopping containerd left over from a previous run");
        send_signal(pid, libc::SIGTERM);
        let deadline = Instant::now() + config.stop_grace;
        while process_alive(pid) && Instant::now() < deadline {
            tokio::time::sleep(READY_POLL).await;
        }
        if process_alive(pid) {
            send_signal(pid, libc::SIGKILL);
            while process_alive(pid) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    fs::remove_file(&pid_path).map_err(|source| SupervisorError::Io {
        path: pid_path,
        source,
    })
}

/// Whether `pid` is a containerd started with `config_file` (pids get reused).
fn is_our_containerd(pid: u32, config_file: &Path) -> bool {
    let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    let is_containerd = args
        .first()
        .and_then(|a| {
            Path::new(std::str::from_utf8(a).ok()?)
                .file_name()
                .map(|n| n == "containerd")
        })
        .unwrap_or(false);
    let config = config_file.as_os_str().as_encoded_bytes();
    is_containerd && args.contains(&config)
}

/// Alive and not a zombie (a reaped-later child of ours still has /proc).
fn process_alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_alive_sees_this_process_and_not_a_reaped_one() {
        assert!(process_alive(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!process_alive(pid));
    }

    #[test]
    fn a_process_is_ours_only_if_it_is_containerd_on_our_config() {
        // This test binary is not containerd, whatever its arguments.
        assert!(!is_our_containerd(
            std::process::id(),
            Path::new("/x/config.toml")
        ));
        assert!(!is_our_containerd(
            u32::MAX - 1,
            Path::new("/x/config.toml")
        ));
    }

    #[tokio::test]
    async fn a_binary_that_exits_at_once_fails_start_with_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let paths = ContainerdPaths::new(dir.path());
        let script = dir.path().join("fake-containerd");
        skiff_testkit::write_executable(
            &script,
            "#!/bin/sh\necho \"fake containerd: bad config $2\" >&2\nexit 3\n",
        );
        let mut config = SupervisorConfig::new(paths.clone());
        config.containerd_bin = script;
        let err = ContainerdSupervisor::start(config).await.unwrap_err();
        match err {
            SupervisorError::ExitedDuringStartup { status, log_tail } => {
                assert_eq!(status.code(), Some(3));
                assert!(
                    log_tail.contains("fake containerd: bad config"),
                    "{log_tail}"
                );
                assert!(log_tail.contains(&*paths.config_file().to_string_lossy()));
            }
            other => panic!("unexpected error: {other}"),
        }
        assert!(!paths.pid_file().exists());
    }

    #[tokio::test]
    async fn a_missing_binary_fails_to_spawn() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = SupervisorConfig::new(ContainerdPaths::new(dir.path()));
        config.containerd_bin = dir.path().join("no-such-containerd");
        let err = ContainerdSupervisor::start(config).await.unwrap_err();
        assert!(matches!(err, SupervisorError::Spawn { .. }), "{err}");
    }
}
