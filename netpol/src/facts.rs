//! What the policies are evaluated against, read from the API objects: a
//! pod's address, namespace, labels, node and named container ports, and a
//! namespace's labels. Pods without an IPv4 address, on the host's network
//! (their address is the node's) or finished (their address may already be
//! another pod's) take no part: they are neither targets nor peers.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use skiff_common::labels::Labels;
pub use skiff_common::nft::Protocol;

/// A named container port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedPort {
    /// The port's name.
    pub name: String,
    /// Its protocol.
    pub protocol: Protocol,
    /// The container port.
    pub port: u16,
}

impl NamedPort {
    /// Port `port` of `protocol`, named `name`.
    pub fn new(name: impl Into<String>, protocol: Protocol, port: u16) -> Self {
        Self {
            name: name.into(),
            protocol,
            port,
        }
    }
}

/// A pod as the policies see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFacts {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Its IPv4 address.
    pub ip: Ipv4Addr,
    /// Labels.
    pub labels: Labels,
    /// The node it is bound to.
    pub node: String,
    /// Its containers' named ports.
    pub ports: Vec<NamedPort>,
}

impl PodFacts {
    /// The facts of `pod`, or `None` when it takes no part (no IPv4
    /// address, host network, finished).
    pub fn of(pod: &Pod) -> Option<Self> {
        let spec = pod.spec.as_ref()?;
        let status = pod.status.as_ref()?;
        if spec.host_network == Some(true) {
            return None;
        }
        if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
            return None;
        }
        let ip = status.pod_ip.as_deref()?.parse::<Ipv4Addr>().ok()?;
        let ports = spec
            .containers
            .iter()
            .flat_map(|c| c.ports.iter().flatten())
            .filter_map(|p| {
                Some(NamedPort::new(
                    p.name.clone()?,
                    Protocol::parse(p.protocol.as_deref())?,
                    u16::try_from(p.container_port).ok()?,
                ))
            })
            .collect();
        Some(Self {
            namespace: pod.metadata.namespace.clone()?,
            name: pod.metadata.name.clone()?,
            ip,
            labels: pod.metadata.labels.clone().unwrap_or_default(),
            node: spec.node_name.clone().unwrap_or_default(),
            ports,
        })
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The number of the named port `name` for `protocol`, if the pod has
    /// one.
    pub fn named_port(&self, name: &str, protocol: Protocol) -> Option<u16> {
        self.ports
            .iter()
            .find(|p| p.name == name && p.protocol == protocol)
            .map(|p| p.port)
    }
}

/// Namespaces' labels by name.
pub type NamespaceLabels = BTreeMap<String, Labels>;

/// The labels of each namespace.
pub fn namespace_labels<'a>(
    namespaces: impl IntoIterator<Item = &'a Namespace>,
) -> NamespaceLabels {
    namespaces
        .into_iter()
        .filter_map(|ns| {
            Some((
                ns.metadata.name.clone()?,
                ns.metadata.labels.clone().unwrap_or_default(),
            ))
        })
        .collect()
}
