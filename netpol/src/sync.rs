//! The controller loop: NetworkPolicies, Pods and Namespaces from the
//! informers; a change schedules a sync after a short coalescing delay; a
//! periodic resync checks the table is still there and intact and rebuilds
//! it when not. Each sync applies only the difference from what was last
//! applied, as one `nft -f` transaction (the first one, and any after a
//! failure or a tampered table, replace the whole table).

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use skiff_common::nft::{Applied, Applier, Nft, NftError, Ruleset, sysctl};
use skiff_informer::{HandlerFns, Informer, SharedInformerFactory};
use tokio::sync::{Notify, watch};
use tracing::Instrument as _;

use crate::facts::{self, PodFacts};
use crate::plan;
use crate::render::{self, FAMILY, names};

/// Default nftables table name.
pub const DEFAULT_TABLE: &str = "skiff-netpol";

/// How the controller runs.
#[derive(Debug, Clone)]
pub struct NetpolConfig {
    /// This node's name: its pods (`spec.nodeName`) get chains.
    pub node_name: String,
    /// nftables table (family `inet`).
    pub table: String,
    /// Changes arriving within this delay are applied together.
    pub coalesce: Duration,
    /// How often the table is checked and re-synced even without changes.
    pub resync: Duration,
    /// Where to run `nft`.
    pub nft: Nft,
    /// Set the host sysctls the rules need (bridged traffic through the
    /// `inet` hooks). Off for controllers in test namespaces.
    pub host_sysctls: bool,
    /// Delete the table when the controller stops cleanly. Off by default:
    /// the policies stay enforced while skiff restarts (the pods keep
    /// running), as kube-router's rules outlive it; the next start replaces
    /// the table.
    pub remove_on_stop: bool,
}

impl NetpolConfig {
    /// Defaults for `node_name`: table `skiff-netpol`, 100 ms coalescing,
    /// 30 s resync, the table kept on stop.
    pub fn new(node_name: impl Into<String>) -> Self {
        Self {
            node_name: node_name.into(),
            table: DEFAULT_TABLE.into(),
            coalesce: Duration::from_millis(100),
            resync: Duration::from_secs(30),
            nft: Nft::new(),
            host_sysctls: true,
            remove_on_stop: false,
        }
    }
}

