//! PodTopologySpread: keep matching pods evenly spread over topology domains.
//! `DoNotSchedule` constraints filter (skew = matching pods in the node's domain, plus
//! the pod itself if it matches, minus the global minimum, must not exceed maxSkew);
//! `ScheduleAnyway` constraints score (fewer matching pods in the domain is better).
//! `nodeAffinityPolicy` (default Honor) and `nodeTaintsPolicy` (default Ignore) decide
//! which nodes' pods count; `minDomains` treats the global minimum as 0 while fewer
//! domains exist.
//!
//! A pod without constraints of its own gets default ones, as upstream: by default
//! (`defaultingType: System`) zone maxSkew 5 and hostname maxSkew 3, both
//! `ScheduleAnyway`, over the pods selected by the Services selecting the pod and by its
//! controlling ReplicationController, ReplicaSet or StatefulSet; a pod nothing selects
//! gets none. `defaultingType: List` uses `defaultConstraints` from the plugin args.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use serde::Deserialize;

use super::helpers::{FILTERING_EFFECTS, RequiredNodeAffinity, first_untolerated};
use super::impl_plugin;
use crate::cache::{NodeInfo, Snapshot};
use crate::framework::*;
use crate::listers::{SPREAD_CONTROLLER_KINDS, WorkloadLister};
use crate::pod_info::PodInfo;
use crate::selectors::{Labels, Selector};

/// Plugin name.
pub(crate) const NAME: &str = "PodTopologySpread";
/// Rejection reason, as upstream.
pub(crate) const REASON: &str = "node(s) didn't match pod topology spread constraints";
/// Rejection reason when the node lacks a topology key, as upstream.
pub(crate) const REASON_MISSING_LABEL: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";
const FILTER_KEY: &str = "PreFilterPodTopologySpread";
const SCORE_KEY: &str = "PreScorePodTopologySpread";
const HOSTNAME: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";

#[derive(Debug, Clone)]
struct Constraint {
    max_skew: i64,
    min_domains: Option<i64>,
    key: String,
    selector: Selector,
    honor_affinity: bool,
    honor_taints: bool,
}

impl Constraint {
    fn compile(c: &TopologySpreadConstraint, selector: Selector) -> Self {
        Constraint {
            max_skew: i64::from(c.max_skew),
            min_domains: c.min_domains.map(i64::from),
            key: c.topology_key.clone(),
            selector,
            honor_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
            honor_taints: c.node_taints_policy.as_deref() == Some("Honor"),
        }
    }
}

/// How pods without constraints of their own are spread (`defaultingType`).
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
pub(crate) enum DefaultingType {
    /// The built-in zone (maxSkew 5) and hostname (maxSkew 3) `ScheduleAnyway` constraints.
    #[default]
    System,
    /// The `defaultConstraints` of the args (none if empty).
    List,
}

/// Plugin args (`PodTopologySpreadArgs`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Args {
    /// Constraints for pods without their own, when `defaultingType` is `List`; they
    /// must not carry a label selector (it is derived from the pod's Services and
    /// controller).
    #[serde(default)]
    pub default_constraints: Vec<TopologySpreadConstraint>,
    /// Where default constraints come from.
    #[serde(default)]
    pub defaulting_type: DefaultingType,
}

/// The system default constraints, as upstream.
pub(crate) fn system_default_constraints() -> Vec<TopologySpreadConstraint> {
    let c = |key: &str, skew: i32| TopologySpreadConstraint {
        topology_key: key.into(),
        max_skew: skew,
        when_unsatisfiable: "ScheduleAnyway".into(),
        ..Default::default()
    };
    vec![c(ZONE, 5), c(HOSTNAME, 3)]
}

/// Constraints for one pod and one `whenUnsatisfiable` value, and whether they are the
/// system defaults (then nodes lacking a topology key still score on the other keys).
struct PodConstraints {
    list: Vec<Constraint>,
    system_defaulted: bool,
}

/// The PodTopologySpread plugin.
pub(crate) struct PodTopologySpread {
    defaults: Vec<TopologySpreadConstraint>,
    system_defaulting: bool,
    workloads: Option<Arc<dyn WorkloadLister>>,
}

