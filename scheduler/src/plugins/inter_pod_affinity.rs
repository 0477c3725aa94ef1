//! InterPodAffinity: required pod affinity and anti-affinity filter nodes (including the
//! symmetric rule that existing pods' anti-affinity must not select the incoming pod);
//! preferred terms, on both sides, score nodes.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;

use super::impl_plugin;
use crate::cache::{NodeInfo, Snapshot};
use crate::framework::*;
use crate::listers::NamespaceLister;
use crate::pod_info::{AffinityTerm, PodInfo, WeightedAffinityTerm};
use crate::selectors::Labels;

/// Plugin name.
pub(crate) const NAME: &str = "InterPodAffinity";
/// Rejection reason for unmet affinity, as upstream.
pub(crate) const REASON_AFFINITY: &str = "node(s) didn't match pod affinity rules";
/// Rejection reason for the pod's own anti-affinity, as upstream.
pub(crate) const REASON_ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";
/// Rejection reason for existing pods' anti-affinity, as upstream.
pub(crate) const REASON_EXISTING_ANTI_AFFINITY: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";
const FILTER_KEY: &str = "PreFilterInterPodAffinity";
const SCORE_KEY: &str = "PreScoreInterPodAffinity";

/// Plugin args (`InterPodAffinityArgs`); a field left out takes its value from
/// `Args::default()`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Args {
    /// Score an existing pod's required affinity towards the incoming pod contributes.
    pub hard_pod_affinity_weight: i64,
    /// Ignore existing pods' preferred terms when scoring.
    pub ignore_preferred_terms_of_existing_pods: bool,
}

impl Default for Args {
    fn default() -> Self {
        Args {
            hard_pod_affinity_weight: 1,
            ignore_preferred_terms_of_existing_pods: false,
        }
    }
}

/// The InterPodAffinity plugin.
pub(crate) struct InterPodAffinity {
    args: Args,
    namespaces: Arc<dyn NamespaceLister>,
}

/// Constructor for the registry.
pub(crate) fn new(args: &serde_json::Value, s: &Services) -> Result<Arc<dyn Plugin>, ConfigError> {
    Ok(Arc::new(InterPodAffinity {
        args: parse_args(NAME, args)?,
        namespaces: s.namespaces.clone(),
    }))
}

impl InterPodAffinity {
    #[cfg(test)]
    /// A plugin with the given args and namespace lister.
    pub(crate) fn with(args: Args, namespaces: Arc<dyn NamespaceLister>) -> Self {
        InterPodAffinity { args, namespaces }
    }

    fn matches(&self, term: &AffinityTerm, pod: &PodInfo) -> bool {
        term.matches(pod, &|ns: &str| self.namespaces.namespace_labels(ns))
    }
}

/// topology key → topology value → count.
type TopologyCounts = HashMap<String, HashMap<String, i64>>;

fn bump(counts: &mut TopologyCounts, key: &str, labels: &Labels, delta: i64) {
    if let Some(v) = labels.get(key) {
        let e = counts
            .entry(key.to_string())
            .or_default()
            .entry(v.clone())
            .or_insert(0);
        *e += delta;
    }
}

fn lookup(counts: &TopologyCounts, key: &str, labels: &Labels) -> i64 {
    labels
        .get(key)
        .and_then(|v| counts.get(key).and_then(|m| m.get(v)))
        .copied()
        .unwrap_or(0)
}

fn is_empty(counts: &TopologyCounts) -> bool {
    counts.values().all(|m| m.values().all(|c| *c <= 0))
}

#[derive(Clone, Default)]
struct FilterState {
    existing_anti: TopologyCounts,
    affinity: TopologyCounts,
    anti: TopologyCounts,
}

impl_plugin! {
    InterPodAffinity = NAME;
    events: [
        ClusterEvent::ASSIGNED_POD_ADD_DELETE_OR_LABEL_CHANGE,
        ClusterEvent::NODE_ADD_OR_LABEL_CHANGE,
        ClusterEvent::added_or_updated(EventResource::Namespace),
    ];
    views!(pre_filter, filter, pre_score, score);
}

