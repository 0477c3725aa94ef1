//! The scheduler driver: owns the queue, cache and profiles, turns informer events into
//! queue and cache updates, runs scheduling cycles and asynchronous binding cycles.
//!
//! Integration entry points: the `on_*` event handlers (fed by informers), `run` (the
//! loop), or `schedule_one` + `finish` for step-by-step use in tests and benchmarks.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::algorithm::{Algorithm, ScheduleError, ScheduleResult};
use crate::binding::{Outcome, Preemptor, StatusReporter};
use crate::cache::{Cache, Snapshot};
use crate::clock::Clock;
use crate::framework::config::{ConfigError, SchedulerConfig, profile_name};
use crate::framework::{
    ActionSet, ClusterEvent, Code, CycleState, EventObjects, EventResource, Framework,
    PostFilterResult, Registry, Services, Status,
};
use crate::metrics::AttemptResult;
use crate::pod_info::{PodInfo, pod_key};
use crate::queue::{Nominator, QueueConfig, QueuedPodInfo, SchedulingQueue};
use crate::selectors::labels_of;

/// How long a finished but unconfirmed binding keeps its assumption.
pub(crate) const ASSUMED_POD_TTL: Duration = Duration::from_secs(15 * 60);
/// How long the scheduling loop runs cycles before it lets the runtime's other tasks
/// (its own bindings among them) run. Yielding after every pod put each cycle behind
/// every queued task on the worker, so the loop got a sliver of a core while the
/// API's work piled up; in-process the scheduler shares its runtime with the server,
/// where upstream's has a process of its own.
const CYCLE_SLICE: Duration = Duration::from_millis(1);

/// A pod assumed onto a node, waiting for its binding cycle.
pub struct BindingJob {
    fwk: Arc<Framework>,
    state: CycleState,
    queued: QueuedPodInfo,
    /// The assumed pod.
    pub pod: Arc<PodInfo>,
    /// Chosen node.
    pub node: String,
    permit_wait: Option<Duration>,
    /// Scheduling result details.
    pub result: ScheduleResult,
}

/// A failed scheduling attempt and what preemption decided.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The pod.
    pub pod: Arc<PodInfo>,
    /// `Unschedulable` or `SchedulerError`.
    pub reason: String,
    /// Upstream-worded message.
    pub message: String,
    /// What preemption decided: the node nominated, the pods to delete for it and
    /// those losing their nomination (all empty when it did not run or found nothing).
    pub preemption: PostFilterResult,
}

/// Result of one scheduling cycle.
pub enum CycleOutcome {
    /// Assumed; run `bind` next.
    Bind(Box<BindingJob>),
    /// Could not be scheduled; report it.
    Failed(Failure),
    /// Popped but not ours to schedule (deleted, other scheduler, already assumed).
    Skipped,
}

/// The scheduler.
pub struct Scheduler {
    profiles: HashMap<String, Arc<Framework>>,
    cache: Mutex<Cache>,
    queue: Mutex<SchedulingQueue>,
    nominator: Arc<Nominator>,
    snapshot: Mutex<Snapshot>,
    algorithm: Mutex<Algorithm>,
    clock: Arc<dyn Clock>,
    reporter: Arc<dyn StatusReporter>,
    preemptor: Arc<dyn Preemptor>,
    wake: Notify,
    bound: AtomicU64,
}

