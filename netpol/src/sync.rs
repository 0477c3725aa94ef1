//! The controller loop: NetworkPolicies, Pods and Namespaces from the
//! informers, rendered into the table that `skiff_common::nft::keep_applied`
//! keeps applied (a sync per burst of changes and per resync period, which
//! rebuilds a table found missing or tampered with).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use skiff_common::nft::{
    Applier, Nft, NftError, Ruleset, TableKind, TableSources, TableSync, sysctl,
};
use skiff_informer::{Informer, SharedInformerFactory};
use tokio::sync::{Notify, watch};

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
    /// The table (family `inet`) and how it is kept. `remove_on_stop` is
    /// off by default: the policies stay enforced while skiff restarts (the
    /// pods keep running), as kube-router's rules outlive it; the next
    /// start replaces the table.
    pub sync: TableSync,
}

impl NetpolConfig {
    /// Defaults for `node_name`: table `skiff-netpol`, 100 ms coalescing,
    /// 30 s resync, the table kept on stop.
    pub fn new(node_name: impl Into<String>) -> Self {
        Self {
            node_name: node_name.into(),
            sync: TableSync::new(DEFAULT_TABLE, false),
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
            policies: factory.notifying_informer(&changed)?,
            pods: factory.notifying_informer(&changed)?,
            namespaces: factory.notifying_informer(&changed)?,
        };
        factory.start()?;
        Ok(sources)
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
        render::render(&config.sync.table, &plan)
    }
}

impl TableSources for Sources {
    async fn wait_for_sync(&self) {
        self.policies.wait_for_sync().await;
        self.pods.wait_for_sync().await;
        self.namespaces.wait_for_sync().await;
    }
}

/// True when the table exists and its forward hook still leads to the pod
/// chains.
pub fn intact(applier: &Applier) -> Result<bool, NftError> {
    applier.intact(names::FORWARD, &format!("vmap @{}", names::INGRESS_PODS))
}

/// The controller's table: bridged traffic must pass the `inet` hooks.
const RULES: TableKind = TableKind {
    family: FAMILY,
    what: "network policy rules",
    intact,
    sysctls: &[(sysctl::BRIDGE_NF_CALL_IPTABLES, "1")],
    sysctls_undone_on_stop: &[],
    sysctls_purpose: "network policies (traffic between pods on one bridge)",
};

/// Runs the controller until `stop` is raised; then removes the table when
/// `config.sync.remove_on_stop`.
pub async fn run(
    factory: &SharedInformerFactory,
    config: NetpolConfig,
    stop: watch::Receiver<bool>,
) -> Result<(), NetpolError> {
    let watch = |changed| Sources::watch(factory, changed);
    skiff_common::nft::run(&RULES, &config.sync, stop, watch, |sources| {
        sources.ruleset(&config)
    })
    .await
}

/// Deletes the table if it exists (a controller that is turned off must not
/// leave the last rules it applied enforced for ever).
pub async fn remove_table(nft: Nft, table: String) {
    skiff_common::nft::remove_table(nft, RULES.family, table, RULES.what).await;
}
