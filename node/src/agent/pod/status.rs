//! The pod status the agent reports: phase, conditions, container statuses
//! with state and last state, IPs, start time and QoS class — computed from
//! what the runtime shows plus what the worker knows (waiting reasons,
//! probe results).

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodSpec, PodStatus,
    ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::probes::ContainerHealth;
use super::runtime_view::{ContainerInstance, PodRuntimeView};
use skiff_common::containers::is_sidecar;
use skiff_common::quote::go_quote;

/// What the worker observed in its last sync, beyond the runtime's view.
#[derive(Debug, Default, Clone)]
pub(crate) struct Observed {
    /// The sandbox's address.
    pub pod_ip: Option<String>,
    /// The sandbox is ready.
    pub sandbox_ready: bool,
    /// Containers not running, with why (reason, message).
    pub waiting: HashMap<String, (String, String)>,
    /// Exited containers that will be started again.
    pub will_restart: HashSet<String>,
    /// Probe verdicts of running containers, by name.
    pub health: HashMap<String, ContainerHealth>,
    /// Every init container completed.
    pub initialized: bool,
    /// An init container failed for good.
    pub init_failed: bool,
    /// The pod was stopped for good (deleted): nothing of it runs again, so
    /// the phase is terminal and every container that ran reads terminated,
    /// as upstream's kubelet reports a pod it killed.
    pub terminal: bool,
    /// The node stopped the pod for good on its own (it ran past its
    /// `activeDeadlineSeconds`, it was evicted): it failed, with why.
    pub stopped: Option<NodeStop>,
    /// Where an in-place resize stands, if one is pending or under way.
    pub resize: Option<super::resize::ResizeStatus>,
}

/// Why the node itself stopped a pod for good, in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeStop {
    /// The pod status's reason.
    pub reason: &'static str,
    /// The pod status's message.
    pub message: String,
    /// Whether the pod also gets the `DisruptionTarget` condition
    /// (`TerminationByKubelet`), as an evicted pod does.
    pub disruption: bool,
}

impl NodeStop {
    /// A pod stopped at its `activeDeadlineSeconds`.
    pub(crate) fn deadline_exceeded() -> Self {
        Self {
            reason: "DeadlineExceeded",
            message: "Pod was active on the node longer than the specified deadline".into(),
            disruption: false,
        }
    }

    /// A pod evicted to relieve the node's pressure, saying why.
    pub(crate) fn evicted(message: String) -> Self {
        Self {
            reason: EVICTED,
            message,
            disruption: true,
        }
    }
}

/// The reason of a pod the node evicted, or refused under pressure.
pub(crate) const EVICTED: &str = "Evicted";

/// Upstream's reason and message for a container of a terminated pod whose
/// end the runtime cannot show (never exited, or already removed).
const STATUS_UNKNOWN: (&str, &str) = (
    "ContainerStatusUnknown",
    "The container could not be located when the pod was terminated",
);
/// The exit code upstream reports with [`STATUS_UNKNOWN`] (as if killed).
const STATUS_UNKNOWN_EXIT: i32 = 137;

/// Nanoseconds since the epoch (CRI) as an API time; `None` for zero.
pub(crate) fn time_from_nanos(nanos: i64) -> Option<Time> {
    if nanos <= 0 {
        return None;
    }
    Timestamp::from_nanosecond(i128::from(nanos)).ok().map(Time)
}

/// 1970-01-01T00:00:00Z.
fn unix_epoch() -> Time {
    Time(Timestamp::UNIX_EPOCH)
}

/// The most of a termination message file kept (upstream's limit).
const TERMINATION_MESSAGE_BYTES: u64 = 4096;
/// What `FallbackToLogsOnError` takes of the log: the last lines, at most
/// so many bytes of them (upstream's limits).
const FALLBACK_LOG_LINES: usize = 80;
const FALLBACK_LOG_BYTES: usize = 2048;

/// What a container left in its termination message file (mounted at its
/// `terminationMessagePath`), or with `FallbackToLogsOnError` and a failure
/// the end of its log when it left nothing there, as a kubelet reads it.
fn termination_message(c: &ContainerInstance, spec: &Container) -> String {
    use std::io::Read;
    let s = &c.status;
    let written = spec
        .termination_message_path
        .as_deref()
        .filter(|p| !p.is_empty())
        .and_then(|path| s.mounts.iter().find(|m| m.container_path == path))
        .and_then(|m| std::fs::File::open(&m.host_path).ok())
        .map(|file| {
            let mut text = Vec::new();
            let _ = file.take(TERMINATION_MESSAGE_BYTES).read_to_end(&mut text);
            String::from_utf8_lossy(&text).into_owned()
        })
        .unwrap_or_default();
    let fallback = spec.termination_message_policy.as_deref() == Some("FallbackToLogsOnError")
        && s.exit_code != 0
        && s.reason != "ContainerCannotRun";
    if !written.is_empty() || !fallback {
        return written;
    }
    let Ok(raw) = std::fs::read(&s.log_path) else {
        return String::new();
    };
    let options = super::logs::LogOptions {
        tail_lines: Some(FALLBACK_LOG_LINES),
        ..Default::default()
    };
    let tail = super::logs::render(&raw, &options);
    let start = tail.len().saturating_sub(FALLBACK_LOG_BYTES);
    String::from_utf8_lossy(&tail[start..]).into_owned()
}

