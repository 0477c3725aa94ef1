//! NodeName: a pod that names a node fits only that node.

use super::stateless_plugin;
use crate::cache::NodeInfo;
use crate::framework::*;
use crate::pod_info::PodInfo;

/// Plugin name.
pub(crate) const NAME: &str = "NodeName";
/// Rejection reason, as upstream.
pub(crate) const REASON: &str = "node(s) didn't match the requested node name";

stateless_plugin! {
    /// The NodeName plugin.
    NodeName = NAME;
    events: [ClusterEvent::NODE_ADD];
    views!(filter);
}

impl FilterPlugin for NodeName {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        match pod.node_name() {
            Some(n) if n != node.name() => Status::unresolvable(REASON),
            _ => Status::success(),
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
        let node = node_info_with(NodeBuilder::new("n1").build(), vec![]);
        let cases = [
            ("no node name", PodBuilder::new("p"), Code::Success),
            ("same node", PodBuilder::new("p").node("n1"), Code::Success),
            (
                "other node",
                PodBuilder::new("p").node("n2"),
                Code::UnschedulableAndUnresolvable,
            ),
        ];
        for (name, pod, want) in cases {
            let st = filter_on(&NodeName, pod, &node);
            assert_eq!(st.code(), want, "{name}");
            if want != Code::Success {
                assert_eq!(st.reasons(), [REASON]);
            }
        }
    }
}
