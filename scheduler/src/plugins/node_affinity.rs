//! NodeAffinity: `nodeSelector` and required node affinity filter nodes; preferred node
//! affinity terms add their weights to matching nodes' scores.

use std::sync::Arc;

use super::helpers::RequiredNodeAffinity;
use super::stateless_plugin;
use crate::cache::{NodeInfo, Snapshot};
use crate::framework::*;
use crate::pod_info::PodInfo;
use crate::selectors::NodeTerm;

/// Plugin name.
pub(crate) const NAME: &str = "NodeAffinity";
/// Rejection reason, as upstream.
pub(crate) const REASON: &str = "node(s) didn't match Pod's node affinity/selector";
const PRE_FILTER_KEY: &str = "PreFilterNodeAffinity";
const PRE_SCORE_KEY: &str = "PreScoreNodeAffinity";

stateless_plugin! {
    /// The NodeAffinity plugin.
    NodeAffinity = NAME;
    events: [ClusterEvent::NODE_ADD_OR_LABEL_CHANGE];
    /// Only a node that now satisfies the pod's node selector and required affinity,
    /// and did not before (or that is new), can help.
    fn queueing_hint(&self, pod: &PodInfo, objects: &EventObjects<'_>) -> QueueingHint {
        let required = RequiredNodeAffinity::of(pod);
        QueueingHint::node_now_fits(objects, |n| {
            required.matches(
                crate::selectors::node_labels(n),
                n.metadata.name.as_deref().unwrap_or(""),
            )
        })
    }
    views!(pre_filter, filter, pre_score, score);
}

impl PreFilterPlugin for NodeAffinity {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _s: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let req = RequiredNodeAffinity::of(pod);
        if req.is_empty() {
            return (None, Status::skip());
        }
        let restriction = req.name_restriction();
        state.write(PRE_FILTER_KEY, req);
        match restriction {
            Some(names) if names.is_empty() => (None, Status::unresolvable(REASON)),
            Some(names) => (
                Some(PreFilterResult {
                    node_names: Some(names),
                    restricted_by: vec![],
                }),
                Status::success(),
            ),
            None => (None, Status::success()),
        }
    }
}

impl FilterPlugin for NodeAffinity {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let ok = match state.read::<RequiredNodeAffinity>(PRE_FILTER_KEY) {
            Some(req) => req.matches_node(node),
            None => RequiredNodeAffinity::of(pod).matches_node(node),
        };
        if ok {
            Status::success()
        } else {
            Status::unresolvable(REASON)
        }
    }
}

#[derive(Clone)]
struct Preferred {
    terms: Vec<(NodeTerm, i64)>,
}

impl PreScorePlugin for NodeAffinity {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _n: &[Arc<NodeInfo>],
        _s: &Snapshot,
    ) -> Status {
        let terms: Vec<(NodeTerm, i64)> = pod
            .spec()
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|na| {
                na.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .into_iter()
            .flatten()
            .filter(|t| t.weight != 0)
            .map(|t| (NodeTerm::compile(&t.preference), i64::from(t.weight)))
            .collect();
        if terms.is_empty() {
            return Status::skip();
        }
        state.write(PRE_SCORE_KEY, Preferred { terms });
        Status::success()
    }
}

