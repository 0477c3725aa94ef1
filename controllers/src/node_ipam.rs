//! Node IPAM: gives every Node a pod CIDR (`spec.podCIDR` / `spec.podCIDRs`)
//! carved from the cluster CIDR, never the same one twice. The Node objects
//! are the record: at start the allocation map is rebuilt from them, and a
//! deleted Node's CIDR becomes free again. When the range is exhausted the
//! Node is left without a CIDR (logged, and a `CIDRNotAvailable` event).

use skiff_common::cidr::{self, Ipv4Net};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use skiff_informer::{Action, Controller, HandlerFns, WorkQueue, wait_synced};

use crate::events::{EventRecorder, object_reference};
use crate::manager::{Context, Stop, stopped};

/// Settings of the IPAM controller.
#[derive(Clone, Debug)]
pub struct IpamConfig {
    /// The range node CIDRs are carved from (IPv4, `a.b.c.d/n`).
    pub cluster_cidr: String,
    /// Prefix length of each node's CIDR.
    pub node_mask: u8,
}

impl Default for IpamConfig {
    fn default() -> Self {
        Self {
            cluster_cidr: "10.42.0.0/16".into(),
            node_mask: 24,
        }
    }
}

/// Errors of the IPAM controller.
#[derive(Debug, thiserror::Error)]
pub enum IpamError {
    /// The configured cluster CIDR is not usable.
    #[error("invalid cluster CIDR {cidr:?} with node mask /{mask}: {reason}")]
    InvalidCidr {
        /// The cluster CIDR as configured.
        cidr: String,
        /// The prefix length of each node's range.
        mask: u8,
        /// Why the pair is unusable.
        reason: &'static str,
    },
    /// Writing a Node's pod CIDR failed.
    #[error("setting the pod CIDR of node {node}: {source}")]
    Api {
        /// The Node's name.
        node: String,
        #[source]
        /// The API's error.
        source: kube::Error,
    },
}

/// Hands out the node-sized subnets of the cluster CIDR.
#[derive(Debug)]
pub struct CidrAllocator {
    cluster: Ipv4Net,
    node_mask: u8,
    used: Vec<bool>,
    /// Where the next search starts, so a released CIDR is not handed out
    /// again at once.
    next: usize,
}

impl CidrAllocator {
    /// An allocator of `/node_mask` subnets of `cluster_cidr`.
    pub fn new(cluster_cidr: &str, node_mask: u8) -> Result<Self, IpamError> {
        let invalid = |reason| IpamError::InvalidCidr {
            cidr: cluster_cidr.to_owned(),
            mask: node_mask,
            reason,
        };
        let cluster = cidr::parse_v4(cluster_cidr)
            .map_err(|_| invalid("not an IPv4 CIDR"))?
            .trunc();
        let len = cluster.prefix_len();
        if node_mask < len || node_mask > 30 {
            return Err(invalid(
                "the node mask must be between the cluster prefix and /30",
            ));
        }
        if node_mask - len > 20 {
            return Err(invalid("more than 2^20 node subnets"));
        }
        Ok(Self {
            cluster,
            node_mask,
            used: vec![false; 1 << (node_mask - len)],
            next: 0,
        })
    }

    fn cidr_of(&self, index: usize) -> Option<String> {
        let index = u32::try_from(index).ok()?;
        cidr::nth_subnet(self.cluster, self.node_mask, index).map(|net| net.to_string())
    }

    /// The slot of `cidr` if it is one of this range's node subnets.
    fn index_of(&self, cidr: &str) -> Option<usize> {
        let net = cidr::parse_v4(cidr).ok()?;
        if net.prefix_len() != self.node_mask {
            return None;
        }
        cidr::subnet_index(self.cluster, net).map(|i| i as usize)
    }

    /// Marks `cidr` taken (from an existing Node); false if it is not ours.
    pub fn occupy(&mut self, cidr: &str) -> bool {
        match self.index_of(cidr) {
            Some(i) => {
                self.used[i] = true;
                true
            }
            None => false,
        }
    }

    /// Frees `cidr`.
    pub fn release(&mut self, cidr: &str) {
        if let Some(i) = self.index_of(cidr) {
            self.used[i] = false;
        }
    }

    /// The next free subnet, now taken; None when exhausted.
    pub fn allocate(&mut self) -> Option<String> {
        let n = self.used.len();
        let i = (0..n)
            .map(|k| (self.next + k) % n)
            .find(|&i| !self.used[i])?;
        self.used[i] = true;
        self.next = (i + 1) % n;
        self.cidr_of(i)
    }
}

fn pod_cidrs(node: &Node) -> Vec<String> {
    let spec = node.spec.as_ref();
    let mut cidrs: Vec<String> = spec.and_then(|s| s.pod_cidrs.clone()).unwrap_or_default();
    if let Some(single) = spec.and_then(|s| s.pod_cidr.clone())
        && !cidrs.contains(&single)
    {
        cidrs.push(single);
    }
    cidrs.retain(|c| !c.is_empty());
    cidrs
}

struct State {
    allocator: CidrAllocator,
    /// Node uid → CIDR handed out but maybe not yet visible in the cache.
    pending: HashMap<String, String>,
}

