//! One pod network across nodes, as flannel builds it (k3s's
//! `--flannel-backend`): every node's pod CIDR is reachable from every other
//! node with no extra pods.
//!
//! - `vxlan` (the default): the node keeps a kernel VXLAN device
//!   (`skiff.vxlan`, VNI 1, UDP 8472, its node address as the outer source,
//!   its pod CIDR's network address as its own /32), publishes the device's
//!   MAC and its address on its Node (flannel's annotations, `peers`), and
//!   for every other Node that publishes the same installs a route to that
//!   node's pod CIDR via its VTEP address (onlink), a permanent neighbour
//!   entry and a forwarding entry (`routes`). Pods get the link MTU less the
//!   50 bytes of VXLAN encapsulation.
//! - `host-gw`: for flat L2 networks, routes to each peer's pod CIDR via its
//!   node address; pods get the link MTU.
//! - `none`: this node's bridge only.
//!
//! In every mode pod traffic that leaves the pod network is masqueraded,
//! and pod-to-pod traffic across nodes is not (`masquerade`). Kernel state
//! is changed through iproute2 (`ip`), not a netlink crate: the commands are
//! installed wherever the CNI plugins are, they are idempotent (`replace`),
//! one `-batch` run applies a whole change, and the code reads as the
//! commands an operator would type — as the service proxy drives `nft`.
//! Entries of Nodes that go away are removed at the next sync; a periodic
//! resync repairs anything changed behind the agent's back.

pub(crate) mod ip;
pub(crate) mod masquerade;
pub(crate) mod peers;
pub(crate) mod routes;

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use skiff_common::cidr::{self, Ipv4Net};
use skiff_common::wakeups::SyncWakeups;
use skiff_informer::{HandlerFns, Informer, SharedInformerFactory};
use tokio::sync::{Notify, watch};
use tracing::Instrument as _;

use peers::LocalEnd;

/// Bytes VXLAN adds to each packet (outer IPv4, UDP, VXLAN headers and the
/// inner Ethernet header).
pub const VXLAN_OVERHEAD: u32 = 50;

/// How pod traffic crosses between nodes (`--flannel-backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord)]
pub enum Backend {
    /// A VXLAN overlay on the kernel's vxlan device.
    #[default]
    Vxlan,
    /// Routes via the peers' node addresses (nodes on one L2 segment).
    HostGw,
    /// No routes to other nodes.
    None,
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Vxlan => "vxlan",
            Backend::HostGw => "host-gw",
            Backend::None => "none",
        })
    }
}

impl std::str::FromStr for Backend {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "vxlan" => Ok(Backend::Vxlan),
            "host-gw" => Ok(Backend::HostGw),
            "none" => Ok(Backend::None),
            other => Err(format!("{other:?} is not vxlan, host-gw or none")),
        }
    }
}

/// Settings of the pod network across nodes.
#[derive(Debug, Clone)]
pub struct OverlayConfig {
    /// The backend.
    pub backend: Backend,
    /// The VXLAN device's name.
    pub device: String,
    /// The VXLAN network identifier.
    pub vni: u32,
    /// The VXLAN UDP port.
    pub port: u16,
    /// The nftables table (family `ip`) of the masquerade rules.
    pub table: String,
    /// How often everything is checked and repaired without a change.
    pub resync: Duration,
}

impl Default for OverlayConfig {
    fn default() -> Self {
        Self {
            backend: Backend::Vxlan,
            device: "skiff.vxlan".into(),
            vni: 1,
            port: 8472,
            table: DEFAULT_TABLE.into(),
            resync: Duration::from_secs(30),
        }
    }
}

/// The default nftables table of the masquerade rules.
pub const DEFAULT_TABLE: &str = "skiff-net";

