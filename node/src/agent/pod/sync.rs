//! One step of a pod worker: bring the runtime one step closer to the pod's
//! spec (sandbox, then init containers in order — a sidecar, one with
//! `restartPolicy: Always`, need only have started, and runs on beside the
//! containers — then containers, with back-off and probes), then report the
//! status if it changed. A sandbox
//! that died is replaced once, its containers restarted in the new one by
//! the restart policy, as upstream's kubelet does.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Container, Node, ObjectReference, Pod};
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::Api;
use kube::api::{Patch, PatchParams};
use skiff_common::conditions::without_transition_times;

use super::admission;
use super::backoff::{Backoff, Verdict, go_duration};
use super::container_events::{container_reference, pod_name};
use super::context::AgentContext;
use super::cri_config::{self, ContainerInputs};
use super::cri_text;
use super::env::{self, EnvContext};
use super::ephemeral;
use super::hooks;
use super::hosts_file;
use super::images;
use super::probes::{Missed, ProbeKind, ProbeResults};
use super::resize;
use super::runtime_view::{ContainerInstance, PodRuntimeView};
use super::security;
use super::status::{self, NodeStop, Observed};
use super::termination;
use crate::agent::volumes::{self, VolumeContext};
use crate::runtime::{RuntimeError, cri_api as api};
use skiff_common::containers::is_sidecar;
use skiff_common::events::object_reference;

/// How often a pod is looked at when nothing happens.
const RESYNC: Duration = Duration::from_secs(10);
/// The grace an evicted pod's containers get: a hard threshold does not
/// wait (upstream's immediate eviction grace period).
const EVICTION_GRACE: Duration = Duration::from_secs(1);
/// How long a `postStart` hook may take (upstream sets no limit; the pod's
/// worker waits for it, so one that never ends must not hold it forever).
const POST_START_LIMIT: Duration = Duration::from_secs(120);
/// Retry delay after a failed sandbox or volume set-up.
const SETUP_RETRY: Duration = Duration::from_secs(2);

/// What a worker remembers about its pod between steps.
pub(crate) struct PodState {
    crash: Backoff,
    images: images::PullBackoff,
    probes: ProbeResults,
    volumes: Option<volumes::PreparedVolumes>,
    /// When API-sourced volume content (ConfigMaps, Secrets, the pod's own
    /// fields, service-account tokens) must be read again.
    volumes_refresh: Option<Instant>,
    last_status: Option<serde_json::Value>,
    /// When this agent first saw the pod, until it is reported Running
    /// (`kubelet_pod_start_duration_seconds`).
    first_seen: Option<Instant>,
    /// The node took the pod (or found it already running): it is not
    /// judged again while its worker lives, as a kubelet admits a pod once.
    admitted: bool,
    /// Container instances stopped to take a resize (`RestartContainer`):
    /// started again at once, not after a crash back-off, as a kubelet
    /// restarts them.
    stopped_for_resize: std::collections::HashSet<String>,
}

impl PodState {
    /// Fresh state for a pod (also for an adopted one).
    pub(crate) fn new(ctx: &AgentContext) -> Self {
        Self {
            crash: Backoff::new(ctx.crash_backoff),
            images: images::PullBackoff::new(ctx.image_backoff),
            probes: ProbeResults::default(),
            volumes: None,
            volumes_refresh: None,
            last_status: None,
            first_seen: Some(Instant::now()),
            admitted: false,
            stopped_for_resize: Default::default(),
        }
    }
}

/// The outcome of a step.
#[derive(Debug)]
pub(crate) enum Step {
    /// Look again at this time (or on the next change).
    Continue(Option<Instant>),
    /// The pod is gone from the node and from the API.
    Finished,
}

/// A failed step (retried by the worker).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SyncError {
    /// The runtime failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The API failed.
    #[error(transparent)]
    Api(#[from] kube::Error),
}

/// The `FailedMount` event's message for a volume that could not be set
/// up, in upstream's words: `MountVolume.SetUp failed for volume "cfg" :
/// configmap "settings" not found`.
fn mount_failure(e: &volumes::VolumeError) -> String {
    use volumes::VolumeError as E;
    let (volume, detail) = match e {
        E::Io {
            volume,
            path,
            source,
        } => (volume, format!("{}: {source}", path.display())),
        E::Source { volume, source } => (volume, source.to_string()),
        E::InvalidPath { volume, path } => (volume, format!("invalid path {path:?}")),
        E::Claim { volume, source } => (volume, source.to_string()),
        E::HostPath { volume, source } => (volume, source.to_string()),
        E::Token { volume, source } => (
            volume,
            format!("requesting a service account token: {source}"),
        ),
        E::Unsupported(volume) => (volume, "unsupported volume type".to_string()),
    };
    format!("MountVolume.SetUp failed for volume \"{volume}\" : {detail}")
}

fn restart_policy(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
}

fn should_restart(policy: &str, exit_code: i32) -> bool {
    match policy {
        "Never" => false,
        "OnFailure" => exit_code != 0,
        _ => true,
    }
}

/// What one look at a sidecar did.
struct SidecarStep {
    /// It runs and its startup probe (if any) passed: the next init
    /// container may start.
    started: bool,
    /// A container was started.
    changed: bool,
}

/// Keeps a sidecar running: started when missing, restarted (with
/// back-off) whenever it exited, whatever the pod's restart policy, and
/// probed as the pod's containers are.
async fn sync_sidecar(
    starter: &Starter<'_>,
    state: &mut PodState,
    observed: &mut Observed,
    wake: &mut Option<Instant>,
    container: &Container,
    latest: Option<ContainerInstance>,
) -> Result<SidecarStep, SyncError> {
    let changed = match latest {
        Some(i) if i.is_running() && i.sandbox_id == starter.sandbox_id => {
            let changed = starter
                .check_running(state, observed, wake, container, &i)
                .await?;
            let started = container.startup_probe.is_none()
                || observed
                    .health
                    .get(&container.name)
                    .is_some_and(|h| h.started);
            return Ok(SidecarStep { started, changed });
        }
        // Running in a sandbox that is being replaced: it is stopped with it.
        Some(i) if i.is_running() => false,
        latest => {
            starter
                .revive(state, observed, wake, container, latest.as_ref(), true)
                .await
        }
    };
    Ok(SidecarStep {
        started: false,
        changed,
    })
}

/// When the pod's `activeDeadlineSeconds` runs out, counted from its
/// start time as this node reported it.
fn active_deadline(pod: &Pod) -> Option<SystemTime> {
    let seconds = pod.spec.as_ref()?.active_deadline_seconds?;
    let started = pod.status.as_ref()?.start_time.as_ref()?.0;
    let started = UNIX_EPOCH + Duration::from_secs(u64::try_from(started.as_second()).ok()?);
    Some(started + Duration::from_secs(u64::try_from(seconds).unwrap_or(0)))
}

fn system_time(nanos: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(u64::try_from(nanos).unwrap_or(0))
}

