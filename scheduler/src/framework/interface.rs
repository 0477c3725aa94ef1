//! Extension-point traits. A plugin implements `Plugin` plus the extension traits it
//! serves, and exposes them through the `as_*` methods so the framework can keep one
//! typed list per extension point.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::cycle_state::CycleState;
use super::events::{ClusterEvent, EventObjects, QueueingHint};
use super::status::Status;
use crate::cache::{NodeInfo, Snapshot};
use crate::pod_info::PodInfo;

/// Highest score a Score plugin may give after normalization.
pub const MAX_NODE_SCORE: i64 = 100;

/// The `as_*` views of a [`Plugin`] for the extension points its type
/// implements, each the plugin itself: `views!(filter, score);` inside its
/// `impl Plugin` lists its extension points once, instead of three lines
/// per point.
macro_rules! views {
    ($($point:ident),+ $(,)?) => { $($crate::framework::views!(@point $point);)+ };
    (@point pre_filter) => { $crate::framework::views!(@as as_pre_filter, PreFilterPlugin); };
    (@point filter) => { $crate::framework::views!(@as as_filter, FilterPlugin); };
    (@point post_filter) => { $crate::framework::views!(@as as_post_filter, PostFilterPlugin); };
    (@point pre_score) => { $crate::framework::views!(@as as_pre_score, PreScorePlugin); };
    (@point score) => { $crate::framework::views!(@as as_score, ScorePlugin); };
    (@point reserve) => { $crate::framework::views!(@as as_reserve, ReservePlugin); };
    (@point permit) => { $crate::framework::views!(@as as_permit, PermitPlugin); };
    (@point pre_bind) => { $crate::framework::views!(@as as_pre_bind, PreBindPlugin); };
    (@point bind) => { $crate::framework::views!(@as as_bind, BindPlugin); };
    (@point post_bind) => { $crate::framework::views!(@as as_post_bind, PostBindPlugin); };
    (@as $view:ident, $point:ident) => {
        fn $view(
            self: ::std::sync::Arc<Self>,
        ) -> Option<::std::sync::Arc<dyn $crate::framework::$point>> {
            Some(self)
        }
    };
}
pub(crate) use views;

/// The default `as_*` views of [`Plugin`], each `None`: one row per
/// extension point, as in `views!`, which overrides those a plugin serves.
macro_rules! no_views {
    ($($(#[$doc:meta])* $view:ident: $point:ident;)+) => {
        $(
            $(#[$doc])*
            fn $view(self: Arc<Self>) -> Option<Arc<dyn $point>> {
                None
            }
        )+
    };
}

/// Base trait of every plugin.
pub trait Plugin: Send + Sync + 'static {
    /// The plugin's registered name.
    fn name(&self) -> &'static str;
    /// Events that could make a pod this plugin rejected schedulable.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        Vec::new()
    }
    /// Whether an event the plugin registered for (the queue has matched it already)
    /// could make `pod`, which this plugin rejected, schedulable, judged from the objects
    /// involved; as upstream's queueing hint functions, it is not told the event itself.
    /// The default retries.
    fn queueing_hint(&self, _pod: &PodInfo, _objects: &EventObjects<'_>) -> QueueingHint {
        QueueingHint::Queue
    }
    no_views! {
        /// PreFilter view.
        as_pre_filter: PreFilterPlugin;
        /// Filter view.
        as_filter: FilterPlugin;
        /// PostFilter view.
        as_post_filter: PostFilterPlugin;
        /// PreScore view.
        as_pre_score: PreScorePlugin;
        /// Score view.
        as_score: ScorePlugin;
        /// Reserve view.
        as_reserve: ReservePlugin;
        /// Permit view.
        as_permit: PermitPlugin;
        /// PreBind view.
        as_pre_bind: PreBindPlugin;
        /// Bind view.
        as_bind: BindPlugin;
        /// PostBind view.
        as_post_bind: PostBindPlugin;
    }
}

/// What a PreFilter may narrow the candidate nodes to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreFilterResult {
    /// Only these nodes can fit; `None` means all nodes.
    pub node_names: Option<Vec<String>>,
    /// Plugins that restricted the node set (filled in by the framework).
    pub restricted_by: Vec<&'static str>,
}

/// Which way a simulation moves another pod: onto a node or off it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodChange {
    /// Simulated onto the node (a nominated pod, a preemption victim given a reprieve).
    Added,
    /// Simulated off the node (a preemption victim).
    Removed,
}