impl PodTopologySpread {
    #[cfg(test)]
    /// A plugin that applies no default constraints (tests of explicit constraints).
    pub(crate) fn without_defaults() -> Self {
        PodTopologySpread {
            defaults: Vec::new(),
            system_defaulting: false,
            workloads: None,
        }
    }

    /// A plugin with `args`, reading Service and controller selectors from `workloads`.
    pub(crate) fn with_args(
        args: Args,
        workloads: Arc<dyn WorkloadLister>,
    ) -> Result<Self, ConfigError> {
        let system = args.defaulting_type == DefaultingType::System;
        if system && !args.default_constraints.is_empty() {
            return Err(ConfigError::InvalidArgs {
                plugin: NAME.into(),
                message: "defaultConstraints must be empty when defaultingType is System".into(),
            });
        }
        if args
            .default_constraints
            .iter()
            .any(|c| c.label_selector.is_some())
        {
            return Err(ConfigError::InvalidArgs {
                plugin: NAME.into(),
                message: "defaultConstraints must not set labelSelector".into(),
            });
        }
        Ok(PodTopologySpread {
            defaults: if system {
                system_default_constraints()
            } else {
                args.default_constraints
            },
            system_defaulting: system,
            workloads: Some(workloads),
        })
    }

    fn constraints(&self, pod: &PodInfo, when: &str) -> PodConstraints {
        let own: &[TopologySpreadConstraint] = pod
            .spec()
            .topology_spread_constraints
            .as_deref()
            .unwrap_or(&[]);
        if !own.is_empty() {
            let list = own
                .iter()
                .filter(|c| c.when_unsatisfiable == when)
                .map(|c| {
                    let mut selector = Selector::from_optional(c.label_selector.as_ref());
                    for k in c.match_label_keys.iter().flatten() {
                        if let Some(v) = pod.labels().get(k) {
                            selector.require_equal(k, v);
                        }
                    }
                    Constraint::compile(c, selector)
                })
                .collect();
            return PodConstraints {
                list,
                system_defaulted: false,
            };
        }
        let wanted: Vec<&TopologySpreadConstraint> = self
            .defaults
            .iter()
            .filter(|c| c.when_unsatisfiable == when)
            .collect();
        let list = match (&self.workloads, wanted.is_empty()) {
            (Some(workloads), false) => {
                let selector = default_selector(pod, workloads.as_ref());
                if selector.is_everything() {
                    Vec::new()
                } else {
                    wanted
                        .into_iter()
                        .map(|c| Constraint::compile(c, selector.clone()))
                        .collect()
                }
            }
            _ => Vec::new(),
        };
        PodConstraints {
            list,
            system_defaulted: self.system_defaulting,
        }
    }
}

/// The pods a default constraint spreads: those matching every selector of the
/// Services selecting `pod` and of its controlling ReplicationController, ReplicaSet
/// or StatefulSet. No requirement at all means nothing selects the pod.
fn default_selector(pod: &PodInfo, workloads: &dyn WorkloadLister) -> Selector {
    let mut merged = Labels::new();
    for set in workloads.service_selectors(&pod.namespace, pod.labels()) {
        merged.extend(set);
    }
    let mut selector = Selector::from_map(&merged);
    let owner = pod
        .pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true));
    if let Some(o) = owner {
        let group = o.api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let known = match o.kind.as_str() {
            "ReplicationController" => group.is_empty(),
            "ReplicaSet" | "StatefulSet" => group == "apps",
            _ => false,
        };
        if known
            && SPREAD_CONTROLLER_KINDS.contains(&o.kind.as_str())
            && let Some(sel) = workloads.controller_selector(&o.kind, &pod.namespace, &o.name)
        {
            selector.and(&sel);
        }
    }
    selector
}

fn has_all_keys(labels: &Labels, cs: &[Constraint]) -> bool {
    cs.iter().all(|c| labels.contains_key(&c.key))
}

fn node_included(
    c: &Constraint,
    pod: &PodInfo,
    affinity: &RequiredNodeAffinity,
    node: &NodeInfo,
) -> bool {
    if c.honor_affinity && !affinity.matches_node(node) {
        return false;
    }
    if c.honor_taints
        && first_untolerated(node.taints(), pod.tolerations(), FILTERING_EFFECTS).is_some()
    {
        return false;
    }
    true
}

