//! The per-cycle view of the cluster: an immutable list of `Arc<NodeInfo>`.
//!
//! `Cache::update_snapshot` refreshes it incrementally (only nodes whose generation moved
//! are replaced), so a scheduling cycle costs O(changed nodes), not O(all nodes).

use std::collections::HashMap;
use std::sync::Arc;

use super::node_info::NodeInfo;

/// A consistent view of all nodes for one scheduling cycle.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub(crate) generation: u64,
    pub(crate) nodes: Vec<Arc<NodeInfo>>,
    pub(crate) index: HashMap<String, usize>,
    pub(crate) with_affinity: Vec<Arc<NodeInfo>>,
    pub(crate) with_required_anti_affinity: Vec<Arc<NodeInfo>>,
    pub(crate) image_nodes: Arc<HashMap<String, usize>>,
}

impl Snapshot {
    /// An empty snapshot.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a snapshot directly from node infos (for tests and simulations).
    pub fn from_nodes(nodes: Vec<NodeInfo>) -> Self {
        let mut s = Snapshot::default();
        let mut images: HashMap<String, usize> = HashMap::new();
        for n in nodes {
            for img in n.images.keys() {
                *images.entry(img.clone()).or_default() += 1;
            }
            s.index.insert(n.name().to_string(), s.nodes.len());
            s.nodes.push(Arc::new(n));
        }
        s.image_nodes = Arc::new(images);
        s.rebuild_affinity_lists();
        s
    }

    /// All nodes, in a stable order.
    pub fn nodes(&self) -> &[Arc<NodeInfo>] {
        &self.nodes
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when there are no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// A node by name.
    pub fn get(&self, name: &str) -> Option<&Arc<NodeInfo>> {
        self.index.get(name).map(|i| &self.nodes[*i])
    }

    /// Nodes hosting at least one pod with pod (anti-)affinity.
    pub fn nodes_with_affinity_pods(&self) -> &[Arc<NodeInfo>] {
        &self.with_affinity
    }

    /// Nodes hosting at least one pod with required pod anti-affinity.
    pub fn nodes_with_required_anti_affinity_pods(&self) -> &[Arc<NodeInfo>] {
        &self.with_required_anti_affinity
    }

    /// On how many nodes an image is present.
    pub fn image_node_count(&self, image: &str) -> usize {
        self.image_nodes.get(image).copied().unwrap_or(0)
    }

    pub(crate) fn rebuild_affinity_lists(&mut self) {
        self.with_affinity = self.nodes_where(|n| !n.pods_with_affinity.is_empty());
        self.with_required_anti_affinity =
            self.nodes_where(|n| !n.pods_with_required_anti_affinity.is_empty());
    }

    /// The nodes for which `keep` holds, in snapshot order.
    fn nodes_where(&self, keep: impl Fn(&NodeInfo) -> bool) -> Vec<Arc<NodeInfo>> {
        self.nodes.iter().filter(|n| keep(n)).cloned().collect()
    }

    pub(crate) fn upsert(&mut self, info: Arc<NodeInfo>) {
        match self.index.get(info.name()) {
            Some(&i) => self.nodes[i] = info,
            None => {
                self.index.insert(info.name().to_string(), self.nodes.len());
                self.nodes.push(info);
            }
        }
    }

    pub(crate) fn remove(&mut self, name: &str) {
        if let Some(i) = self.index.remove(name) {
            self.nodes.swap_remove(i);
            if i < self.nodes.len() {
                let moved = self.nodes[i].name().to_string();
                self.index.insert(moved, i);
            }
        }
    }
}
