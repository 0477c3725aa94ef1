//! Nodes: the one kind with a status subresource whose status on create is
//! kept (a node agent registers its node with its status); a status that
//! states capacity but no allocatable offers all of it.

use serde_json::Value;

use super::{InitialStatus, KindStrategy, NodeWrites};
use crate::object::path_mut;
use crate::registry::ResourceInfo;

/// The `nodes` resource.
#[derive(Debug)]
pub(crate) struct Nodes;

impl KindStrategy for Nodes {
    fn initial_status(&self) -> InitialStatus {
        InitialStatus::Kept
    }

    fn node_writes(&self) -> NodeWrites {
        NodeWrites::OwnNode
    }

    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        let Some(status) = path_mut(object, &["status"]).and_then(Value::as_object_mut) else {
            return;
        };
        if !status.contains_key("allocatable")
            && let Some(capacity) = status.get("capacity").filter(|c| c.is_object()).cloned()
        {
            status.insert("allocatable".into(), capacity);
        }
    }
}
