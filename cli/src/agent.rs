//! The node agent's flags (shared by `skiff server` and `skiff agent`) and
//! `skiff agent`: only the containerd-backed node, talking to a server over
//! HTTPS.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use skiff_common::join_token::JoinToken;
use skiff_informer::SharedInformerFactory;
use skiff_node::agent::identity::{join, remote};
use skiff_node::agent::{self, AgentConfig};
use tokio::sync::watch;

/// Flags of the node agent.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct NodeFlags {
    /// Read flags from this YAML file too (k3s's `config.yaml`: keys are
    /// flag names, lists repeat a flag; the command line wins); default
    /// `/etc/skiff/config.yaml` when it exists.
    #[arg(short = 'c', long, env = "SKIFF_CONFIG_FILE")]
    pub config: Option<PathBuf>,

    /// Name of this node (default: the host name).
    #[arg(long, env = "SKIFF_NODE_NAME")]
    pub node_name: Option<String>,

    /// Use this CRI socket (e.g. unix:///run/containerd/containerd.sock)
    /// instead of starting skiff's own containerd.
    #[arg(long, env = "SKIFF_CONTAINER_RUNTIME_ENDPOINT")]
    pub container_runtime_endpoint: Option<String>,

    /// Pod CIDR used when the control plane assigns none to this node.
    #[arg(long, env = "SKIFF_POD_CIDR", default_value = "10.42.0.0/24")]
    pub pod_cidr: String,

    /// Private registry configuration in k3s's `registries.yaml` shape
    /// (mirrors, credentials, TLS) for the containerd skiff starts; used
    /// when the file exists.
    #[arg(
        long,
        env = "SKIFF_PRIVATE_REGISTRY",
        default_value = "/etc/skiff/registries.yaml"
    )]
    pub private_registry: PathBuf,

    /// Linux bridge of the pod network.
    #[arg(long, env = "SKIFF_CNI_BRIDGE", default_value = "skiff0")]
    pub cni_bridge: String,

    /// Extra node labels, `key=value`; repeatable.
    #[arg(long = "node-label", env = "SKIFF_NODE_LABEL", value_delimiter = ',')]
    pub node_labels: Vec<String>,

    /// Taints the node registers with, `key=value:Effect` (or `key:Effect`),
    /// as k3s's `--node-taint` and a kubelet's `--register-with-taints`:
    /// given when the Node is created; repeatable.
    #[arg(long = "node-taint", env = "SKIFF_NODE_TAINT", value_delimiter = ',')]
    pub node_taints: Vec<String>,

    /// Nameserver pods are told to use (the `kube-dns` Service's ClusterIP);
    /// repeatable.
    #[arg(
        long = "cluster-dns",
        env = "SKIFF_CLUSTER_DNS",
        value_delimiter = ',',
        default_value = skiff_dns::DEFAULT_CLUSTER_DNS
    )]
    pub cluster_dns: Vec<std::net::IpAddr>,

    /// The cluster domain.
    #[arg(long, env = "SKIFF_CLUSTER_DOMAIN", default_value = skiff_dns::DEFAULT_DOMAIN)]
    pub cluster_domain: String,

    /// The node's resolv.conf: pods with `dnsPolicy: Default` get it, and the
    /// cluster DNS forwards other names to its nameservers.
    #[arg(long, env = "SKIFF_RESOLV_CONF", default_value = "/etc/resolv.conf")]
    pub resolv_conf: PathBuf,

    /// The address this node publishes as its InternalIP (and where the
    /// API server reaches its node server); default: the host's first
    /// non-loopback IPv4 address.
    #[arg(long, env = "SKIFF_NODE_IP")]
    pub node_ip: Option<IpAddr>,

    /// The address this node publishes as its ExternalIP (k3s's
    /// `--node-external-ip`): `kubectl get nodes -o wide` shows it, and
    /// ServiceLB gives it to LoadBalancer Services on this node.
    #[arg(long, env = "SKIFF_NODE_EXTERNAL_IP")]
    pub node_external_ip: Option<IpAddr>,

    /// Where this node keeps local-path volumes (k3s's
    /// `--default-local-storage-path`; a separate disk, say), published on
    /// its Node for the provisioner; default DATA_DIR/storage.
    #[arg(long, env = "SKIFF_DEFAULT_LOCAL_STORAGE_PATH")]
    pub default_local_storage_path: Option<PathBuf>,

    /// Port of the node server the API server proxies logs, exec, attach
    /// and port-forward to (0: any free port; the Node publishes it).
    #[arg(long, env = "SKIFF_KUBELET_PORT", default_value_t = 10250)]
    pub kubelet_port: u16,

    /// Address the node server listens on (default: the node IP).
    #[arg(long, env = "SKIFF_KUBELET_ADDRESS")]
    pub kubelet_address: Option<IpAddr>,

    /// Do not run the service proxy (nftables rules for Services).
    #[arg(long, env = "SKIFF_DISABLE_KUBE_PROXY")]
    pub disable_kube_proxy: bool,

    /// nftables table (family `ip`) the service proxy owns.
    #[arg(long, env = "SKIFF_PROXY_TABLE", default_value = skiff_proxy::DEFAULT_TABLE)]
    pub proxy_table: String,

    /// Do not enforce NetworkPolicies (the controller's table is removed).
    #[arg(long, env = "SKIFF_DISABLE_NETWORK_POLICY")]
    pub disable_network_policy: bool,

    /// nftables table (family `inet`) the network policy controller owns.
    #[arg(long, env = "SKIFF_NETPOL_TABLE", default_value = skiff_netpol::DEFAULT_TABLE)]
    pub netpol_table: String,

    /// How pod traffic crosses between nodes: `vxlan` (an overlay on the
    /// kernel's VXLAN device, UDP 8472), `host-gw` (routes via the other
    /// nodes' addresses; nodes on one L2 network) or `none` (this node's
    /// pods only).
    #[arg(long, env = "SKIFF_FLANNEL_BACKEND", default_value = "vxlan")]
    pub flannel_backend: agent::overlay::Backend,

    /// Sysctls (names, or `prefix*` patterns) pods on this node may set
    /// beyond the safe set, as the kubelet's `--allowed-unsafe-sysctls`;
    /// each must be namespaced (`kernel.shm*`, `kernel.msg*`, `kernel.sem`,
    /// `fs.mqueue.*`, `net.*`).
    #[arg(long, env = "SKIFF_ALLOWED_UNSAFE_SYSCTLS", value_delimiter = ',')]
    pub allowed_unsafe_sysctls: Vec<String>,

    /// Hard eviction thresholds, as the kubelet's `--eviction-hard`: below
    /// them the node reports MemoryPressure or DiskPressure, and they are
    /// kept back from allocatable. Signals left out keep their defaults.
    #[arg(
        long,
        env = "SKIFF_EVICTION_HARD",
        default_value = "memory.available<100Mi,nodefs.available<10%"
    )]
    pub eviction_hard: agent::node::eviction::EvictionHard,

    /// Resources kept back for the operating system, as the kubelet's
    /// `--system-reserved` (`cpu=100m,memory=256Mi,ephemeral-storage=1Gi`):
    /// left out of the node's allocatable and of what all pods together may
    /// use.
    #[arg(long, env = "SKIFF_SYSTEM_RESERVED", default_value = "")]
    pub system_reserved: agent::node::reserved::Reserved,

    /// Resources kept back for skiff itself and the container runtime, as
    /// the kubelet's `--kube-reserved` (same spelling).
    #[arg(long, env = "SKIFF_KUBE_RESERVED", default_value = "")]
    pub kube_reserved: agent::node::reserved::Reserved,

    /// Unused images are removed once the agent's disk is this full
    /// (percent; 100 turns it off), as the kubelet's flag.
    #[arg(long, env = "SKIFF_IMAGE_GC_HIGH_THRESHOLD", default_value_t = 85,
          value_parser = clap::value_parser!(u8).range(0..=100))]
    pub image_gc_high_threshold: u8,

    /// ... until it is down to this full (percent; below the high one).
    #[arg(long, env = "SKIFF_IMAGE_GC_LOW_THRESHOLD", default_value_t = 80,
          value_parser = clap::value_parser!(u8).range(0..=100))]
    pub image_gc_low_threshold: u8,

    /// An image seen for less than this is never removed (`2m0s`).
    #[arg(long, env = "SKIFF_MINIMUM_IMAGE_TTL_DURATION", default_value = "2m",
          value_parser = go_duration)]
    pub minimum_image_ttl_duration: std::time::Duration,

    /// The cgroup below which pods' cgroups are laid out (`kubepods`, its
    /// QoS classes, one per pod), as the kubelet's `--cgroup-root`.
    #[arg(long, env = "SKIFF_CGROUP_ROOT", default_value = "/")]
    pub cgroup_root: String,

    /// Whether pods get cgroups of their own (`--cgroups-per-qos=false`
    /// leaves each container where the runtime puts it), as the kubelet's
    /// flag.
    #[arg(long, env = "SKIFF_CGROUPS_PER_QOS", default_value_t = true,
          action = clap::ArgAction::Set)]
    pub cgroups_per_qos: bool,

    /// The most processes one pod may run (its cgroup's `pids.max`), as the
    /// kubelet's flag; -1 (or 0) leaves pods limited by the node only.
    #[arg(long, env = "SKIFF_POD_MAX_PIDS", default_value_t = -1, allow_negative_numbers = true)]
    pub pod_max_pids: i64,

    /// How many pods this node takes (its `pods` capacity), as the
    /// kubelet's flag.
    #[arg(long, env = "SKIFF_MAX_PODS", default_value_t = 110,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_pods: u32,

    /// A container's log file is rotated once it reaches this size (a
    /// quantity), as the kubelet's flag.
    #[arg(long, env = "SKIFF_CONTAINER_LOG_MAX_SIZE", default_value = "10Mi",
          value_parser = log_max_size)]
    pub container_log_max_size: u64,

    /// The most log files a container keeps, the current one included
    /// (older ones compressed), as the kubelet's flag.
    #[arg(long, env = "SKIFF_CONTAINER_LOG_MAX_FILES", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(2..))]
    pub container_log_max_files: u32,

    /// How often containers' logs are looked at for rotation (at least
    /// 3s), as the kubelet's `containerLogMonitorInterval`.
    #[arg(long, env = "SKIFF_CONTAINER_LOG_MONITOR_INTERVAL", default_value = "10s",
          value_parser = log_monitor_interval)]
    pub container_log_monitor_interval: std::time::Duration,

    /// How often running pods' configMap, secret, downwardAPI and projected
    /// volumes are read again, so an update of their source reaches the
    /// containers, as the kubelet's flag.
    #[arg(long, env = "SKIFF_SYNC_FREQUENCY", default_value = "1m",
          value_parser = sync_frequency)]
    pub sync_frequency: std::time::Duration,

    /// nftables table (family `ip`) of the pod network's masquerade rules.
    #[arg(long, env = "SKIFF_POD_NETWORK_TABLE", default_value = agent::overlay::DEFAULT_TABLE)]
    pub pod_network_table: String,
}