/// How long an exited container ran. One that never started (its start
/// failed: `StartError`) ran for no time — not since 1970, which would
/// forget its back-off and restart it at once, over and over, where a
/// kubelet backs off (CrashLoopBackOff) as for any other exit.
fn run_time(status: &api::ContainerStatus) -> Duration {
    if status.started_at <= 0 {
        return Duration::ZERO;
    }
    system_time(status.finished_at)
        .duration_since(system_time(status.started_at))
        .unwrap_or_default()
}

/// The CRI handler of the pod's RuntimeClass ("" — the runtime's default —
/// when it names none), read from the API as upstream's kubelet does; a
/// class that is gone leaves the sandbox uncreated, with the API's words.
async fn runtime_handler(ctx: &AgentContext, pod: &Pod) -> Result<String, RuntimeError> {
    let Some(name) = pod
        .spec
        .as_ref()
        .and_then(|s| s.runtime_class_name.as_deref())
        .filter(|n| !n.is_empty())
    else {
        return Ok(String::new());
    };
    let classes: Api<RuntimeClass> = Api::all(ctx.client.clone());
    match classes.get_opt(name).await {
        Ok(Some(class)) => Ok(class.handler),
        Ok(None) => Err(RuntimeError::RuntimeClass(format!(
            "runtimeclass.node.k8s.io \"{name}\" not found"
        ))),
        Err(e) => Err(RuntimeError::RuntimeClass(format!(
            "failed to lookup RuntimeClass {name}: {e}"
        ))),
    }
}

fn earliest(a: Option<Instant>, b: Instant) -> Option<Instant> {
    Some(a.map_or(b, |a| a.min(b)))
}

