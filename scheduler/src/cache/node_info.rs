//! `NodeInfo`: one node with the aggregates of the pods on it.
//!
//! The cache keeps one `Arc<NodeInfo>` per node and mutates it copy-on-write, so a
//! snapshot that shares the `Arc` is never disturbed and only changed nodes are copied.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Taint};

use crate::pod_info::{HostPort, PodInfo};
use crate::resource::Resource;
use crate::selectors::{Labels, node_labels};

/// A node and the aggregate state of the pods assigned (or assumed) to it.
#[derive(Debug, Clone, Default)]
pub struct NodeInfo {
    node: Option<Arc<Node>>,
    name: String,
    /// Pods on the node.
    pub pods: Vec<Arc<PodInfo>>,
    /// Pods on the node that have any pod (anti-)affinity.
    pub pods_with_affinity: Vec<Arc<PodInfo>>,
    /// Pods on the node that have required pod anti-affinity.
    pub pods_with_required_anti_affinity: Vec<Arc<PodInfo>>,
    /// Sum of the pods' effective requests.
    pub requested: Resource,
    /// Sum of requests with scoring defaults for unset CPU/memory.
    pub non_zero_requested: Resource,
    /// The node's allocatable resources.
    pub allocatable: Resource,
    /// Host ports in use.
    pub used_ports: Vec<HostPort>,
    /// Image name → size in bytes, for images present on the node.
    pub images: Arc<HashMap<String, i64>>,
    /// Bumped on every change; the snapshot copies a node only when this moved.
    pub generation: u64,
    /// `spec.unschedulable`, kept here so filters do not chase the node object.
    pub unschedulable: bool,
    /// True if the node has any taint (lets taint checks skip untainted nodes cheaply).
    pub tainted: bool,
}

impl NodeInfo {
    /// An empty node info for `name` (pods may arrive before their node).
    pub fn new(name: &str) -> Self {
        NodeInfo {
            name: name.to_string(),
            ..Default::default()
        }
    }

    /// The node object, absent while only pods referencing it are known.
    pub fn node(&self) -> Option<&Arc<Node>> {
        self.node.as_ref()
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The node's labels.
    pub fn labels(&self) -> &Labels {
        static EMPTY: Labels = Labels::new();
        self.node.as_deref().map_or(&EMPTY, node_labels)
    }

    /// The node's taints.
    pub fn taints(&self) -> &[Taint] {
        if !self.tainted {
            return &[];
        }
        self.node
            .as_deref()
            .and_then(|n| n.spec.as_ref())
            .and_then(|s| s.taints.as_deref())
            .unwrap_or(&[])
    }

    /// Sets (or replaces) the node object and recomputes allocatable and images.
    pub fn set_node(&mut self, node: Arc<Node>) {
        let spec = node.spec.as_ref();
        self.unschedulable = spec.and_then(|s| s.unschedulable).unwrap_or(false);
        self.tainted = spec
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|t| !t.is_empty());
        let status = node.status.as_ref();
        self.allocatable = status
            .and_then(|s| s.allocatable.as_ref())
            .map(Resource::from_map)
            .unwrap_or_default();
        let mut images = HashMap::new();
        for img in status.and_then(|s| s.images.as_ref()).into_iter().flatten() {
            for name in img.names.iter().flatten() {
                images.insert(name.clone(), img.size_bytes.unwrap_or(0));
            }
        }
        self.images = Arc::new(images);
        self.name = node.metadata.name.clone().unwrap_or_default();
        self.node = Some(node);
    }

    /// Drops the node object, keeping the pods (they may still be deleted later).
    pub fn clear_node(&mut self) {
        self.node = None;
        self.unschedulable = false;
        self.tainted = false;
        self.allocatable = Resource::default();
        self.images = Arc::new(HashMap::new());
    }

    /// Adds a pod's contribution.
    pub fn add_pod(&mut self, pod: Arc<PodInfo>) {
        self.requested.add(&pod.requests);
        self.non_zero_requested.add(&pod.non_zero_requests);
        self.used_ports.extend(pod.host_ports.iter().cloned());
        if pod.has_affinity() {
            self.pods_with_affinity.push(pod.clone());
        }
        if !pod.anti_affinity.required.is_empty() {
            self.pods_with_required_anti_affinity.push(pod.clone());
        }
        self.pods.push(pod);
    }

    /// Removes a pod's contribution; returns false if the pod was not on this node.
    pub fn remove_pod(&mut self, key: &str) -> bool {
        let Some(idx) = self.pods.iter().position(|p| p.key == key) else {
            return false;
        };
        let pod = self.pods.swap_remove(idx);
        self.pods_with_affinity.retain(|p| p.key != key);
        self.pods_with_required_anti_affinity
            .retain(|p| p.key != key);
        self.requested.sub(&pod.requests);
        self.non_zero_requested.sub(&pod.non_zero_requests);
        for hp in &pod.host_ports {
            if let Some(i) = self.used_ports.iter().position(|u| u == hp) {
                self.used_ports.swap_remove(i);
            }
        }
        true
    }

    /// True if a requested host port conflicts with one in use: same protocol and port,
    /// and either IP is the wildcard or both are equal.
    pub fn port_conflicts(&self, wanted: &HostPort) -> bool {
        self.used_ports.iter().any(|u| {
            u.port == wanted.port
                && u.protocol == wanted.protocol
                && (u.ip == wanted.ip || u.ip == "0.0.0.0" || wanted.ip == "0.0.0.0")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{NodeBuilder, PodBuilder};

    #[test]
    fn aggregates_follow_adds_and_removes() {
        let mut ni = NodeInfo::new("n1");
        ni.set_node(Arc::new(NodeBuilder::new("n1").build()));
        let a = Arc::new(PodInfo::new(Arc::new(
            PodBuilder::new("a")
                .container(&[("cpu", "1")])
                .host_port(80, "TCP", "")
                .build(),
        )));
        let b = Arc::new(PodInfo::new(Arc::new(
            PodBuilder::new("b")
                .container(&[("memory", "1Gi")])
                .pod_anti_affinity(&[("x", "y")], "zone")
                .build(),
        )));
        ni.add_pod(a.clone());
        ni.add_pod(b.clone());
        assert_eq!(ni.requested.milli_cpu, 1000);
        assert_eq!(ni.requested.memory, 1 << 30);
        // a: 1000 + 100 (port-only container default); b: 100 default.
        assert_eq!(ni.non_zero_requested.milli_cpu, 1200);
        assert_eq!(ni.pods_with_required_anti_affinity.len(), 1);
        assert!(ni.port_conflicts(&HostPort {
            ip: "10.0.0.1".into(),
            protocol: "TCP".into(),
            port: 80
        }));
        assert!(!ni.port_conflicts(&HostPort {
            ip: "0.0.0.0".into(),
            protocol: "UDP".into(),
            port: 80
        }));
        assert!(ni.remove_pod(&a.key));
        assert!(!ni.remove_pod(&a.key));
        assert_eq!(ni.requested.milli_cpu, 0);
        assert!(ni.used_ports.is_empty());
        assert!(ni.remove_pod(&b.key));
        assert!(ni.pods_with_affinity.is_empty());
        assert_eq!(ni.requested, Resource::default());
    }
}
