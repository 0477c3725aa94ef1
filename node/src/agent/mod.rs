//! The real node agent (skiff's kubelet) on containerd: it brings up the
//! runtime, registers the Node and keeps its Lease and status fresh, waits
//! for the pod CIDR to write the CNI network, then runs one worker per pod
//! bound to the node, fed by a pod informer and by a relist of the runtime
//! every second. Stopping the agent leaves containers running; a restarted
//! agent adopts them by pod UID.
//!
//! This module wires the parts together; each job has its folder: `pod`
//! (how a pod runs), `volumes`, `node` (the Node object and this
//! machine), `identity` (credentials and certificates), `server` (the
//! node server) and `overlay` (the pod network across nodes).

pub(crate) mod eviction;
pub mod identity;
pub mod image_gc;
pub mod node;
pub mod overlay;
pub mod pod;
pub mod server;
pub(crate) mod volumes;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use skiff_common::events::EventRecorder;
use skiff_informer::{SharedInformerFactory, WatchConfig};
use tokio::sync::{mpsc, watch};

use crate::containerd::bringup::{BringUpError, BringUpOptions, NodeRuntime};
use crate::containerd::config::PodCidr;
use crate::runtime::Runtime;
use identity::pki::CertSlot;
use identity::serving_cert;
use node::events::NodeEvents;
use node::{host, network, registration, stats};
use pod::backoff::BackoffConfig;
use pod::context::AgentContext;
use pod::downward::NodeAllocatable;
use pod::{dns_config, pleg, pod_workers};

/// How the agent runs.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The Node's name.
    pub node_name: String,
    /// How to bring up the runtime (`DATA_DIR/agent`, external endpoint...).
    pub runtime: BringUpOptions,
    /// The pod CIDR (`a.b.c.d/len`) to use when the control plane assigns
    /// none within `pod_cidr_wait` (the agent then records it in the Node's
    /// spec).
    pub fallback_pod_cidr: String,
    /// How long to wait for `spec.podCIDR`.
    pub pod_cidr_wait: Duration,
    /// CNI network name.
    pub cni_network: String,
    /// Linux bridge of the pod network.
    pub cni_bridge: String,
    /// Extra Node labels.
    pub node_labels: BTreeMap<String, String>,
    /// Taints the Node is registered with (`--node-taint`; a kubelet's
    /// `--register-with-taints`): given when the Node is created, left to
    /// `kubectl taint` afterwards.
    pub node_taints: Vec<k8s_openapi::api::core::v1::Taint>,
    /// Lease renewal and node health interval.
    pub heartbeat_interval: Duration,
    /// How often the runtime is relisted.
    pub relist_interval: Duration,
    /// Container restart back-off.
    pub crash_backoff: BackoffConfig,
    /// Image pull back-off.
    pub image_backoff: BackoffConfig,
    /// The address the Node publishes as its InternalIP (default: the
    /// host's first non-loopback IPv4 address).
    pub node_ip: Option<IpAddr>,
    /// The Node's ExternalIP (`--node-external-ip`), when it has one.
    pub node_external_ip: Option<IpAddr>,
    /// Port of the node server (logs, exec, attach, port-forward); 0 picks
    /// a free one. The bound port is published in the Node's status.
    pub server_port: u16,
    /// Address the node server listens on (default: the node's IP).
    pub server_address: Option<IpAddr>,
    /// The node server's certificates; without them it does not run (and
    /// logs, exec and port-forward to this node fail).
    pub server_tls: Option<NodeServerTls>,
    /// Cluster DNS handed to pods (resolv.conf per `dnsPolicy`).
    pub dns: dns_config::ClusterDnsSettings,
    /// The pod network across nodes (backend, VXLAN device, masquerade
    /// table).
    pub overlay: overlay::OverlayConfig,
    /// The sysctls pods may set: upstream's safe set, plus those allowed
    /// with `--allowed-unsafe-sysctls`.
    pub sysctls: pod::sysctls::Allowlist,
    /// The hard eviction thresholds (`--eviction-hard`): below them the
    /// node reports memory or disk pressure; they are kept back from
    /// allocatable.
    pub eviction_hard: node::eviction::EvictionHard,
    /// Resources kept back for the system and the node's own daemons
    /// (`--system-reserved` and `--kube-reserved` together): left out of
    /// allocatable and of the `kubepods` cgroup's caps.
    pub reserved: node::reserved::Reserved,
    /// When unused images are removed (`--image-gc-high-threshold`, …).
    pub image_gc: image_gc::ImageGcPolicy,
    /// The cgroup below which the `kubepods` hierarchy of pod cgroups is
    /// laid out (`--cgroup-root`); `None` gives pods no pod-level cgroups
    /// (`--cgroups-per-qos=false`): the runtime places each container.
    pub cgroup_root: Option<String>,
    /// Each pod's process limit (`--pod-max-pids`); `None` leaves pods
    /// unlimited but for the node's.
    pub pod_max_pids: Option<i64>,
    /// When containers' logs are rotated (`--container-log-max-size`, …).
    pub log_rotation: pod::log_rotation::LogRotation,
    /// How many pods the node takes (`--max-pods`).
    pub max_pods: u32,
    /// How often the content of running pods' configMap, secret,
    /// downwardAPI and projected volumes is read again, so an update of
    /// their source reaches the containers (`--sync-frequency`, 1 minute
    /// as upstream's).
    pub sync_frequency: Duration,
    /// The host's log directory the node server's `/logs/` serves.
    pub node_log_dir: PathBuf,
    /// Where this node keeps local-path volumes (k3s's
    /// `--default-local-storage-path`); `DATA_DIR/storage` when unset.
    pub local_storage_dir: Option<PathBuf>,
}

