//! The events a node reports about itself, as a kubelet's do: `Starting`
//! when the agent starts, one for each condition whose status changes
//! (`Node n status is now: NodeReady`), and `NodeNotSchedulable` /
//! `NodeSchedulable` when the node is cordoned or uncordoned. They are what
//! `kubectl describe node` lists under Events.

use k8s_openapi::api::core::v1::{Node, NodeStatus, ObjectReference};
use skiff_common::events::EventRecorder;

/// Reports a node's events under the `kubelet` component.
pub(crate) struct NodeEvents {
    recorder: EventRecorder,
    node: ObjectReference,
    name: String,
    /// Whether the node was last seen cordoned; a kubelet starts from
    /// "schedulable", so an uncordoned node says nothing at start.
    unschedulable: bool,
}

impl NodeEvents {
    /// Events about the Node `name`, written through `recorder`.
    pub(crate) fn new(recorder: EventRecorder, name: &str) -> Self {
        Self {
            recorder,
            node: node_reference(name),
            name: name.to_owned(),
            unschedulable: false,
        }
    }

    /// The agent has started.
    pub(crate) fn starting(&self) {
        self.recorder
            .normal(&self.node, "Starting", "", "Starting kubelet.");
    }

    /// The node's status went from `before` (none: just registered) to
    /// `after`: one event per condition whose status changed.
    pub(crate) fn status_written(&self, before: Option<&NodeStatus>, after: Option<&NodeStatus>) {
        let conditions = |s: Option<&NodeStatus>| s.and_then(|s| s.conditions.clone());
        let before = conditions(before).unwrap_or_default();
        for condition in conditions(after).unwrap_or_default() {
            let was = before.iter().find(|c| c.type_ == condition.type_);
            if was.is_some_and(|was| was.status == condition.status) {
                continue;
            }
            if let Some(reason) = status_event(&condition.type_, &condition.status) {
                self.status_is_now(reason);
            }
        }
    }

    /// The Node as last read: reports a cordon or uncordon since the last
    /// time.
    pub(crate) fn node_seen(&mut self, node: &Node) {
        let unschedulable = node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false);
        if unschedulable == self.unschedulable {
            return;
        }
        self.unschedulable = unschedulable;
        self.status_is_now(if unschedulable {
            "NodeNotSchedulable"
        } else {
            "NodeSchedulable"
        });
    }

    fn status_is_now(&self, reason: &str) {
        self.recorder.normal(
            &self.node,
            reason,
            "",
            format!("Node {} status is now: {reason}", self.name),
        );
    }
}

/// The reference a kubelet's events about its node carry: the node's name
/// in place of its uid, which is what `kubectl describe node` looks for
/// besides the real uid (the node controller's events).
pub(crate) fn node_reference(name: &str) -> ObjectReference {
    ObjectReference {
        kind: Some("Node".to_owned()),
        name: Some(name.to_owned()),
        uid: Some(name.to_owned()),
        ..Default::default()
    }
}

/// The event for a condition now at `status`, in a kubelet's words.
fn status_event(condition: &str, status: &str) -> Option<&'static str> {
    Some(match (condition, status) {
        ("Ready", "True") => "NodeReady",
        ("Ready", _) => "NodeNotReady",
        ("MemoryPressure", "True") => "NodeHasInsufficientMemory",
        ("MemoryPressure", _) => "NodeHasSufficientMemory",
        ("DiskPressure", "True") => "NodeHasDiskPressure",
        ("DiskPressure", _) => "NodeHasNoDiskPressure",
        ("PIDPressure", "True") => "NodeHasInsufficientPID",
        ("PIDPressure", _) => "NodeHasSufficientPID",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_condition_names_its_event_as_a_kubelet_does() {
        assert_eq!(status_event("Ready", "True"), Some("NodeReady"));
        assert_eq!(status_event("Ready", "False"), Some("NodeNotReady"));
        assert_eq!(
            status_event("MemoryPressure", "False"),
            Some("NodeHasSufficientMemory")
        );
        assert_eq!(
            status_event("DiskPressure", "True"),
            Some("NodeHasDiskPressure")
        );
        assert_eq!(
            status_event("PIDPressure", "False"),
            Some("NodeHasSufficientPID")
        );
        assert_eq!(status_event("NetworkUnavailable", "True"), None);
    }
}
