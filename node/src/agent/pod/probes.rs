//! Startup, liveness and readiness probes (exec, httpGet, tcpSocket) with
//! upstream's timing: initial delay from the container's start, a period,
//! a timeout, success and failure thresholds. Results are kept per
//! container instance, so a restarted container starts unprobed.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, HTTPGetAction, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::runtime::Runtime;

/// Which probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ProbeKind {
    /// Gates the other two until it succeeds once.
    Startup,
    /// Restarts the container when it fails.
    Liveness,
    /// Feeds the Ready condition.
    Readiness,
}

#[derive(Debug, Clone)]
struct Tracker {
    next_due: Instant,
    successes: i32,
    failures: i32,
    /// The last settled result (after thresholds); `None` until one.
    result: Option<bool>,
}

/// The probe results of one pod's container instances.
#[derive(Debug, Default)]
pub(crate) struct ProbeResults {
    trackers: HashMap<(String, ProbeKind), Tracker>,
}

/// What the probes say about one running container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ContainerHealth {
    /// Started (startup probe passed, or none).
    pub started: bool,
    /// Ready (readiness probe passed, or none, once started).
    pub ready: bool,
    /// The liveness probe failed enough times: restart it.
    pub liveness_failed: bool,
    /// When the next probe of this container is due.
    pub next_due: Option<Instant>,
}

fn probe_of(container: &Container, kind: ProbeKind) -> Option<&Probe> {
    match kind {
        ProbeKind::Startup => container.startup_probe.as_ref(),
        ProbeKind::Liveness => container.liveness_probe.as_ref(),
        ProbeKind::Readiness => container.readiness_probe.as_ref(),
    }
}

fn secs(v: Option<i32>, default: i32) -> Duration {
    Duration::from_secs(u64::try_from(v.unwrap_or(default).max(0)).unwrap_or(0))
}

impl ProbeResults {
    /// Runs the probes of a running container that are due and returns its
    /// health. `running_for` is how long ago the container started.
    pub(crate) async fn check(
        &mut self,
        runtime: &dyn Runtime,
        container: &Container,
        container_id: &str,
        pod_ip: &str,
        running_for: Duration,
    ) -> ContainerHealth {
        let now = Instant::now();
        let target = Target {
            runtime,
            container,
            container_id,
            pod_ip,
            running_for,
            now,
        };
        let mut next_due: Option<Instant> = None;
        let mut started = true;
        if let Some(result) = self.probe(&target, ProbeKind::Startup).await {
            started = result == Some(true);
            if !started {
                next_due = self.due(container_id, ProbeKind::Startup);
            }
        }
        let mut ready = started;
        let mut liveness_failed = false;
        if started {
            if let Some(result) = self.probe(&target, ProbeKind::Liveness).await {
                liveness_failed = result == Some(false);
                next_due = min_opt(next_due, self.due(container_id, ProbeKind::Liveness));
            }
            if let Some(result) = self.probe(&target, ProbeKind::Readiness).await {
                ready = result == Some(true);
                next_due = min_opt(next_due, self.due(container_id, ProbeKind::Readiness));
            }
        }
        ContainerHealth {
            started,
            ready,
            liveness_failed,
            next_due,
        }
    }

    /// Runs the container's `kind` probe when it is due: `None` when the
    /// container has no such probe, else the probe's latest result (`None`
    /// while it has none).
    async fn probe(&mut self, target: &Target<'_>, kind: ProbeKind) -> Option<Option<bool>> {
        let (probe, due) = self.tracker(
            target.container,
            target.container_id,
            target.running_for,
            target.now,
            kind,
        )?;
        Some(self.run_if_due(target, kind, &probe, due).await)
    }

    fn tracker(
        &mut self,
        container: &Container,
        container_id: &str,
        running_for: Duration,
        now: Instant,
        kind: ProbeKind,
    ) -> Option<(Probe, Instant)> {
        let probe = probe_of(container, kind)?;
        let initial = secs(probe.initial_delay_seconds, 0);
        let start_at = now + initial.saturating_sub(running_for);
        let tracker = self
            .trackers
            .entry((container_id.to_string(), kind))
            .or_insert(Tracker {
                next_due: start_at,
                successes: 0,
                failures: 0,
                result: None,
            });
        Some((probe.clone(), tracker.next_due))
    }

    fn due(&self, id: &str, kind: ProbeKind) -> Option<Instant> {
        self.trackers
            .get(&(id.to_string(), kind))
            .map(|t| t.next_due)
    }