/// Why the pod network could not be set up or synced.
#[derive(Debug, thiserror::Error)]
pub enum OverlayError {
    /// An `ip`, `bridge` or `nft` command did not start or failed (the
    /// masquerade table included).
    #[error(transparent)]
    Command(#[from] skiff_common::host_command::CommandError),
    /// IPv4 forwarding could not be turned on.
    #[error("turning on IPv4 forwarding: {0}")]
    Forwarding(#[source] std::io::Error),
    /// A command's output was not what was expected.
    #[error("{command}: {detail}")]
    Output {
        /// The command.
        command: String,
        /// What was wrong.
        detail: String,
    },
    /// The node address is not IPv4 (the pod network is IPv4 only).
    #[error("the node address {0:?} is not an IPv4 address")]
    NodeAddress(String),
}

/// The node's end of the pod network, set up before the CNI network is
/// written (which needs the pod MTU).
#[derive(Debug, Clone)]
pub struct Prepared {
    /// What the node publishes.
    pub local: LocalEnd,
    /// The node's pod CIDR.
    pub pod_cidr: Ipv4Net,
    /// The MTU pods get (none: the bridge's default).
    pub pod_mtu: Option<u32>,
}

/// Sets up this node's end (blocking): forwarding on, the VXLAN device for
/// `vxlan` (removed for the other backends), and the pod MTU from the MTU of
/// the link holding `node_ip`.
pub fn prepare(
    config: &OverlayConfig,
    node_ip: &str,
    pod_cidr: Ipv4Net,
) -> Result<Prepared, OverlayError> {
    let public_ip: Ipv4Addr = node_ip
        .parse()
        .map_err(|_| OverlayError::NodeAddress(node_ip.to_string()))?;
    ip::enable_forwarding()?;
    let link_mtu = match ip::mtu_of_link_with(public_ip)? {
        Some((_, mtu)) => mtu,
        None => {
            tracing::warn!(%public_ip, "no link holds the node address; assuming MTU 1500");
            1500
        }
    };
    let (vtep_mac, pod_mtu) = match config.backend {
        Backend::Vxlan => {
            let mtu = link_mtu.saturating_sub(VXLAN_OVERHEAD);
            let mac = ip::ensure_vxlan(&ip::VxlanSpec {
                name: &config.device,
                vni: config.vni,
                port: config.port,
                local: public_ip,
                mtu,
                address: pod_cidr.network(),
            })?;
            (Some(mac), Some(mtu))
        }
        Backend::HostGw => {
            ip::delete_link(&config.device)?;
            (None, Some(link_mtu))
        }
        Backend::None => {
            ip::delete_link(&config.device)?;
            (None, None)
        }
    };
    Ok(Prepared {
        local: LocalEnd {
            backend: config.backend,
            public_ip,
            vtep_mac,
            vni: config.vni,
        },
        pod_cidr,
        pod_mtu,
    })
}

/// Keeps the pod network in step with the cluster's Nodes until `stop`:
/// publishes this node's end on its Node, installs and removes the peers'
/// routes and entries, and keeps the masquerade table, at every Node change
/// and every `config.resync`.
pub async fn run(
    client: kube::Client,
    factory: SharedInformerFactory,
    node_name: String,
    config: OverlayConfig,
    prepared: Prepared,
    mut stop: watch::Receiver<bool>,
) {
    let changed = Arc::new(Notify::new());
    let nodes: Informer<Node> = factory.informer::<Node>();
    if let Err(error) = nodes.add_event_handler(HandlerFns::notifying(&changed)) {
        tracing::error!(%error, "pod network: watching Nodes failed; no routes to other nodes");
        return;
    }
    if let Err(error) = factory.start() {
        tracing::error!(%error, "pod network: starting the Node informer failed");
        return;
    }
    tokio::select! {
        _ = nodes.wait_for_sync() => {}
        _ = stop.wait_for(|s| *s) => return,
    }
    let api: Api<Node> = Api::all(client);
    // One sync for a burst of changes (a Node's status updates come every
    // few seconds from each node).
    let coalesce = Duration::from_millis(200);
    let mut wakeups = SyncWakeups::new(changed, stop, config.resync, coalesce);
    let mut last: Option<Synced> = None;
    while let Some(periodic) = wakeups.next().await {
        let span = tracing::info_span!("pod_network_sync", node = %node_name, periodic);
        let round = Round {
            api: &api,
            node_name: &node_name,
            config: &config,
            prepared: &prepared,
        };
        last = round
            .sync(&nodes.cache().list(), periodic, last)
            .instrument(span)
            .await;
    }
}

/// One sync's inputs.
struct Round<'a> {
    api: &'a Api<Node>,
    node_name: &'a str,
    config: &'a OverlayConfig,
    prepared: &'a Prepared,
}

impl Round<'_> {
    /// Publishes this node's end if its Node lacks it, then applies what
    /// the Nodes ask for (unless a change left that as it was); returns
    /// what is now in place (`None` after a failure, so the next round
    /// applies again).
    async fn sync(self, all: &[Arc<Node>], periodic: bool, last: Option<Synced>) -> Option<Synced> {
        if let Some(own) = all
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(self.node_name))
            && !self.prepared.local.published_on(own)
        {
            publish(self.api, self.node_name, &self.prepared.local).await;
        }
        let wanted = Synced::wanted(all, self.node_name, self.config, self.prepared);
        if !periodic && last.as_ref() == Some(&wanted) {
            return last;
        }
        let (config, own) = (self.config.clone(), self.prepared.pod_cidr);
        let outcome =
            tokio::task::spawn_blocking(move || apply(&wanted, &config, own).map(|()| wanted))
                .await;
        match outcome {
            Ok(Ok(done)) => {
                if last.as_ref() != Some(&done) {
                    tracing::info!(peers = done.peers.len(), backend = %self.config.backend, "pod network synced");
                }
                Some(done)
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, "pod network sync failed; retrying at the next resync");
                None
            }
            Err(error) => {
                tracing::error!(%error, "pod network sync task failed");
                None
            }
        }
    }
}