fn counts_towards(c: &Constraint, pod: &PodInfo, other: &PodInfo) -> bool {
    other.namespace == pod.namespace
        && !other.is_terminating()
        && c.selector.matches(other.labels())
}

fn count_on_node(c: &Constraint, pod: &PodInfo, node: &NodeInfo) -> i64 {
    node.pods
        .iter()
        .filter(|p| counts_towards(c, pod, p))
        .count() as i64
}

/// Constructor for the registry.
pub(crate) fn new(args: &serde_json::Value, s: &Services) -> Result<Arc<dyn Plugin>, ConfigError> {
    Ok(Arc::new(PodTopologySpread::with_args(
        parse_args(NAME, args)?,
        s.workloads.clone(),
    )?))
}

impl_plugin! {
    PodTopologySpread = NAME;
    events: [
        ClusterEvent::ASSIGNED_POD_ADD_DELETE_OR_LABEL_CHANGE,
        ClusterEvent::new(
            EventResource::Node,
            ActionSet::ADD
                .or(ActionSet::DELETE)
                .or(ActionSet::UPDATE_NODE_LABEL)
                .or(ActionSet::UPDATE_NODE_TAINT),
        ),
    ];
    views!(pre_filter, filter, pre_score, score);
}

#[derive(Debug, Clone)]
struct FilterState {
    constraints: Vec<Constraint>,
    affinity: RequiredNodeAffinity,
    /// Per constraint: domain value → matching pods.
    counts: Vec<HashMap<String, i64>>,
    /// Per constraint: minimum over domains.
    min: Vec<i64>,
}

impl FilterState {
    fn recompute_min(&mut self, i: usize) {
        self.min[i] = self.counts[i]
            .values()
            .copied()
            .min()
            .unwrap_or(i64::from(i32::MAX));
    }

    fn update(&mut self, pod: &PodInfo, other: &PodInfo, node: &NodeInfo, delta: i64) {
        if !has_all_keys(node.labels(), &self.constraints) {
            return;
        }
        for i in 0..self.constraints.len() {
            let c = &self.constraints[i];
            if !node_included(c, pod, &self.affinity, node) || !counts_towards(c, pod, other) {
                continue;
            }
            let Some(v) = node.labels().get(&c.key) else {
                continue;
            };
            *self.counts[i].entry(v.clone()).or_insert(0) += delta;
            self.recompute_min(i);
        }
    }
}

impl PreFilterPlugin for PodTopologySpread {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let cs = self.constraints(pod, "DoNotSchedule").list;
        if cs.is_empty() {
            return (None, Status::skip());
        }
        let affinity = RequiredNodeAffinity::of(pod);
        let mut counts: Vec<HashMap<String, i64>> = vec![HashMap::new(); cs.len()];
        for node in snapshot.nodes() {
            let labels = node.labels();
            if !has_all_keys(labels, &cs) {
                continue;
            }
            for (i, c) in cs.iter().enumerate() {
                if !node_included(c, pod, &affinity, node) {
                    continue;
                }
                let n = count_on_node(c, pod, node);
                let value = &labels[&c.key];
                match counts[i].get_mut(value) {
                    Some(slot) => *slot += n,
                    None => {
                        counts[i].insert(value.clone(), n);
                    }
                }
            }
        }
        let mut fs = FilterState {
            min: vec![0; cs.len()],
            constraints: cs,
            affinity,
            counts,
        };
        for i in 0..fs.constraints.len() {
            fs.recompute_min(i);
        }
        state.write(FILTER_KEY, fs);
        (None, Status::success())
    }

    fn extensions(&self) -> Option<&dyn PreFilterExtensions> {
        Some(self)
    }
}

impl PreFilterExtensions for PodTopologySpread {
    fn update(&self, state: &mut CycleState, pod: &PodInfo, other: SimulatedPod<'_>) -> Status {
        if let Some(fs) = state.read_mut::<FilterState>(FILTER_KEY) {
            fs.update(pod, other.pod, other.node, other.delta());
        }
        Status::success()
    }
}