/// One step for `pod`.
pub(crate) async fn sync(
    ctx: &AgentContext,
    state: &mut PodState,
    pod: &Pod,
) -> Result<Step, SyncError> {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let runtime = ctx.runtime.as_ref();
    if pod.metadata.deletion_timestamp.is_some() {
        // As upstream's kubelet: stop everything, report the terminal phase
        // with the containers' exits, and only then remove what is left and
        // delete the object — whoever watches the pod (a Job controller, a
        // user) sees how it ended before it goes.
        termination::stop_pod(ctx, Some(pod), &uid, termination::grace_period(pod)).await?;
        report_terminal(ctx, state, pod, None).await?;
        termination::remove_pod(ctx, &uid).await?;
        termination::delete_object(ctx, pod).await?;
        return Ok(Step::Finished);
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        // Finished: nothing may run, but containers stay for their logs.
        let view = PodRuntimeView::load(runtime, &uid).await?;
        for s in view
            .sandboxes
            .iter()
            .filter(|s| s.state == api::PodSandboxState::SandboxReady as i32)
        {
            runtime.stop_pod_sandbox(&s.id).await?;
        }
        return Ok(Step::Continue(None));
    }

    // As upstream's kubelet: a pod active longer than its
    // activeDeadlineSeconds is stopped and fails as DeadlineExceeded.
    let deadline = active_deadline(pod);
    if deadline.is_some_and(|at| at <= SystemTime::now()) {
        let stop = NodeStop::deadline_exceeded();
        ctx.events.normal(
            &object_reference(pod),
            stop.reason,
            "",
            stop.message.clone(),
        );
        termination::stop_pod(ctx, Some(pod), &uid, termination::grace_period(pod)).await?;
        report_terminal(ctx, state, pod, Some(stop)).await?;
        return Ok(Step::Continue(None));
    }
    // As upstream's eviction manager: a pod evicted to relieve the node's
    // pressure is stopped at once and fails, saying why.
    if let Some(message) = ctx.evictions.take(&uid) {
        ctx.events
            .warning(&object_reference(pod), status::EVICTED, "", message.clone());
        termination::stop_pod(ctx, Some(pod), &uid, EVICTION_GRACE).await?;
        report_terminal(ctx, state, pod, Some(NodeStop::evicted(message))).await?;
        return Ok(Step::Continue(None));
    }

    let mut view = PodRuntimeView::load(runtime, &uid).await?;
    // As upstream's kubelet admits a pod before anything of it runs: one
    // the node cannot take (a sysctl it does not allow, requests beyond
    // what it has left) is rejected.
    if !state.admitted && view.sandboxes.is_empty() {
        let node = Api::<Node>::all(ctx.client.clone())
            .get_opt(&ctx.node_name)
            .await?;
        if let Err(refusal) = admission::admit(ctx, pod, node.as_ref(), &ctx.pods.list()) {
            reject(ctx, pod, &refusal.reason, refusal.message).await?;
            return Ok(Step::Continue(None));
        }
    }
    state.admitted = true;
    let mut observed = Observed::default();
    let mut wake: Option<Instant> = Some(Instant::now() + RESYNC);
    if let Some(at) = deadline {
        let left = at.duration_since(SystemTime::now()).unwrap_or_default();
        wake = earliest(wake, Instant::now() + left);
    }

    // In-place resizes: from here on the pod is as the node runs it, each
    // container with the resources the node allocated to it (what its
    // downward API files say of its limits, too).
    let allocated = resize::sync(
        ctx,
        pod,
        &view,
        &mut observed.resize,
        &mut state.stopped_for_resize,
    )
    .await;
    let pod = &allocated;

    // Volumes first: a sandbox is only worth starting when they are there.
    let refresh_due = state.volumes_refresh.is_some_and(|t| t <= Instant::now());
    if state.volumes.is_none() || refresh_due {
        let vctx = VolumeContext {
            client: &ctx.client,
            agent_dir: &ctx.agent_dir,
            host_ip: &ctx.host_ip,
            allocatable: &ctx.allocatable,
            node_name: &ctx.node_name,
            storage_dir: &ctx.storage_dir,
            content_resync: ctx.volume_resync,
        };
        match volumes::prepare(&vctx, pod, state.volumes.as_ref()).await {
            Ok(v) => {
                state.volumes_refresh = v.refresh_at;
                state.volumes = Some(v);
            }
            Err(e) if state.volumes.is_some() => {
                // Running containers keep the old content, as upstream's
                // do when a source went away; tried again at the next resync.
                tracing::warn!(pod = ?pod.metadata.name, error = %e, "refreshing volumes failed");
                ctx.events
                    .warning(&object_reference(pod), "FailedMount", "", mount_failure(&e));
                state.volumes_refresh = Some(Instant::now() + RESYNC);
            }
            Err(e) => {
                tracing::info!(pod = ?pod.metadata.name, error = %e, "volumes not ready");
                let message = mount_failure(&e);
                ctx.events
                    .warning(&object_reference(pod), "FailedMount", "", message);
                return wait_for_setup(ctx, state, pod, &view, observed).await;
            }
        }
    }
    if let Some(due) = state.volumes_refresh {
        wake = earliest(wake, due);
    }
    let volumes = (state.volumes.as_ref())
        .map(|v| v.paths.clone())
        .unwrap_or_default();

    let policy = restart_policy(pod).to_string();
    let sandbox_id = match view.ready_sandbox() {
        Some(s) => {
            let id = s.id.clone();
            if retire_sandboxes(runtime, &view, Some(&id), termination::grace_period(pod)).await? {
                view = PodRuntimeView::load(runtime, &uid).await?;
            }
            id
        }
        None if nothing_to_restart(pod, &view, &policy) => {
            // As upstream's kubelet: a pod whose containers have run and
            // none of which may run again gets no new sandbox; it is over.
            retire_sandboxes(runtime, &view, None, termination::grace_period(pod)).await?;
            report_terminal(ctx, state, pod, None).await?;
            return Ok(Step::Continue(None));
        }
        None => {
            // The sandbox died (or never was): a new one, created once.
            // The containers of the old one are stopped with it and are
            // restarted in the new one by the restart policy, counting
            // from their last restart count; the old sandbox stays,
            // stopped, while it holds their previous instances.
            retire_sandboxes(runtime, &view, None, termination::grace_period(pod)).await?;
            let attempt = view
                .sandboxes
                .iter()
                .filter_map(|s| s.metadata.as_ref().map(|m| m.attempt + 1))
                .max()
                .unwrap_or(0);
            let cgroup = ctx.cgroups.as_ref().and_then(|c| {
                let parent = c.ensure(pod);
                c.weigh_burstable(ctx.pods.list().iter().map(|p| p.as_ref()));
                parent
            });
            let config = cri_config::sandbox_config(pod, &ctx.log_root, attempt, &ctx.dns, cgroup);
            let _ = std::fs::create_dir_all(&config.log_directory);
            let started = match runtime_handler(ctx, pod).await {
                Ok(handler) => runtime.run_pod_sandbox(&config, &handler).await,
                Err(e) => Err(e),
            };
            match started {
                Ok(id) => {
                    view = PodRuntimeView::load(runtime, &uid).await?;
                    id
                }
                Err(e) => {
                    tracing::warn!(pod = ?pod.metadata.name, error = %e, "sandbox failed");
                    // What `kubectl describe pod` shows of it, as upstream's
                    // kubelet words it (repeats become the event's count).
                    ctx.events.warning(
                        &object_reference(pod),
                        "FailedCreatePodSandBox",
                        "",
                        format!("Failed to create pod sandbox: {}", cri_text::grpc_error(&e)),
                    );
                    return wait_for_setup(ctx, state, pod, &view, observed).await;
                }
            }
        }
    };
    let sandbox_status = runtime.pod_sandbox_status(&sandbox_id).await?;
    let attempt = sandbox_status.metadata.as_ref().map_or(0, |m| m.attempt);
    let pod_ip = sandbox_status
        .network
        .as_ref()
        .map(|n| n.ip.clone())
        .filter(|ip| !ip.is_empty());
    observed.sandbox_ready = true;
    observed.pod_ip = pod_ip.clone();
    let cgroup = ctx.cgroups.as_ref().and_then(|c| c.existing(pod));
    let sandbox_config = cri_config::sandbox_config(pod, &ctx.log_root, attempt, &ctx.dns, cgroup);
    let starter = Starter {
        ctx,
        pod,
        sandbox_id: &sandbox_id,
        sandbox_config: &sandbox_config,
        pod_ip: pod_ip.clone().unwrap_or_default(),
        volumes: &volumes,
    };
    let spec = pod.spec.clone().unwrap_or_default();
    let mut changed = false;

    // Init containers, one at a time, in order; a sidecar (restartPolicy
    // Always) need only have started before the next one starts, and keeps
    // running (restarted whenever it exits) beside the pod's containers.
    // Once those have started in this sandbox the pod stays initialized
    // while a sidecar restarts.
    let containers_started = spec.containers.iter().any(|c| {
        view.latest(&c.name)
            .is_some_and(|i| i.sandbox_id == sandbox_id)
    });
    let mut initialized = true;
    for c in spec.init_containers.iter().flatten() {
        if is_sidecar(c) {
            let started = sync_sidecar(
                &starter,
                state,
                &mut observed,
                &mut wake,
                c,
                view.latest(&c.name).cloned(),
            )
            .await?;
            changed |= started.changed;
            if started.started || containers_started {
                continue;
            }
            initialized = false;
            break;
        }
        match view.latest(&c.name).cloned() {
            Some(i) if i.is_exited() && i.status.exit_code == 0 && i.sandbox_id == sandbox_id => {
                continue;
            }
            // Init containers run again in a new sandbox, as upstream's.
            Some(i) if i.is_exited() && i.status.exit_code == 0 => {
                changed |= starter
                    .start(state, &mut observed, c, i.restart_count + 1, true, None)
                    .await;
            }
            Some(i) if i.is_running() => {}
            Some(i) if i.is_exited() && policy == "Never" => {
                observed.init_failed = true;
            }
            latest => {
                changed |= starter
                    .revive(state, &mut observed, &mut wake, c, latest.as_ref(), true)
                    .await;
            }
        }
        initialized = false;
        break;
    }
    observed.initialized = initialized;

    if initialized {
        for c in &spec.containers {
            match view.latest(&c.name).cloned() {
                Some(i) if i.is_running() => {
                    changed |= starter
                        .check_running(state, &mut observed, &mut wake, c, &i)
                        .await?;
                }
                Some(i) if i.is_exited() && !should_restart(&policy, i.status.exit_code) => {}
                latest => {
                    changed |= starter
                        .revive(state, &mut observed, &mut wake, c, latest.as_ref(), false)
                        .await;
                }
            }
        }
    }
    // Ephemeral containers start once each, whatever became of the pod's
    // other containers; one that ended stays ended.
    for debug in ephemeral::of(pod) {
        if view.latest(&debug.container.name).is_some() {
            continue;
        }
        let target = debug
            .target
            .as_deref()
            .and_then(|t| view.latest(t))
            .filter(|i| i.is_running())
            .map(|i| i.id.clone());
        changed |= starter
            .start(state, &mut observed, &debug.container, 0, false, target)
            .await;
    }
    let live: Vec<&str> = view.running().map(|c| c.id.as_str()).collect();
    state.probes.retain(&live);
    if changed {
        view = PodRuntimeView::load(runtime, &uid).await?;
        // A container started now: look again soon for its first state.
        wake = earliest(wake, Instant::now() + Duration::from_millis(500));
    }
    // A container may have exited since it was looked at (or been stopped
    // by its liveness probe): whether it comes back follows the policy.
    for c in &spec.containers {
        if let Some(i) = view.latest(&c.name)
            && i.is_exited()
            && should_restart(&policy, i.status.exit_code)
        {
            observed.will_restart.insert(c.name.clone());
        }
    }
    if over_but_for_sidecars(ctx, pod, &spec, &view, &observed) {
        // As upstream's kubelet: once the containers are done for good, the
        // sidecars still serving them are stopped (gracefully, last first),
        // and only then is the phase written terminal, with how each ended —
        // a finished pod never reads as having a sidecar running and ready.
        termination::stop_pod(ctx, Some(pod), &uid, termination::grace_period(pod)).await?;
        report_terminal(ctx, state, pod, None).await?;
        return Ok(Step::Continue(None));
    }
    let status = report(ctx, state, pod, &view, &observed).await?;
    if matches!(status.as_str(), "Succeeded" | "Failed") {
        runtime.stop_pod_sandbox(&sandbox_id).await?;
        return Ok(Step::Continue(None));
    }
    Ok(Step::Continue(wake))
}