impl NodeFlags {
    /// `--node-name`, else the host's name.
    pub(crate) fn node_name(&self, data_dir: &Path) -> String {
        match &self.node_name {
            Some(name) => name.clone(),
            None => agent::node::host::read(data_dir).hostname,
        }
    }

    /// The agent's configuration with its state under `DATA_DIR/agent`.
    pub(crate) fn agent_config(&self, data_dir: &Path) -> anyhow::Result<AgentConfig> {
        let node_name = self.node_name(data_dir);
        let mut config = AgentConfig::new(node_name, data_dir.join("agent"));
        config.runtime.external_endpoint = self.container_runtime_endpoint.clone();
        config.runtime.registries =
            skiff_node::containerd::registries::Registries::load(&self.private_registry)?;
        if config.runtime.registries.is_some() && config.runtime.external_endpoint.is_some() {
            tracing::warn!(
                file = %self.private_registry.display(),
                "registry configuration not applied: --container-runtime-endpoint names a runtime skiff does not configure"
            );
        }
        config.fallback_pod_cidr = self.pod_cidr.clone();
        config.cni_bridge = self.cni_bridge.clone();
        config.dns = agent::pod::dns_config::ClusterDnsSettings {
            servers: self.cluster_dns.clone(),
            domain: self.cluster_domain.clone(),
            resolv_conf: self.resolv_conf.clone(),
        };
        config.node_ip = Some(self.node_ip());
        config.node_external_ip = self.node_external_ip;
        config.local_storage_dir = self.default_local_storage_path.clone();
        config.server_port = self.kubelet_port;
        config.server_address = self.kubelet_address;
        config.overlay.backend = self.flannel_backend;
        config.overlay.table = self.pod_network_table.clone();
        config.sysctls = agent::pod::sysctls::Allowlist::with_unsafe(&self.allowed_unsafe_sysctls)
            .context("--allowed-unsafe-sysctls")?;
        config.eviction_hard = self.eviction_hard;
        config.reserved = self.system_reserved.plus(self.kube_reserved);
        config.cgroup_root = self.cgroups_per_qos.then(|| self.cgroup_root.clone());
        config.pod_max_pids = (self.pod_max_pids > 0).then_some(self.pod_max_pids);
        config.max_pods = self.max_pods;
        config.sync_frequency = self.sync_frequency;
        config.log_rotation = agent::pod::log_rotation::LogRotation {
            max_size: self.container_log_max_size,
            max_files: self.container_log_max_files as usize,
            interval: self.container_log_monitor_interval,
        };
        if self.image_gc_low_threshold >= self.image_gc_high_threshold {
            anyhow::bail!(
                "--image-gc-low-threshold ({}) must be less than --image-gc-high-threshold ({})",
                self.image_gc_low_threshold,
                self.image_gc_high_threshold
            );
        }
        config.image_gc.high_threshold_percent = self.image_gc_high_threshold;
        config.image_gc.low_threshold_percent = self.image_gc_low_threshold;
        config.image_gc.minimum_age = self.minimum_image_ttl_duration;
        let mut labels = BTreeMap::new();
        for label in &self.node_labels {
            let (k, v) = label
                .split_once('=')
                .with_context(|| format!("node label {label:?} is not key=value"))?;
            labels.insert(k.to_string(), v.to_string());
        }
        config.node_labels = labels;
        config.node_taints = self
            .node_taints
            .iter()
            .map(|spec| agent::node::registration::parse_taint(spec))
            .collect::<Result<_, _>>()?;
        Ok(config)
    }

