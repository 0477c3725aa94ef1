//! What a node publishes about its end of the pod network and what it reads
//! from the others: flannel's Node annotations (`backend-type`,
//! `backend-data` with the VXLAN VTEP's MAC, `public-ip`), and the peers a
//! node routes to — every other Node with a pod CIDR that publishes the same
//! backend.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Node;
use skiff_common::cidr::{self, Ipv4Net};

use super::Backend;

/// Which backend the node runs (`vxlan`, `host-gw`).
pub(crate) const BACKEND_TYPE: &str = "flannel.alpha.coreos.com/backend-type";
/// Backend details: `{"VNI":1,"VtepMAC":"..."}` for VXLAN, `null` otherwise.
pub(crate) const BACKEND_DATA: &str = "flannel.alpha.coreos.com/backend-data";
/// The address other nodes send the node's pod traffic to.
pub(crate) const PUBLIC_IP: &str = "flannel.alpha.coreos.com/public-ip";
/// Subnets come from the Nodes' `spec.podCIDR` (flannel's kube subnet manager).
pub(crate) const SUBNET_MANAGER: &str = "flannel.alpha.coreos.com/kube-subnet-manager";

/// This node's end of the pod network, as published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalEnd {
    /// The backend.
    pub backend: Backend,
    /// The node's address (the VTEP's local address for VXLAN).
    pub public_ip: Ipv4Addr,
    /// The VTEP's MAC (VXLAN only).
    pub vtep_mac: Option<String>,
    /// The VXLAN network identifier (VXLAN only).
    pub vni: u32,
}

impl LocalEnd {
    /// The annotations that describe this end on the Node.
    pub fn annotations(&self) -> BTreeMap<String, String> {
        let data = match (&self.backend, &self.vtep_mac) {
            (Backend::Vxlan, Some(mac)) => {
                serde_json::json!({ "VNI": self.vni, "VtepMAC": mac }).to_string()
            }
            _ => "null".to_string(),
        };
        BTreeMap::from([
            (BACKEND_TYPE.to_string(), self.backend.to_string()),
            (BACKEND_DATA.to_string(), data),
            (PUBLIC_IP.to_string(), self.public_ip.to_string()),
            (SUBNET_MANAGER.to_string(), "true".to_string()),
        ])
    }

    /// Whether `node` already carries exactly these annotations.
    pub fn published_on(&self, node: &Node) -> bool {
        let current = node.metadata.annotations.as_ref();
        self.annotations()
            .iter()
            .all(|(k, v)| current.and_then(|a| a.get(k)) == Some(v))
    }
}

/// Another node the pod network reaches.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Peer {
    /// Its pod CIDR.
    pub pod_cidr: Ipv4Net,
    /// Its address.
    pub public_ip: Ipv4Addr,
    /// Its VTEP's MAC (VXLAN only).
    pub vtep_mac: Option<String>,
}

impl Peer {
    /// The peer's VTEP address on the overlay: its pod CIDR's network
    /// address, which the peer puts on its VXLAN device (as flannel does).
    pub(crate) fn vtep_ip(&self) -> Ipv4Addr {
        self.pod_cidr.network()
    }
}

/// The peers among `nodes` for a node named `own` running `backend` with
/// pod CIDR `own_cidr`: every other Node with a pod CIDR that publishes the
/// same backend (and, for VXLAN, the same VNI and a MAC). Nodes that publish
/// nothing yet (or another backend, or a pod CIDR overlapping this node's)
/// are left out until they do.
pub(crate) fn peers<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    own: &str,
    own_cidr: Ipv4Net,
    backend: Backend,
    vni: u32,
) -> Vec<Peer> {
    let mut found: Vec<Peer> = nodes
        .into_iter()
        .filter(|n| n.metadata.name.as_deref() != Some(own))
        .filter_map(|n| peer(n, backend, vni))
        .filter(|p| !p.pod_cidr.contains(&own_cidr) && !own_cidr.contains(&p.pod_cidr))
        .collect();
    found.sort();
    found.dedup_by(|a, b| a.pod_cidr == b.pod_cidr);
    found
}

fn peer(node: &Node, backend: Backend, vni: u32) -> Option<Peer> {
    let annotations = node.metadata.annotations.as_ref()?;
    if annotations.get(BACKEND_TYPE)?.as_str() != backend.to_string() {
        return None;
    }
    let public_ip: Ipv4Addr = annotations.get(PUBLIC_IP)?.trim().parse().ok()?;
    let pod_cidr = cidr::parse_v4(node.spec.as_ref()?.pod_cidr.as_deref()?)
        .ok()?
        .trunc();
    let vtep_mac = match backend {
        Backend::Vxlan => {
            let data: serde_json::Value =
                serde_json::from_str(annotations.get(BACKEND_DATA)?).ok()?;
            if data["VNI"].as_u64() != Some(u64::from(vni)) {
                return None;
            }
            let mac = data["VtepMAC"].as_str()?;
            if !valid_mac(mac) {
                return None;
            }
            Some(mac.to_ascii_lowercase())
        }
        Backend::HostGw | Backend::None => None,
    };
    Some(Peer {
        pod_cidr,
        public_ip,
        vtep_mac,
    })
}

