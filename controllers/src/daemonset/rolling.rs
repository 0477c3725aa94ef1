//! A DaemonSet's rolling update: which outdated pods go and which nodes get
//! their new pod now, within `maxUnavailable` (delete first, the sync then
//! makes the missing pod) or `maxSurge` (the new pod starts beside the old
//! one, which goes once the new one is available), as upstream decides.

use std::sync::Arc;

use crate::controller_utils::scaled_value;
use crate::pod_control::is_available;
use k8s_openapi::api::apps::v1::DaemonSetUpdateStrategy;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The daemon pods of one node that has any, as the update sees them.
pub(super) struct NodePods {
    /// The node's name.
    pub node: String,
    /// Its pod of the current template, and its pod of an older one (pods
    /// being deleted or failed left out).
    pub new: Option<Arc<Pod>>,
    /// See `new`.
    pub old: Option<Arc<Pod>>,
    /// False when it has more than one of either: the sync prunes those
    /// first, and the node counts as unavailable (or surging) meanwhile.
    pub single: bool,
}

/// `maxSurge` and `maxUnavailable` of a RollingUpdate strategy as numbers of
/// nodes out of `desired` (percentages rounded up, as upstream), or None
/// for OnDelete. Both zero cannot pass validation; were it stored, one
/// unavailable node is allowed.
pub(super) fn limits(strategy: &DaemonSetUpdateStrategy, desired: i32) -> Option<(i32, i32)> {
    if strategy.type_.as_deref() == Some("OnDelete") {
        return None;
    }
    let rolling = strategy.rolling_update.as_ref();
    let surge = scaled_value(
        rolling.and_then(|r| r.max_surge.as_ref()),
        desired,
        true,
        "0",
    );
    let unavailable = scaled_value(
        rolling.and_then(|r| r.max_unavailable.as_ref()),
        desired,
        true,
        "1",
    );
    if surge == 0 && unavailable == 0 && desired > 0 {
        return Some((0, 1));
    }
    Some((surge, unavailable))
}

/// Whether the strategy surges: a node's old pod may then stay beside its
/// new one (a percentage of any number of nodes is at least one).
pub(super) fn surges(strategy: &DaemonSetUpdateStrategy) -> bool {
    limits(strategy, 1).is_some_and(|(surge, _)| surge > 0)
}

/// What the update does now: the pods to delete and the nodes to start a
/// new pod on.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Step {
    /// Outdated pods to delete.
    pub delete: Vec<Arc<Pod>>,
    /// Nodes that get a pod of the current template beside their old one.
    pub create_on: Vec<String>,
}