    /// The node's address: `--node-ip`, else the host's first non-loopback
    /// IPv4 address.
    pub(crate) fn node_ip(&self) -> IpAddr {
        self.node_ip.unwrap_or_else(agent::node::host::internal_ip)
    }

    /// The service proxy's configuration, unless disabled.
    pub(crate) fn proxy_config(&self, node_name: &str) -> Option<skiff_proxy::ProxyConfig> {
        (!self.disable_kube_proxy).then(|| {
            let mut config = skiff_proxy::ProxyConfig::new(node_name);
            config.sync.table = self.proxy_table.clone();
            config
        })
    }
}

/// Starts the network policy controller next to the node agent, or, when
/// it is disabled, removes the table an earlier run left (its rules would
/// otherwise stay enforced, frozen).
pub(crate) fn spawn_netpol(
    components: &mut tokio::task::JoinSet<()>,
    factory: &SharedInformerFactory,
    flags: &NodeFlags,
    node_name: &str,
    stop: watch::Receiver<bool>,
) {
    if flags.disable_network_policy {
        let table = flags.netpol_table.clone();
        components.spawn(skiff_netpol::remove_table(skiff_netpol::Nft::new(), table));
        return;
    }
    let mut config = skiff_netpol::NetpolConfig::new(node_name);
    config.sync.table = flags.netpol_table.clone();
    let factory = factory.clone();
    components.spawn(async move {
        if let Err(error) = skiff_netpol::run(&factory, config, stop).await {
            tracing::error!(%error, "network policy controller stopped");
        }
    });
}