impl FilterPlugin for PodTopologySpread {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(fs) = state.read::<FilterState>(FILTER_KEY) else {
            return Status::success();
        };
        let labels = node.labels();
        for (i, c) in fs.constraints.iter().enumerate() {
            let Some(value) = labels.get(&c.key) else {
                return Status::unresolvable(REASON_MISSING_LABEL);
            };
            let self_match = i64::from(c.selector.matches(pod.labels()));
            let mut min = fs.min[i];
            if c.min_domains
                .is_some_and(|md| (fs.counts[i].len() as i64) < md)
            {
                min = 0;
            }
            let matching = fs.counts[i].get(value).copied().unwrap_or(0);
            if matching + self_match - min > c.max_skew {
                return Status::unschedulable(REASON);
            }
        }
        Status::success()
    }
}

#[derive(Debug, Clone)]
struct ScoreState {
    constraints: Vec<Constraint>,
    ignored: HashSet<String>,
    counts: Vec<HashMap<String, i64>>,
    weights: Vec<f64>,
}

impl PreScorePlugin for PodTopologySpread {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        snapshot: &Snapshot,
    ) -> Status {
        let PodConstraints {
            list: cs,
            system_defaulted,
        } = self.constraints(pod, "ScheduleAnyway");
        if cs.is_empty() {
            return Status::skip();
        }
        // System defaults also score nodes lacking some topology keys, on the keys
        // they have; explicit constraints ignore such nodes.
        let require_all = !system_defaulted;
        let affinity = RequiredNodeAffinity::of(pod);
        let mut ignored = HashSet::new();
        let mut counts: Vec<HashMap<String, i64>> = vec![HashMap::new(); cs.len()];
        let mut domains: Vec<HashSet<&str>> = vec![HashSet::new(); cs.len()];
        for n in nodes {
            let labels = n.labels();
            if require_all && !has_all_keys(labels, &cs) {
                ignored.insert(n.name().to_string());
                continue;
            }
            for (i, c) in cs.iter().enumerate() {
                let Some(v) = labels.get(&c.key) else {
                    continue;
                };
                domains[i].insert(v.as_str());
                if c.key != HOSTNAME {
                    counts[i].entry(v.clone()).or_insert(0);
                }
            }
        }
        for node in snapshot.nodes() {
            let labels = node.labels();
            if require_all && !has_all_keys(labels, &cs) {
                continue;
            }
            for (i, c) in cs.iter().enumerate() {
                if c.key == HOSTNAME || !node_included(c, pod, &affinity, node) {
                    continue;
                }
                let Some(v) = labels.get(&c.key) else {
                    continue;
                };
                if let Some(slot) = counts[i].get_mut(v) {
                    *slot += count_on_node(c, pod, node);
                }
            }
        }
        let weights = domains
            .iter()
            .map(|d| ((d.len() + 2) as f64).ln())
            .collect();
        state.write(
            SCORE_KEY,
            ScoreState {
                constraints: cs,
                ignored,
                counts,
                weights,
            },
        );
        Status::success()
    }
}

