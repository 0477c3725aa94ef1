//! Startup, liveness and readiness probes (exec, httpGet, tcpSocket, grpc) with
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
    /// `on_failure` hears of each attempt that did not pass (a kubelet
    /// reports each as an `Unhealthy` event).
    pub(crate) async fn check(
        &mut self,
        runtime: &dyn Runtime,
        container: &Container,
        container_id: &str,
        pod_ip: &str,
        running_for: Duration,
        on_failure: &(dyn Fn(ProbeKind, &Missed) + Sync),
    ) -> ContainerHealth {
        let now = Instant::now();
        let target = Target {
            runtime,
            on_failure,
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
            let outcome = run_probe(
                target.runtime,
                probe,
                target.container,
                target.container_id,
                target.pod_ip,
            )
            .await;
            if let Err(missed) = &outcome {
                (target.on_failure)(kind, missed);
            }
            let success_threshold = probe.success_threshold.unwrap_or(1).max(1);
            let failure_threshold = probe.failure_threshold.unwrap_or(3).max(1);
            let period = secs(probe.period_seconds, 10).max(Duration::from_secs(1));
            if let Some(t) = self.trackers.get_mut(&key) {
                t.next_due = Instant::now() + period;
                match outcome {
                    Ok(()) => {
                        t.successes += 1;
                        t.failures = 0;
                        if t.successes >= success_threshold {
                            t.result = Some(true);
                        }
                    }
                    Err(Missed::Failed(_)) => {
                        t.failures += 1;
                        t.successes = 0;
                        if t.failures >= failure_threshold {
                            t.result = Some(false);
                        }
                    }
                    // An attempt that could not be made says nothing of the
                    // container: upstream's kubelet throws its result away.
                    Err(Missed::Errored(_)) => {}
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
    /// Told of each failed attempt: which probe, and what it saw.
    on_failure: &'a (dyn Fn(ProbeKind, &Missed) + Sync),
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

/// The runtime gave up on the command at the probe's timeout (containerd
/// answers `DeadlineExceeded`), or skiff's own call deadline passed.
fn timed_out(e: &crate::runtime::RuntimeError) -> bool {
    matches!(e, crate::runtime::RuntimeError::Cri(c) if c.code() == tonic::Code::DeadlineExceeded)
}

/// What a kubelet (its CRI client) says of an exec probe that timed out:
/// `command timed out: "sleep 5" timed out after 1s`.
fn exec_timed_out(cmd: &[String], timeout: Duration) -> String {
    format!(
        "command timed out: {} timed out after {}",
        skiff_common::quote::go_quote(&cmd.join(" ")),
        super::backoff::go_duration(timeout)
    )
}

/// A probe attempt that did not pass, with what it saw in a kubelet's
/// words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Missed {
    /// The check ran and failed: it counts toward the failure threshold.
    Failed(String),
    /// The check could not be run (the runtime refused the exec, say its
    /// command is not in the image): it counts neither way.
    Errored(String),
}

impl Missed {
    /// The `Unhealthy` event's message, as upstream's prober words it;
    /// `probe` is `Liveness`, `Readiness` or `Startup`.
    pub(crate) fn message(&self, probe: &str) -> String {
        match self {
            Self::Failed(seen) => format!("{probe} probe failed: {seen}"),
            Self::Errored(error) => {
                format!("{probe} probe errored and resulted in unknown state: {error}")
            }
        }
    }
}

/// One probe attempt on `container`.
async fn run_probe(
    runtime: &dyn Runtime,
    probe: &Probe,
    container: &Container,
    container_id: &str,
    pod_ip: &str,
) -> Result<(), Missed> {
    let timeout = secs(probe.timeout_seconds, 1).max(Duration::from_secs(1));
    if let Some(exec) = &probe.exec {
        let cmd = exec.command.clone().unwrap_or_default();
        return match runtime.exec_sync(container_id, &cmd, timeout).await {
            Ok(out) if out.exit_code == 0 => Ok(()),
            Ok(out) => {
                let mut seen = String::from_utf8_lossy(&out.stdout).into_owned();
                seen.push_str(&String::from_utf8_lossy(&out.stderr));
                Err(Missed::Failed(seen))
            }
            Err(e) if timed_out(&e) => Err(Missed::Failed(exec_timed_out(&cmd, timeout))),
            Err(e) => Err(Missed::Errored(super::cri_text::grpc_error(&e))),
        };
    }
    other_probe(probe, container, pod_ip, timeout)
        .await
        .map_err(Missed::Failed)
}

/// An HTTP, TCP or gRPC probe attempt: what it saw when it failed.
async fn other_probe(
    probe: &Probe,
    container: &Container,
    pod_ip: &str,
    timeout: Duration,
) -> Result<(), String> {
    if let Some(http) = &probe.http_get {
        let port = container_port(&http.port, container).ok_or_else(|| no_port(&http.port))?;
        return match tokio::time::timeout(timeout, http_get(http, port, pod_ip)).await {
            Ok(Ok(code)) if (200..400).contains(&code) => Ok(()),
            Ok(Ok(code)) => Err(format!("HTTP probe failed with statuscode: {code}")),
            Ok(Err(seen)) => Err(seen),
            Err(_) => Err(format!(
                "Get \"{}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
                http_url(http, port, pod_ip)
            )),
        };
    }
    if let Some(tcp) = &probe.tcp_socket {
        let host = tcp.host.clone().unwrap_or_else(|| pod_ip.to_string());
        let port = container_port(&tcp.port, container).ok_or_else(|| no_port(&tcp.port))?;
        let dialed = tokio::time::timeout(
            timeout,
            tokio::net::TcpStream::connect((host.as_str(), port)),
        )
        .await;
        return match dialed {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("dial tcp {host}:{port}: connect: {}", io_words(&e))),
            Err(_) => Err(format!("dial tcp {host}:{port}: i/o timeout")),
        };
    }
    if let Some(grpc) = &probe.grpc {
        let port = u16::try_from(grpc.port).map_err(|_| format!("invalid port: {}", grpc.port))?;
        let service = grpc.service.as_deref().unwrap_or_default();
        return super::grpc_probe::check(pod_ip, port, service, timeout).await;
    }
    Err("the probe names no handler".to_owned())
}

fn no_port(port: &IntOrString) -> String {
    match port {
        IntOrString::String(name) => format!("couldn't find port: {name} in the container"),
        IntOrString::Int(p) => format!("invalid port: {p}"),
    }
}

/// An I/O error as Go's net package words the common ones.
fn io_words(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".to_owned(),
        std::io::ErrorKind::ConnectionReset => "connection reset by peer".to_owned(),
        _ => e.to_string(),
    }
}

fn http_url(action: &HTTPGetAction, port: u16, pod_ip: &str) -> String {
    let host = action.host.clone().unwrap_or_else(|| pod_ip.to_string());
    let scheme = action
        .scheme
        .as_deref()
        .unwrap_or("HTTP")
        .to_ascii_lowercase();
    let path = action.path.as_deref().unwrap_or("/");
    format!("{scheme}://{host}:{port}{path}")
}

/// The port a probe or hook names: a number, or the name of one of the
/// container's own ports (`port: http`), as upstream resolves it; `None`
/// when no port of the container has that name.
pub(crate) fn container_port(port: &IntOrString, container: &Container) -> Option<u16> {
    match port {
        IntOrString::Int(p) => u16::try_from(*p).ok(),
        IntOrString::String(name) => container
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .and_then(|p| u16::try_from(p.container_port).ok()),
    }
}

/// An HTTP/1.1 GET to `port` (already resolved): the response's status
/// code, or what went wrong on the way, in a kubelet's words.
pub(crate) async fn http_get(
    action: &HTTPGetAction,
    port: u16,
    pod_ip: &str,
) -> Result<u16, String> {
    let host = action.host.clone().unwrap_or_else(|| pod_ip.to_string());
    let failed = |what: String| format!("Get \"{}\": {what}", http_url(action, port, pod_ip));
    let mut stream = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| failed(format!("dial tcp {host}:{port}: connect: {}", io_words(&e))))?;
    let path = action.path.clone().unwrap_or_else(|| "/".to_string());
    let mut request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: kube-probe/1.33\r\nConnection: close\r\n"
    );
    for h in action.http_headers.iter().flatten() {
        request.push_str(&format!("{}: {}\r\n", h.name, h.value));
    }
    request.push_str("\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| failed(io_words(&e)))?;
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
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(|| failed("malformed HTTP response".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exec_probe_that_times_out_says_so_as_a_kubelet_does() {
        let late = crate::runtime::RuntimeError::Cri(crate::CriError::Rpc {
            method: "ExecSync",
            code: tonic::Code::DeadlineExceeded,
            message: "timeout 1s exceeded: context deadline exceeded".into(),
        });
        assert!(timed_out(&late));
        assert!(!timed_out(&crate::runtime::RuntimeError::Failed(
            "no".into()
        )));
        let cmd = ["sh".to_string(), "-c".to_string(), "sleep 5".to_string()];
        assert_eq!(
            exec_timed_out(&cmd, Duration::from_secs(1)),
            r#"command timed out: "sh -c sleep 5" timed out after 1s"#
        );
    }

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
        assert_eq!(http_get(&action, port, "127.0.0.1").await, Ok(200));
        assert_eq!(http_get(&action, port, "127.0.0.1").await, Ok(500));
    }

    #[test]
    fn a_named_port_is_the_containers_port_of_that_name() {
        let container: Container = serde_json::from_value(serde_json::json!({
            "name": "web",
            "ports": [{"name": "metrics", "containerPort": 9090},
                      {"name": "http", "containerPort": 8080}]
        }))
        .unwrap();
        let port = |p: IntOrString| container_port(&p, &container);
        assert_eq!(port(IntOrString::String("http".into())), Some(8080));
        assert_eq!(port(IntOrString::Int(81)), Some(81));
        assert_eq!(port(IntOrString::String("admin".into())), None);
    }
}