/// Whether the pod's phase is terminal while something of it (a sidecar)
/// still runs: every container has exited and none will start again.
fn over_but_for_sidecars(
    ctx: &AgentContext,
    pod: &Pod,
    spec: &k8s_openapi::api::core::v1::PodSpec,
    view: &PodRuntimeView,
    observed: &Observed,
) -> bool {
    let containers_exited = spec
        .containers
        .iter()
        .all(|c| view.latest(&c.name).is_some_and(|i| i.is_exited()));
    if !containers_exited || view.running().next().is_none() {
        return false;
    }
    let phase = status::pod_status(pod, view, observed, &ctx.host_ip).phase;
    matches!(phase.as_deref(), Some("Succeeded" | "Failed"))
}

/// Whether the pod is over without a sandbox: its containers ran and none
/// may run again — with `restartPolicy: Never` once any container ran
/// (upstream gives such a pod no second sandbox), otherwise once every
/// container exited in a way its policy does not restart.
fn nothing_to_restart(pod: &Pod, view: &PodRuntimeView, policy: &str) -> bool {
    if view.sandboxes.is_empty() || view.containers.is_empty() {
        return false;
    }
    if policy == "Never" {
        return true;
    }
    pod.spec.iter().flat_map(|s| s.containers.iter()).all(|c| {
        view.latest(&c.name)
            .is_some_and(|i| i.is_exited() && !should_restart(policy, i.status.exit_code))
    })
}

/// Stops every sandbox of the pod but `keep` (their running containers
/// first, given `grace`), and removes those of them that hold neither the
/// latest nor the previous instance of a container (what `lastState` and
/// `logs --previous` read): a replaced sandbox stays, stopped, until the
/// containers it held are superseded twice. Returns whether anything
/// changed.
async fn retire_sandboxes(
    runtime: &dyn crate::runtime::Runtime,
    view: &PodRuntimeView,
    keep: Option<&str>,
    grace: Duration,
) -> Result<bool, RuntimeError> {
    let holding: HashSet<&str> = view
        .containers
        .values()
        .flat_map(|instances| instances.iter().take(2))
        .map(|i| i.sandbox_id.as_str())
        .collect();
    let mut changed = false;
    for sandbox in view
        .sandboxes
        .iter()
        .filter(|s| Some(s.id.as_str()) != keep)
    {
        let ready = sandbox.state == api::PodSandboxState::SandboxReady as i32;
        let running: Vec<&ContainerInstance> = view
            .running()
            .filter(|c| c.sandbox_id == sandbox.id)
            .collect();
        let remove = !holding.contains(sandbox.id.as_str());
        if !running.is_empty() {
            // A sandbox can die under running containers (its pause
            // process killed): they are stopped as a pod's are, then
            // restarted in the new sandbox by the restart policy.
            let stops = running.iter().map(|c| runtime.stop_container(&c.id, grace));
            for result in futures::future::join_all(stops).await {
                ignore_not_found(result)?;
            }
        }
        if ready || remove || !running.is_empty() {
            ignore_not_found(runtime.stop_pod_sandbox(&sandbox.id).await)?;
            changed = true;
        }
        if remove {
            ignore_not_found(runtime.remove_pod_sandbox(&sandbox.id).await)?;
        }
    }
    Ok(changed)
}

fn ignore_not_found(result: Result<(), RuntimeError>) -> Result<(), RuntimeError> {
    match result {
        Err(e) if !e.is_not_found() => Err(e),
        _ => Ok(()),
    }
}

/// While the pod's volumes or sandbox cannot be set up: the containers
/// wait without a message, as a kubelet's (why is the event's to say), and
/// the pod is synced again shortly.
async fn wait_for_setup(
    ctx: &AgentContext,
    state: &mut PodState,
    pod: &Pod,
    view: &PodRuntimeView,
    observed: Observed,
) -> Result<Step, SyncError> {
    let observed = waiting_for_setup(pod, view, observed);
    report(ctx, state, pod, view, &observed).await?;
    Ok(Step::Continue(Some(Instant::now() + SETUP_RETRY)))
}

/// What the status says of a pod whose volumes or sandbox are not there:
/// its containers are `ContainerCreating`, but one the runtime already runs
/// (the agent restarted, or a volume source went away before it did) is
/// reported as it runs, its pod Running and its sandbox ready, as a
/// kubelet's status comes from the runtime and never takes a started pod
/// back to Pending.
fn waiting_for_setup(pod: &Pod, view: &PodRuntimeView, mut observed: Observed) -> Observed {
    observed.sandbox_ready = view.ready_sandbox().is_some();
    observed.initialized = was_initialized(pod, view);
    for c in creating(pod) {
        if !view.latest(&c.name).is_some_and(|i| i.is_running()) {
            observed
                .waiting
                .insert(c.name.clone(), ("ContainerCreating".into(), String::new()));
        }
    }
    observed
}

/// The containers that wait as `ContainerCreating` while the pod's
/// volumes or sandbox are not there: a pod with init containers has them
/// all wait as `PodInitializing` (the status's default, which `kubectl get
/// pods` shows as `Init:0/n`), as a kubelet's.
fn creating(pod: &Pod) -> impl Iterator<Item = &Container> {
    let spec = pod.spec.as_ref();
    let has_init = spec
        .and_then(|s| s.init_containers.as_ref())
        .is_some_and(|i| !i.is_empty());
    spec.filter(|_| !has_init)
        .into_iter()
        .flat_map(|s| s.containers.iter())
}

async fn start_created(ctx: &AgentContext, instance: &ContainerInstance, observed: &mut Observed) {
    if let Err(e) = ctx.runtime.start_container(&instance.id).await {
        observed.waiting.insert(
            instance.name.clone(),
            ("RunContainerError".into(), e.to_string()),
        );
    }
}

/// Creates and starts container instances in one sandbox.
struct Starter<'a> {
    ctx: &'a AgentContext,
    pod: &'a Pod,
    sandbox_id: &'a str,
    sandbox_config: &'a api::PodSandboxConfig,
    pod_ip: String,
    volumes: &'a HashMap<String, PathBuf>,
}

