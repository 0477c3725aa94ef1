//! Pods nominated to nodes by preemption: they wait for their victims to leave, and the
//! filters account for them so other pods do not take the freed room.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::RwLock;

use crate::framework::NominatedPods;
use crate::pod_info::{PodInfo, PodKey};

/// Thread-safe node → nominated pods index.
#[derive(Default)]
pub struct Nominator {
    inner: RwLock<Inner>,
    /// Pods nominated anywhere, kept beside the lock so the filters of a cluster
    /// with no nominations (the usual case) skip a locked lookup per node.
    count: AtomicUsize,
}

#[derive(Default)]
struct Inner {
    by_node: HashMap<String, Vec<Arc<PodInfo>>>,
    node_of: HashMap<PodKey, String>,
}

impl Nominator {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Nominates `pod` to `node`, replacing an earlier nomination.
    pub fn add(&self, pod: Arc<PodInfo>, node: &str) {
        let mut g = self.inner.write();
        remove_locked(&mut g, &pod.key);
        g.node_of.insert(pod.key.clone(), node.to_string());
        g.by_node.entry(node.to_string()).or_default().push(pod);
        self.count.store(g.node_of.len(), Ordering::Release);
    }

    /// Drops the pod's nomination.
    pub fn remove(&self, key: &str) {
        let mut g = self.inner.write();
        remove_locked(&mut g, key);
        self.count.store(g.node_of.len(), Ordering::Release);
    }

    /// Follows a pod update: keeps the nomination in sync with `status.nominatedNodeName`.
    pub fn sync(&self, pod: &Arc<PodInfo>) {
        match (pod.nominated_node_name(), pod.node_name()) {
            (_, Some(_)) | (None, None) => {
                // Bound pods and pods without a nomination hold none, unless the
                // scheduler nominated them itself (kept until the API reflects it).
                let g = self.inner.read();
                let keep = g.node_of.contains_key(&pod.key) && pod.node_name().is_none();
                drop(g);
                if !keep {
                    self.remove(&pod.key);
                }
            }
            (Some(node), None) => self.add(pod.clone(), node),
        }
    }

    /// The node a pod is nominated to.
    pub fn node_of(&self, key: &str) -> Option<String> {
        self.inner.read().node_of.get(key).cloned()
    }
}

fn remove_locked(g: &mut Inner, key: &str) {
    if let Some(node) = g.node_of.remove(key)
        && let Some(v) = g.by_node.get_mut(&node)
    {
        v.retain(|p| p.key != key);
        if v.is_empty() {
            g.by_node.remove(&node);
        }
    }
}

impl NominatedPods for Nominator {
    fn nominated_pods_for_node(&self, node: &str) -> Vec<Arc<PodInfo>> {
        self.inner
            .read()
            .by_node
            .get(node)
            .cloned()
            .unwrap_or_default()
    }

    fn any(&self) -> bool {
        self.count.load(Ordering::Acquire) > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::PodBuilder;

    #[test]
    fn any_follows_nominations() {
        let n = Nominator::new();
        assert!(!n.any());
        let a = Arc::new(PodInfo::new(Arc::new(PodBuilder::new("a").build())));
        let b = Arc::new(PodInfo::new(Arc::new(PodBuilder::new("b").build())));
        n.add(a.clone(), "n1");
        n.add(b.clone(), "n2");
        // A new nomination replaces the old one rather than adding to the count.
        n.add(a.clone(), "n2");
        assert!(n.any());
        assert_eq!(n.nominated_pods_for_node("n2").len(), 2);
        assert!(n.nominated_pods_for_node("n1").is_empty());
        n.remove(&a.key);
        assert!(n.any());
        n.remove(&b.key);
        assert!(!n.any());
        assert!(n.nominated_pods_for_node("n2").is_empty());
    }
}