impl AgentConfig {
    /// Defaults for a node named `node_name` with its state in `agent_dir`.
    pub fn new(node_name: impl Into<String>, agent_dir: impl Into<PathBuf>) -> Self {
        Self {
            node_name: node_name.into(),
            runtime: BringUpOptions::new(agent_dir),
            fallback_pod_cidr: "10.42.0.0/24".to_string(),
            pod_cidr_wait: Duration::from_secs(10),
            cni_network: "skiff".into(),
            cni_bridge: "skiff0".into(),
            node_labels: BTreeMap::new(),
            node_taints: Vec::new(),
            heartbeat_interval: Duration::from_secs(10),
            relist_interval: Duration::from_secs(1),
            crash_backoff: BackoffConfig::crash_loop(),
            image_backoff: BackoffConfig::crash_loop(),
            node_ip: None,
            node_external_ip: None,
            server_port: server::DEFAULT_PORT,
            server_address: None,
            server_tls: None,
            dns: Default::default(),
            overlay: Default::default(),
            sysctls: Default::default(),
            eviction_hard: Default::default(),
            reserved: Default::default(),
            image_gc: Default::default(),
            cgroup_root: Some("/".into()),
            pod_max_pids: None,
            log_rotation: Default::default(),
            max_pods: node::host::DEFAULT_MAX_PODS,
            sync_frequency: Duration::from_secs(60),
            node_log_dir: PathBuf::from("/var/log"),
            local_storage_dir: None,
        }
    }

    /// What the node keeps back from pods.
    pub fn kept_back(&self) -> node::reserved::KeptBack {
        node::reserved::KeptBack {
            reserved: self.reserved,
            eviction: self.eviction_hard,
        }
    }

    /// `DATA_DIR/agent`.
    pub fn agent_dir(&self) -> &std::path::Path {
        &self.runtime.agent_dir
    }

    /// Where pod log directories live (`AGENT_DIR/logs/pods`).
    pub fn log_root(&self) -> PathBuf {
        self.agent_dir().join("logs").join("pods")
    }
}

/// What the node server needs for TLS: the cluster CA (client certificates
/// must chain to it, and so must the node's serving certificate) and who
/// signs that serving certificate.
#[derive(Clone)]
pub struct NodeServerTls {
    /// The cluster CA certificate(s), PEM.
    pub ca_pem: String,
    /// Signs the node's serving certificate requests.
    pub signer: Arc<dyn serving_cert::ServingCertSigner>,
}

impl std::fmt::Debug for NodeServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeServerTls").finish_non_exhaustive()
    }
}

