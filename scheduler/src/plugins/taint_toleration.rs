//! TaintToleration: filter out nodes with untolerated NoSchedule/NoExecute taints; prefer
//! nodes with fewer untolerated PreferNoSchedule taints.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Toleration;

use super::helpers::{FILTERING_EFFECTS, first_untolerated, tolerates};
use super::stateless_plugin;
use crate::cache::{NodeInfo, Snapshot};
use crate::framework::*;
use crate::pod_info::PodInfo;

/// Plugin name.
pub(crate) const NAME: &str = "TaintToleration";
const STATE_KEY: &str = "PreScoreTaintToleration";

stateless_plugin! {
    /// The TaintToleration plugin.
    TaintToleration = NAME;
    events: [ClusterEvent::NODE_ADD_OR_TAINT_CHANGE];
    /// Only a node whose scheduling taints the pod now tolerates, and did not before
    /// (or that is new), can help.
    fn queueing_hint(&self, pod: &PodInfo, objects: &EventObjects<'_>) -> QueueingHint {
        QueueingHint::node_now_fits(objects, |n| {
            let taints = n.spec.as_ref().and_then(|s| s.taints.as_deref());
            first_untolerated(taints.unwrap_or(&[]), pod.tolerations(), FILTERING_EFFECTS).is_none()
        })
    }
    views!(filter, pre_score, score);
}

impl FilterPlugin for TaintToleration {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if !node.tainted {
            return Status::success();
        }
        match first_untolerated(node.taints(), pod.tolerations(), FILTERING_EFFECTS) {
            None => Status::success(),
            Some(t) => Status::unresolvable(format!(
                "node(s) had untolerated taint {{{}: {}}}",
                t.key,
                t.value.as_deref().unwrap_or("")
            )),
        }
    }
}

#[derive(Clone)]
struct PreScoreState {
    tolerations: Vec<Toleration>,
}

impl PreScorePlugin for TaintToleration {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        _s: &Snapshot,
    ) -> Status {
        // Without PreferNoSchedule taints every node scores the same: skipping changes
        // no ranking and saves two passes over the nodes.
        if !nodes
            .iter()
            .any(|n| n.taints().iter().any(|t| t.effect == "PreferNoSchedule"))
        {
            return Status::skip();
        }
        // Only tolerations that can apply to PreferNoSchedule taints matter for scoring.
        let tolerations = pod
            .tolerations()
            .iter()
            .filter(|t| {
                t.effect
                    .as_deref()
                    .is_none_or(|e| e.is_empty() || e == "PreferNoSchedule")
            })
            .cloned()
            .collect();
        state.write(STATE_KEY, PreScoreState { tolerations });
        Status::success()
    }
}

impl ScorePlugin for TaintToleration {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> (i64, Status) {
        let Some(s) = state.read::<PreScoreState>(STATE_KEY) else {
            return (0, Status::error("TaintToleration prescore state missing"));
        };
        let count = node
            .taints()
            .iter()
            .filter(|t| {
                t.effect == "PreferNoSchedule" && !s.tolerations.iter().any(|tol| tolerates(tol, t))
            })
            .count();
        (count as i64, Status::success())
    }

    fn scale(&self) -> ScoreScale {
        ScoreScale::ToMaxReversed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::helpers::{filter_on, node_info_with, raw_scores};
    use crate::testing::{NodeBuilder, PodBuilder};

    #[test]
    fn filter_table() {
        let cases = [
            (
                "no taints",
                NodeBuilder::new("n"),
                PodBuilder::new("p"),
                None,
            ),
            (
                "untolerated NoSchedule",
                NodeBuilder::new("n").taint("dedicated", "gpu", "NoSchedule"),
                PodBuilder::new("p"),
                Some("node(s) had untolerated taint {dedicated: gpu}"),
            ),
            (
                "untolerated NoExecute",
                NodeBuilder::new("n").taint("k", "", "NoExecute"),
                PodBuilder::new("p"),
                Some("node(s) had untolerated taint {k: }"),
            ),
            (
                "PreferNoSchedule does not filter",
                NodeBuilder::new("n").taint("k", "v", "PreferNoSchedule"),
                PodBuilder::new("p"),
                None,
            ),
            (
                "tolerated by Equal",
                NodeBuilder::new("n").taint("dedicated", "gpu", "NoSchedule"),
                PodBuilder::new("p").toleration("dedicated", "Equal", "gpu", "NoSchedule"),
                None,
            ),
            (
                "toleration for other effect",
                NodeBuilder::new("n").taint("dedicated", "gpu", "NoSchedule"),
                PodBuilder::new("p").toleration("dedicated", "Equal", "gpu", "NoExecute"),
                Some("node(s) had untolerated taint {dedicated: gpu}"),
            ),
            (
                "tolerate everything",
                NodeBuilder::new("n")
                    .taint("a", "1", "NoSchedule")
                    .taint("b", "2", "NoExecute"),
                PodBuilder::new("p").toleration("", "Exists", "", ""),
                None,
            ),
        ];
        for (name, node, pod, want) in cases {
            let ni = node_info_with(node.build(), vec![]);
            let st = filter_on(&TaintToleration, pod, &ni);
            match want {
                None => assert!(st.is_success(), "{name}: {st}"),
                Some(msg) => {
                    assert_eq!(st.code(), Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(st.message(), msg, "{name}");
                }
            }
        }
    }

    #[test]
    fn score_prefers_fewer_intolerable_prefer_no_schedule_taints() {
        let node = |b: NodeBuilder| Arc::new(node_info_with(b.build(), vec![]));
        let nodes: Vec<Arc<NodeInfo>> = vec![
            node(NodeBuilder::new("clean")),
            node(NodeBuilder::new("one").taint("a", "1", "PreferNoSchedule")),
            node(
                NodeBuilder::new("two")
                    .taint("a", "1", "PreferNoSchedule")
                    .taint("b", "1", "PreferNoSchedule"),
            ),
            node(NodeBuilder::new("tolerated").taint("c", "1", "PreferNoSchedule")),
        ];
        let pod = PodInfo::new(Arc::new(
            PodBuilder::new("p")
                .toleration("c", "Exists", "", "PreferNoSchedule")
                .build(),
        ));
        let mut state = CycleState::new();
        assert!(
            TaintToleration
                .pre_score(&mut state, &pod, &nodes, &Snapshot::new())
                .is_success()
        );
        // Without any PreferNoSchedule taint, scoring is skipped (all nodes would tie).
        let untainted = vec![
            node(NodeBuilder::new("a")),
            node(NodeBuilder::new("b").taint("x", "y", "NoSchedule")),
        ];
        assert!(
            TaintToleration
                .pre_score(&mut CycleState::new(), &pod, &untainted, &Snapshot::new())
                .is_skip()
        );
        let mut scores = raw_scores(&TaintToleration, &state, &pod, &nodes);
        TaintToleration.normalize(&state, &pod, &mut scores);
        let got: Vec<i64> = scores.iter().map(|s| s.score).collect();
        assert_eq!(got, vec![100, 50, 0, 100]);
    }
}