/// Another pod simulated onto or off a node (nominated pods, preemption): what a
/// PreFilter extension updates its state by.
#[derive(Debug, Clone, Copy)]
pub struct SimulatedPod<'a> {
    /// The pod moved.
    pub pod: &'a PodInfo,
    /// The node, as it is after the move.
    pub node: &'a NodeInfo,
    /// Which way the pod moves.
    pub change: PodChange,
}

impl<'a> SimulatedPod<'a> {
    /// `pod` simulated onto `node`.
    pub fn added(pod: &'a PodInfo, node: &'a NodeInfo) -> Self {
        SimulatedPod {
            pod,
            node,
            change: PodChange::Added,
        }
    }

    /// `pod` simulated off `node`.
    pub fn removed(pod: &'a PodInfo, node: &'a NodeInfo) -> Self {
        SimulatedPod {
            pod,
            node,
            change: PodChange::Removed,
        }
    }

    /// What the move does to a count of matching pods: 1 or -1.
    pub fn delta(&self) -> i64 {
        match self.change {
            PodChange::Added => 1,
            PodChange::Removed => -1,
        }
    }
}

/// Incremental updates of PreFilter state when pods are added to or removed from a node
/// during simulation (nominated pods, preemption): upstream's AddPod and RemovePod in
/// one method, since the states kept are counts that a pod moves by `other.delta()`.
pub trait PreFilterExtensions: Send + Sync {
    /// `other` is simulated onto or off its node.
    fn update(&self, state: &mut CycleState, pod: &PodInfo, other: SimulatedPod<'_>) -> Status;
}

/// Runs once per pod before filtering; computes state and may reject the pod outright.
pub trait PreFilterPlugin: Plugin {
    /// Computes per-pod state. Skip disables this plugin's Filter for the cycle.
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status);
    /// Incremental state updates, if the plugin keeps state that depends on other pods.
    fn extensions(&self) -> Option<&dyn PreFilterExtensions> {
        None
    }
}

/// Decides whether a pod fits one node.
pub trait FilterPlugin: Plugin {
    /// Success if the pod can run on the node.
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status;
}

/// The per-node verdicts of a failed filtering phase.
pub type NodeToStatus = HashMap<String, Status>;

/// What a PostFilter (preemption) achieved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PostFilterResult {
    /// Node the pod is nominated to run on once victims are gone.
    pub nominated_node: Option<String>,
    /// Pods to delete so the nominated node fits.
    pub victims: Vec<Arc<PodInfo>>,
    /// Lower-priority pods nominated to the same node that lose their nomination.
    pub nominations_to_clear: Vec<Arc<PodInfo>>,
}

/// Runs when no node fits; may make room (preemption).
pub trait PostFilterPlugin: Plugin {
    /// Tries to make the pod schedulable later.
    fn post_filter(
        &self,
        state: &CycleState,
        pod: &Arc<PodInfo>,
        snapshot: &Snapshot,
        statuses: &NodeToStatus,
        ctx: &PostFilterContext<'_>,
    ) -> (Option<PostFilterResult>, Status);
}

/// Framework services a PostFilter needs to simulate scheduling.
pub struct PostFilterContext<'a> {
    /// Runs the profile's filters (with PreFilter extensions) on simulated states.
    pub framework: &'a super::runtime::Framework,
    /// Pods nominated to nodes (preemptors waiting for their victims to leave).
    pub nominated: &'a dyn NominatedPods,
}

/// Lookup of pods nominated to a node.
pub trait NominatedPods: Send + Sync {
    /// Pods nominated to `node`.
    fn nominated_pods_for_node(&self, node: &str) -> Vec<Arc<PodInfo>>;
    /// False when no pod is nominated anywhere (lets filtering skip per-node lookups).
    fn any(&self) -> bool {
        true
    }
}

/// No nominated pods.
pub struct NoNominatedPods;

impl NominatedPods for NoNominatedPods {
    fn nominated_pods_for_node(&self, _node: &str) -> Vec<Arc<PodInfo>> {
        Vec::new()
    }
    fn any(&self) -> bool {
        false
    }
}

/// Runs once per pod on the feasible nodes before scoring.
pub trait PreScorePlugin: Plugin {
    /// Computes per-pod scoring state. Skip disables this plugin's Score.
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        snapshot: &Snapshot,
    ) -> Status;
}

/// A node's score. Borrows the node name: scoring runs per node per pod, so it must not
/// allocate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeScore<'a> {
    /// Node name.
    pub name: &'a str,
    /// Score.
    pub score: i64,
}

