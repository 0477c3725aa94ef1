//! NodePorts: a pod's host ports must be free on the node (same protocol and port
//! conflict when either IP is the wildcard or both IPs are equal).

use super::stateless_plugin;
use crate::cache::NodeInfo;
use crate::framework::*;
use crate::pod_info::PodInfo;

/// Plugin name.
pub(crate) const NAME: &str = "NodePorts";
/// Rejection reason, as upstream.
pub(crate) const REASON: &str = "node(s) didn't have free ports for the requested pod ports";

stateless_plugin! {
    /// The NodePorts plugin.
    NodePorts = NAME;
    events: [ClusterEvent::ASSIGNED_POD_DELETE, ClusterEvent::NODE_ADD];
    /// A deleted pod helps only if it held a host port the pod wants.
    fn queueing_hint(&self, pod: &PodInfo, objects: &EventObjects<'_>) -> QueueingHint {
        let EventObjects::Pod {
            old: Some(deleted),
            new: None,
        } = objects
        else {
            return QueueingHint::Queue;
        };
        let freed = PodInfo::new(std::sync::Arc::new((*deleted).clone())).host_ports;
        QueueingHint::from_bool(freed.iter().any(|u| {
            pod.host_ports.iter().any(|w| {
                u.port == w.port
                    && u.protocol == w.protocol
                    && (u.ip == w.ip || u.ip == "0.0.0.0" || w.ip == "0.0.0.0")
            })
        }))
    }
    views!(filter);
}

impl FilterPlugin for NodePorts {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if pod.host_ports.iter().any(|p| node.port_conflicts(p)) {
            Status::unschedulable(REASON)
        } else {
            Status::success()
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
        let existing = || {
            vec![
                PodBuilder::new("e")
                    .node("n")
                    .host_port(8080, "TCP", "10.0.0.1")
                    .build(),
            ]
        };
        /// A host port of the pod: (port, protocol, host IP).
        type HostPort = (i32, &'static str, &'static str);
        // (case, the pod's host ports, fits)
        let cases: [(&str, &[HostPort], bool); 6] = [
            ("no ports", &[], true),
            ("other port", &[(9090, "TCP", "")], true),
            ("same port other protocol", &[(8080, "UDP", "")], true),
            ("same port other ip", &[(8080, "TCP", "10.0.0.2")], true),
            ("same port same ip", &[(8080, "TCP", "10.0.0.1")], false),
            ("wildcard ip conflicts", &[(8080, "TCP", "")], false),
        ];
        for (name, ports, want) in cases {
            let pod = ports
                .iter()
                .fold(PodBuilder::new("p"), |pod, &(port, protocol, ip)| {
                    pod.host_port(port, protocol, ip)
                });
            let ni = node_info_with(NodeBuilder::new("n").build(), existing());
            let st = filter_on(&NodePorts, pod, &ni);
            assert_eq!(st.is_success(), want, "{name}");
            if !want {
                assert_eq!(
                    (st.code(), st.message()),
                    (Code::Unschedulable, REASON.to_string())
                );
            }
        }
    }
}