impl Scheduler {
    /// Builds a scheduler from a configuration and the API-facing services.
    pub fn new(
        cfg: &SchedulerConfig,
        registry: &Registry,
        services: Services,
        reporter: Arc<dyn StatusReporter>,
        preemptor: Arc<dyn Preemptor>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let mut profiles = HashMap::new();
        let mut list = Vec::new();
        for p in &cfg.profiles {
            let fwk = Arc::new(Framework::new(p, registry, &services)?);
            list.push(fwk.clone());
            profiles.insert(p.scheduler_name.clone(), fwk);
        }
        let nominator = Arc::new(Nominator::new());
        let qcfg = QueueConfig {
            initial_backoff: Duration::from_secs(cfg.pod_initial_backoff_seconds),
            max_backoff: Duration::from_secs(cfg.pod_max_backoff_seconds),
            ..QueueConfig::default()
        };
        Ok(Scheduler {
            queue: Mutex::new(SchedulingQueue::new(
                clock.clone(),
                qcfg,
                &list,
                nominator.clone(),
            )),
            profiles,
            cache: Mutex::new(Cache::new(ASSUMED_POD_TTL)),
            nominator,
            snapshot: Mutex::new(Snapshot::new()),
            algorithm: Mutex::new(Algorithm::new(cfg.percentage_of_nodes_to_score, 0x5eed)),
            clock,
            reporter,
            preemptor,
            wake: Notify::new(),
            bound: AtomicU64::new(0),
        })
    }

    /// The profile for a scheduler name.
    pub fn profile(&self, name: &str) -> Option<&Arc<Framework>> {
        self.profiles.get(name)
    }

    /// Runs `f` with the cache locked (inspection in tests and metrics).
    pub fn with_cache<R>(&self, f: impl FnOnce(&mut Cache) -> R) -> R {
        f(&mut self.cache.lock())
    }

    /// Runs `f` with the queue locked (inspection in tests and metrics).
    pub fn with_queue<R>(&self, f: impl FnOnce(&mut SchedulingQueue) -> R) -> R {
        f(&mut self.queue.lock())
    }

    /// Number of successful bindings so far.
    pub fn bound_count(&self) -> u64 {
        self.bound.load(Ordering::Relaxed)
    }

    fn event(&self, ev: ClusterEvent) {
        self.event_about(ev, &EventObjects::Unknown);
    }

    fn event_about(&self, ev: ClusterEvent, objects: &EventObjects<'_>) {
        if self.queue.lock().on_event_with(ev, objects) > 0 {
            self.wake.notify_one();
        }
    }

    // ---- informer event handlers -------------------------------------------------

    /// A node was added.
    pub fn on_node_add(&self, node: Arc<Node>) {
        self.cache.lock().add_or_update_node(node.clone());
        let objects = EventObjects::Node {
            old: None,
            new: Some(&node),
        };
        self.event_about(ClusterEvent::NODE_ADD, &objects);
    }

    /// A node changed.
    pub fn on_node_update(&self, old: &Node, new: Arc<Node>) {
        let mut actions = ActionSet(0);
        let (os, ns) = (old.status.as_ref(), new.status.as_ref());
        if os.and_then(|s| s.allocatable.as_ref()) != ns.and_then(|s| s.allocatable.as_ref()) {
            actions = actions.or(ActionSet::UPDATE_NODE_ALLOCATABLE);
        }
        if old.metadata.labels != new.metadata.labels {
            actions = actions.or(ActionSet::UPDATE_NODE_LABEL);
        }
        let taints = |n: &Node| n.spec.as_ref().map(|s| (s.taints.clone(), s.unschedulable));
        if taints(old) != taints(&new) {
            actions = actions.or(ActionSet::UPDATE_NODE_TAINT);
        }
        if os.and_then(|s| s.images.as_ref()) != ns.and_then(|s| s.images.as_ref()) {
            actions = actions.or(ActionSet::UPDATE_NODE_OTHER);
        }
        self.cache.lock().add_or_update_node(new.clone());
        if actions.0 != 0 {
            let objects = EventObjects::Node {
                old: Some(old),
                new: Some(&new),
            };
            self.event_about(ClusterEvent::new(EventResource::Node, actions), &objects);
        }
    }

    /// A node was deleted.
    pub fn on_node_delete(&self, name: &str) {
        self.cache.lock().remove_node(name);
        self.event(ClusterEvent::new(EventResource::Node, ActionSet::DELETE));
    }

    fn is_assumed(&self, pod: &Pod) -> bool {
        self.cache.lock().is_assumed(&pod_key(pod))
    }