/// Starts the service proxy next to the node agent.
pub(crate) fn spawn_proxy(
    components: &mut tokio::task::JoinSet<()>,
    factory: &SharedInformerFactory,
    config: skiff_proxy::ProxyConfig,
    stop: watch::Receiver<bool>,
) {
    let factory = factory.clone();
    components.spawn(async move {
        if let Err(error) = skiff_proxy::run(&factory, config, stop).await {
            tracing::error!(%error, "service proxy stopped");
        }
    });
}

/// Flags of `skiff agent`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct AgentArgs {
    /// Directory for the agent's state (containerd, pods, logs).
    #[arg(long, env = "SKIFF_DATA_DIR", default_value = "/var/lib/skiff")]
    pub data_dir: PathBuf,

    /// URL of the skiff server, e.g. https://10.0.0.1:6443.
    #[arg(long, env = "SKIFF_SERVER", required_unless_present = "kubeconfig")]
    pub server: Option<String>,

    /// The join token: the server's `DATA_DIR/token` or one `skiff token
    /// create` printed (`K10<CA hash>::<credential>`); the agent checks the
    /// server's CA against it, then gets a node client certificate (kubelet
    /// TLS bootstrap) and uses that from then on. Any other token is used
    /// as a bearer token as it is, with --ca-file.
    #[arg(long, env = "SKIFF_TOKEN", requires = "server")]
    pub token: Option<String>,

    /// The join token read from this file (k3s's `--token-file`): kept out
    /// of the command line, where `ps` shows it to every user.
    #[arg(
        long,
        env = "SKIFF_TOKEN_FILE",
        requires = "server",
        conflicts_with = "token"
    )]
    pub token_file: Option<PathBuf>,

    /// The cluster CA certificate (PEM; the server's `DATA_DIR/tls/ca.crt`):
    /// the server's certificate must chain to it, and so must the client
    /// certificates the node server accepts. Required with a token that is
    /// not a K10 join token (which carries the CA's hash instead).
    #[arg(long, env = "SKIFF_CA_FILE", requires = "server")]
    pub ca_file: Option<PathBuf>,

    /// Kubeconfig to reach the server instead of --server/--token; it must
    /// name the cluster CA (certificate-authority or -data).
    #[arg(long, env = "SKIFF_KUBECONFIG", conflicts_with = "server")]
    pub kubeconfig: Option<PathBuf>,

    /// Benchmarking mode: instead of a containerd-backed node, run this
    /// many simulated (kwok-style) nodes named `<node-name>-sim-<i>`. Each
    /// joins by --token as its own node (its own `system:node:<name>`
    /// client certificate through the kubelet TLS bootstrap, kept under
    /// DATA_DIR/agent/simulated/), so it may write only what a kubelet of
    /// that name may.
    #[arg(
        long,
        env = "SKIFF_SIMULATED_NODES",
        default_value_t = 0,
        requires = "token"
    )]
    pub simulated_nodes: usize,

    #[command(flatten)]
    pub node: NodeFlags,
}