impl ScorePlugin for NodeAffinity {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        let Some(p) = state.read::<Preferred>(PRE_SCORE_KEY) else {
            return (0, Status::success());
        };
        let s = p
            .terms
            .iter()
            .filter(|(t, _)| t.matches(node.labels(), node.name()))
            .map(|(_, w)| *w)
            .sum();
        (s, Status::success())
    }

    fn scale(&self) -> ScoreScale {
        ScoreScale::ToMax
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::helpers::{node_info_with, raw_scores};
    use crate::testing::{NodeBuilder, PodBuilder, node_req};

    fn run_filter(pod: PodBuilder, node: NodeBuilder) -> Status {
        let pod = PodInfo::new(Arc::new(pod.build()));
        let mut state = CycleState::new();
        let (_, st) = NodeAffinity.pre_filter(&mut state, &pod, &Snapshot::new());
        if st.is_skip() {
            // Nothing required: the framework skips the filter, every node passes.
            return Status::success();
        }
        if !st.is_success() {
            return st;
        }
        NodeAffinity.filter(&state, &pod, &node_info_with(node.build(), vec![]))
    }

    #[test]
    fn filter_table() {
        let zone_a = || NodeBuilder::new("n1").label("zone", "a").label("gen", "3");
        let cases: Vec<(&str, PodBuilder, bool)> = vec![
            ("no constraints", PodBuilder::new("p"), true),
            (
                "nodeSelector matches",
                PodBuilder::new("p").node_selector("zone", "a"),
                true,
            ),
            (
                "nodeSelector mismatch",
                PodBuilder::new("p").node_selector("zone", "b"),
                false,
            ),
            (
                "In",
                PodBuilder::new("p")
                    .required_node_term(vec![node_req("zone", "In", &["a", "b"])], vec![]),
                true,
            ),
            (
                "NotIn",
                PodBuilder::new("p")
                    .required_node_term(vec![node_req("zone", "NotIn", &["a"])], vec![]),
                false,
            ),
            (
                "Exists",
                PodBuilder::new("p")
                    .required_node_term(vec![node_req("zone", "Exists", &[])], vec![]),
                true,
            ),
            (
                "DoesNotExist",
                PodBuilder::new("p")
                    .required_node_term(vec![node_req("zone", "DoesNotExist", &[])], vec![]),
                false,
            ),
            (
                "Gt",
                PodBuilder::new("p")
                    .required_node_term(vec![node_req("gen", "Gt", &["2"])], vec![]),
                true,
            ),
            (
                "Lt",
                PodBuilder::new("p")
                    .required_node_term(vec![node_req("gen", "Lt", &["3"])], vec![]),
                false,
            ),
            (
                "terms are ORed",
                PodBuilder::new("p")
                    .required_node_term(vec![node_req("zone", "In", &["b"])], vec![])
                    .required_node_term(vec![node_req("gen", "In", &["3"])], vec![]),
                true,
            ),
            (
                "expressions are ANDed",
                PodBuilder::new("p").required_node_term(
                    vec![
                        node_req("zone", "In", &["a"]),
                        node_req("gen", "In", &["4"]),
                    ],
                    vec![],
                ),
                false,
            ),
            (
                "matchFields name",
                PodBuilder::new("p")
                    .required_node_term(vec![], vec![node_req("metadata.name", "In", &["n1"])]),
                true,
            ),
            (
                "matchFields other name",
                PodBuilder::new("p")
                    .required_node_term(vec![], vec![node_req("metadata.name", "In", &["n2"])]),
                false,
            ),
            (
                "selector and affinity both required",
                PodBuilder::new("p")
                    .node_selector("zone", "b")
                    .required_node_term(vec![node_req("zone", "In", &["a"])], vec![]),
                false,
            ),
        ];
        for (name, pod, want) in cases {
            let st = run_filter(pod, zone_a());
            assert_eq!(st.is_success(), want, "{name}: {st}");
            if !want {
                assert_eq!(st.code(), Code::UnschedulableAndUnresolvable, "{name}");
                assert_eq!(st.message(), REASON);
            }
        }
    }

    #[test]
    fn pre_filter_restricts_to_named_nodes() {
        let pod = PodInfo::new(Arc::new(
            PodBuilder::new("p")
                .required_node_term(vec![], vec![node_req("metadata.name", "In", &["n2", "n3"])])
                .build(),
        ));
        let (res, st) = NodeAffinity.pre_filter(&mut CycleState::new(), &pod, &Snapshot::new());
        assert!(st.is_success());
        assert_eq!(
            res.unwrap().node_names,
            Some(vec!["n2".to_string(), "n3".to_string()])
        );
    }

    #[test]
    fn preferred_terms_score_by_weight() {
        let pod = PodInfo::new(Arc::new(
            PodBuilder::new("p")
                .preferred_node_term(5, vec![node_req("zone", "In", &["a"])])
                .preferred_node_term(3, vec![node_req("disk", "In", &["ssd"])])
                .build(),
        ));
        let nodes = [
            node_info_with(
                NodeBuilder::new("both")
                    .label("zone", "a")
                    .label("disk", "ssd")
                    .build(),
                vec![],
            ),
            node_info_with(NodeBuilder::new("zone").label("zone", "a").build(), vec![]),
            node_info_with(NodeBuilder::new("none").build(), vec![]),
        ];
        let mut state = CycleState::new();
        assert!(
            NodeAffinity
                .pre_score(&mut state, &pod, &[], &Snapshot::new())
                .is_success()
        );
        let mut scores = raw_scores(&NodeAffinity, &state, &pod, &nodes);
        assert_eq!(
            scores.iter().map(|s| s.score).collect::<Vec<_>>(),
            vec![8, 5, 0]
        );
        NodeAffinity.normalize(&state, &pod, &mut scores);
        assert_eq!(
            scores.iter().map(|s| s.score).collect::<Vec<_>>(),
            vec![100, 62, 0]
        );
        let plain = PodInfo::new(Arc::new(PodBuilder::new("q").build()));
        assert!(
            NodeAffinity
                .pre_score(&mut CycleState::new(), &plain, &[], &Snapshot::new())
                .is_skip()
        );
    }
}
