//! Reading a Node's status conditions. The node-lifecycle controller judges
//! a node by its conditions, the service load balancer by its Ready one, and
//! the node agent's tests wait for the agent to report it; all look them up
//! here.

use k8s_openapi::api::core::v1::{Node, NodeCondition};

/// The Node's status conditions; none when its status reports none.
pub fn conditions(node: &Node) -> &[NodeCondition] {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
}

/// The Node's `Ready` condition, when its status reports one.
pub fn ready_condition(node: &Node) -> Option<&NodeCondition> {
    conditions(node).iter().find(|c| c.type_ == "Ready")
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::NodeStatus;

    use super::*;

    fn node(conditions: Option<Vec<NodeCondition>>) -> Node {
        Node {
            status: Some(NodeStatus {
                conditions,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn condition(type_: &str, status: &str) -> NodeCondition {
        NodeCondition {
            type_: type_.into(),
            status: status.into(),
            ..Default::default()
        }
    }

    #[test]
    fn finds_the_ready_condition_among_others() {
        let n = node(Some(vec![
            condition("MemoryPressure", "False"),
            condition("Ready", "True"),
        ]));
        assert_eq!(ready_condition(&n).map(|c| c.status.as_str()), Some("True"));
        let without = node(Some(vec![condition("MemoryPressure", "False")]));
        assert!(ready_condition(&without).is_none());
        assert!(ready_condition(&node(None)).is_none());
        assert!(ready_condition(&Node::default()).is_none());
    }

    #[test]
    fn a_node_without_status_has_no_conditions() {
        assert!(conditions(&node(None)).is_empty());
        assert!(conditions(&Node::default()).is_empty());
        let n = node(Some(vec![condition("Ready", "True")]));
        assert_eq!(conditions(&n), [condition("Ready", "True")]);
    }
}