/// The join token of `--token-file`, trimmed; a file that cannot be read
/// or holds nothing stops the start.
pub(crate) fn read_token_file(path: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the join token from {}", path.display()))?;
    let token = text.trim();
    anyhow::ensure!(!token.is_empty(), "{} holds no join token", path.display());
    Ok(token.to_string())
}

/// Runs the agent until SIGTERM or Ctrl-C.
pub(crate) async fn run(mut args: AgentArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.token_file {
        args.token = Some(read_token_file(path)?);
    }
    create_data_dir(&args.data_dir)?;
    if args.simulated_nodes > 0 {
        return run_simulated(&args).await;
    }
    let mut config = args.node.agent_config(&args.data_dir)?;
    let mut joined = None;
    let remote = match (&args.kubeconfig, &args.server) {
        (Some(path), _) => remote::client_from_kubeconfig(path).await?,
        (None, Some(server)) => {
            let token = args
                .token
                .as_deref()
                .context("--token is required with --server")?;
            let token = JoinToken::parse(token).context("--token")?;
            if token.ca_hash.is_some() {
                let join = join::JoinConfig {
                    server: server.clone(),
                    token,
                    agent_dir: config.agent_dir().to_path_buf(),
                    node_name: config.node_name.clone(),
                };
                let done = join::join(&join).await?;
                if let Some(ca_file) = &args.ca_file {
                    let given = std::fs::read_to_string(ca_file)
                        .with_context(|| format!("reading {}", ca_file.display()))?;
                    join::check_ca(server, &join.token, &given)
                        .with_context(|| format!("--ca-file {}", ca_file.display()))?;
                }
                tracing::info!(node = %config.node_name, "joined with a node client certificate");
                let remote = remote::Remote {
                    client: done.client.clone(),
                    ca_pem: done.ca_pem.clone(),
                };
                joined = Some(done);
                remote
            } else {
                let ca_file = args.ca_file.as_deref().context(
                    "--ca-file is required with a token that is not a K10 join token: the server must be verified",
                )?;
                remote::client_from_token(server, &token.credential, ca_file)?
            }
        }
        (None, None) => anyhow::bail!(
            "give --server and --token (and --ca-file for a plain token), or --kubeconfig"
        ),
    };
    let client = remote.client;
    config.server_tls = Some(agent::NodeServerTls {
        ca_pem: remote.ca_pem,
        signer: std::sync::Arc::new(agent::identity::csr_signer::CsrSigner::new(client.clone())),
    });
    let factory = SharedInformerFactory::new(client.clone());
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut proxy = tokio::task::JoinSet::new();
    if let Some(proxy_config) = args.node.proxy_config(&config.node_name) {
        spawn_proxy(&mut proxy, &factory, proxy_config, stop_rx.clone());
    }
    // As the node, like the proxy: the node authorizer lets it read what
    // the policies need.
    spawn_netpol(
        &mut proxy,
        &factory,
        &args.node,
        &config.node_name,
        stop_rx.clone(),
    );
    if let Some(joined) = joined {
        // The client certificate is renewed before it expires.
        proxy.spawn(join::keep_renewed(
            joined,
            config.agent_dir().to_path_buf(),
            config.node_name.clone(),
            join::RENEW_CHECK,
            stop_rx.clone(),
        ));
    }
    let mut agent = {
        let factory = factory.clone();
        tokio::spawn(async move { agent::run(client, &factory, config, stop_rx).await })
    };
    tokio::select! {
        result = &mut agent => {
            return match result.context("agent task")? {
                Ok(()) => Ok(()),
                Err(e) => Err(e.into()),
            };
        }
        _ = crate::termination_signal() => {}
    }
    stop_all(stop_tx, &factory, agent, "agent task", proxy).await
}