/// Why the agent stopped.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The runtime did not come up.
    #[error("bringing up the container runtime: {0}")]
    Runtime(#[from] BringUpError),
    /// The Node could not be registered.
    #[error("registering node {node}: {source}")]
    Register {
        /// The node.
        node: String,
        /// The API error.
        source: kube::Error,
    },
    /// The pod informer could not start.
    #[error("watching pods: {0}")]
    Informer(#[from] skiff_informer::InformerError),
    /// The CNI network could not be written.
    #[error("configuring the pod network: {0}")]
    Network(#[source] BringUpError),
    /// The node server could not start.
    #[error("node server: {0}")]
    Server(#[from] server::ServerError),
    /// The fallback pod CIDR is not a usable network.
    #[error("pod CIDR: {0}")]
    PodCidr(#[from] crate::containerd::config::ConfigError),
}

/// Runs the agent until `stop` is raised; then stops containerd (when skiff
/// started it) and leaves pods running.
pub async fn run(
    client: kube::Client,
    factory: &SharedInformerFactory,
    config: AgentConfig,
    stop: watch::Receiver<bool>,
) -> Result<(), AgentError> {
    let started = std::time::Instant::now();
    crate::oom_score::protect(std::path::Path::new("/proc/self"), "node agent");
    let node_runtime = NodeRuntime::start(config.runtime.clone()).await?;
    tracing::info!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        imported = node_runtime.airgap_report().imported.len(),
        failed = node_runtime.airgap_report().failed.len(),
        "container runtime ready"
    );
    // Mount propagation into and out of pods needs their volumes on a
    // shared mount; without one such containers fail to start, as on a
    // kubelet host whose root directory is private.
    let pods_dir = volumes::pods_dir(config.agent_dir());
    if let Err(error) = volumes::mounts::share(&pods_dir) {
        tracing::warn!(%error, "pods directory not shared: HostToContainer and Bidirectional mounts will fail");
    }
    let result = run_with_runtime(client, factory, &config, &node_runtime, stop).await;
    node_runtime.shutdown().await;
    result
}

async fn run_with_runtime(
    client: kube::Client,
    factory: &SharedInformerFactory,
    config: &AgentConfig,
    node_runtime: &NodeRuntime,
    stop: watch::Receiver<bool>,
) -> Result<(), AgentError> {
    let runtime: Arc<dyn Runtime> = Arc::new(node_runtime.cri());
    let agent_dir = config.agent_dir().to_path_buf();
    let mut facts = host::read(&agent_dir);
    facts.max_pods = config.max_pods;
    if let Some(ip) = config.node_ip {
        facts.internal_ip = ip.to_string();
    }
    facts.external_ip = config.node_external_ip.map(|ip| ip.to_string());
    let version = runtime.version().await.ok();
    let node_name = config.node_name.clone();
    let register_err = |source| AgentError::Register {
        node: node_name.clone(),
        source,
    };
    let reported_before = registration::register(
        &client,
        &registration::node_object(&node_name, &config.node_labels, &config.node_taints),
    )
    .await
    .map_err(register_err)?;
    // Where this node's local-path volumes go, for the provisioner in the
    // controller manager to name in the volumes it makes for claims here.
    let storage_dir = match &config.local_storage_dir {
        Some(dir) => std::path::absolute(dir).unwrap_or_else(|_| dir.clone()),
        None => volumes::storage_dir(&agent_dir),
    };
    registration::publish_storage_dir(&client, &node_name, &storage_dir)
        .await
        .map_err(register_err)?;
    let health = registration::observe(runtime.as_ref(), &agent_dir, &config.eviction_hard).await;
    let server_listener = match &config.server_tls {
        Some(_) => {
            let ip = config
                .server_address
                .or_else(|| facts.internal_ip.parse().ok())
                .unwrap_or(IpAddr::from([127, 0, 0, 1]));
            Some(server::bind(ip, config.server_port).await?)
        }
        None => {
            tracing::warn!(
                "no TLS for the node server: logs, exec, attach and port-forward to this node are unavailable"
            );
            None
        }
    };
    let server_port = server_listener
        .as_ref()
        .and_then(|l| l.local_addr().ok())
        .map(|a| a.port())
        .unwrap_or_default();
    // A restart keeps the transition times of conditions that did not
    // change while the node was down, as a kubelet's do.
    let mut status = registration::node_status(
        &node_name,
        &facts,
        version.as_ref(),
        &health,
        &config.kept_back(),
        reported_before.as_ref(),
    );
    status.daemon_endpoints = Some(k8s_openapi::api::core::v1::NodeDaemonEndpoints {
        kubelet_endpoint: Some(k8s_openapi::api::core::v1::DaemonEndpoint {
            port: i32::from(server_port),
        }),
    });
    let registered = registration::write_status(&client, &node_name, &status)
        .await
        .map_err(register_err)?;
    registration::renew_lease(&client, &node_name)
        .await
        .map_err(register_err)?;
    tracing::info!(node = %node_name, runtime = ?version.as_ref().map(|v| v.node_runtime_version()), "node registered");
    let events = EventRecorder::core(client.clone(), "kubelet", Some(&node_name));
    let mut node_events = NodeEvents::new(events.clone(), &node_name);
    node_events.starting();
    node_events.status_written(reported_before.as_ref(), registered.status.as_ref());
    node_events.node_seen(&registered);

    let (pressure_tx, pressure_rx) = tokio::sync::watch::channel(health.pressure);
    let heartbeat = registration::Heartbeat {
        client: client.clone(),
        runtime: runtime.clone(),
        node_name: node_name.clone(),
        facts: facts.clone(),
        version,
        agent_dir: agent_dir.clone(),
        kept_back: config.kept_back(),
        pressure: pressure_tx,
        interval: config.heartbeat_interval,
        events: node_events,
    };
    let mut tasks = tokio::task::JoinSet::new();
    {
        let stop = stop.clone();
        let previous = registered.status.clone();
        tasks.spawn(heartbeat.run(stop, previous, Some(health)));
    }

    if node_runtime.containerd_paths().is_some() {
        let fallback: PodCidr = config.fallback_pod_cidr.parse()?;
        let cidr = network::pod_cidr(&client, &node_name, config, fallback).await;
        let prepared = network::prepare_overlay(config, &facts.internal_ip, cidr).await;
        let mtu = prepared.as_ref().and_then(|p| p.pod_mtu);
        network::apply(node_runtime, config, cidr, prepared.as_ref())
            .map_err(AgentError::Network)?;
        tracing::info!(%cidr, bridge = %config.cni_bridge, ?mtu, backend = %config.overlay.backend, "pod network configured");
        if let Some(prepared) = prepared {
            tasks.spawn(overlay::run(
                client.clone(),
                factory.clone(),
                node_name.clone(),
                config.overlay.clone(),
                prepared,
                stop.clone(),
            ));
        }
    }

    let (kept_back, capacity) = (config.kept_back(), facts.capacity());
    let offered = kept_back.allocatable(capacity);
    let pods_cap = kept_back.cgroup_limits(capacity);
    let allocatable = NodeAllocatable {
        cpu: offered.cpu_milli as f64 / 1000.0,
        memory: offered.memory as f64,
        ephemeral_storage: offered.ephemeral_storage as f64,
        pods: facts.max_pods,
    };
    let pods = factory
        .informer_with::<Pod>(WatchConfig::default().fields(&format!("spec.nodeName={node_name}")));
    // Containers are told where Services are; a kubelet waits for its
    // Service informer before it starts any.
    let services = factory.informer::<k8s_openapi::api::core::v1::Service>();
    let ctx = Arc::new(AgentContext {
        client: client.clone(),
        runtime: runtime.clone(),
        node_name: node_name.clone(),
        host_ip: facts.internal_ip.clone(),
        agent_dir: agent_dir.clone(),
        log_root: config.log_root(),
        allocatable,
        memory_capacity: facts.memory,
        cgroups: config
            .cgroup_root
            .as_deref()
            .and_then(|root| pod::cgroups::PodCgroups::start(root, &pods_cap, config.pod_max_pids)),
        crash_backoff: config.crash_backoff,
        image_backoff: config.image_backoff,
        dns: dns_config::PodDnsInputs::load(&config.dns),
        events,
        sysctls: config.sysctls.clone(),
        apparmor: pod::apparmor::host_enabled(),
        pressure: pressure_rx,
        evictions: Default::default(),
        pods: pods.cache().clone(),
        services: services.cache().clone(),
        volume_resync: config.sync_frequency,
        storage_dir: storage_dir.clone(),
    });
    let stats = Arc::new(
        stats::StatsProvider::new(runtime.clone(), node_name.clone())
            .with_storage(agent_dir.clone(), config.log_root()),
    );
    let (tx, rx) = mpsc::unbounded_channel();
    let listener = pods.add_event_handler(pod_workers::PodEvents::new(tx.clone()))?;
    factory.start()?;
    // A stop raised meanwhile (the factory shut down) ends the wait, as
    // the informers then never sync.
    let synced = async {
        pods.wait_for_sync().await;
        services.wait_for_sync().await;
    };
    let mut stopping = stop.clone();
    let stopped = async move {
        let _ = stopping.wait_for(|s| *s).await;
    };
    let stopped_first = tokio::select! {
        () = synced => false,
        () = stopped => true,
    };
    if stopped_first {
        pods.remove_event_handler(&listener);
        while tasks.join_next().await.is_some() {}
        return Ok(());
    }
    tracing::info!(pods = pods.cache().len(), "pod workers starting");
    if let (Some(listener), Some(tls)) = (server_listener, config.server_tls.clone()) {
        let bound = listener.local_addr().ok();
        let configz = server::configz::kubelet_config(
            config,
            &bound.map(|a| a.ip().to_string()).unwrap_or_default(),
            bound.map_or(0, |a| a.port()),
        );
        let state = server::NodeState {
            configz: Arc::new(configz),
            node_log_dir: config.node_log_dir.clone(),
            runtime: runtime.clone(),
            pods: pods.cache().clone(),
            log_root: config.log_root(),
            stats: stats.clone(),
            authorizer: Arc::new(server::authz::CachedReviewer::new(Arc::new(
                server::authz::SubjectAccessReviewer::new(client.clone(), node_name.clone()),
            ))),
            authenticator: Arc::new(server::authn::CachedTokens::new(Arc::new(
                server::authn::TokenReviewer::new(client.clone()),
            ))),
        };
        // The serving certificate names every address the Node publishes,
        // as a kubelet's does.
        let mut addresses = vec![facts.internal_ip.clone(), node_name.clone()];
        addresses.extend(facts.external_ip.clone());
        tasks.spawn(serve_node(
            listener,
            state,
            tls,
            agent_dir.join("pki"),
            node_name.clone(),
            addresses,
            stop.clone(),
        ));
    }
    tasks.spawn(pleg::run(
        runtime.clone(),
        config.relist_interval,
        tx.clone(),
        stop.clone(),
    ));
    let images = Arc::new(tokio::sync::Mutex::new(image_gc::ImageGc {
        runtime: runtime.clone(),
        agent_dir: agent_dir.clone(),
        policy: config.image_gc,
        events: ctx.events.clone(),
        node: node::events::node_reference(&node_name),
        seen: Default::default(),
        keep: node_runtime
            .airgap_report()
            .imported
            .iter()
            .flat_map(|(_, names)| names.iter().cloned())
            .collect(),
    }));
    tasks.spawn(image_gc::ImageGc::run(images.clone(), stop.clone()));
    tasks.spawn(volumes::reclaim::run(
        client.clone(),
        node_name.clone(),
        storage_dir,
        stop.clone(),
    ));
    let evictions = eviction::Manager {
        stats,
        images,
        thresholds: config.eviction_hard,
        wake: tx.clone(),
        interval: config.heartbeat_interval,
    };
    tasks.spawn(evictions.run(ctx.clone(), stop.clone()));
    tasks.spawn(pod::cgroups::keep_swept(ctx.clone(), stop.clone()));
    tasks.spawn(pod::log_rotation::keep_rotated(
        runtime.clone(),
        config.log_rotation,
        stop.clone(),
    ));
    tasks.spawn(pod_workers::run(
        ctx,
        pods.cache().clone(),
        tx,
        rx,
        stop.clone(),
    ));

    let mut stop_wait = stop;
    let _ = stop_wait.wait_for(|s| *s).await;
    pods.remove_event_handler(&listener);
    while tasks.join_next().await.is_some() {}
    Ok(())
}

/// How often the serving certificate is checked for renewal while serving.
const SERVING_CERT_CHECK: Duration = Duration::from_secs(3600);

/// Obtains the node's serving certificate (retrying while the signer
/// fails, e.g. before a CertificateSigningRequest is approved), then serves
/// the node server until `stop`, renewing the certificate when a fifth of
/// its life is left.
async fn serve_node(
    listener: tokio::net::TcpListener,
    state: server::NodeState,
    tls: NodeServerTls,
    pki_dir: PathBuf,
    node_name: String,
    addresses: Vec<String>,
    mut stop: watch::Receiver<bool>,
) {
    let obtain =
        || serving_cert::ensure(&pki_dir, &node_name, &addresses, &tls.ca_pem, &tls.signer);
    let mut delay = Duration::from_secs(1);
    let (slot, config) = loop {
        let attempt = async {
            let cert = obtain().await?;
            let slot = CertSlot::new(&cert).map_err(server::tls::TlsError::Serving)?;
            let config = server::tls::server_config(slot.clone(), &tls.ca_pem)?;
            Ok::<_, server::ServerError>((slot, config))
        };
        match attempt.await {
            Ok(ready) => break ready,
            Err(error) => {
                tracing::warn!(%error, retry_in = ?delay, "node server not started");
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            stopped = stop.wait_for(|s| *s) => {
                drop(stopped);
                return;
            }
        }
        delay = (delay * 2).min(Duration::from_secs(60));
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
    tracing::info!(port, ?addresses, "node server listening (TLS)");
    let renew = async {
        loop {
            tokio::time::sleep(SERVING_CERT_CHECK).await;
            // `ensure` keeps a certificate that still fits and renews one
            // that does not; either way the slot presents the result.
            match obtain().await {
                Ok(cert) => {
                    if let Err(error) = slot.replace(&cert) {
                        tracing::warn!(%error, "presenting the renewed node serving certificate");
                    }
                }
                Err(error) => tracing::warn!(%error, "renewing the node serving certificate"),
            }
        }
    };
    tokio::select! {
        () = server::serve(listener, config, state, stop) => {}
        () = renew => {}
    }
}