impl Starter<'_> {
    /// Writes the pod's managed `/etc/hosts` (under the pod's directory)
    /// and returns its path; `None` when it cannot be written.
    fn hosts_file(&self) -> Option<PathBuf> {
        let uid = self.pod.metadata.uid.as_deref().unwrap_or_default();
        let file = volumes::pod_dir(&self.ctx.agent_dir, uid).join("etc-hosts");
        let node_hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
        let domain = &self.ctx.dns.cluster.domain;
        let text = hosts_file::content(self.pod, &self.pod_ip, domain, &node_hosts);
        let written = file
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&file, text));
        match written {
            Ok(()) => Some(file),
            Err(error) => {
                tracing::warn!(file = %file.display(), %error, "no managed /etc/hosts");
                None
            }
        }
    }

    /// A fresh, empty file for one instance of `container` to leave its
    /// The container's mounts of part of a volume, pinned (see
    /// `volumes::sub_path`): mount index → the mount point the runtime
    /// gets. A failure is the container's `CreateContainerConfigError`, in
    /// upstream's words (the cause goes to the agent's log).
    fn pin_sub_paths(
        &self,
        container: &Container,
        env: &[(String, String)],
    ) -> Result<HashMap<usize, PathBuf>, String> {
        let uid = self.pod.metadata.uid.as_deref().unwrap_or_default();
        let pod_dir = volumes::pod_dir(&self.ctx.agent_dir, uid);
        let mut pinned = HashMap::new();
        for (index, mount) in container.volume_mounts.iter().flatten().enumerate() {
            let sub = match mount.sub_path_expr.as_deref().filter(|e| !e.is_empty()) {
                Some(expr) => env::expand_sub_path(expr, env)?,
                None => mount.sub_path.clone().unwrap_or_default(),
            };
            if sub.is_empty() {
                continue;
            }
            let Some(volume) = self.volumes.get(&mount.name) else {
                continue;
            };
            let at = volumes::sub_path::pin(volume, &sub, &pod_dir, &container.name, index)
                .map_err(|error| {
                    tracing::warn!(pod = ?self.pod.metadata.name, container = %container.name, volume = %mount.name, %error, "sub path refused");
                    format!(
                        "failed to prepare subPath for volumeMount {:?} of container {:?}",
                        mount.name, container.name
                    )
                })?;
            pinned.insert(index, at);
        }
        Ok(pinned)
    }

    /// termination message in (writable by any user in the container, as
    /// upstream's), under the pod's directory; `None` when it cannot be made.
    fn termination_log(&self, container: &Container, restart_count: u32) -> Option<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        container
            .termination_message_path
            .as_deref()
            .filter(|p| !p.is_empty())?;
        let uid = self.pod.metadata.uid.as_deref().unwrap_or_default();
        let dir = volumes::pod_dir(&self.ctx.agent_dir, uid)
            .join("containers")
            .join(&container.name);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let file = dir.join(format!("{restart_count}-{nanos:x}"));
        let made = std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::File::create(&file))
            .and_then(|_| std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)));
        match made {
            Ok(()) => Some(file),
            Err(error) => {
                tracing::warn!(file = %file.display(), %error, "no termination message file");
                None
            }
        }
    }

    /// Probes a running container (startup, liveness, readiness) and records
    /// the verdict; stops it when its liveness probe failed, for its restart
    /// policy to bring it back. Returns whether it was stopped.
    async fn check_running(
        &self,
        state: &mut PodState,
        observed: &mut Observed,
        wake: &mut Option<Instant>,
        container: &Container,
        instance: &ContainerInstance,
    ) -> Result<bool, SyncError> {
        let (runtime, pod) = (self.ctx.runtime.as_ref(), self.pod);
        let running_for = SystemTime::now()
            .duration_since(system_time(instance.status.started_at))
            .unwrap_or_default();
        let regarding = container_reference(pod, &container.name);
        let events = &self.ctx.events;
        let unhealthy = |kind: ProbeKind, missed: &Missed| {
            let probe = match kind {
                ProbeKind::Startup => "Startup",
                ProbeKind::Liveness => "Liveness",
                ProbeKind::Readiness => "Readiness",
            };
            events.warning(&regarding, "Unhealthy", "", missed.message(probe));
        };
        let health = state
            .probes
            .check(
                runtime,
                container,
                &instance.id,
                &self.pod_ip,
                running_for,
                &unhealthy,
            )
            .await;
        if let Some(due) = health.next_due {
            *wake = earliest(*wake, due);
        }
        let mut stopped = false;
        if health.liveness_failed {
            tracing::info!(pod = ?pod.metadata.name, container = %container.name, "liveness probe failed; restarting");
            let message = format!(
                "Container {} failed liveness probe, will be restarted",
                container.name
            );
            let regarding = container_reference(pod, &container.name);
            self.ctx.events.normal(&regarding, "Killing", "", message);
            let grace = container
                .liveness_probe
                .as_ref()
                .and_then(|p| p.termination_grace_period_seconds)
                .map(|s| Duration::from_secs(u64::try_from(s).unwrap_or(0)))
                .unwrap_or_else(|| termination::grace_period(pod));
            runtime.stop_container(&instance.id, grace).await?;
            stopped = true;
        }
        observed.health.insert(container.name.clone(), health);
        Ok(stopped)
    }

    /// Brings up a container that is not running, from what became of its
    /// `latest` instance: one that exited is restarted (after its back-off),
    /// one only created is started or replaced, and a container with none
    /// gets its first. Whether it may restart at all is the caller's to
    /// judge (the restart policies of init, sidecar and app containers
    /// differ); returns whether a container was started.
    async fn revive(
        &self,
        state: &mut PodState,
        observed: &mut Observed,
        wake: &mut Option<Instant>,
        container: &Container,
        latest: Option<&ContainerInstance>,
        init: bool,
    ) -> bool {
        match latest {
            Some(i) if i.is_exited() => {
                self.restart_with_backoff(state, observed, wake, container, i, init)
                    .await
            }
            Some(i) => {
                self.start_or_replace_created(state, observed, container, i, init)
                    .await
            }
            None => self.start(state, observed, container, 0, init, None).await,
        }
    }

    /// Restarts an exited container unless its back-off says to wait; returns
    /// whether a container was started. Either way the container is marked as
    /// one that will restart (its status reports it waiting, not terminated).
    async fn restart_with_backoff(
        &self,
        state: &mut PodState,
        observed: &mut Observed,
        wake: &mut Option<Instant>,
        container: &Container,
        exited: &ContainerInstance,
        init: bool,
    ) -> bool {
        observed.will_restart.insert(container.name.clone());
        if state.stopped_for_resize.remove(&exited.id) {
            return self
                .start_after(state, observed, container, exited, init)
                .await;
        }
        let finished = system_time(exited.status.finished_at);
        let ran = run_time(&exited.status);
        let now = SystemTime::now();
        match state.crash.check(&container.name, finished, ran, now) {
            Verdict::Retry => {
                self.start_after(state, observed, container, exited, init)
                    .await
            }
            Verdict::Wait { until, delay } => {
                let message = format!(
                    "Back-off restarting failed container {} in pod {}",
                    container.name,
                    pod_name(self.pod)
                );
                let regarding = container_reference(self.pod, &container.name);
                self.ctx.events.warning(&regarding, "BackOff", "", message);
                observed.waiting.insert(
                    container.name.clone(),
                    (
                        "CrashLoopBackOff".into(),
                        // The delay as Go prints it (`1m20s`, `5m0s`).
                        format!(
                            "back-off {} restarting failed container={} pod={}",
                            go_duration(delay),
                            container.name,
                            pod_name(self.pod)
                        ),
                    ),
                );
                let left = until.duration_since(now).unwrap_or_default();
                *wake = earliest(*wake, Instant::now() + left);
                false
            }
        }
    }

    /// Pulls (by policy), resolves env, creates and starts one instance,
    /// joining the process namespace of the container `pid_target` (a
    /// runtime id) when one is given; on failure records the waiting reason.
    /// Returns whether it started.
    async fn start(
        &self,
        state: &mut PodState,
        observed: &mut Observed,
        container: &Container,
        restart_count: u32,
        init: bool,
        pid_target: Option<String>,
    ) -> bool {
        let runtime = self.ctx.runtime.as_ref();
        let mut wait = |reason: &str, message: String| {
            tracing::info!(pod = ?self.pod.metadata.name, container = %container.name, reason, %message, "container not started");
            observed
                .waiting
                .insert(container.name.clone(), (reason.to_string(), message));
        };
        let pull = images::PullContext {
            client: &self.ctx.client,
            pod: self.pod,
        };
        let mut notes = images::PullNotes::default();
        let pulled = images::ensure(runtime, &pull, container, &mut state.images, &mut notes).await;
        self.image_events(container, &notes, &pulled).await;
        let image = match pulled {
            Ok(image) => image,
            Err(problem) => {
                wait(problem.reason, problem.message);
                return false;
            }
        };
        let settings = security::effective(self.pod, container);
        if let Err(message) = security::verify_seccomp(&settings) {
            let regarding = container_reference(self.pod, &container.name);
            let error = format!("Error: {message}");
            self.ctx.events.warning(&regarding, "Failed", "", error);
            wait("CreateContainerConfigError", message);
            return false;
        }
        if settings.run_as_non_root {
            let known = runtime.image_status(&image).await.ok().flatten();
            if let Err(message) =
                security::verify_non_root(self.pod, container, &settings, known.as_ref())
            {
                let regarding = container_reference(self.pod, &container.name);
                let error = format!("Error: {message}");
                self.ctx.events.warning(&regarding, "Failed", "", error);
                wait("CreateContainerConfigError", message);
                return false;
            }
        }
        let services = self.ctx.services.list();
        let service_vars = super::service_env::for_pod(self.pod, services.iter().map(|s| &**s));
        let env_ctx = EnvContext {
            pod: self.pod,
            host_ip: &self.ctx.host_ip,
            pod_ip: &self.pod_ip,
            allocatable: &self.ctx.allocatable,
            services: &service_vars,
        };
        let env = match env::resolve(&self.ctx.client, &env_ctx, container).await {
            Ok(env) => env,
            Err(e) => {
                // Upstream records each container it could not configure.
                let message = e.to_string();
                let regarding = container_reference(self.pod, &container.name);
                let error = format!("Error: {message}");
                self.ctx.events.warning(&regarding, "Failed", "", error);
                wait("CreateContainerConfigError", message);
                return false;
            }
        };
        let sub_paths = match self.pin_sub_paths(container, &env) {
            Ok(pinned) => pinned,
            Err(message) => {
                let regarding = container_reference(self.pod, &container.name);
                let error = format!("Error: {message}");
                self.ctx.events.warning(&regarding, "Failed", "", error);
                wait("CreateContainerConfigError", message);
                return false;
            }
        };
        let command = env::expand_args(container.command.as_deref().unwrap_or(&[]), &env);
        let args = env::expand_args(container.args.as_deref().unwrap_or(&[]), &env);
        let seccomp_root = super::seccomp_root(&self.ctx.agent_dir);
        let inputs = ContainerInputs {
            pod: self.pod,
            image,
            env,
            command,
            args,
            volumes: self.volumes,
            sub_paths,
            restart_count,
            init,
            pid_target,
            termination_log: self.termination_log(container, restart_count),
            hosts_file: self.hosts_file(),
            seccomp_root: &seccomp_root,
            oom_score_adj: crate::oom_score::for_container(
                self.pod,
                container,
                self.ctx.memory_capacity,
            ),
        };
        let config = cri_config::container_config(container, &inputs);
        let log_dir = PathBuf::from(&self.sandbox_config.log_directory).join(&container.name);
        let _ = std::fs::create_dir_all(&log_dir);
        let events = &self.ctx.events;
        let regarding = container_reference(self.pod, &container.name);
        let id = match self.create_and_start(container, &config, &regarding).await {
            Ok(id) => id,
            Err((reason, e)) => {
                // The runtime's own words, as a kubelet gives them (the
                // status message, without skiff's call name or code).
                let message = cri_text::status_message(&e);
                events.warning(&regarding, "Failed", "", format!("Error: {message}"));
                wait(reason, message);
                return false;
            }
        };
        if let Some(handler) = container
            .lifecycle
            .as_ref()
            .and_then(|l| l.post_start.as_ref())
        {
            let target = hooks::HookTarget {
                runtime,
                pod: self.pod,
                container,
                container_id: &id,
                pod_ip: &self.pod_ip,
            };
            if let Err(message) = hooks::run(&target, handler, POST_START_LIMIT).await {
                // The hook's words stay out of the event (they may hold
                // secrets), as a kubelet keeps them out.
                events.warning(
                    &regarding,
                    "FailedPostStartHook",
                    "",
                    "PostStartHook failed",
                );
                events.normal(&regarding, "Killing", "", "FailedPostStartHook");
                let grace = termination::grace_period(self.pod);
                if let Err(error) = runtime.stop_container(&id, grace).await {
                    tracing::warn!(container = %container.name, %error, "stopping after a failed postStart hook");
                }
                wait("PostStartHookError", message);
            }
        }
        true
    }

    /// Creates and starts the container, recording the Created and Started
    /// events; a failure comes back with the waiting reason it gives the
    /// container (CreateContainerError, RunContainerError).
    async fn create_and_start(
        &self,
        container: &Container,
        config: &api::ContainerConfig,
        regarding: &ObjectReference,
    ) -> Result<String, (&'static str, RuntimeError)> {
        let runtime = self.ctx.runtime.as_ref();
        let events = &self.ctx.events;
        let id = runtime
            .create_container(self.sandbox_id, config, self.sandbox_config)
            .await
            .map_err(|e| ("CreateContainerError", e))?;
        let created = format!("Created container: {}", container.name);
        events.normal(regarding, "Created", "", created);
        runtime
            .start_container(&id)
            .await
            .map_err(|e| ("RunContainerError", e))?;
        let started = format!("Started container {}", container.name);
        events.normal(regarding, "Started", "", started);
        Ok(id)
    }

    /// The events upstream records around image pulls: the image
    /// manager's, then, when the image is not there, `Error: <reason>` as
    /// the kubelet records every container it could not start.
    async fn image_events(
        &self,
        container: &Container,
        notes: &images::PullNotes,
        outcome: &Result<String, images::ImageProblem>,
    ) {
        let events = &self.ctx.events;
        let regarding = container_reference(self.pod, &container.name);
        if !notes.missing_secrets.is_empty() {
            let message = format!(
                "Unable to retrieve some image pull secrets ({}); attempting to pull the image may not succeed.",
                notes.missing_secrets.join(", ")
            );
            events.warning(&regarding, "FailedToRetrieveImagePullSecret", "", message);
        }
        for event in &notes.events {
            let message = event.message.clone();
            if event.warning {
                events.warning(&regarding, event.reason, "", message);
            } else {
                events.normal(&regarding, event.reason, "", message);
            }
        }
        if let Err(problem) = outcome {
            let error = format!("Error: {}", problem.reason);
            events.warning(&regarding, "Failed", "", error);
        }
    }

    /// Starts an instance that was created but never started. In the pod's
    /// sandbox it is started as it is; in a sandbox that is no longer the
    /// pod's it is removed and a new one started here with the same restart
    /// count. One in the unknown state (containerd was killed while starting
    /// it) cannot be started: as upstream's kubelet, it is stopped first, so
    /// that two instances never run, and replaced by a new one that counts
    /// a restart, the stopped one kept for `lastState`. Returns whether a
    /// container was started (an attempt counts).
    async fn start_or_replace_created(
        &self,
        state: &mut PodState,
        observed: &mut Observed,
        container: &Container,
        created: &ContainerInstance,
        init: bool,
    ) -> bool {
        if created.is_unknown() {
            if let Err(e) = self
                .ctx
                .runtime
                .stop_container(&created.id, Duration::ZERO)
                .await
                && !e.is_not_found()
            {
                tracing::warn!(container = %created.id, error = %e, "stopping a container in the unknown state");
                observed.waiting.insert(
                    created.name.clone(),
                    (
                        "RunContainerError".into(),
                        format!("stopping the container in the unknown state: {e}"),
                    ),
                );
                return false;
            }
            tracing::info!(container = %created.id, name = %created.name, "replacing a container in the unknown state");
            return self
                .start_after(state, observed, container, created, init)
                .await;
        }
        if created.sandbox_id == self.sandbox_id {
            start_created(self.ctx, created, observed).await;
            return true;
        }
        if let Err(e) = self.ctx.runtime.remove_container(&created.id).await
            && !e.is_not_found()
        {
            tracing::warn!(container = %created.id, error = %e, "removing a container of a replaced sandbox");
        }
        self.start(
            state,
            observed,
            container,
            created.restart_count,
            init,
            None,
        )
        .await
    }

    /// Starts the instance after `previous` (one more restart) and, once it
    /// has started, prunes those before `previous`. Returns whether it
    /// started.
    async fn start_after(
        &self,
        state: &mut PodState,
        observed: &mut Observed,
        container: &Container,
        previous: &ContainerInstance,
        init: bool,
    ) -> bool {
        let restart_count = previous.restart_count + 1;
        let started = self
            .start(state, observed, container, restart_count, init, None)
            .await;
        if started {
            self.prune(&container.name, previous).await;
        }
        started
    }

    /// Removes instances older than `keep` (the one just replaced stays for
    /// `lastState` and `logs --previous`).
    async fn prune(&self, name: &str, keep: &ContainerInstance) {
        let runtime = self.ctx.runtime.as_ref();
        let uid = self.pod.metadata.uid.as_deref().unwrap_or_default();
        let Ok(view) = PodRuntimeView::load(runtime, uid).await else {
            return;
        };
        for old in view.containers.get(name).into_iter().flatten() {
            if old.restart_count < keep.restart_count && old.is_exited() {
                let _ = runtime.remove_container(&old.id).await;
            }
        }
    }
}

