//! PodTopologySpread: keep matching pods evenly spread over topology domains.
//! `DoNotSchedule` constraints filter (skew = matching pods in the node's domain, plus
//! the pod itself if it matches, minus the global minimum, must not exceed maxSkew);
//! `ScheduleAnyway` constraints score (fewer matching pods in the domain is better).
//! `nodeAffinityPolicy` (default Honor) and `nodeTaintsPolicy` (default Ignore) decide
//! which nodes' pods count; `minDomains` treats the global minimum as 0 while fewer
//! domains exist.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::TopologySpreadConstraint;

use super::helpers::{RequiredNodeAffinity, first_untolerated};
use crate::cache::{NodeInfo, Snapshot};
use crate::framework::*;
use crate::pod_info::PodInfo;
use crate::selectors::{Labels, Selector};

/// Plugin name.
pub const NAME: &str = "PodTopologySpread";
/// Rejection reason, as upstream.
pub const REASON: &str = "node(s) didn't match pod topology spread constraints";
/// Rejection reason when the node lacks a topology key, as upstream.
pub const REASON_MISSING_LABEL: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";
const FILTER_KEY: &str = "PreFilterPodTopologySpread";
const SCORE_KEY: &str = "PreScorePodTopologySpread";
const HOSTNAME: &str = "kubernetes.io/hostname";

#[derive(Debug, Clone)]
struct Constraint {
    max_skew: i64,
    min_domains: Option<i64>,
    key: String,
    selector: Selector,
    honor_affinity: bool,
    honor_taints: bool,
}