    async fn run_if_due(
        &mut self,
        target: &Target<'_>,
        kind: ProbeKind,
        probe: &Probe,
        due: Instant,
    ) -> Option<bool> {
        let key = (target.container_id.to_string(), kind);
        if target.now >= due {
            let ok = run_probe(target.runtime, probe, target.container_id, target.pod_ip).await;
            let success_threshold = probe.success_threshold.unwrap_or(1).max(1);
            let failure_threshold = probe.failure_threshold.unwrap_or(3).max(1);
            let period = secs(probe.period_seconds, 10).max(Duration::from_secs(1));
            if let Some(t) = self.trackers.get_mut(&key) {
                t.next_due = Instant::now() + period;
                if ok {
                    t.successes += 1;
                    t.failures = 0;
                    if t.successes >= success_threshold {
                        t.result = Some(true);
                    }
                } else {
                    t.failures += 1;
                    t.successes = 0;
                    if t.failures >= failure_threshold {
                        t.result = Some(false);
                    }
                }
            }
        }
        let result = self.trackers.get(&key).and_then(|t| t.result);
        // A startup probe that passed is never run again.
        if kind == ProbeKind::Startup
            && result == Some(true)
            && let Some(t) = self.trackers.get_mut(&key)
        {
            t.next_due = target.now + Duration::from_secs(3600 * 24 * 365);
        }
        result
    }

    /// Forgets containers that no longer run.
    pub(crate) fn retain(&mut self, live_ids: &[&str]) {
        self.trackers
            .retain(|(id, _), _| live_ids.contains(&id.as_str()));
    }
}

/// The container instance one round of probes is about.
struct Target<'a> {
    runtime: &'a dyn Runtime,
    container: &'a Container,
    container_id: &'a str,
    pod_ip: &'a str,
    running_for: Duration,
    now: Instant,
}

fn min_opt(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// One probe attempt: true on success.
pub(crate) async fn run_probe(
    runtime: &dyn Runtime,
    probe: &Probe,
    container_id: &str,
    pod_ip: &str,
) -> bool {
    let timeout = secs(probe.timeout_seconds, 1).max(Duration::from_secs(1));
    if let Some(exec) = &probe.exec {
        let cmd = exec.command.clone().unwrap_or_default();
        return matches!(
            runtime.exec_sync(container_id, &cmd, timeout).await,
            Ok(out) if out.exit_code == 0
        );
    }
    if let Some(http) = &probe.http_get {
        return tokio::time::timeout(timeout, http_get(http, pod_ip))
            .await
            .unwrap_or(false);
    }
    if let Some(tcp) = &probe.tcp_socket {
        let host = tcp.host.clone().unwrap_or_else(|| pod_ip.to_string());
        let Some(port) = port_number(&tcp.port) else {
            return false;
        };
        return matches!(
            tokio::time::timeout(
                timeout,
                tokio::net::TcpStream::connect((host.as_str(), port))
            )
            .await,
            Ok(Ok(_))
        );
    }
    // gRPC probes are not supported: report failure rather than pretend.
    false
}

fn port_number(port: &IntOrString) -> Option<u16> {
    match port {
        IntOrString::Int(p) => u16::try_from(*p).ok(),
        // Named ports are resolved by the caller's spec; numbers as text work.
        IntOrString::String(s) => s.parse().ok(),
    }
}

/// An HTTP/1.1 GET; 200-399 is success.
async fn http_get(action: &HTTPGetAction, pod_ip: &str) -> bool {
    let host = action.host.clone().unwrap_or_else(|| pod_ip.to_string());
    let Some(port) = port_number(&action.port) else {
        return false;
    };
    let Ok(mut stream) = tokio::net::TcpStream::connect((host.as_str(), port)).await else {
        return false;
    };
    let path = action.path.clone().unwrap_or_else(|| "/".to_string());
    let mut request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: skiff-probe/1\r\nConnection: close\r\n"
    );
    for h in action.http_headers.iter().flatten() {
        request.push_str(&format!("{}: {}\r\n", h.name, h.value));
    }
    request.push_str("\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut head = [0u8; 64];
    let mut read = 0;
    while read < 12 {
        match stream.read(&mut head[read..]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n,
        }
    }
    let text = String::from_utf8_lossy(&head[..read]);
    text.split_whitespace()
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok())
        .is_some_and(|code| (200..400).contains(&code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn http_probe_reads_the_status_code() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            for code in ["200 OK", "500 Oops"] {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = [0u8; 512];
                let _ = s.read(&mut buf).await;
                let _ = s
                    .write_all(format!("HTTP/1.1 {code}\r\nContent-Length: 0\r\n\r\n").as_bytes())
                    .await;
            }
        });
        let action = HTTPGetAction {
            port: IntOrString::Int(i32::from(port)),
            path: Some("/healthz".into()),
            ..Default::default()
        };
        assert!(http_get(&action, "127.0.0.1").await);
        assert!(!http_get(&action, "127.0.0.1").await);
    }
}