impl ScorePlugin for PodTopologySpread {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        let Some(s) = state.read::<ScoreState>(SCORE_KEY) else {
            return (0, Status::success());
        };
        if s.ignored.contains(node.name()) {
            return (0, Status::success());
        }
        let labels = node.labels();
        let mut score = 0.0;
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(v) = labels.get(&c.key) else {
                continue;
            };
            let cnt = if c.key == HOSTNAME {
                count_on_node(c, pod, node)
            } else {
                s.counts[i].get(v).copied().unwrap_or(0)
            };
            score += cnt as f64 * s.weights[i] + (c.max_skew - 1) as f64;
        }
        (score.round() as i64, Status::success())
    }

    fn normalize(
        &self,
        state: &CycleState,
        _pod: &PodInfo,
        scores: &mut [NodeScore<'_>],
    ) -> Status {
        let Some(s) = state.read::<ScoreState>(SCORE_KEY) else {
            return Status::success();
        };
        let live = scores
            .iter()
            .filter(|x| !s.ignored.contains(x.name))
            .map(|x| x.score);
        let (min, max) = live.fold((i64::MAX, 0), |(lo, hi), v| (lo.min(v), hi.max(v)));
        for x in scores.iter_mut() {
            x.score = if s.ignored.contains(x.name) {
                0
            } else if max == 0 {
                MAX_NODE_SCORE
            } else {
                MAX_NODE_SCORE * (max + min - x.score) / max
            };
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::helpers::{node_info_with, raw_scores};
    use crate::testing::{NodeBuilder, PodBuilder};

    fn zone_node(name: &str, zone: &str, pods: usize) -> NodeInfo {
        let mut nb = NodeBuilder::new(name);
        if !zone.is_empty() {
            nb = nb.label("zone", zone);
        }
        let pods = (0..pods)
            .map(|i| {
                PodBuilder::new(&format!("{name}-{i}"))
                    .label("app", "web")
                    .node(name)
                    .build()
            })
            .collect();
        node_info_with(nb.build(), pods)
    }

    /// A pod `app=web` spread over `zone` among its kind with `max_skew`; `when`
    /// says what an unsatisfiable spread does.
    fn web_pod(max_skew: i32, when: &str) -> PodBuilder {
        PodBuilder::new("p")
            .label("app", "web")
            .spread(max_skew, "zone", when, &[("app", "web")])
    }

    fn filter_all(pod: &PodInfo, nodes: Vec<NodeInfo>) -> Vec<(String, Code)> {
        let snap = Snapshot::from_nodes(nodes);
        let mut state = CycleState::new();
        let (_, st) = PodTopologySpread::without_defaults().pre_filter(&mut state, pod, &snap);
        assert!(st.is_success(), "{st}");
        snap.nodes()
            .iter()
            .map(|n| {
                (
                    n.name().to_string(),
                    PodTopologySpread::without_defaults()
                        .filter(&state, pod, n)
                        .code(),
                )
            })
            .collect()
    }

    #[test]
    fn hard_constraint_table() {
        let web = |skew: i32| web_pod(skew, "DoNotSchedule");
        struct Case {
            name: &'static str,
            pod: PodBuilder,
            nodes: Vec<NodeInfo>,
            want: Vec<Code>,
        }
        let cases = vec![
            Case {
                name: "skew 1 allows only the emptier zone",
                pod: web(1),
                nodes: vec![zone_node("a1", "a", 2), zone_node("b1", "b", 1)],
                want: vec![Code::Unschedulable, Code::Success],
            },
            Case {
                name: "skew 2 allows both",
                pod: web(2),
                nodes: vec![zone_node("a1", "a", 2), zone_node("b1", "b", 1)],
                want: vec![Code::Success, Code::Success],
            },
            Case {
                name: "node without the key is unresolvable",
                pod: web(1),
                nodes: vec![zone_node("a1", "a", 0), zone_node("x", "", 0)],
                want: vec![Code::Success, Code::UnschedulableAndUnresolvable],
            },
            Case {
                name: "pod not matching its own selector does not add itself",
                pod: PodBuilder::new("p").spread(1, "zone", "DoNotSchedule", &[("app", "web")]),
                nodes: vec![zone_node("a1", "a", 2), zone_node("b1", "b", 1)],
                want: vec![Code::Success, Code::Success],
            },
            Case {
                name: "minDomains above the domain count makes the minimum 0",
                pod: PodBuilder::new("p").label("app", "web").spread_constraint(
                    TopologySpreadConstraint {
                        max_skew: 1,
                        min_domains: Some(3),
                        topology_key: "zone".into(),
                        when_unsatisfiable: "DoNotSchedule".into(),
                        label_selector: Some(crate::testing::match_labels(&[("app", "web")])),
                        ..Default::default()
                    },
                ),
                nodes: vec![zone_node("a1", "a", 1), zone_node("b1", "b", 1)],
                want: vec![Code::Unschedulable, Code::Unschedulable],
            },
        ];
        for c in cases {
            let pod = PodInfo::new(Arc::new(c.pod.build()));
            let got: Vec<Code> = filter_all(&pod, c.nodes)
                .into_iter()
                .map(|(_, c)| c)
                .collect();
            assert_eq!(got, c.want, "{}", c.name);
        }
    }

    #[test]
    fn node_affinity_policy_honored_by_default() {
        // Zone c is excluded by the pod's nodeSelector, so its empty domain does not lower
        // the minimum: with policy Honor, a (1 pod) and b (1 pod) are both fine.
        let mk = |policy: Option<&str>| {
            PodInfo::new(Arc::new(
                PodBuilder::new("p")
                    .label("app", "web")
                    .node_selector("pool", "main")
                    .spread_constraint(TopologySpreadConstraint {
                        max_skew: 1,
                        topology_key: "zone".into(),
                        when_unsatisfiable: "DoNotSchedule".into(),
                        label_selector: Some(crate::testing::match_labels(&[("app", "web")])),
                        node_affinity_policy: policy.map(String::from),
                        ..Default::default()
                    })
                    .build(),
            ))
        };
        let nodes = || {
            let with_pool = |n: NodeInfo| {
                let node = NodeBuilder::new(n.name())
                    .label("zone", n.labels()["zone"].as_str())
                    .label("pool", "main")
                    .build();
                let mut ni = NodeInfo::new(n.name());
                ni.set_node(Arc::new(node));
                for p in &n.pods {
                    ni.add_pod(p.clone());
                }
                ni
            };
            vec![
                with_pool(zone_node("a1", "a", 1)),
                with_pool(zone_node("b1", "b", 1)),
                zone_node("c1", "c", 0),
            ]
        };
        let honor: Vec<Code> = filter_all(&mk(None), nodes())
            .into_iter()
            .map(|(_, c)| c)
            .collect();
        assert_eq!(honor[..2], [Code::Success, Code::Success]);
        let ignore: Vec<Code> = filter_all(&mk(Some("Ignore")), nodes())
            .into_iter()
            .map(|(_, c)| c)
            .collect();
        assert_eq!(ignore[..2], [Code::Unschedulable, Code::Unschedulable]);
    }

    #[test]
    fn remove_pod_extension_updates_counts() {
        let pod = PodInfo::new(Arc::new(web_pod(1, "DoNotSchedule").build()));
        let snap = Snapshot::from_nodes(vec![zone_node("a1", "a", 2), zone_node("b1", "b", 1)]);
        let mut state = CycleState::new();
        PodTopologySpread::without_defaults().pre_filter(&mut state, &pod, &snap);
        let a1 = snap.get("a1").unwrap();
        assert_eq!(
            PodTopologySpread::without_defaults()
                .filter(&state, &pod, a1)
                .code(),
            Code::Unschedulable
        );
        let victim = a1.pods[0].clone();
        PodTopologySpread::without_defaults().update(
            &mut state,
            &pod,
            SimulatedPod::removed(&victim, a1),
        );
        assert!(
            PodTopologySpread::without_defaults()
                .filter(&state, &pod, a1)
                .is_success()
        );
    }

    #[test]
    fn soft_constraint_scores_emptier_domains_higher() {
        let pod = PodInfo::new(Arc::new(web_pod(1, "ScheduleAnyway").build()));
        let snap = Snapshot::from_nodes(vec![
            zone_node("a1", "a", 3),
            zone_node("b1", "b", 1),
            zone_node("c1", "c", 0),
            zone_node("x", "", 0),
        ]);
        let mut state = CycleState::new();
        assert!(
            PodTopologySpread::without_defaults()
                .pre_score(&mut state, &pod, snap.nodes(), &snap)
                .is_success()
        );
        let mut scores = raw_scores(
            &PodTopologySpread::without_defaults(),
            &state,
            &pod,
            snap.nodes(),
        );
        PodTopologySpread::without_defaults().normalize(&state, &pod, &mut scores);
        let got: Vec<i64> = scores.iter().map(|s| s.score).collect();
        // weight ln(3+2)=1.609: raw a=round(4.83)=5, b=round(1.61)=2, c=0 → 100*(5+0-s)/5
        assert_eq!(got, vec![0, 60, 100, 0]);
        let none = PodInfo::new(Arc::new(PodBuilder::new("q").build()));
        assert!(
            PodTopologySpread::without_defaults()
                .pre_score(&mut CycleState::new(), &none, snap.nodes(), &snap)
                .is_skip()
        );
    }

    /// Nodes in zones `topology.kubernetes.io/zone` with hostnames, carrying `pods`
    /// pods labelled `app=web` (and one unrelated pod each).
    fn default_node(name: &str, zone: Option<&str>, web_pods: usize) -> NodeInfo {
        let mut nb = NodeBuilder::new(name).label(HOSTNAME, name);
        if let Some(z) = zone {
            nb = nb.label(ZONE, z);
        }
        let mut pods: Vec<_> = (0..web_pods)
            .map(|i| {
                PodBuilder::new(&format!("{name}-web-{i}"))
                    .label("app", "web")
                    .node(name)
                    .build()
            })
            .collect();
        pods.push(
            PodBuilder::new(&format!("{name}-other"))
                .label("app", "other")
                .node(name)
                .build(),
        );
        node_info_with(nb.build(), pods)
    }

    fn scores_of(plugin: &PodTopologySpread, pod: &PodInfo, snap: &Snapshot) -> Option<Vec<i64>> {
        let mut state = CycleState::new();
        let st = plugin.pre_score(&mut state, pod, snap.nodes(), snap);
        if st.is_skip() {
            return None;
        }
        assert!(st.is_success(), "{st}");
        let mut scores = raw_scores(plugin, &state, pod, snap.nodes());
        plugin.normalize(&state, pod, &mut scores);
        Some(scores.iter().map(|s| s.score).collect())
    }

    fn system_plugin(listers: &Arc<crate::listers::MemoryListers>) -> PodTopologySpread {
        PodTopologySpread::with_args(Args::default(), listers.clone()).expect("system defaults")
    }

    #[test]
    fn system_defaults_are_zone_5_and_hostname_3_schedule_anyway() {
        let d = system_default_constraints();
        let got: Vec<(&str, i32, &str)> = d
            .iter()
            .map(|c| {
                (
                    c.topology_key.as_str(),
                    c.max_skew,
                    c.when_unsatisfiable.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![(ZONE, 5, "ScheduleAnyway"), (HOSTNAME, 3, "ScheduleAnyway")]
        );
    }

    /// Listers holding the Service `default/web`, which selects `app=web`.
    fn web_service_listers() -> Arc<crate::listers::MemoryListers> {
        let listers = Arc::new(crate::listers::MemoryListers::new());
        listers.put_service(
            "default",
            "web",
            Some([("app".to_string(), "web".to_string())].into()),
        );
        listers
    }

    /// A pod the Service of `web_service_listers` selects, with no constraints
    /// of its own: the one the defaults are for.
    fn web_service_pod() -> PodInfo {
        PodInfo::new(Arc::new(PodBuilder::new("p").label("app", "web").build()))
    }

    #[test]
    fn service_selected_pod_is_spread_by_default() {
        let listers = web_service_listers();
        let plugin = system_plugin(&listers);
        let snap = Snapshot::from_nodes(vec![
            default_node("a1", Some("a"), 4),
            default_node("b1", Some("b"), 1),
            default_node("c1", Some("c"), 0),
        ]);
        let pod = web_service_pod();
        let got = scores_of(&plugin, &pod, &snap).expect("defaulted constraints score");
        // Fewer web pods in the zone and on the host scores higher; the emptiest wins.
        assert!(got[2] > got[1] && got[1] > got[0], "{got:?}");
        assert_eq!(got[2], MAX_NODE_SCORE);
        // Default constraints only score: the filter lets every node through.
        let mut state = CycleState::new();
        let (_, st) = plugin.pre_filter(&mut state, &pod, &snap);
        assert!(st.is_skip());
    }

    #[test]
    fn pod_selected_by_nothing_or_with_own_constraints_gets_no_defaults() {
        let listers = web_service_listers();
        // A Service with an empty selector selects no pods.
        listers.put_service("default", "headless", None);
        let plugin = system_plugin(&listers);
        let snap = Snapshot::from_nodes(vec![
            default_node("a1", Some("a"), 4),
            default_node("b1", Some("b"), 0),
        ]);
        let lonely = PodInfo::new(Arc::new(PodBuilder::new("q").label("app", "db").build()));
        assert_eq!(scores_of(&plugin, &lonely, &snap), None);
        // A Service in another namespace does not select the pod.
        let elsewhere = PodInfo::new(Arc::new(
            PodBuilder::new("r")
                .namespace("other")
                .label("app", "web")
                .build(),
        ));
        assert_eq!(scores_of(&plugin, &elsewhere, &snap), None);
        // Own constraints replace the defaults (here: hard ones only, so no scoring).
        let own = PodInfo::new(Arc::new(
            PodBuilder::new("s")
                .label("app", "web")
                .spread(1, ZONE, "DoNotSchedule", &[("app", "web")])
                .build(),
        ));
        assert_eq!(scores_of(&plugin, &own, &snap), None);
    }

    #[test]
    fn controller_owner_selector_drives_defaults() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let listers = Arc::new(crate::listers::MemoryListers::new());
        let mut sel = Selector::everything();
        sel.require_equal("app", "web");
        listers.put_controller("ReplicaSet", "default", "web-1", sel);
        let plugin = system_plugin(&listers);
        let snap = Snapshot::from_nodes(vec![
            default_node("a1", Some("a"), 3),
            default_node("b1", Some("b"), 0),
        ]);
        let mut pod = PodBuilder::new("p").label("app", "web").build();
        pod.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "web-1".into(),
            uid: "u".into(),
            controller: Some(true),
            ..Default::default()
        }]);
        let got = scores_of(&plugin, &PodInfo::new(Arc::new(pod.clone())), &snap)
            .expect("owned by a known ReplicaSet");
        assert!(got[1] > got[0], "{got:?}");
        // An owner the lister does not know contributes nothing.
        if let Some(refs) = pod.metadata.owner_references.as_mut() {
            refs[0].name = "unknown".into();
        }
        assert_eq!(
            scores_of(&plugin, &PodInfo::new(Arc::new(pod)), &snap),
            None
        );
    }

    #[test]
    fn system_defaults_score_nodes_missing_the_zone_label_by_hostname() {
        let listers = web_service_listers();
        let plugin = system_plugin(&listers);
        let snap = Snapshot::from_nodes(vec![
            default_node("a1", Some("a"), 2),
            default_node("x1", None, 0),
            default_node("x2", None, 3),
        ]);
        let pod = web_service_pod();
        let got = scores_of(&plugin, &pod, &snap).expect("defaults apply");
        // Nodes without the zone label are not ignored (an ignored node scores 0): x1,
        // with no web pods on the host, gets the best score, x2 (three) less.
        assert_eq!(got[1], MAX_NODE_SCORE, "{got:?}");
        assert!(got[2] > 0 && got[2] < MAX_NODE_SCORE, "{got:?}");
    }

    #[test]
    fn list_defaulting_uses_configured_constraints_and_rejects_bad_args() {
        let listers = web_service_listers();
        let args: Args = serde_json::from_value(serde_json::json!({
            "defaultingType": "List",
            "defaultConstraints": [
                {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
            ]
        }))
        .expect("args parse");
        let plugin = PodTopologySpread::with_args(args, listers.clone()).expect("valid");
        let snap = Snapshot::from_nodes(vec![
            default_node("a1", Some("a"), 2),
            default_node("b1", Some("b"), 0),
        ]);
        let pod = web_service_pod();
        let mut state = CycleState::new();
        let (_, st) = plugin.pre_filter(&mut state, &pod, &snap);
        assert!(st.is_success(), "{st}");
        let codes: Vec<Code> = snap
            .nodes()
            .iter()
            .map(|n| plugin.filter(&state, &pod, n).code())
            .collect();
        assert_eq!(codes, vec![Code::Unschedulable, Code::Success]);

        let bad: Args = serde_json::from_value(serde_json::json!({
            "defaultConstraints": [
                {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
            ]
        }))
        .expect("args parse");
        assert!(PodTopologySpread::with_args(bad, listers.clone()).is_err());
        let with_selector: Args = serde_json::from_value(serde_json::json!({
            "defaultingType": "List",
            "defaultConstraints": [
                {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway",
                 "labelSelector": {"matchLabels": {"app": "web"}}}
            ]
        }))
        .expect("args parse");
        assert!(PodTopologySpread::with_args(with_selector, listers).is_err());
    }
}
