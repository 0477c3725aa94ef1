//! The proxy loop: Services, EndpointSlices and Nodes from the shared
//! informers, rendered into the table that `skiff_common::nft::keep_applied`
//! keeps applied (a sync per burst of changes and per resync period, which
//! rebuilds a table someone flushed or removed).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use skiff_informer::{Informer, SharedInformerFactory};
use tokio::sync::{Notify, watch};

use skiff_common::nft::{Applier, Family, NftError, TableKind, TableSources, TableSync, sysctl};

use crate::plan::{self, NodeFacts};
use crate::render::{self, Ruleset, chains};

/// Default nftables table name.
pub const DEFAULT_TABLE: &str = "skiff-proxy";

/// How the proxy runs.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// This node's name (its addresses get node ports; `Local` policies
    /// keep to its endpoints).
    pub node_name: String,
    /// The table (family `ip`) and how it is kept. `remove_on_stop` is on
    /// by default, so a stopped skiff leaves no rules behind (pointing at
    /// pods nobody manages any more); off, rules outlive the process as
    /// kube-proxy's do.
    pub sync: TableSync,
}

impl ProxyConfig {
    /// Defaults for `node_name`: table `skiff-proxy`, 100 ms coalescing,
    /// 30 s resync.
    pub fn new(node_name: impl Into<String>) -> Self {
        Self {
            node_name: node_name.into(),
            sync: TableSync::new(DEFAULT_TABLE, true),
        }
    }
}

/// Why the proxy stopped.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// An informer could not start.
    #[error("watching services: {0}")]
    Informer(#[from] skiff_informer::InformerError),
    /// nft is missing or unusable.
    #[error("nftables unusable: {0}")]
    Nft(#[from] NftError),
}

/// The informer caches the proxy reads.
#[derive(Clone)]
pub struct Sources {
    services: Informer<Service>,
    slices: Informer<EndpointSlice>,
    nodes: Informer<Node>,
}

impl Sources {
    /// The shared informers of `factory`, with `changed` notified on every
    /// change.
    pub fn watch(
        factory: &SharedInformerFactory,
        changed: Arc<Notify>,
    ) -> Result<Self, ProxyError> {
        let sources = Self {
            services: factory.notifying_informer(&changed)?,
            slices: factory.notifying_informer(&changed)?,
            nodes: factory.notifying_informer(&changed)?,
        };
        factory.start()?;
        Ok(sources)
    }

    /// The ruleset the caches call for.
    pub fn ruleset(&self, config: &ProxyConfig) -> Ruleset {
        let services = self.services.cache().list();
        let slices = self.slices.cache().list();
        let nodes = self.nodes.cache().list();
        let plans = plan::plan(
            &config.node_name,
            services.iter().map(|s| &**s),
            slices.iter().map(|s| &**s),
        );
        let facts = NodeFacts::from_nodes(&config.node_name, nodes.iter().map(|n| &**n));
        render::render(&config.sync.table, &plans, &facts)
    }
}

impl TableSources for Sources {
    async fn wait_for_sync(&self) {
        self.services.wait_for_sync().await;
        self.slices.wait_for_sync().await;
        self.nodes.wait_for_sync().await;
    }
}

/// True when the table exists and its nat prerouting hook still leads to
/// the rules.
pub fn intact(applier: &Applier) -> Result<bool, NftError> {
    applier.intact(
        chains::NAT_PREROUTING,
        &format!("jump {}", chains::SERVICES),
    )
}

/// The proxy's table: replies between pods on one bridge must pass the
/// `ip` hooks to be un-NATed, the node forwards, and loopback addresses
/// route to pods (node ports on `127.0.0.1`).
const RULES: TableKind = TableKind {
    family: Family::Ip,
    what: "service rules",
    intact,
    sysctls: &[
        (sysctl::IP_FORWARD, "1"),
        (sysctl::BRIDGE_NF_CALL_IPTABLES, "1"),
        (sysctl::ROUTE_LOCALNET, "1"),
    ],
    sysctls_purpose: "the service proxy (pod-to-Service traffic on one bridge, node ports on 127.0.0.1)",
    // Without the loopback guard, route_localnet would let other hosts in.
    sysctls_undone_on_stop: &[(sysctl::ROUTE_LOCALNET, render::LOOPBACK_GUARD_LISTED)],
};

/// Runs the proxy until `stop` is raised; then removes the table when
/// `config.sync.remove_on_stop` (else the next start replaces it).
pub async fn run(
    factory: &SharedInformerFactory,
    config: ProxyConfig,
    stop: watch::Receiver<bool>,
) -> Result<(), ProxyError> {
    let watch = |changed| Sources::watch(factory, changed);
    skiff_common::nft::run(&RULES, &config.sync, stop, watch, |sources| {
        sources.ruleset(&config)
    })
    .await
}
