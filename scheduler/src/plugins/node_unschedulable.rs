//! NodeUnschedulable: cordoned nodes (`spec.unschedulable`) take only pods tolerating
//! the `node.kubernetes.io/unschedulable:NoSchedule` taint.

use k8s_openapi::api::core::v1::Taint;

use super::helpers::tolerates;
use super::stateless_plugin;
use crate::cache::NodeInfo;
use crate::framework::*;
use crate::pod_info::PodInfo;

/// Plugin name.
pub(crate) const NAME: &str = "NodeUnschedulable";
/// Rejection reason, as upstream.
pub(crate) const REASON: &str = "node(s) were unschedulable";
/// The taint a cordoned node implies.
pub(crate) const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";

stateless_plugin! {
    /// The NodeUnschedulable plugin.
    NodeUnschedulable = NAME;
    events: [ClusterEvent::NODE_ADD_OR_TAINT_CHANGE];
    /// Only a node that is (now) not cordoned can help.
    fn queueing_hint(&self, _pod: &PodInfo, objects: &EventObjects<'_>) -> QueueingHint {
        QueueingHint::node_now_fits(objects, |n| {
            n.spec.as_ref().and_then(|s| s.unschedulable) != Some(true)
        })
    }
    views!(filter);
}

impl FilterPlugin for NodeUnschedulable {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let cordoned = node.unschedulable;
        if !cordoned {
            return Status::success();
        }
        let taint = Taint {
            key: UNSCHEDULABLE_TAINT_KEY.into(),
            value: None,
            effect: "NoSchedule".into(),
            time_added: None,
        };
        if pod.tolerations().iter().any(|t| tolerates(t, &taint)) {
            Status::success()
        } else {
            Status::unresolvable(REASON)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::helpers::{filter_on, node_info_with};
    use crate::testing::{NodeBuilder, PodBuilder};

    #[test]
    fn filter_table() {
        use Code::*;
        // Whether the node is cordoned, and whether the pod tolerates that.
        let cases = [
            ("schedulable node", false, false, Success),
            ("cordoned node", true, false, UnschedulableAndUnresolvable),
            ("cordoned node, tolerated", true, true, Success),
        ];
        for (name, cordoned, tolerated, want) in cases {
            let mut node = NodeBuilder::new("n");
            if cordoned {
                node = node.unschedulable();
            }
            let mut pod = PodBuilder::new("p");
            if tolerated {
                pod = pod.toleration(UNSCHEDULABLE_TAINT_KEY, "Exists", "", "NoSchedule");
            }
            let ni = node_info_with(node.build(), vec![]);
            let st = filter_on(&NodeUnschedulable, pod, &ni);
            assert_eq!(st.code(), want, "{name}");
        }
    }
}