fn terminated_state(c: &ContainerInstance, spec: &Container) -> ContainerStateTerminated {
    let s = &c.status;
    let mut message = s.message.clone();
    let left = termination_message(c, spec);
    if !left.is_empty() {
        if !message.is_empty() {
            message.push_str(": ");
        }
        message.push_str(&left);
    }
    let reason = if !s.reason.is_empty() && s.reason != "Completed" && s.reason != "Error" {
        s.reason.clone()
    } else if s.exit_code == 0 {
        "Completed".to_string()
    } else {
        "Error".to_string()
    };
    ContainerStateTerminated {
        exit_code: s.exit_code,
        reason: Some(reason),
        message: Some(message).filter(|m| !m.is_empty()),
        // A container whose start failed never started: upstream reports
        // its start as the zero of Unix time (1970-01-01T00:00:00Z), as
        // the runtime gives it, not as absent.
        started_at: Some(time_from_nanos(s.started_at).unwrap_or_else(unix_epoch)),
        finished_at: time_from_nanos(s.finished_at),
        container_id: Some(format!("containerd://{}", c.id)),
        signal: None,
    }
}

fn container_status(
    spec: &Container,
    view: &PodRuntimeView,
    observed: &Observed,
    default_waiting: &str,
    previous: Option<&ContainerStatus>,
) -> ContainerStatus {
    let latest = view.latest(&spec.name);
    let health = observed.health.get(&spec.name);
    let waiting = observed.waiting.get(&spec.name);
    let mut status = ContainerStatus {
        name: spec.name.clone(),
        image: spec.image.clone().unwrap_or_default(),
        image_id: String::new(),
        restart_count: latest.map_or(0, |c| i32::try_from(c.restart_count).unwrap_or(i32::MAX)),
        started: Some(false),
        ready: false,
        ..Default::default()
    };
    let waiting_state = |reason: &str, message: Option<&str>| ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.to_string()),
            message: message.map(str::to_string).filter(|m| !m.is_empty()),
        }),
        ..Default::default()
    };
    match latest {
        Some(c) => {
            status.container_id = Some(format!("containerd://{}", c.id));
            status.image_id = c.status.image_ref.clone();
            if c.is_running() {
                // Before its probes first report, a container with a
                // startup or readiness probe is not ready (as upstream): only
                // a container without them is ready as soon as it runs.
                let started = spec.startup_probe.is_none();
                let h = health.copied().unwrap_or(ContainerHealth {
                    started,
                    ready: started && spec.readiness_probe.is_none(),
                    liveness_failed: false,
                    next_due: None,
                });
                status.started = Some(h.started);
                status.ready = h.ready;
                status.state = Some(ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: time_from_nanos(c.status.started_at),
                    }),
                    ..Default::default()
                });
                if let Some(prev) = view.previous(&spec.name).filter(|p| p.is_exited()) {
                    status.last_state = Some(ContainerState {
                        terminated: Some(terminated_state(prev, spec)),
                        ..Default::default()
                    });
                }
            } else if c.is_exited() {
                let terminated = ContainerState {
                    terminated: Some(terminated_state(c, spec)),
                    ..Default::default()
                };
                if observed.will_restart.contains(&spec.name) || waiting.is_some() {
                    let (reason, message) = waiting
                        .map(|(r, m)| (r.as_str(), Some(m.as_str())))
                        .unwrap_or(("ContainerCreating", None));
                    status.state = Some(waiting_state(reason, message));
                    status.last_state = Some(terminated);
                } else {
                    status.state = Some(terminated);
                    if let Some(prev) = view.previous(&spec.name).filter(|p| p.is_exited()) {
                        status.last_state = Some(ContainerState {
                            terminated: Some(terminated_state(prev, spec)),
                            ..Default::default()
                        });
                    }
                }
            } else {
                let (reason, message) = waiting
                    .map(|(r, m)| (r.as_str(), Some(m.as_str())))
                    .unwrap_or(("ContainerCreating", None));
                status.state = Some(waiting_state(reason, message));
            }
        }
        None => {
            let (reason, message) = waiting
                .map(|(r, m)| (r.as_str(), Some(m.as_str())))
                .unwrap_or((default_waiting, None));
            status.state = Some(waiting_state(reason, message));
        }
    }
    if observed.terminal {
        terminate(&mut status, latest.is_some(), previous);
    }
    // `spec` is the container as the node runs it: its allocated resources
    // (see `resize`), what upstream reports as both.
    if let Some(resources) = spec.resources.as_ref().filter(|r| {
        r.requests.as_ref().is_some_and(|m| !m.is_empty())
            || r.limits.as_ref().is_some_and(|m| !m.is_empty())
    }) {
        status.allocated_resources = resources.requests.clone().filter(|m| !m.is_empty());
        status.resources = Some(ResourceRequirements {
            requests: resources.requests.clone(),
            limits: resources.limits.clone(),
            ..Default::default()
        });
    }
    status
}