fn constraints(pod: &PodInfo, when: &str) -> Vec<Constraint> {
    let raw: &[TopologySpreadConstraint] = pod
        .spec()
        .topology_spread_constraints
        .as_deref()
        .unwrap_or(&[]);
    raw.iter()
        .filter(|c| c.when_unsatisfiable == when)
        .map(|c| {
            let mut selector = Selector::from_optional(c.label_selector.as_ref());
            for k in c.match_label_keys.iter().flatten() {
                if let Some(v) = pod.labels().get(k) {
                    selector.require_equal(k, v);
                }
            }
            Constraint {
                max_skew: i64::from(c.max_skew),
                min_domains: c.min_domains.map(i64::from),
                key: c.topology_key.clone(),
                selector,
                honor_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
                honor_taints: c.node_taints_policy.as_deref() == Some("Honor"),
            }
        })
        .collect()
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
        && first_untolerated(
            node.taints(),
            pod.tolerations(),
            &["NoSchedule", "NoExecute"],
        )
        .is_some()
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

/// The PodTopologySpread plugin.
pub struct PodTopologySpread;

/// Constructor for the registry.
pub fn new(_args: &serde_json::Value, _s: &Services) -> Result<Arc<dyn Plugin>, ConfigError> {
    Ok(Arc::new(PodTopologySpread))
}

impl Plugin for PodTopologySpread {
    fn name(&self) -> &'static str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(
                EventResource::Pod,
                ActionSet::ADD
                    .or(ActionSet::DELETE)
                    .or(ActionSet::UPDATE_POD_LABEL),
            ),
            ClusterEvent::new(
                EventResource::Node,
                ActionSet::ADD
                    .or(ActionSet::DELETE)
                    .or(ActionSet::UPDATE_NODE_LABEL)
                    .or(ActionSet::UPDATE_NODE_TAINT),
            ),
        ]
    }
    fn as_pre_filter(self: Arc<Self>) -> Option<Arc<dyn PreFilterPlugin>> {
        Some(self)
    }
    fn as_filter(self: Arc<Self>) -> Option<Arc<dyn FilterPlugin>> {
        Some(self)
    }
    fn as_pre_score(self: Arc<Self>) -> Option<Arc<dyn PreScorePlugin>> {
        Some(self)
    }
    fn as_score(self: Arc<Self>) -> Option<Arc<dyn ScorePlugin>> {
        Some(self)
    }
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
        let cs = constraints(pod, "DoNotSchedule");
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
    fn add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        added: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        if let Some(fs) = state.read_mut::<FilterState>(FILTER_KEY) {
            fs.update(pod, added, node, 1);
        }
        Status::success()
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        removed: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        if let Some(fs) = state.read_mut::<FilterState>(FILTER_KEY) {
            fs.update(pod, removed, node, -1);
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
        let cs = constraints(pod, "ScheduleAnyway");
        if cs.is_empty() {
            return Status::skip();
        }
        let affinity = RequiredNodeAffinity::of(pod);
        let mut ignored = HashSet::new();
        let mut counts: Vec<HashMap<String, i64>> = vec![HashMap::new(); cs.len()];
        let mut domains: Vec<HashSet<&str>> = vec![HashSet::new(); cs.len()];
        for n in nodes {
            let labels = n.labels();
            if !has_all_keys(labels, &cs) {
                ignored.insert(n.name().to_string());
                continue;
            }
            for (i, c) in cs.iter().enumerate() {
                let v = labels[&c.key].as_str();
                domains[i].insert(v);
                if c.key != HOSTNAME {
                    counts[i].entry(v.to_string()).or_insert(0);
                }
            }
        }
        for node in snapshot.nodes() {
            let labels = node.labels();
            if !has_all_keys(labels, &cs) {
                continue;
            }
            for (i, c) in cs.iter().enumerate() {
                if c.key == HOSTNAME || !node_included(c, pod, &affinity, node) {
                    continue;
                }
                if let Some(slot) = counts[i].get_mut(&labels[&c.key]) {
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
    use crate::plugins::helpers::node_info_with;
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

    fn filter_all(pod: &PodInfo, nodes: Vec<NodeInfo>) -> Vec<(String, Code)> {
        let snap = Snapshot::from_nodes(nodes);
        let mut state = CycleState::new();
        let (_, st) = PodTopologySpread.pre_filter(&mut state, pod, &snap);
        assert!(st.is_success(), "{st}");
        snap.nodes()
            .iter()
            .map(|n| {
                (
                    n.name().to_string(),
                    PodTopologySpread.filter(&state, pod, n).code(),
                )
            })
            .collect()
    }

    #[test]
    fn hard_constraint_table() {
        let web = |skew: i32| {
            PodBuilder::new("p").label("app", "web").spread(
                skew,
                "zone",
                "DoNotSchedule",
                &[("app", "web")],
            )
        };
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
        let pod = PodInfo::new(Arc::new(
            PodBuilder::new("p")
                .label("app", "web")
                .spread(1, "zone", "DoNotSchedule", &[("app", "web")])
                .build(),
        ));
        let snap = Snapshot::from_nodes(vec![zone_node("a1", "a", 2), zone_node("b1", "b", 1)]);
        let mut state = CycleState::new();
        PodTopologySpread.pre_filter(&mut state, &pod, &snap);
        let a1 = snap.get("a1").unwrap();
        assert_eq!(
            PodTopologySpread.filter(&state, &pod, a1).code(),
            Code::Unschedulable
        );
        let victim = a1.pods[0].clone();
        PodTopologySpread.remove_pod(&mut state, &pod, &victim, a1);
        assert!(PodTopologySpread.filter(&state, &pod, a1).is_success());
    }

    #[test]
    fn soft_constraint_scores_emptier_domains_higher() {
        let pod = PodInfo::new(Arc::new(
            PodBuilder::new("p")
                .label("app", "web")
                .spread(1, "zone", "ScheduleAnyway", &[("app", "web")])
                .build(),
        ));
        let snap = Snapshot::from_nodes(vec![
            zone_node("a1", "a", 3),
            zone_node("b1", "b", 1),
            zone_node("c1", "c", 0),
            zone_node("x", "", 0),
        ]);
        let mut state = CycleState::new();
        assert!(
            PodTopologySpread
                .pre_score(&mut state, &pod, snap.nodes(), &snap)
                .is_success()
        );
        let mut scores: Vec<NodeScore> = snap
            .nodes()
            .iter()
            .map(|n| NodeScore {
                name: n.name(),
                score: PodTopologySpread.score(&state, &pod, n).0,
            })
            .collect();
        PodTopologySpread.normalize(&state, &pod, &mut scores);
        let got: Vec<i64> = scores.iter().map(|s| s.score).collect();
        // weight ln(3+2)=1.609: raw a=round(4.83)=5, b=round(1.61)=2, c=0 → 100*(5+0-s)/5
        assert_eq!(got, vec![0, 60, 100, 0]);
        let none = PodInfo::new(Arc::new(PodBuilder::new("q").build()));
        assert!(
            PodTopologySpread
                .pre_score(&mut CycleState::new(), &none, snap.nodes(), &snap)
                .is_skip()
        );
    }
}