/// Writes the status of a pod whose containers were all stopped for good:
/// a terminal phase and terminated container states.
async fn report_terminal(
    ctx: &AgentContext,
    state: &mut PodState,
    pod: &Pod,
    stopped: Option<NodeStop>,
) -> Result<(), SyncError> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let view = PodRuntimeView::load(ctx.runtime.as_ref(), uid).await?;
    let observed = Observed {
        terminal: true,
        stopped,
        initialized: was_initialized(pod, &view),
        ..Default::default()
    };
    report(ctx, state, pod, &view, &observed).await?;
    Ok(())
}

/// Rejects `pod` as upstream's kubelet does one it does not admit: a
/// Warning event saying why, and the pod failed with `reason` and "Pod was
/// rejected: <why>", nothing else of its status written (nothing of it
/// ran).
async fn reject(
    ctx: &AgentContext,
    pod: &Pod,
    reason: &str,
    message: String,
) -> Result<(), SyncError> {
    tracing::info!(pod = ?pod.metadata.name, reason, %message, "pod rejected");
    let status = serde_json::json!({ "status": {
        "phase": "Failed",
        "reason": reason,
        "message": format!("Pod was rejected: {message}"),
        "qosClass": skiff_common::qos::qos_class(pod).to_string(),
    }});
    ctx.events
        .warning(&object_reference(pod), reason, "", message);
    merge_status(ctx, pod, &status).await?;
    Ok(())
}