/// The state of a container of a pod stopped for good: terminated. The
/// runtime's exit wins; else what was reported before, when that was already
/// a termination (the containers may be gone by now, on a repeated report);
/// else, for a container that ran (`ran`) or was running, upstream's
/// "status unknown" termination. A container that never started keeps its
/// waiting state.
fn terminate(status: &mut ContainerStatus, ran: bool, previous: Option<&ContainerStatus>) {
    let state = status.state.get_or_insert_with(Default::default);
    if state.terminated.is_some() {
        return;
    }
    let before = previous.and_then(|p| p.state.as_ref());
    if let Some(t) = before.and_then(|s| s.terminated.clone()) {
        *state = ContainerState {
            terminated: Some(t),
            ..Default::default()
        };
        return;
    }
    let was_running = before.and_then(|s| s.running.as_ref()).is_some();
    if ran || was_running {
        *state = ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: STATUS_UNKNOWN_EXIT,
                reason: Some(STATUS_UNKNOWN.0.to_string()),
                message: Some(STATUS_UNKNOWN.1.to_string()),
                container_id: status.container_id.clone(),
                ..Default::default()
            }),
            ..Default::default()
        };
    }
    status.ready = false;
    status.started = Some(false);
}

/// The phase from the container statuses, as upstream derives it.
fn phase(statuses: &[ContainerStatus], observed: &Observed) -> &'static str {
    if observed.init_failed {
        return "Failed";
    }
    if observed.terminal {
        // Upstream: a stopped pod succeeded only if every container ended
        // with 0; anything else (never initialized, killed, unknown) failed.
        let succeeded = observed.initialized
            && statuses.iter().all(|s| {
                s.state
                    .as_ref()
                    .and_then(|st| st.terminated.as_ref())
                    .is_some_and(|t| t.exit_code == 0)
            });
        return if succeeded { "Succeeded" } else { "Failed" };
    }
    if !observed.initialized {
        return "Pending";
    }
    let (mut waiting, mut running, mut succeeded, mut failed, mut restarting) = (0, 0, 0, 0, 0);
    for s in statuses {
        let state = s.state.as_ref();
        if state.and_then(|st| st.running.as_ref()).is_some() {
            running += 1;
        } else if let Some(t) = state.and_then(|st| st.terminated.as_ref()) {
            if t.exit_code == 0 {
                succeeded += 1;
            } else {
                failed += 1;
            }
        } else if s
            .last_state
            .as_ref()
            .and_then(|l| l.terminated.as_ref())
            .is_some()
        {
            restarting += 1;
        } else {
            waiting += 1;
        }
    }
    if waiting > 0 {
        "Pending"
    } else if running > 0 || restarting > 0 {
        "Running"
    } else if failed > 0 {
        "Failed"
    } else if succeeded > 0 {
        "Succeeded"
    } else {
        "Pending"
    }
}

fn find_status<'a>(
    statuses: Option<&'a [ContainerStatus]>,
    name: &str,
) -> Option<&'a ContainerStatus> {
    statuses.into_iter().flatten().find(|s| s.name == name)
}

/// Whether `status` has the condition `type_` with status True.
pub(crate) fn condition_is_true(status: Option<&PodStatus>, type_: &str) -> bool {
    status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// Whether every readiness gate of `spec` is a True condition in `status`: others
/// set those conditions, and the pod is not Ready before they have. The agent and
/// the simulated nodes judge readiness gates this one way.
pub(crate) fn readiness_gates_hold(spec: &PodSpec, status: Option<&PodStatus>) -> bool {
    spec.readiness_gates
        .iter()
        .flatten()
        .all(|g| condition_is_true(status, &g.condition_type))
}

/// What the readiness conditions' reasons and messages are made of.
struct ReadinessFacts<'a> {
    spec: &'a PodSpec,
    init_statuses: &'a [ContainerStatus],
    statuses: &'a [ContainerStatus],
    previous: &'a PodStatus,
    phase: &'a str,
}