/// `skiff agent --simulated-nodes N`: joins as the agent's own node (whose
/// identity watches the pods), gives each hollow node its own node
/// identity, and runs them until SIGTERM or Ctrl-C.
async fn run_simulated(args: &AgentArgs) -> anyhow::Result<()> {
    use skiff_node::simulated::{self, NodeClients, SimulatedConfig, identities};
    let (Some(server), Some(token)) = (&args.server, &args.token) else {
        anyhow::bail!(
            "--simulated-nodes needs --server and a K10 join token: every simulated node joins by it"
        );
    };
    let token = JoinToken::parse(token).context("--token")?;
    anyhow::ensure!(
        token.ca_hash.is_some(),
        "--simulated-nodes needs a K10 join token (K10<CA hash>::…): every simulated node joins by it"
    );
    let node_name = args.node.node_name(&args.data_dir);
    let agent_dir = args.data_dir.join("agent");
    let own = join::join(&join::JoinConfig {
        server: server.clone(),
        token: token.clone(),
        agent_dir: agent_dir.clone(),
        node_name: node_name.clone(),
    })
    .await?;
    let mut config = SimulatedConfig::new(args.simulated_nodes);
    config.name_prefix = format!("{node_name}-sim-");
    let names: Vec<String> = (0..config.nodes)
        .map(|index| simulated::node_name(&config, index))
        .collect();
    tracing::info!(nodes = names.len(), "joining the simulated nodes");
    let hollow =
        identities::join_all(server, &token, &own.ca_pem, &agent_dir, names.clone()).await?;

    let (stop_tx, stop_rx) = watch::channel(false);
    let mut renewals = tokio::task::JoinSet::new();
    let mut renew = |joined: join::Joined, dir: PathBuf, name: String| {
        renewals.spawn(join::keep_renewed(
            joined,
            dir,
            name,
            join::RENEW_CHECK,
            stop_rx.clone(),
        ));
    };
    let clients = NodeClients::PerNode(std::sync::Arc::new(
        hollow.iter().map(|joined| joined.client.clone()).collect(),
    ));
    for (joined, name) in hollow.into_iter().zip(names) {
        renew(joined, identities::node_dir(&agent_dir, &name), name);
    }
    renew(own.clone(), agent_dir, node_name);

    let factory = SharedInformerFactory::new(own.client);
    let mut nodes = {
        let factory = factory.clone();
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            let shutdown = async move {
                let _ = stop.wait_for(|s| *s).await;
            };
            simulated::run(clients, &factory, config, shutdown).await
        })
    };
    tokio::select! {
        result = &mut nodes => {
            result.context("simulated nodes task")??;
            anyhow::bail!("the simulated nodes stopped");
        }
        _ = crate::termination_signal() => {}
    }
    stop_all(stop_tx, &factory, nodes, "simulated nodes task", renewals).await
}