impl InterPodAffinity {
    /// Applies `existing` (on `node`) to the filter counts with `delta`.
    fn account(
        &self,
        fs: &mut FilterState,
        pod: &PodInfo,
        existing: &PodInfo,
        node: &NodeInfo,
        delta: i64,
    ) {
        let labels = node.labels();
        self.count_existing_anti(&mut fs.existing_anti, pod, existing, labels, delta);
        self.count_own_terms(fs, pod, existing, labels, delta);
    }

    /// Counts (with `delta`) the domains of `labels` where a required anti-affinity
    /// term of `existing` rejects `pod`.
    fn count_existing_anti(
        &self,
        counts: &mut TopologyCounts,
        pod: &PodInfo,
        existing: &PodInfo,
        labels: &Labels,
        delta: i64,
    ) {
        for t in &existing.anti_affinity.required {
            if self.matches(t, pod) {
                bump(counts, &t.topology_key, labels, delta);
            }
        }
    }

    /// Counts (with `delta`) `existing` for `pod`'s own required terms: in the
    /// domains of `labels` where it meets all of the affinity terms, and in those
    /// where it meets an anti-affinity term.
    fn count_own_terms(
        &self,
        fs: &mut FilterState,
        pod: &PodInfo,
        existing: &PodInfo,
        labels: &Labels,
        delta: i64,
    ) {
        if !pod.affinity.required.is_empty()
            && pod
                .affinity
                .required
                .iter()
                .all(|t| self.matches(t, existing))
        {
            for t in &pod.affinity.required {
                bump(&mut fs.affinity, &t.topology_key, labels, delta);
            }
        }
        for t in &pod.anti_affinity.required {
            if self.matches(t, existing) {
                bump(&mut fs.anti, &t.topology_key, labels, delta);
            }
        }
    }

    /// Adds `sign` times the weight of each of `terms` that matches `target` to the
    /// scores of the domains of `labels`.
    fn score_terms(
        &self,
        scores: &mut TopologyCounts,
        terms: &[WeightedAffinityTerm],
        target: &PodInfo,
        labels: &Labels,
        sign: i64,
    ) {
        for w in terms {
            if self.matches(&w.term, target) {
                bump(scores, &w.term.topology_key, labels, sign * w.weight);
            }
        }
    }
}

impl PreFilterPlugin for InterPodAffinity {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let mut fs = FilterState::default();
        for node in snapshot.nodes_with_required_anti_affinity_pods() {
            for existing in &node.pods_with_required_anti_affinity {
                self.count_existing_anti(&mut fs.existing_anti, pod, existing, node.labels(), 1);
            }
        }
        let has_own = !pod.affinity.required.is_empty() || !pod.anti_affinity.required.is_empty();
        if !has_own && is_empty(&fs.existing_anti) {
            return (None, Status::skip());
        }
        if has_own {
            for node in snapshot.nodes() {
                let labels = node.labels();
                for existing in &node.pods {
                    self.count_own_terms(&mut fs, pod, existing, labels, 1);
                }
            }
        }
        state.write(FILTER_KEY, fs);
        (None, Status::success())
    }

    fn extensions(&self) -> Option<&dyn PreFilterExtensions> {
        Some(self)
    }
}

impl PreFilterExtensions for InterPodAffinity {
    fn update(&self, state: &mut CycleState, pod: &PodInfo, other: SimulatedPod<'_>) -> Status {
        if let Some(fs) = state.read_mut::<FilterState>(FILTER_KEY) {
            self.account(fs, pod, other.pod, other.node, other.delta());
        }
        Status::success()
    }
}