/// Names as Go prints a `[]string` with `%s`: `[a b]`.
fn go_list(names: &[&str]) -> String {
    format!("[{}]", names.join(" "))
}

impl ReadinessFacts<'_> {
    /// `ContainersReady`'s (and so `Ready`'s) reason and message when it is
    /// False, as upstream's: `PodCompleted` or `PodFailed` once the pod is
    /// over, else `ContainersNotReady` with `containers with unready
    /// status: [a b]` (sidecars first, then the containers).
    fn containers_not_ready(&self) -> (&'static str, Option<String>) {
        match self.phase {
            "Succeeded" => return ("PodCompleted", None),
            "Failed" => return ("PodFailed", None),
            _ => {}
        }
        let sidecars = self
            .spec
            .init_containers
            .iter()
            .flatten()
            .zip(self.init_statuses)
            .filter(|(c, _)| is_sidecar(c))
            .map(|(_, s)| s);
        let unready: Vec<&str> = sidecars
            .chain(self.statuses)
            .filter(|s| !s.ready)
            .map(|s| s.name.as_str())
            .collect();
        let message = (!unready.is_empty())
            .then(|| format!("containers with unready status: {}", go_list(&unready)));
        ("ContainersNotReady", message)
    }

    /// `Ready`'s reason and message when the containers are ready but a
    /// readiness gate is not: `ReadinessGatesNotReady`, each gate said as
    /// upstream says it.
    fn gates_not_ready(&self) -> (Option<&'static str>, Option<String>) {
        let said: Vec<String> = self
            .spec
            .readiness_gates
            .iter()
            .flatten()
            .filter_map(|g| {
                let gate = &g.condition_type;
                let found = self
                    .previous
                    .conditions
                    .iter()
                    .flatten()
                    .find(|c| &c.type_ == gate);
                match found {
                    None => Some(format!(
                        "corresponding condition of pod readiness gate {} does not exist.",
                        go_quote(gate)
                    )),
                    Some(c) if c.status != "True" => Some(format!(
                        "the status of pod readiness gate {} is not \"True\", but {}",
                        go_quote(gate),
                        c.status
                    )),
                    Some(_) => None,
                }
            })
            .collect();
        if said.is_empty() {
            (None, None)
        } else {
            (Some("ReadinessGatesNotReady"), Some(said.join(", ")))
        }
    }

    /// `Initialized`'s reason and message: `PodCompleted` for a pod that
    /// succeeded; while init containers have yet to finish (or a sidecar
    /// to start), `ContainersNotInitialized` with `containers with
    /// incomplete status: [a]`.
    fn initialized(&self, initialized: bool) -> (Option<&'static str>, Option<String>) {
        if self.phase == "Succeeded" {
            return (Some("PodCompleted"), None);
        }
        if initialized {
            return (None, None);
        }
        let incomplete: Vec<&str> = self
            .spec
            .init_containers
            .iter()
            .flatten()
            .zip(self.init_statuses)
            .filter(|(c, s)| {
                if is_sidecar(c) {
                    s.started != Some(true)
                } else {
                    let done = s.state.as_ref().and_then(|st| st.terminated.as_ref());
                    done.is_none_or(|t| t.exit_code != 0)
                }
            })
            .map(|(c, _)| c.name.as_str())
            .collect();
        let message = (!incomplete.is_empty()).then(|| {
            format!(
                "containers with incomplete status: {}",
                go_list(&incomplete)
            )
        });
        (Some("ContainersNotInitialized"), message)
    }
}

/// The pod's status. Conditions keep their transition times when their
/// status does not change; conditions owned by others are kept.
/// The condition of a resize not admitted (`Infeasible`, `Deferred`).
const RESIZE_PENDING: &str = "PodResizePending";
/// The condition of a resize admitted and not yet applied.
const RESIZE_IN_PROGRESS: &str = "PodResizeInProgress";

/// Upstream's condition for where a resize stands; none once there is no
/// resize left to apply.
fn resize_condition(
    resize: Option<&super::resize::ResizeStatus>,
    previous: &PodStatus,
    now: &Time,
) -> Option<PodCondition> {
    use super::resize::ResizeStatus;
    let (type_, reason, message) = match resize? {
        ResizeStatus::Pending { reason, message } => {
            (RESIZE_PENDING, Some(reason.clone()), Some(message.clone()))
        }
        ResizeStatus::InProgress { error } => (
            RESIZE_IN_PROGRESS,
            error.as_ref().map(|_| "Error".to_string()),
            error.clone(),
        ),
    };
    let old = (previous.conditions.iter().flatten()).find(|c| c.type_ == type_);
    let transition = match old {
        Some(o) if o.reason == reason => o.last_transition_time.clone(),
        _ => Some(now.clone()),
    };
    Some(PodCondition {
        type_: type_.to_string(),
        status: "True".to_string(),
        reason,
        message,
        last_transition_time: transition,
        ..Default::default()
    })
}

