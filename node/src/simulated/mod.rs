//! The simulated runtime: hollow nodes in the style of kwok. They register,
//! renew their Leases and "run" the pods bound to them instantly — status goes
//! straight to Running with a fake IP, pods that do not restart finish after a
//! configurable time — so thousands of nodes fit in one process for scale tests
//! and benchmarks. Every simulated Node says `simulated://` as its runtime
//! version, so nobody mistakes it for the containerd path.
//!
//! All simulated nodes share one pod informer and one work queue. Who they
//! act as is [`NodeClients`]: inside `skiff server` one in-process user for
//! all; in a joined `skiff agent` each hollow node its own
//! `system:node:<name>` client certificate ([`identities`]), so the Node
//! authorizer and NodeRestriction judge every write as a real kubelet's.

pub mod identities;
mod ips;
mod nodes;
mod pods;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use skiff_informer::{EnqueueKeys, FilteringHandler, ObjectKey, SharedInformerFactory, WorkQueue};

pub use nodes::{SIMULATED_RUNTIME_VERSION, node_name};

/// Pod annotation overriding the exit code of a simulated pod's containers.
pub const EXIT_CODE_ANNOTATION: &str = "simulated.skiff.dev/exit-code";
/// Pod annotation overriding how long a non-restarting simulated pod runs.
pub const RUN_SECONDS_ANNOTATION: &str = "simulated.skiff.dev/run-seconds";

/// How the simulated nodes look and behave.
#[derive(Debug, Clone)]
pub struct SimulatedConfig {
    /// How many nodes to simulate.
    pub nodes: usize,
    /// Node names are `{prefix}{index}`.
    pub name_prefix: String,
    /// CPU capacity of each node (a quantity).
    pub cpu: String,
    /// Memory capacity of each node (a quantity).
    pub memory: String,
    /// How many pods each node takes.
    pub pods: u32,
    /// How long containers of pods whose restartPolicy is not Always run before
    /// they exit.
    pub run_duration: Duration,
    /// The exit code of those containers.
    pub exit_code: i32,
    /// How often each node renews its Lease.
    pub lease_renew_interval: Duration,
    /// Concurrent pod status writers.
    pub workers: usize,
}

impl SimulatedConfig {
    /// `nodes` hollow nodes named `sim-node-0…`, each with 32 CPUs, 256 GiB
    /// and 110 pods, whose finite pods exit 0 after one second.
    pub fn new(nodes: usize) -> Self {
        Self {
            nodes,
            name_prefix: "sim-node-".to_string(),
            cpu: "32".to_string(),
            memory: "256Gi".to_string(),
            pods: 110,
            run_duration: Duration::from_secs(1),
            exit_code: 0,
            lease_renew_interval: Duration::from_secs(10),
            workers: 16,
        }
    }
}

/// The API clients the hollow nodes write with.
#[derive(Clone)]
pub enum NodeClients {
    /// One identity for every node (the server's in-process
    /// `system:skiff:simulated-nodes`).
    Shared(kube::Client),
    /// One client per node, in index order, each authenticating as that
    /// node.
    PerNode(Arc<Vec<kube::Client>>),
}

impl NodeClients {
    /// The client node `index` writes with.
    fn for_node(&self, index: usize) -> &kube::Client {
        match self {
            Self::Shared(client) => client,
            Self::PerNode(clients) => &clients[index % clients.len().max(1)],
        }
    }
}

/// Why the simulated nodes stopped.
#[derive(Debug, thiserror::Error)]
pub enum SimulatedError {
    /// A Node could not be created.
    #[error("registering simulated node {node}: {source}")]
    Register {
        /// The node.
        node: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The node clients do not match the nodes (one shared, or one per node).
    #[error("{clients} node clients for {nodes} simulated nodes")]
    Clients {
        /// Simulated nodes configured.
        nodes: usize,
        /// Node clients given.
        clients: usize,
    },
    /// The pod informer could not start.
    #[error("watching pods: {0}")]
    Informer(#[from] skiff_informer::InformerError),
}

/// Registers the nodes and runs their pods until `shutdown` resolves.
pub async fn run(
    clients: NodeClients,
    factory: &SharedInformerFactory,
    config: SimulatedConfig,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), SimulatedError> {
    let config = Arc::new(config);
    tracing::info!(nodes = config.nodes, "registering simulated nodes");
    if let NodeClients::PerNode(list) = &clients
        && list.len() != config.nodes
    {
        return Err(SimulatedError::Clients {
            nodes: config.nodes,
            clients: list.len(),
        });
    }
    nodes::register_all(&clients, &config).await?;
    let leases = tokio::spawn(nodes::renew_leases(clients.clone(), config.clone()));

    let queue = WorkQueue::<ObjectKey>::new();
    let prefix = config.name_prefix.clone();
    let pods = factory.informer::<Pod>();
    pods.add_event_handler(FilteringHandler::new(
        move |pod: &Pod| {
            pod.spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(|n| n.starts_with(&prefix))
        },
        EnqueueKeys::new(queue.clone()),
    ))?;
    factory.start()?;
    factory.wait_for_sync().await;
    tracing::info!(nodes = config.nodes, "simulated nodes ready");

    let reconciler = pods::PodReconciler::new(clients, pods.cache().clone(), config.clone());
    let workers = skiff_informer::Controller::new("simulated-pods", queue)
        .workers(config.workers)
        .run_until(move |key| reconciler.clone().reconcile(key), shutdown);
    workers.await;
    leases.abort();
    Ok(())
}