impl FilterPlugin for InterPodAffinity {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(fs) = state.read::<FilterState>(FILTER_KEY) else {
            return Status::success();
        };
        let labels = node.labels();
        if !pod.affinity.required.is_empty() {
            let mut all_exist = true;
            for t in &pod.affinity.required {
                if !labels.contains_key(&t.topology_key) {
                    return Status::unresolvable(REASON_AFFINITY);
                }
                if lookup(&fs.affinity, &t.topology_key, labels) <= 0 {
                    all_exist = false;
                }
            }
            // The first pod of a group whose affinity selects itself may go anywhere.
            let first_of_group = is_empty(&fs.affinity)
                && pod.affinity.required.iter().all(|t| self.matches(t, pod));
            if !all_exist && !first_of_group {
                return Status::unresolvable(REASON_AFFINITY);
            }
        }
        if pod
            .anti_affinity
            .required
            .iter()
            .any(|t| lookup(&fs.anti, &t.topology_key, labels) > 0)
        {
            return Status::unschedulable(REASON_ANTI_AFFINITY);
        }
        for (key, values) in &fs.existing_anti {
            if labels
                .get(key)
                .and_then(|v| values.get(v))
                .is_some_and(|c| *c > 0)
            {
                return Status::unschedulable(REASON_EXISTING_ANTI_AFFINITY);
            }
        }
        Status::success()
    }
}

#[derive(Clone, Default)]
struct ScoreState {
    scores: TopologyCounts,
}

impl PreScorePlugin for InterPodAffinity {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
        snapshot: &Snapshot,
    ) -> Status {
        let has_preferred =
            !pod.affinity.preferred.is_empty() || !pod.anti_affinity.preferred.is_empty();
        let nodes: &[Arc<NodeInfo>] = if has_preferred {
            snapshot.nodes()
        } else {
            snapshot.nodes_with_affinity_pods()
        };
        if nodes.is_empty() {
            return Status::skip();
        }
        let mut ss = ScoreState::default();
        for node in nodes {
            let labels = node.labels();
            let existing_pods: &[Arc<PodInfo>] = if has_preferred {
                &node.pods
            } else {
                &node.pods_with_affinity
            };
            for existing in existing_pods {
                self.score_terms(&mut ss.scores, &pod.affinity.preferred, existing, labels, 1);
                self.score_terms(
                    &mut ss.scores,
                    &pod.anti_affinity.preferred,
                    existing,
                    labels,
                    -1,
                );
                if self.args.hard_pod_affinity_weight > 0 {
                    for t in &existing.affinity.required {
                        if self.matches(t, pod) {
                            bump(
                                &mut ss.scores,
                                &t.topology_key,
                                labels,
                                self.args.hard_pod_affinity_weight,
                            );
                        }
                    }
                }
                if !self.args.ignore_preferred_terms_of_existing_pods {
                    self.score_terms(&mut ss.scores, &existing.affinity.preferred, pod, labels, 1);
                    self.score_terms(
                        &mut ss.scores,
                        &existing.anti_affinity.preferred,
                        pod,
                        labels,
                        -1,
                    );
                }
            }
        }
        if ss.scores.is_empty() {
            return Status::skip();
        }
        state.write(SCORE_KEY, ss);
        Status::success()
    }
}

