//! `Framework`: one profile's plugins, ordered per extension point, and the logic that
//! runs each extension point (merging results, normalizing and weighting scores).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::oneshot;

use super::config::{ConfigError, DEFAULT_PLUGINS, PluginSet, Profile};
use super::cycle_state::CycleState;
use super::events::ClusterEvent;
use super::interface::*;
use super::registry::{Registry, Services};
use super::status::{Code, Status};
use crate::cache::{NodeInfo, Snapshot};
use crate::pod_info::{PodInfo, PodKey};

struct WaitingPod {
    pending: HashSet<&'static str>,
    done: Option<oneshot::Sender<Status>>,
}

/// The plugins of one profile and the extension-point runners.
pub struct Framework {
    scheduler_name: String,
    percentage_of_nodes_to_score: Option<u32>,
    pre_filter: Vec<Arc<dyn PreFilterPlugin>>,
    filter: Vec<Arc<dyn FilterPlugin>>,
    post_filter: Vec<Arc<dyn PostFilterPlugin>>,
    pre_score: Vec<Arc<dyn PreScorePlugin>>,
    score: Vec<(Arc<dyn ScorePlugin>, i64)>,
    reserve: Vec<Arc<dyn ReservePlugin>>,
    permit: Vec<Arc<dyn PermitPlugin>>,
    pre_bind: Vec<Arc<dyn PreBindPlugin>>,
    bind: Vec<Arc<dyn BindPlugin>>,
    post_bind: Vec<Arc<dyn PostBindPlugin>>,
    events: Vec<(&'static str, ClusterEvent, Arc<dyn Plugin>)>,
    waiting: Mutex<HashMap<PodKey, WaitingPod>>,
}

fn disabled(set: &PluginSet, name: &str) -> bool {
    set.disabled.iter().any(|d| d.name == "*" || d.name == name)
}

/// The plugins active at an extension point (`active`, with their weights) that
/// serve it, each through its view for the point (`as_filter`, ...).
fn serving<T: ?Sized>(
    active: Vec<(Arc<dyn Plugin>, i64)>,
    view: impl Fn(Arc<dyn Plugin>) -> Option<Arc<T>>,
) -> Vec<Arc<T>> {
    active.into_iter().filter_map(|(pl, _)| view(pl)).collect()
}

/// Runs `step` for each of `plugins` in order until one fails: that status, tagged with
/// its plugin, or success when none does.
fn until_failure<P: Plugin + ?Sized>(
    plugins: &[Arc<P>],
    mut step: impl FnMut(&P) -> Status,
) -> Status {
    for pl in plugins {
        let st = step(pl);
        if !st.is_success() {
            return st.with_plugin(pl.name());
        }
    }
    Status::success()
}

impl Framework {
    /// Builds a profile's framework from the registry.
    pub fn new(
        profile: &Profile,
        registry: &Registry,
        services: &Services,
    ) -> Result<Self, ConfigError> {
        let p = &profile.plugins;
        // multiPoint: defaults minus disabled, plus enabled (weights override).
        let mut multi: Vec<(String, i64)> = DEFAULT_PLUGINS
            .iter()
            .filter(|(n, _)| !disabled(&p.multi_point, n))
            .map(|(n, w)| (n.to_string(), *w))
            .collect();
        for e in &p.multi_point.enabled {
            match multi.iter_mut().find(|(n, _)| *n == e.name) {
                Some(entry) => entry.1 = e.weight.unwrap_or(entry.1),
                None => multi.push((e.name.clone(), e.weight.unwrap_or(0))),
            }
        }
        let mut names: Vec<String> = multi.iter().map(|(n, _)| n.clone()).collect();
        for set in [
            &p.pre_filter,
            &p.filter,
            &p.post_filter,
            &p.pre_score,
            &p.score,
            &p.reserve,
            &p.permit,
            &p.pre_bind,
            &p.bind,
            &p.post_bind,
        ] {
            for e in &set.enabled {
                if !names.contains(&e.name) {
                    names.push(e.name.clone());
                }
            }
        }
        let mut instances: HashMap<String, Arc<dyn Plugin>> = HashMap::new();
        for name in &names {
            let factory = registry
                .get(name)
                .ok_or_else(|| ConfigError::UnknownPlugin {
                    profile: profile.scheduler_name.clone(),
                    plugin: name.clone(),
                })?;
            let args = profile
                .plugin_config
                .iter()
                .find(|c| &c.name == name)
                .map(|c| c.args.clone())
                .unwrap_or_default();
            instances.insert(name.clone(), factory(&args, services)?);
        }
        // The plugins active at one extension point, in order.
        let point = |set: &PluginSet| -> Vec<(Arc<dyn Plugin>, i64)> {
            let mut out: Vec<(Arc<dyn Plugin>, i64)> = Vec::new();
            let mut seen = HashSet::new();
            for e in &set.enabled {
                if seen.insert(e.name.clone()) {
                    let w = e
                        .weight
                        .or_else(|| multi.iter().find(|(n, _)| *n == e.name).map(|(_, w)| *w))
                        .unwrap_or(0);
                    out.push((instances[&e.name].clone(), w));
                }
            }
            for (n, w) in &multi {
                if !disabled(set, n) && seen.insert(n.clone()) {
                    out.push((instances[n].clone(), *w));
                }
            }
            out
        };
        let mut events = Vec::new();
        // Statuses carry the plugin's own name, so events are keyed by it too.
        for pl in instances.values() {
            for ev in pl.events_to_register() {
                events.push((pl.name(), ev, pl.clone()));
            }
        }
        Ok(Framework {
            scheduler_name: profile.scheduler_name.clone(),
            percentage_of_nodes_to_score: profile.percentage_of_nodes_to_score,
            pre_filter: serving(point(&p.pre_filter), |pl| pl.as_pre_filter()),
            filter: serving(point(&p.filter), |pl| pl.as_filter()),
            post_filter: serving(point(&p.post_filter), |pl| pl.as_post_filter()),
            pre_score: serving(point(&p.pre_score), |pl| pl.as_pre_score()),
            score: point(&p.score)
                .into_iter()
                .filter_map(|(pl, w)| pl.as_score().map(|s| (s, if w <= 0 { 1 } else { w })))
                .collect(),
            reserve: serving(point(&p.reserve), |pl| pl.as_reserve()),
            permit: serving(point(&p.permit), |pl| pl.as_permit()),
            pre_bind: serving(point(&p.pre_bind), |pl| pl.as_pre_bind()),
            bind: serving(point(&p.bind), |pl| pl.as_bind()),
            post_bind: serving(point(&p.post_bind), |pl| pl.as_post_bind()),
            events,
            waiting: Mutex::new(HashMap::new()),
        })
    }

