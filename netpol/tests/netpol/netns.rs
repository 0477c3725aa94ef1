//! A small node in network namespaces, removed on drop: a node namespace
//! with bridge `br0` (the pod network's gateway) and an uplink namespace
//! routed through it ("another node", reaching the pods over a routed
//! hop, not the bridge), plus pod namespaces on the bridge, each able to
//! serve HTTP and fetch.

use std::sync::Arc;

use skiff_common::nft::Nft;
use skiff_testkit::netns::{Netns, unique_name};

/// The node, its uplink peer and its pods.
pub struct Node {
    prefix: String,
    /// Holds the bridge, the table and the routes.
    pub node: Netns,
    /// A routed neighbour (10.77.1.2), standing for another node.
    pub remote: Netns,
    pods: Vec<Arc<Netns>>,
}

/// The pod network: 10.77.0.0/24, gateway 10.77.0.1 on the node's bridge.
pub const GATEWAY: &str = "10.77.0.1";
/// The routed neighbour's address.
pub const REMOTE: &str = "10.77.1.2";

impl Node {
    pub fn new() -> Self {
        let prefix = unique_name("np");
        let node = Netns::new(format!("{prefix}-node"));
        node.exec_ok(&["ip", "link", "add", "br0", "type", "bridge"]);
        node.address("br0", &format!("{GATEWAY}/24"));
        node.exec_ok(&["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
        // Bridged traffic through the inet forward hook (br_netfilter).
        node.exec_ok(&["sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1"]);
        let remote = Netns::new(format!("{prefix}-remote"));
        node.link_peer("up0", &remote, "eth0");
        node.address("up0", "10.77.1.1/24");
        remote.address("eth0", &format!("{REMOTE}/24"));
        remote.exec_ok(&["ip", "route", "add", "default", "via", "10.77.1.1"]);
        Self {
            prefix,
            node,
            remote,
            pods: Vec::new(),
        }
    }

    /// A pod namespace on the bridge with address `ip`; its index.
    pub fn pod(&mut self, ip: &str) -> usize {
        let index = self.pods.len();
        let pod = Netns::new(format!("{}-p{index}", self.prefix));
        let host_end = format!("vp{index}");
        self.node.link_peer(&host_end, &pod, "eth0");
        self.node
            .exec_ok(&["ip", "link", "set", &host_end, "master", "br0"]);
        self.node.exec_ok(&["ip", "link", "set", &host_end, "up"]);
        pod.address("eth0", &format!("{ip}/24"));
        pod.exec_ok(&["ip", "route", "add", "default", "via", GATEWAY]);
        self.pods.push(Arc::new(pod));
        index
    }

    pub fn pod_ns(&self, index: usize) -> &Arc<Netns> {
        &self.pods[index]
    }

    /// busybox httpd on `ip:8080` in pod `index`, answering `/` with `body`.
    pub fn serve(&self, index: usize, ip: &str, body: &str) {
        self.pods[index].serve(ip, body);
    }

    /// busybox httpd on `ip:8080` in the node namespace.
    pub fn serve_on_node(&self, ip: &str, body: &str) {
        self.node.serve(ip, body);
    }

    pub fn nft(&self) -> Nft {
        self.node.nft()
    }
}