/// The agent's stop after a termination signal, the same for the
/// containerd-backed node and the simulated ones: raises `stop`, shuts the
/// informers down, then waits for the `main` task (`what` names it; its
/// error is the command's) and every side task, so nothing still runs when
/// the process exits.
async fn stop_all<E>(
    stop: watch::Sender<bool>,
    factory: &SharedInformerFactory,
    main: tokio::task::JoinHandle<Result<(), E>>,
    what: &'static str,
    mut side_tasks: tokio::task::JoinSet<()>,
) -> anyhow::Result<()>
where
    anyhow::Error: From<E>,
{
    tracing::info!("stopping");
    let _ = stop.send(true);
    factory.shutdown();
    main.await.context(what)??;
    while side_tasks.join_next().await.is_some() {}
    tracing::info!("stopped");
    Ok(())
}

/// Creates the data directory private to its owner (0700); one that
/// already exists keeps its mode, but is warned about when others may
/// write to it.
pub(crate) fn create_data_dir(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    match std::fs::metadata(dir) {
        Ok(meta) => {
            if meta.permissions().mode() & 0o022 != 0 {
                tracing::warn!(dir = %dir.display(), "the data dir is writable by others; make it 0700");
            }
            Ok(())
        }
        Err(_) => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating data dir {}", dir.display())),
    }
}

/// Starts the node agent inside `skiff server`.
pub(crate) fn spawn_in_server(
    components: &mut tokio::task::JoinSet<()>,
    factory: &SharedInformerFactory,
    client: kube::Client,
    config: AgentConfig,
    stop: watch::Receiver<bool>,
) {
    let factory = factory.clone();
    components.spawn(async move {
        if let Err(error) = agent::run(client, &factory, config, stop).await {
            tracing::error!(%error, "node agent stopped");
        }
    });
}

/// `--container-log-max-size`: a quantity above zero.
fn log_max_size(text: &str) -> Result<u64, String> {
    skiff_common::quantity::parse_scaled(text, 1)
        .and_then(|bytes| u64::try_from(bytes).ok())
        .filter(|bytes| *bytes > 0)
        .ok_or_else(|| format!("{text:?} is not a positive quantity such as 10Mi"))
}

/// `--container-log-monitor-interval`: at least 3s, as the kubelet checks.
fn log_monitor_interval(text: &str) -> Result<std::time::Duration, String> {
    let interval = go_duration(text)?;
    if interval < std::time::Duration::from_secs(3) {
        return Err(format!(
            "{text:?} is too short: the interval must be at least 3s"
        ));
    }
    Ok(interval)
}

fn sync_frequency(text: &str) -> Result<std::time::Duration, String> {
    let every = go_duration(text)?;
    if every.is_zero() {
        return Err(format!(
            "{text:?} is too short: the period must be above 0s"
        ));
    }
    Ok(every)
}

/// A Go duration (`2m`, `1m30s`, `0s`).
fn go_duration(text: &str) -> Result<std::time::Duration, String> {
    skiff_apiserver::request_timeout::parse_go_duration(text)
        .ok_or_else(|| format!("{text:?} is not a duration such as 2m or 1m30s"))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_new_data_dir_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("a/b");
        super::create_data_dir(&data).unwrap();
        let mode = std::fs::metadata(&data).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }
}