    /// The `schedulerName` this profile serves.
    pub fn scheduler_name(&self) -> &str {
        &self.scheduler_name
    }

    /// Profile override of the percentage of nodes to score.
    pub fn percentage_of_nodes_to_score(&self) -> Option<u32> {
        self.percentage_of_nodes_to_score
    }

    /// (plugin name, event, plugin) triples the queue uses for event-driven requeueing
    /// (the plugin answers queueing hints).
    pub fn events(&self) -> &[(&'static str, ClusterEvent, Arc<dyn Plugin>)] {
        &self.events
    }

    /// Names of the score plugins with their weights.
    pub fn score_weights(&self) -> Vec<(&'static str, i64)> {
        self.score.iter().map(|(p, w)| (p.name(), *w)).collect()
    }

    /// Names of the filter plugins, in order.
    pub fn filter_names(&self) -> Vec<&'static str> {
        self.filter.iter().map(|p| p.name()).collect()
    }

    /// True if any PostFilter plugin is configured.
    pub fn has_post_filter(&self) -> bool {
        !self.post_filter.is_empty()
    }

    /// Runs PreFilter plugins; merges their node restrictions (intersection).
    pub fn run_pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let mut merged: Option<PreFilterResult> = None;
        for pl in &self.pre_filter {
            let (res, st) = pl.pre_filter(state, pod, snapshot);
            if st.is_skip() {
                state.skip_filter(pl.name());
                continue;
            }
            if !st.is_success() {
                return (None, st.with_plugin(pl.name()));
            }
            if let Some(mut r) = res.filter(|r| r.node_names.is_some()) {
                r.restricted_by = vec![pl.name()];
                merged = Some(match merged {
                    None => r,
                    Some(mut prev) => {
                        let a = prev.node_names.unwrap_or_default();
                        let b = r.node_names.unwrap_or_default();
                        prev.restricted_by.push(pl.name());
                        PreFilterResult {
                            node_names: Some(a.into_iter().filter(|n| b.contains(n)).collect()),
                            restricted_by: prev.restricted_by,
                        }
                    }
                });
            }
        }
        (merged, Status::success())
    }