/// Why the controller stopped.
#[derive(Debug, thiserror::Error)]
pub enum NetpolError {
    /// An informer could not start.
    #[error("watching network policies: {0}")]
    Informer(#[from] skiff_informer::InformerError),
    /// nft is missing or unusable.
    #[error("nftables unusable: {0}")]
    Nft(#[from] NftError),
}

/// The informer caches the controller reads.
#[derive(Clone)]
pub struct Sources {
    policies: Informer<NetworkPolicy>,
    pods: Informer<Pod>,
    namespaces: Informer<Namespace>,
}

impl Sources {
    /// The shared informers of `factory`, with `changed` notified on every
    /// change.
    pub fn watch(
        factory: &SharedInformerFactory,
        changed: Arc<Notify>,
    ) -> Result<Self, NetpolError> {
        let sources = Self {
            policies: factory.informer::<NetworkPolicy>(),
            pods: factory.informer::<Pod>(),
            namespaces: factory.informer::<Namespace>(),
        };
        sources
            .policies
            .add_event_handler(HandlerFns::notifying(&changed))?;
        sources
            .pods
            .add_event_handler(HandlerFns::notifying(&changed))?;
        sources
            .namespaces
            .add_event_handler(HandlerFns::notifying(&changed))?;
        factory.start()?;
        Ok(sources)
    }

    async fn wait_for_sync(&self) {
        self.policies.wait_for_sync().await;
        self.pods.wait_for_sync().await;
        self.namespaces.wait_for_sync().await;
    }

    /// The ruleset the caches call for.
    pub fn ruleset(&self, config: &NetpolConfig) -> Ruleset {
        let policies = self.policies.cache().list();
        let pods: Vec<PodFacts> = self
            .pods
            .cache()
            .list()
            .iter()
            .filter_map(|p| PodFacts::of(p))
            .collect();
        let namespaces = self.namespaces.cache().list();
        let namespaces = facts::namespace_labels(namespaces.iter().map(|n| &**n));
        let policies: Vec<&NetworkPolicy> = policies.iter().map(|p| &**p).collect();
        let plan = plan::plan(&config.node_name, &policies, &pods, &namespaces);
        render::render(&config.table, &plan)
    }
}

/// True when the table exists and its forward hook still leads to the pod
/// chains.
pub fn intact(applier: &Applier) -> Result<bool, NftError> {
    applier.intact(names::FORWARD, &format!("vmap @{}", names::INGRESS_PODS))
}

/// Runs the controller until `stop` is raised; then removes the table when
/// `config.remove_on_stop`.
pub async fn run(
    factory: &SharedInformerFactory,
    config: NetpolConfig,
    stop: watch::Receiver<bool>,
) -> Result<(), NetpolError> {
    let result = sync_until_stopped(factory, &config, stop).await;
    if config.remove_on_stop {
        remove_table(config.nft.clone(), config.table.clone()).await;
    }
    result
}

/// Deletes the table if it exists (a controller that is turned off must not
/// leave the last rules it applied enforced for ever).
pub async fn remove_table(nft: Nft, table: String) {
    let name = table.clone();
    let removed = tokio::task::spawn_blocking(move || nft.delete_table(FAMILY, &name)).await;
    match removed {
        Ok(Ok(())) => tracing::info!(%table, "network policy rules removed"),
        Ok(Err(error)) => tracing::warn!(%error, "removing the network policy rules"),
        Err(error) => tracing::warn!(%error, "removing the network policy rules"),
    }
}

async fn sync_until_stopped(
    factory: &SharedInformerFactory,
    config: &NetpolConfig,
    mut stop: watch::Receiver<bool>,
) -> Result<(), NetpolError> {
    if config.host_sysctls {
        sysctl::ensure(
            &[(sysctl::BRIDGE_NF_CALL_IPTABLES, "1")],
            "network policies (traffic between pods on one bridge)",
        );
    }
    let changed = Arc::new(Notify::new());
    let sources = Sources::watch(factory, changed.clone())?;
    tokio::select! {
        _ = sources.wait_for_sync() => {}
        _ = stop.wait_for(|s| *s) => return Ok(()),
    }
    let mut applier = Some(Applier::new(
        config.nft.clone(),
        FAMILY,
        config.table.clone(),
    ));
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
        let span = tracing::info_span!("netpol_sync", table = %config.table, periodic);
        let started = Instant::now();
        let ruleset = sources.ruleset(config);
        let mut taken = applier
            .take()
            .unwrap_or_else(|| Applier::new(config.nft.clone(), FAMILY, config.table.clone()));
        let table = config.table.clone();
        let task = tokio::task::spawn_blocking(move || {
            if periodic && taken.has_applied() {
                match intact(&taken) {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!(%table, "network policy rules missing or flushed; rebuilding");
                        taken.invalidate();
                    }
                    Err(error) => tracing::warn!(%error, "checking the network policy rules"),
                }
            }
            let result = taken.apply(ruleset);
            (result, taken)
        });
        let result = match task.instrument(span.clone()).await {
            Ok((result, returned)) => {
                applier = Some(returned);
                result
            }
            // The applier went with the task; a new one replaces the table.
            Err(join) => Err(NftError::Spawn {
                command: "nft sync".into(),
                source: std::io::Error::other(join.to_string()),
            }),
        };
        let _entered = span.enter();
        match result {
            Ok(how) => {
                failures = 0;
                if how != Applied::Unchanged {
                    tracing::debug!(
                        ?how,
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "network policy rules synced"
                    );
                }
            }
            Err(error) => {
                failures += 1;
                tracing::error!(%error, "applying network policy rules failed");
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