struct Shared {
    state: Mutex<State>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Runs node IPAM with the default cluster CIDR (10.42.0.0/16, /24 per node).
pub async fn run(ctx: Context, stop: Stop) {
    run_with(ctx, stop, IpamConfig::default()).await;
}

/// Runs node IPAM with `config` until `stop`.
pub async fn run_with(ctx: Context, stop: Stop, config: IpamConfig) {
    let allocator = match CidrAllocator::new(&config.cluster_cidr, config.node_mask) {
        Ok(a) => a,
        Err(error) => {
            tracing::error!(%error, "node-ipam: not started");
            stopped(stop).await;
            return;
        }
    };
    let nodes = ctx.factory.informer::<Node>();
    // Every CIDR already handed out is occupied before the first assignment.
    if !wait_synced(&[&nodes], stopped(stop.clone())).await {
        return;
    }
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            allocator,
            pending: HashMap::new(),
        }),
    });
    {
        let mut state = shared.lock();
        for node in nodes.cache().list() {
            for cidr in pod_cidrs(&node) {
                state.allocator.occupy(&cidr);
            }
        }
    }
    let queue = WorkQueue::<String>::new();
    let (q1, q2, q3) = (queue.clone(), queue.clone(), queue.clone());
    let (released, waiting) = (Arc::clone(&shared), nodes.cache().clone());
    let handler = HandlerFns::new()
        .on_add(move |n: &Arc<Node>| q1.add(n.name_any()))
        .on_update(move |_, n: &Arc<Node>| q2.add(n.name_any()))
        .on_delete(move |n: &Arc<Node>| {
            let mut state = released.lock();
            for cidr in pod_cidrs(n) {
                state.allocator.release(&cidr);
            }
            if let Some(cidr) = n.uid().and_then(|uid| state.pending.remove(&uid)) {
                state.allocator.release(&cidr);
            }
            // Nodes left without a CIDR when the range ran out get this one.
            for node in waiting.list() {
                if pod_cidrs(&node).is_empty() {
                    q3.add(node.name_any());
                }
            }
        });
    let cache = nodes.cache().clone();
    let client = ctx.client.clone();
    let events = EventRecorder::new(ctx.client.clone(), "node-ipam-controller");
    Controller::new("node-ipam", queue)
        .watch(&nodes, handler)
        .run_until(
            move |name: String| {
                let node = cache.get("", &name);
                let (client, shared, events) =
                    (client.clone(), Arc::clone(&shared), events.clone());
                async move {
                    match node {
                        Some(node) => assign(&client, &shared, &events, &node).await,
                        None => Ok(Action::Done),
                    }
                }
            },
            stopped(stop),
        )
        .await;
}

async fn assign(
    client: &kube::Client,
    shared: &Shared,
    events: &EventRecorder,
    node: &Node,
) -> Result<Action, IpamError> {
    let uid = node.uid().unwrap_or_default();
    let existing = pod_cidrs(node);
    if !existing.is_empty() {
        let mut state = shared.lock();
        for cidr in &existing {
            state.allocator.occupy(cidr);
        }
        if let Some(pending) = state.pending.remove(&uid)
            && !existing.contains(&pending)
        {
            state.allocator.release(&pending);
        }
        return Ok(Action::Done);
    }
    let cidr = {
        let mut state = shared.lock();
        match state.pending.get(&uid) {
            Some(cidr) => Some(cidr.clone()),
            None => {
                let cidr = state.allocator.allocate();
                if let Some(c) = &cidr {
                    state.pending.insert(uid.clone(), c.clone());
                }
                cidr
            }
        }
    };
    let name = node.name_any();
    let Some(cidr) = cidr else {
        tracing::warn!(node = %name, "node-ipam: no pod CIDR left for the node");
        events.warning(
            &object_reference(node),
            "CIDRNotAvailable",
            "Allocate",
            format!("Node {name} status is now: CIDRNotAvailable"),
        );
        return Ok(Action::Done);
    };
    let api: Api<Node> = Api::all(client.clone());
    let patch = serde_json::json!({ "spec": { "podCIDR": cidr, "podCIDRs": [cidr] } });
    match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            tracing::info!(node = %name, %cidr, "node-ipam: pod CIDR assigned");
            Ok(Action::Done)
        }
        Err(kube::Error::Api(s)) if s.code == 404 => {
            let mut state = shared.lock();
            state.pending.remove(&uid);
            state.allocator.release(&cidr);
            Ok(Action::Done)
        }
        Err(source) => Err(IpamError::Api { node: name, source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_distinct_subnets_and_reuses_released_ones() {
        let mut a = CidrAllocator::new("10.42.0.0/16", 24).unwrap();
        assert_eq!(a.allocate().as_deref(), Some("10.42.0.0/24"));
        assert_eq!(a.allocate().as_deref(), Some("10.42.1.0/24"));
        a.release("10.42.0.0/24");
        assert_eq!(a.allocate().as_deref(), Some("10.42.2.0/24"));
        assert!(a.occupy("10.42.255.0/24"));
        assert!(!a.occupy("10.43.0.0/24"));
        assert!(!a.occupy("10.42.3.0/25"));
        let mut seen: Vec<String> = Vec::new();
        while let Some(c) = a.allocate() {
            seen.push(c);
        }
        // 256 subnets: 3 handed out, 1 occupied, 1 released and reused at the end.
        assert_eq!(seen.len(), 256 - 3);
        assert!(seen.contains(&"10.42.0.0/24".to_string()));
        assert!(!seen.contains(&"10.42.255.0/24".to_string()));
    }

    #[test]
    fn small_ranges_run_out_and_bad_ranges_are_refused() {
        let mut a = CidrAllocator::new("192.168.0.0/23", 24).unwrap();
        assert_eq!(a.allocate().as_deref(), Some("192.168.0.0/24"));
        assert_eq!(a.allocate().as_deref(), Some("192.168.1.0/24"));
        assert_eq!(a.allocate(), None);
        assert!(CidrAllocator::new("10.42.0.0/16", 8).is_err());
        assert!(CidrAllocator::new("fd00::/64", 80).is_err());
        assert!(CidrAllocator::new("nonsense", 24).is_err());
    }
}
