//! The proxy loop: Services, EndpointSlices and Nodes from the shared
//! informers; a change schedules a sync after a short coalescing delay; a
//! periodic resync checks that the table is still there and intact (someone
//! may have flushed it) and rebuilds it when not. Each sync applies only the
//! difference from what was last applied, as one transaction; the first sync
//! after a start, and any after a failure or a tampered table, replace the
//! whole table.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use skiff_informer::{HandlerFns, Informer, SharedInformerFactory};
use tokio::sync::{Notify, watch};

use skiff_common::nft::{Applied, Applier, Family, Nft, NftError, sysctl};

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
            services: factory.informer::<Service>(),
            slices: factory.informer::<EndpointSlice>(),
            nodes: factory.informer::<Node>(),
        };
        sources
            .services
            .add_event_handler(HandlerFns::notifying(&changed))?;
        sources
            .slices
            .add_event_handler(HandlerFns::notifying(&changed))?;
        sources
            .nodes
            .add_event_handler(HandlerFns::notifying(&changed))?;
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
        let removed =
            tokio::task::spawn_blocking(move || nft.delete_table(Family::Ip, &table)).await;
        match removed {
            Ok(Ok(())) => tracing::info!(table = %config.table, "service rules removed"),
            Ok(Err(error)) => tracing::warn!(%error, "removing the service rules"),
            Err(error) => tracing::warn!(%error, "removing the service rules"),
        }
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
    let mut applier = Applier::new(config.nft.clone(), Family::Ip, config.table.clone());
    let mut failures = 0u32;
    let mut resync = tokio::time::interval(config.resync);
    resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let periodic = tokio::select! {
            _ = stop.wait_for(|s| *s) => return Ok(()),
            _ = changed.notified() => false,
            _ = resync.tick() => true,
        };
        if !periodic {
            // Coalesce a burst of changes into one sync.
            tokio::time::sleep(config.coalesce).await;
        }
        let started = Instant::now();
        let ruleset = sources.ruleset(config);
        let nft = config.nft.clone();
        let table = config.table.clone();
        let check = periodic;
        let (result, returned) = tokio::task::spawn_blocking(move || {
            let mut applier = applier;
            if check && applier.has_applied() {
                match intact(&applier) {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!(%table, "service rules missing or flushed; rebuilding");
                        applier.invalidate();
                    }
                    Err(error) => tracing::warn!(%error, "checking the service rules"),
                }
            }
            (applier.apply(ruleset), applier)
        })
        .await
        .unwrap_or_else(|join| {
            tracing::error!(error = %join, "rules sync task failed");
            (
                Err(NftError::Spawn {
                    command: "sync".into(),
                    source: std::io::Error::other(join.to_string()),
                }),
                Applier::new(nft, Family::Ip, config.table.clone()),
            )
        });
        applier = returned;
        match result {
            Ok(how) => {
                failures = 0;
                if how != Applied::Unchanged {
                    tracing::debug!(
                        ?how,
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "service rules synced"
                    );
                }
            }
            Err(error) => {
                failures += 1;
                tracing::error!(%error, "applying service rules failed");
                // Retry soon, backing off up to the resync period.
                let delay = Duration::from_millis(500 << failures.min(6)).min(config.resync);
                let retry = changed.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    retry.notify_one();
                });
            }
        }
    }
}
