//! The scheduler's cache: nodes, the pods bound to them and the pods *assumed* onto them
//! while their binding is in flight.
//!
//! Assumed pods count against their node immediately so the next cycle cannot double-book
//! the capacity. An assumption is confirmed when the informer reports the pod bound,
//! forgotten when binding fails, and expires if the binding finished but the informer
//! never confirmed it.

pub(crate) mod node_info;
pub(crate) mod snapshot;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;

use crate::pod_info::{PodInfo, PodKey};
pub use node_info::NodeInfo;
pub use snapshot::Snapshot;

/// Errors from cache operations; each means the caller's view disagrees with the cache.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CacheError {
    /// The pod is already in the cache and cannot be assumed again.
    #[error("pod {0} is already in the cache, so it cannot be assumed")]
    AlreadyPresent(String),
    /// The pod was expected to be assumed but is not.
    #[error("pod {0} is not assumed")]
    NotAssumed(String),
    /// The pod was assumed onto a different node than the caller says.
    #[error("pod {pod} was assumed on node {assumed} but is reported on {reported}")]
    WrongNode {
        /// The pod.
        pod: String,
        /// Where it was assumed.
        assumed: String,
        /// Where the caller says it is.
        reported: String,
    },
    /// The pod has no node name.
    #[error("pod {0} has no node name")]
    NoNodeName(String),
}

/// The node `pod` is bound or assumed to: the one the cache files it under.
fn bound_node(pod: &PodInfo) -> Result<String, CacheError> {
    pod.node_name()
        .map(str::to_string)
        .ok_or_else(|| CacheError::NoNodeName(pod.full_name()))
}

#[derive(Debug, Clone)]
struct PodState {
    pod: Arc<PodInfo>,
    node: String,
    assumed: bool,
    /// Set when binding finished: the assumption expires at this instant unless confirmed.
    deadline: Option<Instant>,
}

#[derive(Debug, Clone)]
struct NodeEntry {
    info: Arc<NodeInfo>,
}

/// Nodes and pods known to the scheduler, including assumed pods.
#[derive(Debug)]
pub struct Cache {
    nodes: HashMap<String, NodeEntry>,
    pods: HashMap<PodKey, PodState>,
    generation: u64,
    /// generation → node name, one entry per node at its latest generation: the snapshot
    /// walks only entries newer than its own generation.
    changes: BTreeMap<u64, String>,
    images: HashMap<String, usize>,
    images_changed: bool,
    assumed_ttl: Duration,
}

impl Cache {
    /// A cache whose finished-but-unconfirmed assumptions expire after `assumed_ttl`.
    pub fn new(assumed_ttl: Duration) -> Self {
        Cache {
            nodes: HashMap::new(),
            pods: HashMap::new(),
            generation: 0,
            changes: BTreeMap::new(),
            images: HashMap::new(),
            images_changed: false,
            assumed_ttl,
        }
    }

    fn touch(&mut self, name: &str) -> &mut NodeInfo {
        self.generation += 1;
        let generation = self.generation;
        let entry = self
            .nodes
            .entry(name.to_string())
            .or_insert_with(|| NodeEntry {
                info: Arc::new(NodeInfo::new(name)),
            });
        let info = Arc::make_mut(&mut entry.info);
        self.changes.remove(&info.generation);
        info.generation = generation;
        self.changes.insert(generation, name.to_string());
        info
    }

    fn count_images(&mut self, info_images: &HashMap<String, i64>, delta: isize) {
        for img in info_images.keys() {
            let c = self.images.entry(img.clone()).or_default();
            *c = c.saturating_add_signed(delta);
            if *c == 0 {
                self.images.remove(img);
            }
        }
        if !info_images.is_empty() {
            self.images_changed = true;
        }
    }