/// How raw scores map into [0, MAX_NODE_SCORE] when that depends on the scores
/// alone: what a [`ScorePlugin`] names instead of writing its own `normalize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScoreScale {
    /// The scores are in range already.
    AsIs,
    /// Scaled relative to the highest score (upstream's `DefaultNormalizeScore`).
    ToMax,
    /// As `ToMax`, then flipped, so lower raw scores rank higher.
    ToMaxReversed,
    /// Scaled from the lowest score (0) to the highest (MAX_NODE_SCORE); all 0 when
    /// they are all equal.
    MinMax,
}

impl ScoreScale {
    /// Scales `scores` in place.
    pub fn apply(self, scores: &mut [NodeScore<'_>]) {
        match self {
            ScoreScale::AsIs => {}
            ScoreScale::ToMax | ScoreScale::ToMaxReversed => {
                let reverse = self == ScoreScale::ToMaxReversed;
                let max = scores.iter().map(|s| s.score).max().unwrap_or(0);
                if max == 0 {
                    if reverse {
                        for s in scores.iter_mut() {
                            s.score = MAX_NODE_SCORE;
                        }
                    }
                    return;
                }
                for s in scores.iter_mut() {
                    let v = MAX_NODE_SCORE * s.score / max;
                    s.score = if reverse { MAX_NODE_SCORE - v } else { v };
                }
            }
            ScoreScale::MinMax => {
                let min = scores.iter().map(|s| s.score).min().unwrap_or(0);
                let max = scores.iter().map(|s| s.score).max().unwrap_or(0);
                let diff = max - min;
                for s in scores.iter_mut() {
                    s.score = if diff > 0 {
                        MAX_NODE_SCORE * (s.score - min) / diff
                    } else {
                        0
                    };
                }
            }
        }
    }
}

/// Ranks feasible nodes.
pub trait ScorePlugin: Plugin {
    /// Raw score of a node.
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> (i64, Status);
    /// How the default `normalize` scales raw scores; default: they are in range.
    fn scale(&self) -> ScoreScale {
        ScoreScale::AsIs
    }
    /// Maps raw scores into [0, MAX_NODE_SCORE]; default: by [`ScorePlugin::scale`].
    fn normalize(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        scores: &mut [NodeScore<'_>],
    ) -> Status {
        self.scale().apply(scores);
        Status::success()
    }
}

/// Reserves resources held outside the cache (volumes, devices) for the chosen node.
pub trait ReservePlugin: Plugin {
    /// Reserve; failure aborts the cycle and runs Unreserve.
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status;
    /// Undoes Reserve; must be idempotent.
    fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str);
}

/// Approves, rejects or delays binding.
pub trait PermitPlugin: Plugin {
    /// Success, Unschedulable, or Wait with a timeout.
    fn permit(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> (Status, Duration);
}

/// Work before binding (volume provisioning and the like).
#[async_trait]
pub trait PreBindPlugin: Plugin {
    /// Runs before Bind; failure aborts binding.
    async fn pre_bind(&self, pod: &PodInfo, node: &str) -> Status;
}

/// Binds a pod to a node. The first plugin not returning Skip decides.
#[async_trait]
pub trait BindPlugin: Plugin {
    /// Binds.
    async fn bind(&self, pod: &PodInfo, node: &str) -> Status;
}

/// Informational hook after a successful bind.
#[async_trait]
pub trait PostBindPlugin: Plugin {
    /// Called after binding succeeded.
    async fn post_bind(&self, pod: &PodInfo, node: &str);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_scales() {
        // (raw scores, scale, scaled scores)
        let cases: [(&[i64], ScoreScale, &[i64]); 7] = [
            (&[2, 4], ScoreScale::ToMax, &[50, 100]),
            (&[0, 4], ScoreScale::ToMaxReversed, &[100, 0]),
            (&[0], ScoreScale::ToMaxReversed, &[100]),
            (&[0, 0], ScoreScale::ToMax, &[0, 0]),
            (&[-5, 10], ScoreScale::MinMax, &[0, 100]),
            (&[3, 3], ScoreScale::MinMax, &[0, 0]),
            (&[7, 200], ScoreScale::AsIs, &[7, 200]),
        ];
        let names = ["a", "b"];
        for (raw, scale, want) in cases {
            let mut scores: Vec<NodeScore> = raw
                .iter()
                .zip(names)
                .map(|(&score, name)| NodeScore { name, score })
                .collect();
            scale.apply(&mut scores);
            let got: Vec<i64> = scores.iter().map(|s| s.score).collect();
            assert_eq!(got, want, "{raw:?} {scale:?}");
        }
    }
}
