//! The node agent's flags (shared by `skiff server` and `skiff agent`) and
//! `skiff agent`: only the containerd-backed node, talking to a server over
//! HTTPS.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use skiff_informer::SharedInformerFactory;
use skiff_node::agent::{self, AgentConfig, remote};
use tokio::sync::watch;

/// Flags of the node agent.
#[derive(Debug, Clone, clap::Args)]
pub struct NodeFlags {
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

    /// Linux bridge of the pod network.
    #[arg(long, env = "SKIFF_CNI_BRIDGE", default_value = "skiff0")]
    pub cni_bridge: String,

    /// Extra node labels, `key=value`; repeatable.
    #[arg(long = "node-label", env = "SKIFF_NODE_LABEL", value_delimiter = ',')]
    pub node_labels: Vec<String>,

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

    /// Port of the node server the API server proxies logs, exec, attach
    /// and port-forward to (0: any free port; the Node publishes it).
    #[arg(long, env = "SKIFF_KUBELET_PORT", default_value_t = 10250)]
    pub kubelet_port: u16,

    /// Do not run the service proxy (nftables rules for Services).
    #[arg(long, env = "SKIFF_DISABLE_KUBE_PROXY")]
    pub disable_kube_proxy: bool,

    /// nftables table (family `ip`) the service proxy owns.
    #[arg(long, env = "SKIFF_PROXY_TABLE", default_value = skiff_proxy::DEFAULT_TABLE)]
    pub proxy_table: String,
}

impl NodeFlags {
    /// The agent's configuration with its state under `DATA_DIR/agent`.
    pub fn agent_config(&self, data_dir: &Path) -> anyhow::Result<AgentConfig> {
        let node_name = match &self.node_name {
            Some(name) => name.clone(),
            None => agent::host::read(data_dir).hostname,
        };
        let mut config = AgentConfig::new(node_name, data_dir.join("agent"));
        config.runtime.external_endpoint = self.container_runtime_endpoint.clone();
        config.fallback_pod_cidr = self.pod_cidr.clone();
        config.cni_bridge = self.cni_bridge.clone();
        config.dns = agent::dns_config::ClusterDnsSettings {
            servers: self.cluster_dns.clone(),
            domain: self.cluster_domain.clone(),
            resolv_conf: self.resolv_conf.clone(),
        };
        config.server_port = self.kubelet_port;
        let mut labels = BTreeMap::new();
        for label in &self.node_labels {
            let (k, v) = label
                .split_once('=')
                .with_context(|| format!("node label {label:?} is not key=value"))?;
            labels.insert(k.to_string(), v.to_string());
        }
        config.node_labels = labels;
        Ok(config)
    }

    /// The service proxy's configuration, unless disabled.
    pub fn proxy_config(&self, node_name: &str) -> Option<skiff_proxy::ProxyConfig> {
        (!self.disable_kube_proxy).then(|| {
            let mut config = skiff_proxy::ProxyConfig::new(node_name);
            config.table = self.proxy_table.clone();
            config
        })
    }
}

/// Starts the service proxy next to the node agent.
pub fn spawn_proxy(
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
pub struct AgentArgs {
    /// Directory for the agent's state (containerd, pods, logs).
    #[arg(long, env = "SKIFF_DATA_DIR", default_value = "/var/lib/skiff")]
    pub data_dir: PathBuf,

    /// URL of the skiff server, e.g. https://10.0.0.1:6443.
    #[arg(long, env = "SKIFF_SERVER", required_unless_present = "kubeconfig")]
    pub server: Option<String>,

    /// Bearer token to authenticate to the server.
    #[arg(long, env = "SKIFF_TOKEN", requires = "server")]
    pub token: Option<String>,

    /// CA certificate (PEM) of the server; without it the server's
    /// certificate is not verified.
    #[arg(long, env = "SKIFF_CA_FILE")]
    pub ca_file: Option<PathBuf>,

    /// Kubeconfig to reach the server instead of --server/--token.
    #[arg(long, env = "SKIFF_KUBECONFIG", conflicts_with = "server")]
    pub kubeconfig: Option<PathBuf>,

    /// The server's node-proxy token (its `DATA_DIR/tls/node-proxy.token`):
    /// the node server accepts only requests that carry it.
    #[arg(long, env = "SKIFF_NODE_PROXY_TOKEN")]
    pub node_proxy_token: Option<String>,

    #[command(flatten)]
    pub node: NodeFlags,
}

/// Runs the agent until SIGTERM or Ctrl-C.
pub async fn run(args: AgentArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("creating data dir {}", args.data_dir.display()))?;
    let client = match (&args.kubeconfig, &args.server) {
        (Some(path), _) => remote::client_from_kubeconfig(path).await?,
        (None, Some(server)) => {
            let token = args
                .token
                .as_deref()
                .context("--token is required with --server")?;
            if args.ca_file.is_none() {
                tracing::warn!("no --ca-file: the server's certificate is not verified");
            }
            remote::client_from_token(server, token, args.ca_file.as_deref())?
        }
        (None, None) => anyhow::bail!("give --server and --token, or --kubeconfig"),
    };
    let mut config = args.node.agent_config(&args.data_dir)?;
    config.server_token = args.node_proxy_token.clone();
    if config.server_token.is_none() {
        tracing::warn!(
            "no --node-proxy-token: logs, exec and port-forward to this node are refused"
        );
    }
    let factory = SharedInformerFactory::new(client.clone());
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut proxy = tokio::task::JoinSet::new();
    if let Some(proxy_config) = args.node.proxy_config(&config.node_name) {
        spawn_proxy(&mut proxy, &factory, proxy_config, stop_rx.clone());
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
        _ = termination_signal() => {}
    }
    tracing::info!("stopping");
    let _ = stop_tx.send(true);
    factory.shutdown();
    agent.await.context("agent task")??;
    while proxy.join_next().await.is_some() {}
    tracing::info!("stopped");
    Ok(())
}

/// Starts the node agent inside `skiff server`.
pub fn spawn_in_server(
    components: &mut tokio::task::JoinSet<()>,
    factory: &SharedInformerFactory,
    clients: agent::AgentClients,
    config: AgentConfig,
    stop: watch::Receiver<bool>,
) {
    let factory = factory.clone();
    components.spawn(async move {
        if let Err(error) = agent::run(clients, &factory, config, stop).await {
            tracing::error!(%error, "node agent stopped");
        }
    });
}

/// Resolves on SIGTERM or SIGINT.
async fn termination_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot install signal handlers; stop with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = int.recv() => tracing::info!("SIGINT received"),
    }
}