impl ScorePlugin for InterPodAffinity {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        let Some(ss) = state.read::<ScoreState>(SCORE_KEY) else {
            return (0, Status::success());
        };
        let labels = node.labels();
        let s = ss
            .scores
            .iter()
            .filter_map(|(k, m)| labels.get(k).and_then(|v| m.get(v)))
            .sum();
        (s, Status::success())
    }

    fn scale(&self) -> ScoreScale {
        ScoreScale::MinMax
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::listers::MemoryListers;
    use crate::plugins::helpers::{node_info_with, raw_scores};
    use crate::testing::{NodeBuilder, PodBuilder};

    fn plugin() -> InterPodAffinity {
        InterPodAffinity::with(Args::default(), Arc::new(MemoryListers::new()))
    }

    fn node(name: &str, zone: &str, pods: Vec<PodBuilder>) -> NodeInfo {
        node_info_with(
            NodeBuilder::new(name).label("zone", zone).build(),
            pods.into_iter().map(|p| p.node(name).build()).collect(),
        )
    }

    /// n1 and n2 in zone a, n3 in zone b; n1 runs `existing`.
    fn zones_with_one_pod(existing: PodBuilder) -> Vec<NodeInfo> {
        vec![
            node("n1", "a", vec![existing]),
            node("n2", "a", vec![]),
            node("n3", "b", vec![]),
        ]
    }

    fn filter(pod: PodBuilder, nodes: Vec<NodeInfo>) -> Vec<Status> {
        let pl = plugin();
        let pod = PodInfo::new(Arc::new(pod.build()));
        let snap = Snapshot::from_nodes(nodes);
        let mut state = CycleState::new();
        let (_, st) = pl.pre_filter(&mut state, &pod, &snap);
        if st.is_skip() {
            return snap.nodes().iter().map(|_| Status::success()).collect();
        }
        snap.nodes()
            .iter()
            .map(|n| pl.filter(&state, &pod, n))
            .collect()
    }

    fn codes(v: &[Status]) -> Vec<Code> {
        v.iter().map(|s| s.code()).collect()
    }

    #[test]
    fn required_affinity_table() {
        let cluster = || zones_with_one_pod(PodBuilder::new("db").label("app", "db"));
        let got = filter(
            PodBuilder::new("p").pod_affinity(&[("app", "db")], "zone"),
            cluster(),
        );
        assert_eq!(
            codes(&got),
            vec![
                Code::Success,
                Code::Success,
                Code::UnschedulableAndUnresolvable
            ]
        );
        assert_eq!(got[2].message(), REASON_AFFINITY);
        let by_host = filter(
            PodBuilder::new("p").pod_affinity(&[("app", "db")], "kubernetes.io/hostname"),
            cluster(),
        );
        assert_eq!(
            codes(&by_host),
            vec![
                Code::Success,
                Code::UnschedulableAndUnresolvable,
                Code::UnschedulableAndUnresolvable
            ]
        );
        let missing_key = filter(
            PodBuilder::new("p").pod_affinity(&[("app", "db")], "rack"),
            cluster(),
        );
        assert!(
            missing_key
                .iter()
                .all(|s| s.code() == Code::UnschedulableAndUnresolvable)
        );
        let nothing = filter(
            PodBuilder::new("p").pod_affinity(&[("app", "cache")], "zone"),
            cluster(),
        );
        assert!(
            nothing.iter().all(|s| !s.is_success()),
            "no matching pod anywhere and the pod does not match itself"
        );
        let first = filter(
            PodBuilder::new("p")
                .label("app", "cache")
                .pod_affinity(&[("app", "cache")], "zone"),
            cluster(),
        );
        assert!(
            first.iter().all(|s| s.is_success()),
            "first pod of a self-affine group goes anywhere"
        );
    }

    #[test]
    fn required_anti_affinity_and_symmetry() {
        let cluster = || zones_with_one_pod(PodBuilder::new("web").label("app", "web"));
        let got = filter(
            PodBuilder::new("p").pod_anti_affinity(&[("app", "web")], "zone"),
            cluster(),
        );
        assert_eq!(
            codes(&got),
            vec![Code::Unschedulable, Code::Unschedulable, Code::Success]
        );
        assert_eq!(got[0].message(), REASON_ANTI_AFFINITY);
        // An existing pod that repels app=x prevents an app=x pod in its zone, even though
        // the incoming pod has no terms at all.
        let repelling = || {
            zones_with_one_pod(PodBuilder::new("guard").pod_anti_affinity(&[("app", "x")], "zone"))
        };
        let sym = filter(PodBuilder::new("p").label("app", "x"), repelling());
        assert_eq!(
            codes(&sym),
            vec![Code::Unschedulable, Code::Unschedulable, Code::Success]
        );
        assert_eq!(sym[0].message(), REASON_EXISTING_ANTI_AFFINITY);
        let unrelated = filter(PodBuilder::new("p").label("app", "y"), repelling());
        assert!(unrelated.iter().all(|s| s.is_success()));
        let other_ns = filter(
            PodBuilder::new("p").namespace("other").label("app", "x"),
            repelling(),
        );
        assert!(
            other_ns.iter().all(|s| s.is_success()),
            "terms select the owner's namespace by default"
        );
    }

    #[test]
    fn preferred_terms_score() {
        let pl = plugin();
        let nodes = vec![
            node("n1", "a", vec![PodBuilder::new("db").label("app", "db")]),
            node("n2", "b", vec![PodBuilder::new("web").label("app", "web")]),
            node("n3", "c", vec![]),
        ];
        let snap = Snapshot::from_nodes(nodes);
        let pod = PodInfo::new(Arc::new(
            PodBuilder::new("p")
                .preferred_pod_affinity(10, &[("app", "db")], "zone")
                .preferred_pod_anti_affinity(5, &[("app", "web")], "zone")
                .build(),
        ));
        let mut state = CycleState::new();
        assert!(
            pl.pre_score(&mut state, &pod, snap.nodes(), &snap)
                .is_success()
        );
        let mut scores = raw_scores(&pl, &state, &pod, snap.nodes());
        assert_eq!(
            scores.iter().map(|s| s.score).collect::<Vec<_>>(),
            vec![10, -5, 0]
        );
        pl.normalize(&state, &pod, &mut scores);
        assert_eq!(
            scores.iter().map(|s| s.score).collect::<Vec<_>>(),
            vec![100, 0, 33]
        );
    }

    #[test]
    fn existing_pods_required_affinity_attracts_with_hard_weight() {
        let pl = plugin();
        let snap = Snapshot::from_nodes(vec![
            node(
                "n1",
                "a",
                vec![PodBuilder::new("fan").pod_affinity(&[("app", "star")], "zone")],
            ),
            node("n2", "b", vec![]),
        ]);
        let pod = PodInfo::new(Arc::new(
            PodBuilder::new("star").label("app", "star").build(),
        ));
        let mut state = CycleState::new();
        assert!(
            pl.pre_score(&mut state, &pod, snap.nodes(), &snap)
                .is_success()
        );
        assert_eq!(pl.score(&state, &pod, &snap.nodes()[0]).0, 1);
        assert_eq!(pl.score(&state, &pod, &snap.nodes()[1]).0, 0);
    }

    #[test]
    fn namespace_selector_selects_pods_in_labelled_namespaces() {
        use k8s_openapi::api::core::v1::PodAffinityTerm;
        let listers = MemoryListers::new();
        listers.put_namespace("team-a", [("team".to_string(), "a".to_string())].into());
        listers.put_namespace("team-b", [("team".to_string(), "b".to_string())].into());
        let pl = InterPodAffinity::with(Args::default(), Arc::new(listers));
        let mut pod = PodBuilder::new("p").build();
        pod.spec.get_or_insert_default().affinity = Some(k8s_openapi::api::core::v1::Affinity {
            pod_anti_affinity: Some(k8s_openapi::api::core::v1::PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                    label_selector: Some(crate::testing::match_labels(&[("app", "db")])),
                    namespace_selector: Some(crate::testing::match_labels(&[("team", "a")])),
                    topology_key: "zone".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        });
        let snap = Snapshot::from_nodes(vec![
            node(
                "n1",
                "a",
                vec![
                    PodBuilder::new("db-a")
                        .namespace("team-a")
                        .label("app", "db"),
                ],
            ),
            node(
                "n2",
                "b",
                vec![
                    PodBuilder::new("db-b")
                        .namespace("team-b")
                        .label("app", "db"),
                ],
            ),
            node(
                "n3",
                "c",
                vec![PodBuilder::new("db-default").label("app", "db")],
            ),
        ]);
        let pod = PodInfo::new(Arc::new(pod));
        let mut state = CycleState::new();
        assert!(pl.pre_filter(&mut state, &pod, &snap).1.is_success());
        let got: Vec<Code> = snap
            .nodes()
            .iter()
            .map(|n| pl.filter(&state, &pod, n).code())
            .collect();
        assert_eq!(got, vec![Code::Unschedulable, Code::Success, Code::Success]);
    }
}