    fn assigned(pod: &Pod) -> bool {
        pod.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty())
    }

    /// A pod was added.
    pub fn on_pod_add(&self, pod: Arc<Pod>) {
        if Self::assigned(&pod) {
            let info = Arc::new(PodInfo::new(pod.clone()));
            self.queue.lock().delete(&info.key);
            if let Err(e) = self.cache.lock().add_pod(info) {
                tracing::debug!(error = %e, "pod add ignored by cache");
            }
            let objects = EventObjects::Pod {
                old: None,
                new: Some(&pod),
            };
            self.event_about(ClusterEvent::ASSIGNED_POD_ADD, &objects);
        } else if pod.metadata.deletion_timestamp.is_none()
            && !self.is_assumed(&pod)
            && self.queue.lock().add(pod)
        {
            self.wake.notify_one();
        }
    }

    /// A pod changed.
    pub fn on_pod_update(&self, old: &Pod, new: Arc<Pod>) {
        if !Self::assigned(&new) {
            // A pod whose binding is in flight is not rescheduled by its own status
            // updates (e.g. our FailedScheduling/nomination patches arriving late).
            if !self.is_assumed(&new) {
                self.queue.lock().update(new);
                self.wake.notify_one();
            }
            return;
        }
        if !Self::assigned(old) {
            self.on_pod_add(new);
            return;
        }
        let mut actions = ActionSet::UPDATE_OTHER;
        if labels_of(&old.metadata.labels) != labels_of(&new.metadata.labels) {
            actions = actions.or(ActionSet::UPDATE_POD_LABEL);
        }
        // Status-only updates (the kubelet's) are frequent: a second PodInfo
        // is paid only when what the requests come from changed, the spec or
        // the resources the node reports (a resize applied lowers them).
        let info = Arc::new(PodInfo::new(new.clone()));
        if old.spec != new.spec || reported_resources(old) != reported_resources(&new) {
            let old_req = PodInfo::new(Arc::new(old.clone())).requests;
            if info.requests.milli_cpu < old_req.milli_cpu || info.requests.memory < old_req.memory
            {
                actions = actions.or(ActionSet::UPDATE_POD_SCALE_DOWN);
            }
        }
        if let Err(e) = self.cache.lock().update_pod(info) {
            tracing::debug!(error = %e, "pod update ignored by cache");
        }
        let objects = EventObjects::Pod {
            old: Some(old),
            new: Some(&new),
        };
        self.event_about(ClusterEvent::new(EventResource::Pod, actions), &objects);
    }

    /// A pod was deleted.
    pub fn on_pod_delete(&self, pod: &Pod) {
        let key = pod_key(pod);
        if Self::assigned(pod) {
            self.cache.lock().remove_pod(&key);
            let objects = EventObjects::Pod {
                old: Some(pod),
                new: None,
            };
            self.event_about(ClusterEvent::ASSIGNED_POD_DELETE, &objects);
        } else {
            self.queue.lock().delete(&key);
            // An assumed pod deleted before the informer saw its binding.
            if self.cache.lock().is_assumed(&key) {
                self.cache.lock().remove_pod(&key);
                self.event(ClusterEvent::ASSIGNED_POD_DELETE);
            }
        }
    }

    /// Any other cluster change (PVC/PV/StorageClass/Namespace add or update).
    pub fn on_cluster_event(&self, ev: ClusterEvent) {
        self.event(ev);
    }

    /// Periodic housekeeping: backoff completions, the 5-minute unschedulable flush and
    /// expired assumptions. Call about once a second.
    pub fn flush(&self) {
        let moved = {
            let mut q = self.queue.lock();
            q.flush_backoff_completed() + q.flush_unschedulable_leftover()
        };
        let expired = self.cache.lock().cleanup_expired(self.clock.now());
        if !expired.is_empty() {
            tracing::warn!(
                count = expired.len(),
                "assumed pods expired without confirmation"
            );
            self.event(ClusterEvent::ASSIGNED_POD_DELETE);
        }
        if moved > 0 {
            self.wake.notify_one();
        }
    }

    // ---- scheduling cycle ----------------------------------------------------------

    /// Pops one pod (if any is ready) and runs its scheduling cycle.
    pub fn schedule_one(&self) -> Option<CycleOutcome> {
        let q = self.queue.lock().pop()?;
        Some(self.schedule_queued(q))
    }

    fn profile_for(&self, pod: &PodInfo) -> Option<Arc<Framework>> {
        self.profiles.get(profile_name(&pod.pod)).cloned()
    }

    fn schedule_queued(&self, q: QueuedPodInfo) -> CycleOutcome {
        let pod = q.pod.clone();
        let Some(fwk) = self.profile_for(&pod) else {
            self.queue.lock().done(&pod.key);
            return CycleOutcome::Skipped;
        };
        if pod.is_terminating() || self.cache.lock().get_pod(&pod.key).is_some() {
            self.queue.lock().done(&pod.key);
            return CycleOutcome::Skipped;
        }
        let mut snap = self.snapshot.lock();
        self.cache.lock().update_snapshot(&mut snap);
        let mut state = CycleState::new();
        let res =
            self.algorithm
                .lock()
                .schedule_pod(&fwk, &mut state, &pod, &snap, &*self.nominator);
        match res {
            Ok(result) => {
                drop(snap);
                self.assume_and_reserve(fwk, state, q, result)
            }
            Err(ScheduleError::Fit(mut fe)) => {
                let mut failure = Self::failure(pod.clone(), "Unschedulable", String::new());
                if fwk.has_post_filter() {
                    let (res, st) = fwk.run_post_filter(
                        &state,
                        &pod,
                        &snap,
                        &fe.diagnosis.node_to_status,
                        &*self.nominator,
                    );
                    if st.is_success() {
                        if let Some(r) = res {
                            if let Some(n) = &r.nominated_node {
                                self.nominator.add(pod.clone(), n);
                            }
                            for p in &r.nominations_to_clear {
                                self.nominator.remove(&p.key);
                            }
                            failure.preemption = r;
                        }
                    } else if !st.message().is_empty() {
                        fe.diagnosis.post_filter_msg = Some(st.message());
                    }
                }
                drop(snap);
                failure.message = fe.to_string();
                self.queue.lock().add_unschedulable(
                    q,
                    fe.diagnosis.unschedulable_plugins.clone(),
                    false,
                );
                CycleOutcome::Failed(failure)
            }
            Err(ScheduleError::NoNodes) => {
                drop(snap);
                self.queue
                    .lock()
                    .add_unschedulable(q, BTreeSet::new(), false);
                CycleOutcome::Failed(Self::failure(
                    pod,
                    "Unschedulable",
                    ScheduleError::NoNodes.to_string(),
                ))
            }
            Err(e @ ScheduleError::Internal(_)) => {
                drop(snap);
                self.queue
                    .lock()
                    .add_unschedulable(q, BTreeSet::new(), true);
                CycleOutcome::Failed(Self::failure(pod, "SchedulerError", e.to_string()))
            }
        }
    }

    fn failure(pod: Arc<PodInfo>, reason: &str, message: String) -> Failure {
        Failure {
            pod,
            reason: reason.into(),
            message,
            preemption: PostFilterResult::default(),
        }
    }

    fn assume_and_reserve(
        &self,
        fwk: Arc<Framework>,
        mut state: CycleState,
        q: QueuedPodInfo,
        result: ScheduleResult,
    ) -> CycleOutcome {
        let node = result.suggested_host.clone();
        let assumed = Arc::new(q.pod.assumed_on(&node));
        if let Err(e) = self.cache.lock().assume_pod(assumed.clone()) {
            self.queue
                .lock()
                .add_unschedulable(q, BTreeSet::new(), true);
            return CycleOutcome::Failed(Self::failure(assumed, "SchedulerError", e.to_string()));
        }
        let st = fwk.run_reserve(&mut state, &assumed, &node);
        if !st.is_success() {
            return self.undo_assume(&fwk, &mut state, q, &assumed, &node, st);
        }
        let (st, timeout) = fwk.run_permit(&mut state, &assumed, &node);
        let permit_wait = match st.code() {
            Code::Success => None,
            Code::Wait => Some(timeout),
            _ => return self.undo_assume(&fwk, &mut state, q, &assumed, &node, st),
        };
        {
            let mut queue = self.queue.lock();
            queue.done(&assumed.key);
        }
        self.nominator.remove(&assumed.key);
        CycleOutcome::Bind(Box::new(BindingJob {
            fwk,
            state,
            queued: q,
            pod: assumed,
            node,
            permit_wait,
            result,
        }))
    }

    fn undo_assume(
        &self,
        fwk: &Framework,
        state: &mut CycleState,
        q: QueuedPodInfo,
        assumed: &Arc<PodInfo>,
        node: &str,
        st: Status,
    ) -> CycleOutcome {
        fwk.run_unreserve(state, assumed, node);
        if let Err(e) = self.cache.lock().forget_pod(&assumed.key) {
            tracing::error!(error = %e, "forgetting assumed pod");
        }
        let error = st.code() == Code::Error;
        let plugins = st.plugin().into_iter().collect();
        let reason = self.requeue_unassumed(q, plugins, error);
        CycleOutcome::Failed(Self::failure(assumed.clone(), reason, st.message()))
    }

    /// Parks again a pod whose assumed placement was given up (waiting for an event one
    /// of `plugins` registered, or with backoff after an `error`), and tells the queue
    /// the resources it held are free, as a deleted assigned pod's would be. Returns the
    /// failure's reason: `SchedulerError` after an error, else `Unschedulable`.
    fn requeue_unassumed(
        &self,
        q: QueuedPodInfo,
        plugins: BTreeSet<&'static str>,
        error: bool,
    ) -> &'static str {
        self.queue.lock().add_unschedulable(q, plugins, error);
        self.event(ClusterEvent::ASSIGNED_POD_DELETE);
        if error {
            "SchedulerError"
        } else {
            "Unschedulable"
        }
    }

    // ---- binding cycle and reporting ------------------------------------------------

    /// Runs the binding cycle of an assumed pod: wait on permit, PreBind, Bind, PostBind.
    /// On failure the assumption is forgotten and the pod requeued with backoff.
    pub async fn bind(&self, job: BindingJob) -> Result<(), Failure> {
        let BindingJob {
            fwk,
            mut state,
            queued,
            pod,
            node,
            permit_wait,
            ..
        } = job;
        let mut st = Status::success();
        if let Some(t) = permit_wait {
            st = fwk.wait_on_permit(&pod, t).await;
        }
        if st.is_success() {
            st = fwk.run_pre_bind(&pod, &node).await;
        }
        if st.is_success() {
            st = fwk.run_bind(&pod, &node).await;
        }
        if st.is_success() {
            let now = self.clock.now();
            self.cache.lock().finish_binding(&pod.key, now);
            self.bound.fetch_add(1, Ordering::Relaxed);
            crate::metrics::attempt(AttemptResult::Scheduled, fwk.scheduler_name());
            let first = queued.initial_attempt.unwrap_or(queued.timestamp);
            crate::metrics::scheduled(queued.attempts, now.saturating_duration_since(first));
            fwk.run_post_bind(&pod, &node).await;
            return Ok(());
        }
        fwk.run_unreserve(&mut state, &pod, &node);
        if let Err(e) = self.cache.lock().forget_pod(&pod.key) {
            tracing::error!(error = %e, "forgetting pod after failed bind");
        }
        let error = st.code() == Code::Error;
        let plugins = st.plugin().filter(|_| !error).into_iter().collect();
        let reason = self.requeue_unassumed(queued, plugins, error);
        Err(Self::failure(
            pod,
            reason,
            format!("Binding rejected: {}", st.message()),
        ))
    }

    /// Reports a scheduling failure: deletes preemption victims, clears taken
    /// nominations, then records the condition/event.
    pub async fn report_failure(&self, f: &Failure) {
        let result = if f.reason == "SchedulerError" {
            AttemptResult::Error
        } else {
            AttemptResult::Unschedulable
        };
        crate::metrics::attempt(result, profile_name(&f.pod.pod));
        for v in &f.preemption.victims {
            if let Err(e) = self.preemptor.delete_victim(&v.pod, &f.pod.pod).await {
                tracing::warn!(victim = %v.full_name(), error = %e, "deleting preemption victim");
            }
        }
        for p in &f.preemption.nominations_to_clear {
            if let Err(e) = self.preemptor.clear_nomination(&p.pod).await {
                tracing::warn!(pod = %p.full_name(), error = %e, "clearing nomination");
            }
        }
        let outcome = Outcome::Failed {
            reason: f.reason.clone(),
            message: f.message.clone(),
            nominated_node: f.preemption.nominated_node.clone(),
        };
        if let Err(e) = self.reporter.report(&f.pod.pod, &outcome).await {
            tracing::warn!(pod = %f.pod.full_name(), error = %e, "reporting scheduling failure");
        }
    }

    /// Handles one cycle outcome to completion (bind or report).
    pub async fn finish(&self, outcome: CycleOutcome) {
        match outcome {
            CycleOutcome::Bind(job) => {
                let pod = job.pod.clone();
                let node = job.node.clone();
                match self.bind(*job).await {
                    Ok(()) => {
                        if let Err(e) = self
                            .reporter
                            .report(&pod.pod, &Outcome::Scheduled { node })
                            .await
                        {
                            tracing::warn!(pod = %pod.full_name(), error = %e, "reporting scheduled pod");
                        }
                    }
                    Err(f) => self.report_failure(&f).await,
                }
            }
            CycleOutcome::Failed(f) => self.report_failure(&f).await,
            CycleOutcome::Skipped => {}
        }
    }

    /// Runs the scheduler until `shutdown` resolves: one scheduling cycle at a time,
    /// binding and reporting on spawned tasks, housekeeping every second.
    pub async fn run(self: Arc<Self>, shutdown: impl std::future::Future<Output = ()>) {
        crate::metrics::follow(&self);
        let ticker = {
            let me = self.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_secs(1));
                loop {
                    tick.tick().await;
                    me.flush();
                }
            })
        };
        tokio::pin!(shutdown);
        let mut slice_start = std::time::Instant::now();
        loop {
            let notified = self.wake.notified();
            match self.schedule_one() {
                Some(outcome) => {
                    if !matches!(outcome, CycleOutcome::Skipped) {
                        let me = self.clone();
                        tokio::spawn(async move { me.finish(outcome).await });
                    }
                    if slice_start.elapsed() >= CYCLE_SLICE {
                        tokio::task::yield_now().await;
                        slice_start = std::time::Instant::now();
                    }
                }
                None => {
                    tokio::select! {
                        _ = notified => {}
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        _ = &mut shutdown => break,
                    }
                }
            }
        }
        ticker.abort();
    }
}
/// What a pod's status says of the resources its containers run with and
/// were allocated, and why its resize waits: the parts of the status the
/// scheduler's requests depend on.
type ReportedResources<'a> = (
    Vec<(
        &'a str,
        Option<&'a ResourceRequirements>,
        Option<&'a BTreeMap<String, Quantity>>,
    )>,
    Option<&'a str>,
);

fn reported_resources(pod: &Pod) -> ReportedResources<'_> {
    let Some(status) = pod.status.as_ref() else {
        return (Vec::new(), None);
    };
    let containers = (status.container_statuses.iter().flatten())
        .chain(status.init_container_statuses.iter().flatten())
        .filter(|c| c.resources.is_some() || c.allocated_resources.is_some())
        .map(|c| {
            (
                c.name.as_str(),
                c.resources.as_ref(),
                c.allocated_resources.as_ref(),
            )
        })
        .collect();
    let pending = (status.conditions.iter().flatten())
        .find(|c| c.type_ == "PodResizePending")
        .and_then(|c| c.reason.as_deref());
    (containers, pending)
}