pub(crate) fn pod_status(
    pod: &Pod,
    view: &PodRuntimeView,
    observed: &Observed,
    host_ip: &str,
) -> PodStatus {
    let now = Time(Timestamp::now());
    let previous = pod.status.clone().unwrap_or_default();
    let spec = pod.spec.clone().unwrap_or_default();
    let init_statuses: Vec<ContainerStatus> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| {
            let before = find_status(previous.init_container_statuses.as_deref(), &c.name);
            container_status(c, view, observed, "PodInitializing", before)
        })
        .collect();
    let default_waiting = if observed.initialized {
        "ContainerCreating"
    } else {
        "PodInitializing"
    };
    let statuses: Vec<ContainerStatus> = spec
        .containers
        .iter()
        .map(|c| {
            let before = find_status(previous.container_statuses.as_deref(), &c.name);
            container_status(c, view, observed, default_waiting, before)
        })
        .collect();
    // Ephemeral containers report how they run, but never as ready: they
    // have no part in the pod's phase or readiness.
    let ephemeral_statuses: Vec<ContainerStatus> = super::ephemeral::of(pod)
        .iter()
        .map(|e| {
            let before = find_status(
                previous.ephemeral_container_statuses.as_deref(),
                &e.container.name,
            );
            let mut status =
                container_status(&e.container, view, observed, "ContainerCreating", before);
            status.ready = false;
            status
        })
        .collect();
    let phase = if observed.stopped.is_some() {
        "Failed"
    } else {
        phase(&statuses, observed)
    };
    let terminal = phase == "Succeeded" || phase == "Failed";
    // Sidecars count as upstream counts them: the pod is ready when its
    // containers and its sidecars are.
    let sidecars_ready = spec
        .init_containers
        .iter()
        .flatten()
        .zip(&init_statuses)
        .filter(|(c, _)| is_sidecar(c))
        .all(|(_, s)| s.ready);
    let containers_ready = !terminal && sidecars_ready && statuses.iter().all(|s| s.ready);
    let gates_ok = readiness_gates_hold(&spec, Some(&previous));
    let bool_text = |b: bool| if b { "True" } else { "False" };
    let readiness = ReadinessFacts {
        spec: &spec,
        init_statuses: &init_statuses,
        statuses: &statuses,
        previous: &previous,
        phase,
    };
    let (containers_reason, containers_message) = readiness.containers_not_ready();
    let (ready_reason, ready_message) = if containers_ready {
        readiness.gates_not_ready()
    } else {
        (Some(containers_reason), containers_message.clone())
    };
    // A pod without init containers is initialized from the start, as
    // upstream's, even while its volumes or sandbox are not there yet.
    let initialized =
        observed.initialized || spec.init_containers.as_ref().is_none_or(|i| i.is_empty());
    let (initialized_reason, initialized_message) = readiness.initialized(initialized);
    let wanted: Vec<(&str, bool, Option<&str>, Option<String>)> = vec![
        (
            "PodReadyToStartContainers",
            observed.sandbox_ready && !terminal,
            None,
            None,
        ),
        (
            "Initialized",
            initialized,
            initialized_reason,
            initialized_message,
        ),
        (
            "Ready",
            containers_ready && gates_ok,
            ready_reason,
            ready_message,
        ),
        (
            "ContainersReady",
            containers_ready,
            Some(containers_reason),
            containers_message,
        ),
        ("PodScheduled", true, None, None),
    ];
    let mut conditions: Vec<PodCondition> = Vec::new();
    for (type_, status, reason, message) in wanted {
        let status = bool_text(status).to_string();
        let old = previous
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == type_);
        let transition = match old {
            Some(o) if o.status == status => o.last_transition_time.clone(),
            _ => Some(now.clone()),
        };
        // Upstream gives a reason to a condition that is False, and to
        // `Initialized` of a pod that succeeded (True, PodCompleted).
        let keep = status == "False" || (type_ == "Initialized" && phase == "Succeeded");
        conditions.push(PodCondition {
            type_: type_.to_string(),
            reason: reason.filter(|_| keep).map(str::to_string),
            message: message.filter(|_| status == "False"),
            status,
            last_transition_time: transition,
            ..Default::default()
        });
    }
    for c in previous.conditions.iter().flatten() {
        let resizing = [RESIZE_PENDING, RESIZE_IN_PROGRESS].contains(&c.type_.as_str());
        if !resizing && !conditions.iter().any(|k| k.type_ == c.type_) {
            conditions.push(c.clone());
        }
    }
    conditions.extend(resize_condition(observed.resize.as_ref(), &previous, &now));
    if let Some(stop) = observed.stopped.as_ref().filter(|s| s.disruption) {
        conditions.retain(|c| c.type_ != "DisruptionTarget");
        conditions.push(PodCondition {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
            reason: Some("TerminationByKubelet".into()),
            message: Some(stop.message.clone()),
            last_transition_time: Some(now.clone()),
            ..Default::default()
        });
    }
    let pod_ip = observed.pod_ip.clone().or(previous.pod_ip.clone());
    PodStatus {
        phase: Some(phase.to_string()),
        reason: observed.stopped.as_ref().map(|s| s.reason.to_owned()),
        message: observed.stopped.as_ref().map(|s| s.message.clone()),
        conditions: Some(conditions),
        host_ip: Some(host_ip.to_string()),
        host_ips: Some(vec![HostIP {
            ip: host_ip.to_string(),
        }]),
        pod_ips: pod_ip.clone().map(|ip| vec![PodIP { ip }]),
        pod_ip,
        start_time: previous.start_time.clone().or(Some(now)),
        qos_class: Some(skiff_common::qos::qos_class(pod).to_string()),
        init_container_statuses: (!init_statuses.is_empty()).then_some(init_statuses),
        container_statuses: Some(statuses),
        ephemeral_container_statuses: (!ephemeral_statuses.is_empty())
            .then_some(ephemeral_statuses),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::cri_api as api;

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "uid": "u"},
            "spec": {"containers": [{"name": "c", "image": "img"}]}
        }))
        .unwrap()
    }

    fn instance(state: api::ContainerState, exit: i32, restart: u32) -> ContainerInstance {
        ContainerInstance {
            id: format!("id{restart}"),
            name: "c".into(),
            restart_count: restart,
            sandbox_id: "sandbox".into(),
            status: api::ContainerStatus {
                state: state as i32,
                exit_code: exit,
                started_at: 1_000_000_000,
                finished_at: if state == api::ContainerState::ContainerExited {
                    2_000_000_000
                } else {
                    0
                },
                ..Default::default()
            },
        }
    }

    fn view(instances: Vec<ContainerInstance>) -> PodRuntimeView {
        PodRuntimeView {
            sandboxes: Vec::new(),
            containers: HashMap::from([("c".to_string(), instances)]),
        }
    }

    #[test]
    fn a_container_whose_start_failed_started_at_the_unix_epoch() {
        let mut failed = instance(api::ContainerState::ContainerExited, 128, 0);
        failed.status.started_at = 0;
        failed.status.reason = "StartError".into();
        let spec = Container {
            name: "c".into(),
            ..Default::default()
        };
        let state = terminated_state(&failed, &spec);
        assert_eq!(state.reason.as_deref(), Some("StartError"));
        let started = serde_json::to_value(&state.started_at).unwrap();
        assert_eq!(started, "1970-01-01T00:00:00Z");
        let ran = terminated_state(&instance(api::ContainerState::ContainerExited, 1, 0), &spec);
        let started = serde_json::to_value(&ran.started_at).unwrap();
        assert_eq!(started, "1970-01-01T00:00:01Z");
    }

    /// What the agent observed of a live pod: sandbox ready, init containers done.
    fn started() -> Observed {
        Observed {
            initialized: true,
            sandbox_ready: true,
            ..Default::default()
        }
    }

    /// What the agent observed of a pod it stopped for good.
    fn terminal() -> Observed {
        Observed {
            terminal: true,
            initialized: true,
            ..Default::default()
        }
    }

    /// The first container's terminated state.
    fn terminated(s: &PodStatus) -> ContainerStateTerminated {
        s.container_statuses.as_ref().unwrap()[0]
            .state
            .clone()
            .unwrap()
            .terminated
            .unwrap()
    }

    /// The pod's condition `type_`.
    fn condition(s: PodStatus, type_: &str) -> PodCondition {
        s.conditions
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == type_)
            .unwrap()
    }

    #[test]
    fn a_container_that_exited_zero_makes_the_pod_succeeded() {
        let observed = started();
        let v = view(vec![instance(api::ContainerState::ContainerExited, 0, 0)]);
        let s = pod_status(&pod(), &v, &observed, "192.0.2.1");
        assert_eq!(s.phase.as_deref(), Some("Succeeded"));
        let t = terminated(&s);
        assert_eq!((t.exit_code, t.reason.as_deref()), (0, Some("Completed")));
    }

    #[test]
    fn a_crash_looping_container_waits_with_its_last_termination() {
        let mut observed = started();
        observed.will_restart.insert("c".into());
        observed.waiting.insert(
            "c".into(),
            ("CrashLoopBackOff".into(), "back-off 10s".into()),
        );
        let v = view(vec![
            instance(api::ContainerState::ContainerExited, 2, 3),
            instance(api::ContainerState::ContainerExited, 2, 2),
        ]);
        let s = pod_status(&pod(), &v, &observed, "192.0.2.1");
        assert_eq!(s.phase.as_deref(), Some("Running"));
        let c = &s.container_statuses.unwrap()[0];
        assert_eq!(c.restart_count, 3);
        assert_eq!(
            c.state
                .as_ref()
                .unwrap()
                .waiting
                .as_ref()
                .unwrap()
                .reason
                .as_deref(),
            Some("CrashLoopBackOff")
        );
        let last = c.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
        assert_eq!((last.exit_code, last.reason.as_deref()), (2, Some("Error")));
    }

    #[test]
    fn readiness_comes_from_probe_health_and_conditions_follow() {
        let mut observed = started();
        observed.health.insert(
            "c".into(),
            ContainerHealth {
                started: true,
                ready: false,
                liveness_failed: false,
                next_due: None,
            },
        );
        let v = view(vec![instance(api::ContainerState::ContainerRunning, 0, 0)]);
        let s = pod_status(&pod(), &v, &observed, "192.0.2.1");
        assert_eq!(s.phase.as_deref(), Some("Running"));
        // Said as upstream says it, on both conditions.
        for type_ in ["Ready", "ContainersReady"] {
            let c = condition(s.clone(), type_);
            assert_eq!(c.status, "False");
            assert_eq!(c.reason.as_deref(), Some("ContainersNotReady"));
            assert_eq!(
                c.message.as_deref(),
                Some("containers with unready status: [c]")
            );
        }
        assert_eq!(condition(s, "Initialized").reason, None);
        // Nothing set up yet, no init containers: initialized all the same.
        let mut early = started();
        early.initialized = false;
        early.sandbox_ready = false;
        let s = pod_status(&pod(), &view(Vec::new()), &early, "192.0.2.1");
        let initialized = condition(s, "Initialized");
        assert_eq!(
            (initialized.status.as_str(), initialized.reason),
            ("True", None)
        );
    }

    #[test]
    fn conditions_say_why_as_upstream_says_it() {
        // Containers ready, a readiness gate not: the gate is named.
        let mut gated = pod();
        gated.spec.as_mut().unwrap().readiness_gates =
            Some(vec![k8s_openapi::api::core::v1::PodReadinessGate {
                condition_type: "example.com/lb".into(),
            }]);
        let v = view(vec![instance(api::ContainerState::ContainerRunning, 0, 0)]);
        let s = pod_status(&gated, &v, &started(), "192.0.2.1");
        assert_eq!(condition(s.clone(), "ContainersReady").status, "True");
        let ready = condition(s, "Ready");
        assert_eq!(ready.reason.as_deref(), Some("ReadinessGatesNotReady"));
        assert_eq!(
            ready.message.as_deref(),
            Some(
                r#"corresponding condition of pod readiness gate "example.com/lb" does not exist."#
            )
        );
        // A pod that succeeded: Initialized stays True, with PodCompleted.
        let done = view(vec![instance(api::ContainerState::ContainerExited, 0, 0)]);
        let s = pod_status(&pod(), &done, &terminal(), "192.0.2.1");
        assert_eq!(s.phase.as_deref(), Some("Succeeded"));
        let initialized = condition(s.clone(), "Initialized");
        assert_eq!(initialized.status, "True");
        assert_eq!(initialized.reason.as_deref(), Some("PodCompleted"));
        assert_eq!(
            condition(s, "Ready").reason.as_deref(),
            Some("PodCompleted")
        );
        // An init container yet to finish is named.
        let mut init = pod();
        init.spec.as_mut().unwrap().init_containers = Some(vec![Container {
            name: "setup".into(),
            ..Default::default()
        }]);
        let mut waiting = started();
        waiting.initialized = false;
        let s = pod_status(&init, &view(Vec::new()), &waiting, "192.0.2.1");
        let initialized = condition(s, "Initialized");
        assert_eq!(initialized.status, "False");
        assert_eq!(
            initialized.reason.as_deref(),
            Some("ContainersNotInitialized")
        );
        assert_eq!(
            initialized.message.as_deref(),
            Some("containers with incomplete status: [setup]")
        );
    }

    #[test]
    fn a_running_container_with_a_readiness_probe_is_not_ready_before_the_probe_reports() {
        let observed = started();
        let mut probed = pod();
        probed.spec.as_mut().unwrap().containers[0].readiness_probe = Some(Default::default());
        let v = view(vec![instance(api::ContainerState::ContainerRunning, 0, 0)]);
        let ready = |p: &Pod| condition(pod_status(p, &v, &observed, "192.0.2.1"), "Ready").status;
        assert_eq!(ready(&probed), "False");
        assert_eq!(
            ready(&pod()),
            "True",
            "without probes it is ready once running"
        );
    }

    #[test]
    fn a_pod_is_ready_only_once_its_sidecars_are() {
        let mut with_sidecar = pod();
        let spec = with_sidecar.spec.as_mut().unwrap();
        spec.init_containers = Some(vec![k8s_openapi::api::core::v1::Container {
            name: "side".into(),
            restart_policy: Some("Always".into()),
            readiness_probe: Some(Default::default()),
            ..Default::default()
        }]);
        let mut side = instance(api::ContainerState::ContainerRunning, 0, 0);
        side.name = "side".into();
        let mut v = view(vec![instance(api::ContainerState::ContainerRunning, 0, 0)]);
        v.containers.insert("side".into(), vec![side]);
        let mut observed = started();
        let ready = |observed: &Observed| {
            condition(
                pod_status(&with_sidecar, &v, observed, "192.0.2.1"),
                "Ready",
            )
            .status
        };
        assert_eq!(
            ready(&observed),
            "False",
            "its readiness probe has not passed"
        );
        observed.health.insert(
            "side".into(),
            ContainerHealth {
                started: true,
                ready: true,
                liveness_failed: false,
                next_due: None,
            },
        );
        assert_eq!(ready(&observed), "True");
        let s = pod_status(&with_sidecar, &v, &observed, "192.0.2.1");
        assert_eq!(s.phase.as_deref(), Some("Running"));
        let side = &s.init_container_statuses.unwrap()[0];
        assert!(side.ready && side.started == Some(true), "{side:?}");
    }

    #[test]
    fn a_never_started_container_is_pending_with_its_reason() {
        let mut observed = started();
        observed.waiting.insert(
            "c".into(),
            ("ErrImageNeverPull".into(), "not present".into()),
        );
        let s = pod_status(&pod(), &view(Vec::new()), &observed, "192.0.2.1");
        assert_eq!(s.phase.as_deref(), Some("Pending"));
        let w = s.container_statuses.unwrap()[0]
            .state
            .clone()
            .unwrap()
            .waiting
            .unwrap();
        assert_eq!(w.reason.as_deref(), Some("ErrImageNeverPull"));
    }

    #[test]
    fn a_killed_pod_fails_with_its_container_terminated() {
        // restartPolicy Always does not keep it Running: it was stopped for good.
        let v = view(vec![instance(api::ContainerState::ContainerExited, 137, 0)]);
        let s = pod_status(&pod(), &v, &terminal(), "192.0.2.1");
        assert_eq!(s.phase.as_deref(), Some("Failed"));
        let t = terminated(&s);
        assert_eq!((t.exit_code, t.reason.as_deref()), (137, Some("Error")));
        // Upstream's reason for a pod that failed (not PodCompleted).
        let ready = condition(s, "Ready");
        assert_eq!(ready.reason.as_deref(), Some("PodFailed"));
        assert_eq!(ready.message, None);
    }

    #[test]
    fn a_stopped_pod_whose_containers_exited_zero_succeeded() {
        let v = view(vec![instance(api::ContainerState::ContainerExited, 0, 0)]);
        let s = pod_status(&pod(), &v, &terminal(), "192.0.2.1");
        assert_eq!(s.phase.as_deref(), Some("Succeeded"));
    }

    #[test]
    fn a_stopped_pod_keeps_reported_exits_and_marks_lost_containers_unknown() {
        let mut p = pod();
        p.status = Some(PodStatus {
            phase: Some("Failed".into()),
            container_statuses: Some(vec![ContainerStatus {
                name: "c".into(),
                state: Some(ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        exit_code: 143,
                        reason: Some("Error".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        });
        // The containers are already removed: the reported exit stays.
        let s = pod_status(&p, &view(Vec::new()), &terminal(), "192.0.2.1");
        assert_eq!(s.phase.as_deref(), Some("Failed"));
        assert_eq!(terminated(&s).exit_code, 143);

        // A container that was running and cannot be found any more.
        let v = view(vec![instance(api::ContainerState::ContainerRunning, 0, 0)]);
        let s = pod_status(&pod(), &v, &terminal(), "192.0.2.1");
        assert_eq!(s.phase.as_deref(), Some("Failed"));
        let t = terminated(&s);
        assert_eq!(
            (t.exit_code, t.reason.as_deref()),
            (137, Some("ContainerStatusUnknown"))
        );
    }

    #[test]
    fn a_stopped_pod_that_never_started_fails_and_its_container_still_waits() {
        let s = pod_status(&pod(), &view(Vec::new()), &terminal(), "192.0.2.1");
        assert_eq!(s.phase.as_deref(), Some("Failed"));
        let state = s.container_statuses.unwrap()[0].state.clone().unwrap();
        assert!(state.waiting.is_some(), "{state:?}");
    }
}