    /// Runs Filter plugins on one node; returns the first non-success status.
    pub fn run_filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        for pl in &self.filter {
            if state.is_filter_skipped(pl.name()) {
                continue;
            }
            let st = pl.filter(state, pod, node);
            if !st.is_success() {
                let st = if st.is_rejected() {
                    st
                } else {
                    Status::error(st.message())
                };
                return st.with_plugin(pl.name());
            }
        }
        Status::success()
    }

    /// Runs filters, first with nominated pods of equal or higher priority added to the
    /// node (so a preemptor's room is not taken), then without them.
    pub fn run_filter_with_nominated(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &Arc<NodeInfo>,
        nominated: &dyn NominatedPods,
    ) -> Status {
        if !nominated.any() {
            return self.run_filter(state, pod, node);
        }
        let others: Vec<Arc<PodInfo>> = nominated
            .nominated_pods_for_node(node.name())
            .into_iter()
            .filter(|p| p.key != pod.key && p.priority >= pod.priority)
            .collect();
        if others.is_empty() {
            return self.run_filter(state, pod, node);
        }
        let mut st2 = state.clone();
        let mut ni = NodeInfo::clone(node);
        for p in &others {
            ni.add_pod(p.clone());
            let s = self.run_pre_filter_extensions(&mut st2, pod, SimulatedPod::added(p, &ni));
            if !s.is_success() {
                return s;
            }
        }
        let first = self.run_filter(&st2, pod, &ni);
        if !first.is_success() {
            return first;
        }
        self.run_filter(state, pod, node)
    }

    /// Tells PreFilter extensions that `other` was added to or removed from its node in
    /// a simulation.
    pub fn run_pre_filter_extensions(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        other: SimulatedPod<'_>,
    ) -> Status {
        until_failure(&self.pre_filter, |pl| match pl.extensions() {
            Some(ext) if !state.is_filter_skipped(pl.name()) => ext.update(state, pod, other),
            _ => Status::success(),
        })
    }

    /// Runs PostFilter plugins until one succeeds or returns an error.
    pub fn run_post_filter(
        &self,
        state: &CycleState,
        pod: &Arc<PodInfo>,
        snapshot: &Snapshot,
        statuses: &NodeToStatus,
        nominated: &dyn NominatedPods,
    ) -> (Option<PostFilterResult>, Status) {
        let ctx = PostFilterContext {
            framework: self,
            nominated,
        };
        let mut reasons = Vec::new();
        for pl in &self.post_filter {
            let (res, st) = pl.post_filter(state, pod, snapshot, statuses, &ctx);
            if st.is_success() {
                return (res, st);
            }
            if st.code() == Code::Error {
                return (None, st.with_plugin(pl.name()));
            }
            reasons.extend(st.reasons().iter().cloned());
        }
        (None, Status::with_reasons(Code::Unschedulable, reasons))
    }

    /// Runs PreScore plugins.
    pub fn run_pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        snapshot: &Snapshot,
    ) -> Status {
        until_failure(&self.pre_score, |pl| {
            let st = pl.pre_score(state, pod, nodes, snapshot);
            if st.is_skip() {
                state.skip_score(pl.name());
                return Status::success();
            }
            st
        })
    }

    /// Scores, normalizes and weights; returns the total per node (same order as `nodes`).
    pub fn run_score(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> Result<Vec<i64>, Status> {
        let mut totals = vec![0i64; nodes.len()];
        let mut scratch: Vec<NodeScore> = Vec::new();
        for (pl, weight) in &self.score {
            if state.is_score_skipped(pl.name()) {
                continue;
            }
            if scratch.is_empty() {
                scratch = nodes
                    .iter()
                    .map(|n| NodeScore {
                        name: n.name(),
                        score: 0,
                    })
                    .collect();
            }
            for (i, n) in nodes.iter().enumerate() {
                let (s, st) = pl.score(state, pod, n);
                if !st.is_success() {
                    return Err(st.with_plugin(pl.name()));
                }
                scratch[i].score = s;
            }
            let st = pl.normalize(state, pod, &mut scratch);
            if !st.is_success() {
                return Err(st.with_plugin(pl.name()));
            }
            for (i, s) in scratch.iter().enumerate() {
                if !(0..=MAX_NODE_SCORE).contains(&s.score) {
                    return Err(Status::error(format!(
                        "plugin {} returns an invalid score {} for node {}",
                        pl.name(),
                        s.score,
                        s.name
                    )));
                }
                totals[i] += s.score * weight;
            }
        }
        Ok(totals)
    }

    /// Runs Reserve plugins; on failure the caller must run Unreserve.
    pub fn run_reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        until_failure(&self.reserve, |pl| pl.reserve(state, pod, node))
    }

    /// Runs Unreserve in reverse order.
    pub fn run_unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) {
        for pl in self.reserve.iter().rev() {
            pl.unreserve(state, pod, node);
        }
    }

    /// Runs Permit plugins. A `Wait` result registers the pod as waiting; the binding
    /// cycle then calls `wait_on_permit`.
    pub fn run_permit(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        node: &str,
    ) -> (Status, Duration) {
        let mut pending = HashSet::new();
        let mut timeout = Duration::MAX;
        for pl in &self.permit {
            let (st, t) = pl.permit(state, pod, node);
            match st.code() {
                Code::Success | Code::Skip => {}
                Code::Wait => {
                    pending.insert(pl.name());
                    timeout = timeout.min(t);
                }
                Code::Error => return (st.with_plugin(pl.name()), Duration::ZERO),
                _ => return (st.with_plugin(pl.name()), Duration::ZERO),
            }
        }
        if pending.is_empty() {
            return (Status::success(), Duration::ZERO);
        }
        self.waiting.lock().insert(
            pod.key.clone(),
            WaitingPod {
                pending,
                done: None,
            },
        );
        (Status::new(Code::Wait, "waiting on permit"), timeout)
    }

    /// Waits until every waiting Permit plugin allows the pod, one rejects it, or the
    /// timeout passes (then the pod is rejected as unschedulable).
    pub async fn wait_on_permit(&self, pod: &PodInfo, timeout: Duration) -> Status {
        let rx = {
            let mut w = self.waiting.lock();
            let Some(wp) = w.get_mut(&pod.key) else {
                return Status::success();
            };
            if wp.pending.is_empty() {
                w.remove(&pod.key);
                return Status::success();
            }
            let (tx, rx) = oneshot::channel();
            wp.done = Some(tx);
            rx
        };
        let res = tokio::time::timeout(timeout, rx).await;
        self.waiting.lock().remove(&pod.key);
        match res {
            Ok(Ok(st)) => st,
            Ok(Err(_)) => Status::error("permit wait aborted"),
            Err(_) => Status::unschedulable("rejected due to timeout after waiting at permit"),
        }
    }

    /// A Permit plugin allows a waiting pod.
    pub fn allow_waiting_pod(&self, key: &str, plugin: &'static str) {
        let mut w = self.waiting.lock();
        if let Some(wp) = w.get_mut(key) {
            wp.pending.remove(plugin);
            if wp.pending.is_empty()
                && let Some(tx) = wp.done.take()
            {
                let _ = tx.send(Status::success());
            }
        }
    }

    /// Rejects a waiting pod.
    pub fn reject_waiting_pod(&self, key: &str, plugin: &'static str, reason: &str) {
        let mut w = self.waiting.lock();
        if let Some(wp) = w.get_mut(key) {
            wp.pending.clear();
            let st = Status::unschedulable(reason.to_string()).with_plugin(plugin);
            match wp.done.take() {
                Some(tx) => {
                    let _ = tx.send(st);
                }
                None => {
                    w.remove(key);
                }
            }
        }
    }

    /// Runs PreBind plugins.
    pub async fn run_pre_bind(&self, pod: &PodInfo, node: &str) -> Status {
        for pl in &self.pre_bind {
            let st = pl.pre_bind(pod, node).await;
            if !st.is_success() && !st.is_skip() {
                return st.with_plugin(pl.name());
            }
        }
        Status::success()
    }

    /// Runs Bind plugins until one does not skip.
    pub async fn run_bind(&self, pod: &PodInfo, node: &str) -> Status {
        for pl in &self.bind {
            let st = pl.bind(pod, node).await;
            if st.is_skip() {
                continue;
            }
            return if st.is_success() {
                st
            } else {
                st.with_plugin(pl.name())
            };
        }
        Status::error("no bind plugin bound the pod")
    }

    /// Runs PostBind plugins.
    pub async fn run_post_bind(&self, pod: &PodInfo, node: &str) {
        for pl in &self.post_bind {
            pl.post_bind(pod, node).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::config::{PluginRef, PluginSet, Plugins};
    use crate::listers::MemoryListers;
    use crate::testing::{FakeApi, PodBuilder};

    struct Gate;

    impl Plugin for Gate {
        fn name(&self) -> &'static str {
            "Gate"
        }
        fn as_permit(self: Arc<Self>) -> Option<Arc<dyn PermitPlugin>> {
            Some(self)
        }
    }

    impl PermitPlugin for Gate {
        fn permit(
            &self,
            _state: &mut CycleState,
            pod: &PodInfo,
            _node: &str,
        ) -> (Status, Duration) {
            if pod.name.starts_with("deny") {
                (Status::unschedulable("denied by gate"), Duration::ZERO)
            } else {
                (
                    Status::new(Code::Wait, "wait"),
                    Duration::from_millis(if pod.name.starts_with("slow") {
                        20
                    } else {
                        60_000
                    }),
                )
            }
        }
    }

    fn framework() -> Framework {
        let mut registry = crate::plugins::in_tree_registry();
        registry.register("Gate", |_, _| Ok(Arc::new(Gate)));
        let profile = Profile {
            plugins: Plugins {
                permit: PluginSet {
                    enabled: vec![PluginRef {
                        name: "Gate".into(),
                        weight: None,
                    }],
                    disabled: vec![],
                },
                ..Default::default()
            },
            ..Default::default()
        };
        let services =
            Services::in_memory(Arc::new(MemoryListers::new()), Arc::new(FakeApi::default()));
        Framework::new(&profile, &registry, &services).unwrap()
    }

    fn pod(name: &str) -> PodInfo {
        PodInfo::new(Arc::new(PodBuilder::new(name).build()))
    }

    #[tokio::test]
    async fn permit_wait_allow_reject_and_timeout() {
        let fwk = Arc::new(framework());
        let (st, _) = fwk.run_permit(&mut CycleState::new(), &pod("deny-me"), "n1");
        assert_eq!(
            (st.code(), st.plugin()),
            (Code::Unschedulable, Some("Gate"))
        );

        let p = pod("ok");
        let (st, timeout) = fwk.run_permit(&mut CycleState::new(), &p, "n1");
        assert_eq!(st.code(), Code::Wait);
        let f2 = fwk.clone();
        let key = p.key.clone();
        let allow = tokio::spawn(async move {
            tokio::task::yield_now().await;
            f2.allow_waiting_pod(&key, "Gate");
        });
        // Allowing before the wait starts must also work: the pending set is checked first.
        allow.await.unwrap();
        assert!(fwk.wait_on_permit(&p, timeout).await.is_success());

        let r = pod("rejected");
        let (_, timeout) = fwk.run_permit(&mut CycleState::new(), &r, "n1");
        let f3 = fwk.clone();
        let key = r.key.clone();
        let waiter =
            tokio::spawn(async move { f3.wait_on_permit(&pod("rejected"), timeout).await });
        while fwk
            .waiting
            .lock()
            .get(&key)
            .is_none_or(|w| w.done.is_none())
        {
            tokio::task::yield_now().await;
        }
        fwk.reject_waiting_pod(&key, "Gate", "no room in the gang");
        let st = waiter.await.unwrap();
        assert_eq!(
            (st.code(), st.message()),
            (Code::Unschedulable, "no room in the gang".to_string())
        );

        let s = pod("slow");
        let (_, timeout) = fwk.run_permit(&mut CycleState::new(), &s, "n1");
        let st = fwk.wait_on_permit(&s, timeout).await;
        assert_eq!(
            st.message(),
            "rejected due to timeout after waiting at permit"
        );
    }

    #[test]
    fn default_profile_plugin_order() {
        let fwk = framework();
        assert_eq!(
            fwk.filter_names(),
            vec![
                "NodeUnschedulable",
                "NodeName",
                "TaintToleration",
                "NodeAffinity",
                "NodePorts",
                "NodeResourcesFit",
                "VolumeBinding",
                "PodTopologySpread",
                "InterPodAffinity"
            ]
        );
        assert!(fwk.has_post_filter());
    }
}