/// `aa:bb:cc:dd:ee:ff`, a unicast address (what a VTEP has). Anything else
/// is refused: the value goes into `ip`/`bridge` commands.
pub(crate) fn valid_mac(mac: &str) -> bool {
    let octets: Vec<&str> = mac.split(':').collect();
    octets.len() == 6
        && octets
            .iter()
            .all(|o| o.len() == 2 && o.chars().all(|c| c.is_ascii_hexdigit()))
        && u8::from_str_radix(octets[0], 16).is_ok_and(|first| first & 1 == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, cidr: Option<&str>, annotations: serde_json::Value) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"podCIDR": cidr},
        }))
        .unwrap()
    }

    fn vxlan_node(name: &str, cidr: &str, ip: &str, mac: &str) -> Node {
        node(
            name,
            Some(cidr),
            serde_json::json!({
                BACKEND_TYPE: "vxlan",
                BACKEND_DATA: format!("{{\"VNI\":1,\"VtepMAC\":\"{mac}\"}}"),
                PUBLIC_IP: ip,
            }),
        )
    }

    #[test]
    fn a_published_end_is_read_back_as_a_peer() {
        let end = LocalEnd {
            backend: Backend::Vxlan,
            public_ip: "192.0.2.7".parse().unwrap(),
            vtep_mac: Some("0a:a5:5b:7f:51:f7".into()),
            vni: 1,
        };
        let annotations: serde_json::Map<String, serde_json::Value> = end
            .annotations()
            .into_iter()
            .map(|(k, v)| (k, v.into()))
            .collect();
        let published = node("b", Some("10.42.1.0/24"), annotations.into());
        assert!(end.published_on(&published));
        let own: Ipv4Net = "10.42.0.0/24".parse().unwrap();
        let found = peers([&published], "a", own, Backend::Vxlan, 1);
        assert_eq!(
            found,
            [Peer {
                pod_cidr: "10.42.1.0/24".parse().unwrap(),
                public_ip: "192.0.2.7".parse().unwrap(),
                vtep_mac: Some("0a:a5:5b:7f:51:f7".into()),
            }]
        );
        assert_eq!(found[0].vtep_ip(), "10.42.1.0".parse::<Ipv4Addr>().unwrap());
    }

    #[test]
    fn only_other_nodes_with_the_same_backend_and_vni_are_peers() {
        let own: Ipv4Net = "10.42.0.0/24".parse().unwrap();
        let nodes = [
            vxlan_node("self", "10.42.0.0/24", "192.0.2.1", "02:00:00:00:00:01"),
            vxlan_node("good", "10.42.2.0/24", "192.0.2.2", "02:00:00:00:00:02"),
            // No pod CIDR yet, another VNI, a bad MAC, a multicast MAC, a
            // CIDR overlapping ours, another backend, nothing published.
            node("no-cidr", None, serde_json::json!({BACKEND_TYPE: "vxlan"})),
            node(
                "other-vni",
                Some("10.42.3.0/24"),
                serde_json::json!({BACKEND_TYPE: "vxlan", PUBLIC_IP: "192.0.2.3",
                    BACKEND_DATA: "{\"VNI\":2,\"VtepMAC\":\"02:00:00:00:00:03\"}"}),
            ),
            vxlan_node(
                "bad-mac",
                "10.42.4.0/24",
                "192.0.2.4",
                "02:00:00:00:00:04 dev lo",
            ),
            vxlan_node(
                "multicast",
                "10.42.5.0/24",
                "192.0.2.5",
                "01:00:5e:00:00:05",
            ),
            vxlan_node("overlap", "10.42.0.0/16", "192.0.2.6", "02:00:00:00:00:06"),
            node(
                "host-gw",
                Some("10.42.7.0/24"),
                serde_json::json!({BACKEND_TYPE: "host-gw", PUBLIC_IP: "192.0.2.7", BACKEND_DATA: "null"}),
            ),
            node("simulated", Some("10.42.8.0/24"), serde_json::json!({})),
        ];
        let found = peers(&nodes, "self", own, Backend::Vxlan, 1);
        let names: Vec<String> = found.iter().map(|p| p.pod_cidr.to_string()).collect();
        assert_eq!(names, ["10.42.2.0/24"]);
        let host_gw = peers(&nodes, "self", own, Backend::HostGw, 1);
        assert_eq!(
            host_gw,
            [Peer {
                pod_cidr: "10.42.7.0/24".parse().unwrap(),
                public_ip: "192.0.2.7".parse().unwrap(),
                vtep_mac: None,
            }]
        );
    }
}