/// Merges `patch` (`{"status": …}`) into `pod`'s status: whether it was
/// written (not when the pod is already gone).
async fn merge_status(
    ctx: &AgentContext,
    pod: &Pod,
    patch: &serde_json::Value,
) -> Result<bool, kube::Error> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    merge_pod_status(&api, name, patch).await
}

/// Merges `patch` (`{"status": …}`) into the status of the pod `name`:
/// whether it was written, which it is not when the pod is already gone
/// (its delete event ends the story). The agent and the simulated nodes
/// report pod status this one way.
pub(crate) async fn merge_pod_status(
    api: &Api<Pod>,
    name: &str,
    patch: &serde_json::Value,
) -> Result<bool, kube::Error> {
    match api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether every init container completed (the runtime shows it exited 0,
/// or the last report said so): upstream's test for whether a stopped
/// pod's regular containers count at all.
fn was_initialized(pod: &Pod, view: &PodRuntimeView) -> bool {
    let inits = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default();
    let reported = status::condition_is_true(pod.status.as_ref(), "Initialized");
    reported
        || inits.iter().all(|c| {
            view.latest(&c.name)
                .is_some_and(|i| i.is_exited() && i.status.exit_code == 0)
        })
}

/// Computes the status and writes it when it differs from the last one
/// written; returns the phase.
async fn report(
    ctx: &AgentContext,
    state: &mut PodState,
    pod: &Pod,
    view: &PodRuntimeView,
    observed: &Observed,
) -> Result<String, kube::Error> {
    let status = status::pod_status(pod, view, observed, &ctx.host_ip);
    let phase = status.phase.clone().unwrap_or_default();
    let value = serde_json::to_value(&status).unwrap_or_default();
    // Transition times are "now" until the API echoes ours back; they alone
    // are no reason to write again.
    if state.last_status.as_ref().map(without_transition_times)
        == Some(without_transition_times(&value))
    {
        return Ok(phase);
    }
    let patch = serde_json::json!({ "status": value });
    if merge_status(ctx, pod, &patch).await? {
        state.last_status = Some(value);
        // As upstream, a start is timed only from Pending (or no phase
        // yet) to Running: an adopted pod that was running is not one.
        let was = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if phase == "Running"
            && let Some(seen) = state.first_seen.take()
            && matches!(was, None | Some("Pending"))
        {
            crate::agent::node::metrics::pod_started(seen.elapsed());
        }
    }
    Ok(phase)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_already_running_stays_running_while_its_volumes_wait() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "user", "uid": "u1"},
            "spec": {"containers": [{"name": "c", "image": "i"}, {"name": "d", "image": "i"}]}
        }))
        .expect("pod");
        let running = ContainerInstance {
            id: "id".into(),
            name: "c".into(),
            restart_count: 0,
            sandbox_id: "s".into(),
            status: api::ContainerStatus {
                state: api::ContainerState::ContainerRunning as i32,
                started_at: 1_000_000_000,
                ..Default::default()
            },
        };
        let view = PodRuntimeView {
            sandboxes: vec![api::PodSandbox {
                id: "s".into(),
                state: api::PodSandboxState::SandboxReady as i32,
                ..Default::default()
            }],
            containers: HashMap::from([("c".to_string(), vec![running])]),
        };
        let observed = waiting_for_setup(&pod, &view, Observed::default());
        assert!(observed.sandbox_ready && observed.initialized);
        assert!(!observed.waiting.contains_key("c"), "c runs");
        assert_eq!(observed.waiting["d"].0, "ContainerCreating");
        let status = status::pod_status(&pod, &view, &observed, "192.0.2.1");
        let states: Vec<_> = (status.container_statuses.iter().flatten())
            .map(|s| (s.name.as_str(), s.state.clone().unwrap_or_default()))
            .collect();
        assert!(states[0].1.running.is_some(), "{states:?}");
        assert!(states[1].1.waiting.is_some(), "{states:?}");
        assert_eq!(status.phase.as_deref(), Some("Pending"), "d still waits");

        // Nothing of it in the runtime yet: every container is created.
        let fresh = waiting_for_setup(&pod, &PodRuntimeView::default(), Observed::default());
        assert!(!fresh.sandbox_ready);
        assert_eq!(fresh.waiting.len(), 2);
        // Once every container runs, the pod is Running.
        let mut all = view.clone();
        let mut d = all.containers["c"][0].clone();
        d.name = "d".into();
        all.containers.insert("d".into(), vec![d]);
        let observed = waiting_for_setup(&pod, &all, Observed::default());
        let status = status::pod_status(&pod, &all, &observed, "192.0.2.1");
        assert_eq!(status.phase.as_deref(), Some("Running"));
    }

    #[test]
    fn a_container_that_never_started_ran_for_no_time() {
        let second = 1_000_000_000;
        let never = api::ContainerStatus {
            started_at: 0,
            finished_at: 1_700_000_000 * second,
            ..Default::default()
        };
        assert_eq!(run_time(&never), Duration::ZERO);
        let ran = api::ContainerStatus {
            started_at: 1_700_000_000 * second,
            finished_at: 1_700_000_030 * second,
            ..Default::default()
        };
        assert_eq!(run_time(&ran), Duration::from_secs(30));
    }

    #[test]
    fn a_volume_that_cannot_be_set_up_is_named_as_upstream_names_it() {
        let missing = volumes::VolumeError::Source {
            volume: "cfg".into(),
            source: Box::new(env::EnvError::Missing {
                kind: "configmap",
                name: "settings".into(),
                what: "not found".into(),
            }),
        };
        assert_eq!(
            mount_failure(&missing),
            "MountVolume.SetUp failed for volume \"cfg\" : configmap \"settings\" not found"
        );
        let odd = volumes::VolumeError::Unsupported("disk".into());
        assert_eq!(
            mount_failure(&odd),
            "MountVolume.SetUp failed for volume \"disk\" : unsupported volume type"
        );
    }

    fn pod(policy: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "uid": "u"},
            "spec": {"restartPolicy": policy, "containers": [{"name": "a"}, {"name": "b"}]}
        }))
        .unwrap()
    }

    fn view(exits: &[(&str, Option<i32>)]) -> PodRuntimeView {
        let mut view = PodRuntimeView {
            sandboxes: vec![api::PodSandbox {
                id: "old".into(),
                state: api::PodSandboxState::SandboxNotready as i32,
                ..Default::default()
            }],
            ..Default::default()
        };
        for (name, exit) in exits {
            let state = match exit {
                Some(_) => api::ContainerState::ContainerExited,
                None => api::ContainerState::ContainerRunning,
            };
            let instance = ContainerInstance {
                id: format!("{name}-1"),
                name: name.to_string(),
                restart_count: 0,
                sandbox_id: "old".into(),
                status: api::ContainerStatus {
                    state: state as i32,
                    exit_code: exit.unwrap_or(0),
                    ..Default::default()
                },
            };
            view.containers.insert(name.to_string(), vec![instance]);
        }
        view
    }

    #[test]
    fn a_dead_sandbox_is_replaced_unless_nothing_may_run_again() {
        // Nothing ran yet: a first (or retried) sandbox.
        assert!(!nothing_to_restart(&pod("Never"), &view(&[]), "Never"));
        // Never: once anything ran, the pod is over.
        let ran = view(&[("a", Some(0))]);
        assert!(nothing_to_restart(&pod("Never"), &ran, "Never"));
        // OnFailure: over only when every container succeeded.
        let both = view(&[("a", Some(0)), ("b", Some(0))]);
        assert!(nothing_to_restart(&pod("OnFailure"), &both, "OnFailure"));
        let one_failed = view(&[("a", Some(0)), ("b", Some(1))]);
        assert!(!nothing_to_restart(
            &pod("OnFailure"),
            &one_failed,
            "OnFailure"
        ));
        let one_missing = view(&[("a", Some(0))]);
        assert!(!nothing_to_restart(
            &pod("OnFailure"),
            &one_missing,
            "OnFailure"
        ));
        // Always: a sandbox that died under running containers is replaced.
        let running = view(&[("a", None), ("b", Some(0))]);
        assert!(!nothing_to_restart(&pod("Always"), &running, "Always"));
    }

    #[test]
    fn restart_policies() {
        assert!(should_restart("Always", 0));
        assert!(should_restart("OnFailure", 1));
        assert!(!should_restart("OnFailure", 0));
        assert!(!should_restart("Never", 1));
    }
}