    /// Adds or updates a node.
    pub fn add_or_update_node(&mut self, node: Arc<Node>) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let old_images = self
            .nodes
            .get(&name)
            .filter(|e| e.info.node().is_some())
            .map(|e| e.info.images.clone());
        let info = self.touch(&name);
        info.set_node(node);
        let new_images = info.images.clone();
        if old_images.as_deref() != Some(&*new_images) {
            if let Some(old) = old_images {
                self.count_images(&old, -1);
            }
            self.count_images(&new_images, 1);
        }
    }

    /// Removes a node. Pods still on it stay accounted until they are deleted.
    pub fn remove_node(&mut self, name: &str) {
        let Some(entry) = self.nodes.get(name) else {
            return;
        };
        let images = entry.info.images.clone();
        let has_pods = !entry.info.pods.is_empty();
        self.count_images(&images, -1);
        if has_pods {
            self.touch(name).clear_node();
        } else {
            self.generation += 1;
            if let Some(e) = self.nodes.remove(name) {
                self.changes.remove(&e.info.generation);
            }
            // A tombstone: the snapshot sees the name with no node and drops it.
            self.changes.insert(self.generation, name.to_string());
        }
    }

    /// Puts `pod` on `node`, assumed (bound here, not yet seen bound) or
    /// confirmed.
    fn place(&mut self, pod: Arc<PodInfo>, node: String, assumed: bool) {
        self.touch(&node).add_pod(pod.clone());
        self.pods.insert(
            pod.key.clone(),
            PodState {
                pod,
                node,
                assumed,
                deadline: None,
            },
        );
    }

    /// Assumes `pod` (whose `spec.nodeName` is set to the chosen node) is bound.
    pub fn assume_pod(&mut self, pod: Arc<PodInfo>) -> Result<(), CacheError> {
        let node = bound_node(&pod)?;
        if self.pods.contains_key(&pod.key) {
            return Err(CacheError::AlreadyPresent(pod.full_name()));
        }
        self.place(pod, node, true);
        Ok(())
    }

    /// Marks an assumed pod's binding as finished: from now on the assumption expires
    /// after the TTL unless the informer confirms the pod.
    pub fn finish_binding(&mut self, key: &str, now: Instant) {
        let ttl = self.assumed_ttl;
        if let Some(ps) = self.pods.get_mut(key).filter(|ps| ps.assumed) {
            ps.deadline = Some(now + ttl);
        }
    }

    /// Forgets an assumed pod (its binding failed).
    pub fn forget_pod(&mut self, key: &str) -> Result<(), CacheError> {
        match self.pods.get(key) {
            Some(ps) if ps.assumed => {
                let node = ps.node.clone();
                self.pods.remove(key);
                self.remove_from_node(&node, key);
                Ok(())
            }
            _ => Err(CacheError::NotAssumed(key.to_string())),
        }
    }

    fn remove_from_node(&mut self, node: &str, key: &str) {
        if !self.nodes.contains_key(node) {
            return;
        }
        let info = self.touch(node);
        info.remove_pod(key);
        let orphan = info.node().is_none() && info.pods.is_empty();
        if orphan {
            self.remove_node(node);
        }
    }

    /// A bound pod appeared (informer add): confirms an assumption or adds the pod.
    pub fn add_pod(&mut self, pod: Arc<PodInfo>) -> Result<(), CacheError> {
        let node = bound_node(&pod)?;
        if let Some(ps) = self.pods.get(&pod.key).cloned() {
            if !ps.assumed {
                return Err(CacheError::AlreadyPresent(pod.full_name()));
            }
            // Confirm; the bound pod replaces the assumed copy (it may even be on another
            // node if someone else bound it).
            self.remove_from_node(&ps.node, &pod.key);
        }
        self.place(pod, node, false);
        Ok(())
    }

    /// A bound pod changed (informer update).
    pub fn update_pod(&mut self, new: Arc<PodInfo>) -> Result<(), CacheError> {
        match self.pods.get(&new.key) {
            Some(ps) if !ps.assumed => {
                let old_node = ps.node.clone();
                self.remove_from_node(&old_node, &new.key);
                self.pods.remove(&new.key);
                self.add_pod(new)
            }
            // Updates of assumed or unknown pods are treated as adds (the informer may
            // have coalesced the add).
            _ => self.add_pod(new),
        }
    }

    /// A bound pod was deleted.
    pub fn remove_pod(&mut self, key: &str) {
        if let Some(ps) = self.pods.remove(key) {
            self.remove_from_node(&ps.node, key);
        }
    }

    /// True if the pod is assumed (bind in flight or unconfirmed).
    pub fn is_assumed(&self, key: &str) -> bool {
        self.pods.get(key).is_some_and(|p| p.assumed)
    }

    /// The pod as the cache knows it.
    pub fn get_pod(&self, key: &str) -> Option<Arc<PodInfo>> {
        self.pods.get(key).map(|p| p.pod.clone())
    }

    /// Drops assumptions whose binding finished more than the TTL ago without the
    /// informer confirming them. Returns the expired pods.
    pub fn cleanup_expired(&mut self, now: Instant) -> Vec<Arc<PodInfo>> {
        let expired: Vec<(PodKey, String, Arc<PodInfo>)> = self
            .pods
            .iter()
            .filter(|(_, ps)| ps.assumed && ps.deadline.is_some_and(|d| now >= d))
            .map(|(k, ps)| (k.clone(), ps.node.clone(), ps.pod.clone()))
            .collect();
        for (key, node, _) in &expired {
            self.pods.remove(key);
            self.remove_from_node(node, key);
        }
        expired.into_iter().map(|(_, _, p)| p).collect()
    }

    /// Number of nodes with a node object.
    pub fn node_count(&self) -> usize {
        self.nodes
            .values()
            .filter(|e| e.info.node().is_some())
            .count()
    }

    /// The node info for a node (copy-on-write handle).
    pub fn node(&self, name: &str) -> Option<Arc<NodeInfo>> {
        self.nodes.get(name).map(|e| e.info.clone())
    }

    /// Brings `snap` up to date, copying only nodes that changed since its last update.
    pub fn update_snapshot(&mut self, snap: &mut Snapshot) {
        let mut affinity_dirty = false;
        for (_, name) in self.changes.range(snap.generation + 1..) {
            let old_had_affinity = snap.get(name).is_some_and(|n| {
                !n.pods_with_affinity.is_empty() || !n.pods_with_required_anti_affinity.is_empty()
            });
            match self.nodes.get(name) {
                Some(e) if e.info.node().is_some() => {
                    let has = !e.info.pods_with_affinity.is_empty();
                    affinity_dirty |= old_had_affinity || has;
                    snap.upsert(e.info.clone());
                }
                _ => {
                    affinity_dirty |= old_had_affinity;
                    snap.remove(name);
                }
            }
        }
        if affinity_dirty {
            snap.rebuild_affinity_lists();
        }
        if self.images_changed {
            snap.image_nodes = Arc::new(self.images.clone());
            self.images_changed = false;
        }
        snap.generation = self.generation;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{NodeBuilder, PodBuilder};

    fn pod(name: &str, node: &str, cpu: &str) -> Arc<PodInfo> {
        Arc::new(PodInfo::new(Arc::new(
            PodBuilder::new(name)
                .node(node)
                .container(&[("cpu", cpu)])
                .build(),
        )))
    }

    fn cache_with_nodes(names: &[&str]) -> Cache {
        let mut c = Cache::new(Duration::from_secs(30));
        for n in names {
            c.add_or_update_node(Arc::new(NodeBuilder::new(n).build()));
        }
        c
    }

    #[test]
    fn assume_confirm_forget() {
        let mut c = cache_with_nodes(&["n1"]);
        let p = pod("p", "n1", "1");
        c.assume_pod(p.clone()).unwrap();
        assert_eq!(c.node("n1").unwrap().requested.milli_cpu, 1000);
        assert_eq!(
            c.assume_pod(p.clone()),
            Err(CacheError::AlreadyPresent("default/p".into()))
        );
        // Confirmation replaces the assumed copy without double counting.
        c.add_pod(p.clone()).unwrap();
        assert!(!c.is_assumed(&p.key));
        assert_eq!(c.node("n1").unwrap().requested.milli_cpu, 1000);
        assert_eq!(
            c.forget_pod(&p.key),
            Err(CacheError::NotAssumed(p.key.clone()))
        );
        c.remove_pod(&p.key);
        assert_eq!(c.node("n1").unwrap().requested.milli_cpu, 0);
    }

    #[test]
    fn failed_bind_then_retry_does_not_double_count() {
        let mut c = cache_with_nodes(&["n1", "n2"]);
        let p = pod("p", "n1", "1");
        c.assume_pod(p.clone()).unwrap();
        c.forget_pod(&p.key).unwrap();
        assert_eq!(c.node("n1").unwrap().requested.milli_cpu, 0);
        // Retried and placed elsewhere.
        let retry = pod("p", "n2", "1");
        c.assume_pod(retry.clone()).unwrap();
        c.finish_binding(&retry.key, Instant::now());
        c.add_pod(retry).unwrap();
        assert_eq!(c.node("n1").unwrap().requested.milli_cpu, 0);
        assert_eq!(c.node("n2").unwrap().requested.milli_cpu, 1000);
        assert_eq!(c.node("n2").unwrap().pods.len(), 1);
    }

    #[test]
    fn assumptions_expire_only_after_binding_finished() {
        let mut c = cache_with_nodes(&["n1"]);
        let start = Instant::now();
        let p = pod("p", "n1", "1");
        c.assume_pod(p.clone()).unwrap();
        assert!(
            c.cleanup_expired(start + Duration::from_secs(3600))
                .is_empty(),
            "bind still in flight"
        );
        c.finish_binding(&p.key, start);
        assert!(
            c.cleanup_expired(start + Duration::from_secs(29))
                .is_empty()
        );
        let expired = c.cleanup_expired(start + Duration::from_secs(30));
        assert_eq!(expired.len(), 1);
        assert_eq!(c.node("n1").unwrap().requested.milli_cpu, 0);
        assert!(c.get_pod(&p.key).is_none());
    }

    #[test]
    fn snapshot_copies_only_changed_nodes() {
        let mut c = cache_with_nodes(&["n1", "n2", "n3"]);
        let mut snap = Snapshot::new();
        c.update_snapshot(&mut snap);
        assert_eq!(snap.len(), 3);
        let n2_before = snap.get("n2").unwrap().clone();
        c.assume_pod(pod("p", "n1", "1")).unwrap();
        c.update_snapshot(&mut snap);
        assert_eq!(snap.get("n1").unwrap().requested.milli_cpu, 1000);
        assert!(
            Arc::ptr_eq(&n2_before, snap.get("n2").unwrap()),
            "unchanged node is shared, not copied"
        );
        c.remove_node("n3");
        c.update_snapshot(&mut snap);
        assert_eq!(snap.len(), 2);
        assert!(snap.get("n3").is_none());
        assert!(snap.get("n2").is_some());
    }

    #[test]
    fn snapshot_isolated_from_later_cache_changes() {
        let mut c = cache_with_nodes(&["n1"]);
        let mut snap = Snapshot::new();
        c.update_snapshot(&mut snap);
        c.assume_pod(pod("p", "n1", "1")).unwrap();
        assert_eq!(
            snap.get("n1").unwrap().requested.milli_cpu,
            0,
            "copy-on-write keeps the snapshot stable"
        );
    }

    #[test]
    fn pods_before_node_and_image_counts() {
        let mut c = Cache::new(Duration::from_secs(30));
        c.add_pod(pod("p", "late", "1")).unwrap();
        let mut snap = Snapshot::new();
        c.update_snapshot(&mut snap);
        assert!(
            snap.get("late").is_none(),
            "nodes without a Node object are not schedulable"
        );
        c.add_or_update_node(Arc::new(
            NodeBuilder::new("late").image("nginx:1", 100).build(),
        ));
        c.add_or_update_node(Arc::new(
            NodeBuilder::new("other").image("nginx:1", 100).build(),
        ));
        c.update_snapshot(&mut snap);
        assert_eq!(snap.get("late").unwrap().requested.milli_cpu, 1000);
        assert_eq!(snap.image_node_count("nginx:1"), 2);
        c.remove_node("other");
        c.update_snapshot(&mut snap);
        assert_eq!(snap.image_node_count("nginx:1"), 1);
    }
}