/// What one sync establishes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Synced {
    peers: Vec<peers::Peer>,
    pod_cidrs: BTreeSet<Ipv4Net>,
}

impl Synced {
    fn wanted(nodes: &[Arc<Node>], own: &str, config: &OverlayConfig, prepared: &Prepared) -> Self {
        let peers = match config.backend {
            Backend::None => Vec::new(),
            backend => peers::peers(
                nodes.iter().map(|n| n.as_ref()),
                own,
                prepared.pod_cidr,
                backend,
                config.vni,
            ),
        };
        let pod_cidrs = nodes
            .iter()
            .filter_map(|n| n.spec.as_ref()?.pod_cidr.as_deref())
            .filter_map(|c| cidr::parse_v4(c).ok())
            .map(|c| c.trunc())
            .collect();
        Self { peers, pod_cidrs }
    }
}

/// Makes the kernel match `wanted` (blocking).
fn apply(wanted: &Synced, config: &OverlayConfig, own: Ipv4Net) -> Result<(), OverlayError> {
    let device = (config.backend == Backend::Vxlan).then_some(config.device.as_str());
    let current = ip::read_state(device)?;
    let changes = routes::plan(config.backend, &config.device, &wanted.peers, &current);
    // Neighbours and forwarding entries before the routes that use them.
    ip::batch("bridge", &changes.bridge)?;
    ip::batch("ip", &changes.ip)?;
    masquerade::apply(&masquerade::script(&config.table, own, &wanted.pod_cidrs))
}

/// Writes this node's end onto its Node (a merge patch of the annotations).
async fn publish(api: &Api<Node>, node: &str, local: &LocalEnd) {
    let patch = serde_json::json!({ "metadata": { "annotations": local.annotations() } });
    match api
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            tracing::info!(public_ip = %local.public_ip, mac = ?local.vtep_mac, "pod network end published on the Node")
        }
        Err(error) => tracing::warn!(%error, "publishing the pod network end on the Node failed"),
    }
}
