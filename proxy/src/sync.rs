//! The proxy loop: Services, EndpointSlices and Nodes from the shared
//! informers, rendered into the table that `skiff_common::nft::keep_applied`
//! keeps applied (a sync per burst of changes and per resync period, which
//! rebuilds a table someone flushed or removed).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use skiff_informer::{Informer, SharedInformerFactory};
use tokio::sync::{Notify, watch};

use skiff_common::nft::{Applier, Family, Nft, NftError, TableSync, keep_applied, sysctl};

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
    /// nftables table (family `ip`).
    pub table: String,
    /// Changes arriving within this delay are applied together.
    pub coalesce: Duration,
    /// How often the table is checked and re-synced even without changes.
    pub resync: Duration,
    /// Where to run `nft`.
    pub nft: Nft,
    /// Set the host sysctls the proxy needs (bridged traffic through
    /// netfilter, forwarding). Off for proxies in test namespaces.
    pub host_sysctls: bool,
    /// Delete the table when the proxy stops cleanly, so a stopped skiff
    /// leaves no rules behind (pointing at pods nobody manages any more).
    /// Off, rules outlive the process as kube-proxy's do.
    pub remove_on_stop: bool,
}

impl ProxyConfig {
    /// Defaults for `node_name`: table `skiff-proxy`, 100 ms coalescing,
    /// 30 s resync.
    pub fn new(node_name: impl Into<String>) -> Self {
        Self {
            node_name: node_name.into(),
            table: DEFAULT_TABLE.into(),
            coalesce: Duration::from_millis(100),
            resync: Duration::from_secs(30),
            nft: Nft::new(),
            host_sysctls: true,
            remove_on_stop: true,
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

    async fn wait_for_sync(&self) {
        self.services.wait_for_sync().await;
        self.slices.wait_for_sync().await;
        self.nodes.wait_for_sync().await;
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
        render::render(&config.table, &plans, &facts)
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

/// Runs the proxy until `stop` is raised; then removes the table when
/// `config.remove_on_stop` (else the next start replaces it).
pub async fn run(
    factory: &SharedInformerFactory,
    config: ProxyConfig,
    stop: watch::Receiver<bool>,
) -> Result<(), ProxyError> {
    let result = sync_until_stopped(factory, &config, stop).await;
    if config.remove_on_stop {
        let (nft, table) = (config.nft.clone(), config.table.clone());
        skiff_common::nft::remove_table(nft, Family::Ip, table, "service rules").await;
    }
    result
}

async fn sync_until_stopped(
    factory: &SharedInformerFactory,
    config: &ProxyConfig,
    mut stop: watch::Receiver<bool>,
) -> Result<(), ProxyError> {
    if config.host_sysctls {
        skiff_common::nft::sysctl::ensure(
            &[
                (sysctl::IP_FORWARD, "1"),
                (sysctl::BRIDGE_NF_CALL_IPTABLES, "1"),
            ],
            "the service proxy (pod-to-Service traffic on one bridge)",
        );
    }
    let changed = Arc::new(Notify::new());
    let sources = Sources::watch(factory, changed.clone())?;
    tokio::select! {
        _ = sources.wait_for_sync() => {}
        _ = stop.wait_for(|s| *s) => return Ok(()),
    }
    let sync = TableSync {
        nft: config.nft.clone(),
        family: Family::Ip,
        table: config.table.clone(),
        coalesce: config.coalesce,
        resync: config.resync,
        what: "service rules",
        intact,
    };
    keep_applied(&sync, changed, stop, || sources.ruleset(config)).await;
    Ok(())
}