/// The next step of the update over `nodes` (every node holding a daemon
/// pod), with `surge` and `unavailable` from [`limits`].
pub(super) fn step(
    nodes: &[NodePods],
    surge: i32,
    unavailable: i32,
    min_ready: i32,
    at: &Time,
) -> Step {
    let available = |pod: &Arc<Pod>| is_available(pod, min_ready, at);
    let mut step = Step::default();
    if surge == 0 {
        // Delete just enough old pods to stay within maxUnavailable; the
        // sync makes their successors once they are gone.
        let mut down = 0;
        let mut candidates = Vec::new();
        for n in nodes {
            if !n.single {
                down += 1;
                continue;
            }
            match (&n.new, &n.old) {
                (None, None) | (Some(_), Some(_)) => down += 1,
                (Some(new), None) => down += i32::from(!available(new)),
                (None, Some(old)) if !available(old) => {
                    step.delete.push(old.clone());
                    down += 1;
                }
                (None, Some(_)) if down >= unavailable => {}
                (None, Some(old)) => candidates.push(old.clone()),
            }
        }
        let room = usize::try_from(unavailable - down).unwrap_or(0);
        step.delete.extend(candidates.into_iter().take(room));
        return step;
    }
    // Surge: a node's new pod starts beside its old one, at most `surge` at
    // a time (an old pod that is not available anyway is replaced at once),
    // and the old pod goes when the new one is available.
    let mut surging = 0;
    let mut candidates = Vec::new();
    for n in nodes {
        if !n.single {
            surging += 1;
            continue;
        }
        match (&n.new, &n.old) {
            (_, None) => {}
            (None, Some(old)) if !available(old) => step.create_on.push(n.node.clone()),
            (None, Some(_)) if surging >= surge => {}
            (None, Some(_)) => candidates.push(n.node.clone()),
            (Some(new), Some(_)) if !available(new) => surging += 1,
            (Some(_), Some(old)) => step.delete.push(old.clone()),
        }
    }
    let room = usize::try_from(surge - surging).unwrap_or(0);
    step.create_on.extend(candidates.into_iter().take(room));
    step
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::RollingUpdateDaemonSet;
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use k8s_openapi::jiff::Timestamp;

    fn strategy(
        surge: Option<IntOrString>,
        unavailable: Option<IntOrString>,
    ) -> DaemonSetUpdateStrategy {
        DaemonSetUpdateStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(RollingUpdateDaemonSet {
                max_surge: surge,
                max_unavailable: unavailable,
            }),
        }
    }

    #[test]
    fn percentages_round_up_and_on_delete_has_none() {
        let pct = |s: &str| Some(IntOrString::String(s.into()));
        assert_eq!(limits(&strategy(None, pct("30%")), 5), Some((0, 2)));
        assert_eq!(limits(&strategy(None, pct("10%")), 5), Some((0, 1)));
        assert_eq!(
            limits(&strategy(pct("25%"), Some(IntOrString::Int(0))), 10),
            Some((3, 0))
        );
        assert_eq!(limits(&strategy(None, None), 4), Some((0, 1)));
        let on_delete = DaemonSetUpdateStrategy {
            type_: Some("OnDelete".into()),
            rolling_update: None,
        };
        assert_eq!(limits(&on_delete, 4), None);
    }

    fn pod(name: &str, ready: bool) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            status: Some(PodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    last_transition_time: Some(Time(Timestamp::UNIX_EPOCH)),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    fn node(name: &str, new: Option<Arc<Pod>>, old: Option<Arc<Pod>>) -> NodePods {
        NodePods {
            node: name.into(),
            new,
            old,
            single: true,
        }
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<&str> {
        pods.iter()
            .map(|p| p.metadata.name.as_deref().unwrap_or(""))
            .collect()
    }

    #[test]
    fn without_surge_old_pods_go_within_max_unavailable_unavailable_ones_first() {
        let at = Time(Timestamp::now());
        let nodes = [
            node("a", None, Some(pod("old-a", true))),
            node("b", None, Some(pod("old-b", false))),
            node("c", None, Some(pod("old-c", true))),
            node("d", Some(pod("new-d", true)), None),
        ];
        // b is down already: with maxUnavailable 2 one available old pod
        // may go besides it.
        let step2 = step(&nodes, 0, 2, 0, &at);
        assert_eq!(names(&step2.delete), ["old-b", "old-a"]);
        assert!(step2.create_on.is_empty());
        let step1 = step(&nodes, 0, 1, 0, &at);
        assert_eq!(names(&step1.delete), ["old-b"]);
    }

    #[test]
    fn with_surge_new_pods_start_beside_old_ones_which_go_once_replaced() {
        let at = Time(Timestamp::now());
        let nodes = [
            node("a", None, Some(pod("old-a", true))),
            node("b", None, Some(pod("old-b", true))),
            node("c", Some(pod("new-c", false)), Some(pod("old-c", true))),
            node("d", Some(pod("new-d", true)), Some(pod("old-d", true))),
            node("e", None, Some(pod("old-e", false))),
        ];
        // c surges (its new pod not yet available), d's old pod goes, e's
        // unavailable old pod is replaced at once; one more surge is room
        // for a (maxSurge 2), not b.
        let s = step(&nodes, 2, 0, 0, &at);
        assert_eq!(names(&s.delete), ["old-d"]);
        assert_eq!(s.create_on, ["e", "a"]);
        let s = step(&nodes, 1, 0, 0, &at);
        assert_eq!(s.create_on, ["e"]);
    }
}
