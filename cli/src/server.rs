//! `skiff server`: opens the store, starts the API server over HTTPS and the
//! in-process components, and stops them in order on SIGTERM or Ctrl-C.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use skiff_apiserver::authn::{Authenticator, UserInfo};
use skiff_apiserver::encryption::{EncryptionSource, ProviderKind};
use skiff_apiserver::tls::{self, ClusterCerts};
use skiff_apiserver::{ApiServer, ApiServerConfig};
use skiff_informer::{ElectionConfig, LeaderElector, Leadership, SharedInformerFactory};
use skiff_node::simulated::{self, SimulatedConfig};
use skiff_store::snapshot::SnapshotDir;
use skiff_store::{
    CompactionPolicy, EtcdConfig, EtcdStore, SledConfig, SledStore, SpaceReserve, Store,
};
use tokio::sync::watch;

const DEFAULT_STORE_CACHE_MB: u64 = 16;
/// How long after start-up the server gives its start-up code pages back:
/// past the components' first syncs and the node's registration.
const STARTUP_SETTLE: Duration = Duration::from_secs(15);
const DEFAULT_STORE_RESERVE_MB: u64 = 64;

/// Flags of `skiff server`; each can also be set through its `SKIFF_*`
/// environment variable.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ServerArgs {
    /// Directory for the store, certificates, kubeconfig and agent state.
    #[arg(long, env = "SKIFF_DATA_DIR", default_value = "/var/lib/skiff")]
    pub data_dir: PathBuf,

    /// Port of the HTTPS API.
    #[arg(long, env = "SKIFF_HTTPS_LISTEN_PORT", default_value_t = 6443)]
    pub https_listen_port: u16,

    /// Address the API listens on.
    #[arg(long, env = "SKIFF_BIND_ADDRESS", default_value = "0.0.0.0")]
    pub bind_address: IpAddr,

    /// Extra subject alternative names (host names or IPs) for the serving
    /// certificate; repeatable.
    #[arg(long = "tls-san", env = "SKIFF_TLS_SAN", value_delimiter = ',')]
    pub tls_san: Vec<String>,

    /// Also write the admin kubeconfig to this file, as k3s's
    /// `--write-kubeconfig`; DATA_DIR/kubeconfig.yaml is written either
    /// way (the other subcommands read it).
    #[arg(long = "write-kubeconfig", short = 'o', env = "SKIFF_WRITE_KUBECONFIG")]
    pub write_kubeconfig: Option<PathBuf>,

    /// File mode, in octal, of the admin kubeconfig written for users
    /// (--write-kubeconfig's file, else DATA_DIR/kubeconfig.yaml), as k3s's
    /// `--write-kubeconfig-mode`; without it, 0600. Whoever can read that
    /// file is a cluster admin.
    #[arg(
        long = "write-kubeconfig-mode",
        env = "SKIFF_WRITE_KUBECONFIG_MODE",
        value_parser = file_mode
    )]
    pub write_kubeconfig_mode: Option<u32>,

    /// Run only the control plane, without the containerd-backed node agent.
    #[arg(long, env = "SKIFF_DISABLE_AGENT")]
    pub disable_agent: bool,

    /// Packaged components not to run, by k3s's names; repeatable:
    /// `coredns` (the cluster DNS), `traefik` (the ingress), `servicelb`,
    /// `local-storage` (the local-path provisioner and its class),
    /// `metrics-server` (accepted; the metrics API is built in and stays).
    #[arg(
        long = "disable",
        env = "SKIFF_DISABLE",
        value_delimiter = ',',
        value_parser = clap::builder::PossibleValuesParser::new(
            ["coredns", "traefik", "servicelb", "local-storage", "metrics-server"]
        )
    )]
    pub disable: Vec<String>,

    /// Add this many simulated (kwok-style) nodes that run pods instantly with
    /// fake IPs; for scale tests and benchmarks.
    #[arg(long, env = "SKIFF_SIMULATED_NODES", default_value_t = 0)]
    pub simulated_nodes: usize,

    /// The node agent (ignored with --disable-agent).
    #[command(flatten)]
    pub node: crate::agent::NodeFlags,

    /// Keep the cluster's state in etcd instead of the embedded store in
    /// DATA_DIR/db: the client URLs of one etcd v3 cluster (http:// or
    /// https://, comma-separated or repeated for several members).
    #[arg(long, env = "SKIFF_DATASTORE_ENDPOINT", value_delimiter = ',')]
    pub datastore_endpoint: Vec<String>,

    /// CA bundle (PEM) that signed the etcd servers' certificates; needed
    /// with https:// endpoints.
    #[arg(long, env = "SKIFF_DATASTORE_CAFILE", requires = "datastore_endpoint")]
    pub datastore_cafile: Option<PathBuf>,

    /// Client certificate (PEM) presented to etcd.
    #[arg(
        long,
        env = "SKIFF_DATASTORE_CERTFILE",
        requires = "datastore_endpoint"
    )]
    pub datastore_certfile: Option<PathBuf>,

    /// Key (PEM) of --datastore-certfile.
    #[arg(long, env = "SKIFF_DATASTORE_KEYFILE", requires = "datastore_endpoint")]
    pub datastore_keyfile: Option<PathBuf>,

    /// Seconds start-up waits for the etcd cluster to answer before it
    /// gives up.
    #[arg(
        long,
        env = "SKIFF_DATASTORE_CONNECT_TIMEOUT",
        default_value_t = 30,
        requires = "datastore_endpoint"
    )]
    pub datastore_connect_timeout: u64,

    /// Join the cluster of the server at this URL, which shares this
    /// server's --datastore-endpoint: its CAs, signing keys and token file
    /// are read from the datastore, decrypted with --token.
    #[arg(
        long,
        env = "SKIFF_SERVER",
        requires_all = ["token", "datastore_endpoint"]
    )]
    pub server: Option<String>,

    /// The cluster's token (the first server's DATA_DIR/token); without it
    /// the token in DATA_DIR/token, or a new one, is used.
    #[arg(long, env = "SKIFF_TOKEN")]
    pub token: Option<String>,

    /// How often the store drops old history, in seconds (the embedded
    /// store and etcd alike).
    #[arg(long, env = "SKIFF_STORE_COMPACTION_INTERVAL", default_value_t = 30)]
    pub store_compaction_interval: u64,

    /// History younger than this many seconds is always kept (watchers that
    /// reconnect within it resume without a relist).
    #[arg(long, env = "SKIFF_STORE_HISTORY_MIN_AGE", default_value_t = 300)]
    pub store_history_min_age: u64,

    /// At least this many of the newest revisions are always kept.
    #[arg(
        long,
        env = "SKIFF_STORE_HISTORY_MIN_REVISIONS",
        default_value_t = 1000
    )]
    pub store_history_min_revisions: u64,

    /// Free disk space (MiB) the embedded store keeps back on its data
    /// directory's file system: below it creates and updates are refused
    /// (507) while reads, watches and deletes go on; deletes stop at an
    /// eighth of it. 0 turns the reserve off. Not used with etcd, whose own
    /// quota (NOSPACE alarm) plays this part.
    #[arg(long, env = "SKIFF_STORE_RESERVE_MB", default_value_t = DEFAULT_STORE_RESERVE_MB)]
    pub store_reserve_mb: u64,

    /// Deadline of requests that are not long-running (watch, exec,
    /// attach, logs, port-forward and proxy are exempt), a duration such as
    /// 60s or 1m30s; a request past it gets 504 Timeout.
    #[arg(long, env = "SKIFF_REQUEST_TIMEOUT", default_value = "60s", value_parser = positive_duration)]
    pub request_timeout: Duration,

    /// How often the nodes' resource usage is scraped for `kubectl top`
    /// and the metrics.k8s.io API (metrics-server's --metric-resolution),
    /// a duration such as 15s; CPU is the rate between two scrapes.
    #[arg(long, env = "SKIFF_METRIC_RESOLUTION", default_value = "15s", value_parser = positive_duration)]
    pub metric_resolution: Duration,
    /// How often the HorizontalPodAutoscaler controller looks at each
    /// autoscaler (kube-controller-manager's flag of the same name), a
    /// duration such as 15s.
    #[arg(
        long,
        env = "SKIFF_HORIZONTAL_POD_AUTOSCALER_SYNC_PERIOD",
        default_value = "15s",
        value_parser = positive_duration
    )]
    pub horizontal_pod_autoscaler_sync_period: Duration,

    /// API Priority and Fairness: this plus --max-mutating-requests-inflight
    /// is the number of requests that run at once, shared among the limited
    /// priority levels by their nominalConcurrencyShares; beyond that
    /// requests wait in fair queues or get 429 TooManyRequests. Both 0: no
    /// limit.
    #[arg(long, env = "SKIFF_MAX_REQUESTS_INFLIGHT", default_value_t = 400)]
    pub max_requests_inflight: usize,

    /// See --max-requests-inflight (upstream's two limits, added together
    /// under priority and fairness).
    #[arg(
        long,
        env = "SKIFF_MAX_MUTATING_REQUESTS_INFLIGHT",
        default_value_t = 200
    )]
    pub max_mutating_requests_inflight: usize,

    /// Seconds a watch lasts at least when the client sets no
    /// timeoutSeconds; each runs a random time between this and twice this.
    #[arg(long, env = "SKIFF_MIN_REQUEST_TIMEOUT", default_value_t = 1800)]
    pub min_request_timeout: u64,

    /// Range of Service cluster IPs (IPv4 CIDR); its first address is the
    /// `kubernetes` Service's.
    #[arg(long, env = "SKIFF_SERVICE_CIDR", default_value = "10.43.0.0/16")]
    pub service_cidr: String,

    /// Ports NodePort Services get theirs from, inclusive at both ends
    /// (`30000-32767`, or upstream's `30000+2767`); keep it clear of the
    /// nodes' ephemeral ports.
    #[arg(
        long,
        env = "SKIFF_SERVICE_NODE_PORT_RANGE",
        default_value = "30000-32767",
        value_parser = port_range
    )]
    pub service_node_port_range: std::ops::RangeInclusive<u16>,

    /// Range the nodes' pod CIDRs (a /24 each) are carved from.
    #[arg(long, env = "SKIFF_CLUSTER_CIDR", default_value = "10.42.0.0/16")]
    pub cluster_cidr: String,

    /// Page cache of the embedded store, in MiB (not used with etcd).
    #[arg(long, env = "SKIFF_STORE_CACHE_MB", default_value_t = DEFAULT_STORE_CACHE_MB)]
    pub store_cache_mb: u64,

    /// Where the cluster DNS listens (UDP and TCP); the `kube-dns` Service's
    /// endpoints are this node's address with this port.
    #[arg(long, env = "SKIFF_CLUSTER_DNS_LISTEN", default_value = "0.0.0.0:53")]
    pub cluster_dns_listen: SocketAddr,

    /// Where the cluster DNS serves its Prometheus metrics over plain
    /// HTTP, as CoreDNS's `prometheus :9153` (the `kube-dns` Service's
    /// `metrics` port); an unspecified address means the DNS's own
    /// addresses, port 0 any free port.
    #[arg(
        long,
        env = "SKIFF_CLUSTER_DNS_METRICS_LISTEN",
        default_value = "0.0.0.0:9153"
    )]
    pub cluster_dns_metrics_listen: SocketAddr,

    /// Do not run the cluster DNS.
    #[arg(long, env = "SKIFF_DISABLE_CLUSTER_DNS")]
    pub disable_cluster_dns: bool,

    /// Keep the code pages start-up touched resident, instead of giving
    /// them back to the kernel once the server has settled (see
    /// `code_pages`).
    #[arg(long, env = "SKIFF_KEEP_STARTUP_CODE")]
    pub keep_startup_code: bool,

    /// The built-in ingress controller.
    #[command(flatten)]
    pub ingress: crate::ingress::IngressFlags,

    /// Admission plugins' settings: upstream's AdmissionConfiguration
    /// file (YAML or JSON), e.g. the PodSecurity plugin's defaults and
    /// exemptions.
    #[arg(long, env = "SKIFF_ADMISSION_CONTROL_CONFIG_FILE")]
    pub admission_control_config_file: Option<PathBuf>,

    /// Encrypt Secrets at rest with keys skiff keeps in
    /// DATA_DIR/cred/encryption-config.json (see `skiff secrets-encrypt`).
    #[arg(
        long,
        env = "SKIFF_SECRETS_ENCRYPTION",
        conflicts_with = "encryption_provider_config"
    )]
    pub secrets_encryption: bool,

    /// Cipher of the keys `--secrets-encryption` generates.
    #[arg(
        long,
        env = "SKIFF_SECRETS_ENCRYPTION_PROVIDER",
        default_value = "aescbc",
        value_parser = managed_provider
    )]
    pub secrets_encryption_provider: ProviderKind,

    /// Encrypt resources at rest as this EncryptionConfiguration file
    /// (apiserver.config.k8s.io/v1) says.
    #[arg(long, env = "SKIFF_ENCRYPTION_PROVIDER_CONFIG")]
    pub encryption_provider_config: Option<PathBuf>,

    /// Lifetime of issued leaf certificates, in days (for tests: under 120
    /// days they are renewed at every start).
    #[arg(long, env = "SKIFF_CERTIFICATE_LIFETIME_DAYS", hide = true)]
    pub certificate_lifetime_days: Option<u64>,

    /// Upstream's AuthenticationConfiguration file
    /// (apiserver.config.k8s.io/v1beta1): OpenID Connect issuers whose JWTs
    /// authenticate users, their claims mapped by name, and which requests
    /// without credentials go on as `system:anonymous`.
    #[arg(long, env = "SKIFF_AUTHENTICATION_CONFIG")]
    pub authentication_config: Option<PathBuf>,

    /// Whether requests without credentials go on as `system:anonymous`
    /// for authorization to judge (the default policy lets them read health
    /// and version only); `--anonymous-auth=false` answers them all 401, as
    /// k3s runs its API server. Default true, as kube-apiserver's.
    #[arg(long, env = "SKIFF_ANONYMOUS_AUTH", num_args = 0..=1,
          require_equals = true, default_missing_value = "true")]
    pub anonymous_auth: Option<bool>,

    /// kube-apiserver's older OpenID Connect flags, one issuer (instead of
    /// `--authentication-config`): its URL (https).
    #[arg(long, env = "SKIFF_OIDC_ISSUER_URL")]
    pub oidc_issuer_url: Option<String>,

    /// The audience the issuer's tokens must name.
    #[arg(long, env = "SKIFF_OIDC_CLIENT_ID")]
    pub oidc_client_id: Option<String>,

    /// The claim naming the user.
    #[arg(long, env = "SKIFF_OIDC_USERNAME_CLAIM", default_value = "sub")]
    pub oidc_username_claim: String,

    /// Put before each user name (`-` for nothing; default: the issuer URL
    /// and `#`, except for the `email` claim).
    #[arg(long, env = "SKIFF_OIDC_USERNAME_PREFIX")]
    pub oidc_username_prefix: Option<String>,

    /// The claim listing the user's groups.
    #[arg(long, env = "SKIFF_OIDC_GROUPS_CLAIM")]
    pub oidc_groups_claim: Option<String>,

    /// Put before each group name.
    #[arg(long, env = "SKIFF_OIDC_GROUPS_PREFIX", default_value = "")]
    pub oidc_groups_prefix: String,

    /// PEM CA the issuer's HTTPS certificate must chain to (default: the
    /// system roots).
    #[arg(long, env = "SKIFF_OIDC_CA_FILE")]
    pub oidc_ca_file: Option<PathBuf>,

    /// `key=value` a token must hold as a claim (repeatable).
    #[arg(long, env = "SKIFF_OIDC_REQUIRED_CLAIM", value_delimiter = ',')]
    pub oidc_required_claim: Vec<String>,

    /// The signing algorithms accepted.
    #[arg(
        long,
        env = "SKIFF_OIDC_SIGNING_ALGS",
        value_delimiter = ',',
        default_value = "RS256"
    )]
    pub oidc_signing_algs: Vec<String>,

    /// Keep an audit log in this file (`-` for standard output), one
    /// audit.k8s.io/v1 Event per line.
    #[arg(long, env = "SKIFF_AUDIT_LOG_PATH")]
    pub audit_log_path: Option<PathBuf>,

    /// Upstream's audit Policy file (audit.k8s.io/v1); without one, every
    /// request is logged at Metadata level.
    #[arg(long, env = "SKIFF_AUDIT_POLICY_FILE")]
    pub audit_policy_file: Option<PathBuf>,

    /// Days to keep rotated audit logs (0: forever).
    #[arg(
        long = "audit-log-maxage",
        env = "SKIFF_AUDIT_LOG_MAXAGE",
        default_value_t = 0
    )]
    pub audit_log_maxage: u64,

    /// Rotated audit logs to keep (0: all).
    #[arg(
        long = "audit-log-maxbackup",
        env = "SKIFF_AUDIT_LOG_MAXBACKUP",
        default_value_t = 0
    )]
    pub audit_log_maxbackup: usize,

    /// When scheduled snapshots are taken: a cron expression in local time
    /// (five fields, `@daily`-style shorthands, `@every <duration>`), as
    /// k3s's --etcd-snapshot-schedule-cron.
    #[arg(
        long,
        visible_alias = "etcd-snapshot-schedule-cron",
        env = "SKIFF_SNAPSHOT_SCHEDULE_CRON",
        default_value = "0 */12 * * *"
    )]
    pub snapshot_schedule_cron: String,

    /// Scheduled snapshots to keep (older ones are deleted after each new
    /// one); also what `skiff snapshot prune` keeps by default.
    #[arg(
        long,
        visible_alias = "etcd-snapshot-retention",
        env = "SKIFF_SNAPSHOT_RETENTION",
        default_value_t = 5
    )]
    pub snapshot_retention: usize,

    /// Where snapshots are written (default DATA_DIR/server/db/snapshots).
    #[arg(long, visible_alias = "etcd-snapshot-dir", env = "SKIFF_SNAPSHOT_DIR")]
    pub snapshot_dir: Option<PathBuf>,

    /// Name prefix of scheduled snapshots (`<name>-<node>-<unix time>`).
    #[arg(
        long,
        visible_alias = "etcd-snapshot-name",
        env = "SKIFF_SNAPSHOT_NAME",
        default_value = "etcd-snapshot"
    )]
    pub snapshot_name: String,

    /// Take no scheduled snapshots (`skiff snapshot save` still works).
    #[arg(
        long,
        visible_alias = "etcd-disable-snapshots",
        env = "SKIFF_DISABLE_SNAPSHOTS"
    )]
    pub disable_snapshots: bool,

    /// With --cluster-reset-restore-path: restore that snapshot into the
    /// data dir (its store is moved aside to db-old-<unix time>), then
    /// exit; start again without these flags.
    #[arg(long, env = "SKIFF_CLUSTER_RESET")]
    pub cluster_reset: bool,

    /// The snapshot file --cluster-reset restores.
    #[arg(
        long,
        env = "SKIFF_CLUSTER_RESET_RESTORE_PATH",
        requires = "cluster_reset"
    )]
    pub cluster_reset_restore_path: Option<PathBuf>,

    /// Size in megabytes at which the audit log is rotated (0: 100).
    #[arg(
        long = "audit-log-maxsize",
        env = "SKIFF_AUDIT_LOG_MAXSIZE",
        default_value_t = 0
    )]
    pub audit_log_maxsize: u64,
}

/// Reads `--secrets-encryption-provider`.
fn managed_provider(name: &str) -> Result<ProviderKind, String> {
    ProviderKind::from_name(name)
        .filter(|kind| skiff_apiserver::encryption::MANAGED_PROVIDERS.contains(kind))
        .ok_or_else(|| format!("{name:?} is not aescbc or secretbox"))
}

/// Reads `--request-timeout`, `--metric-resolution` and
/// `--horizontal-pod-autoscaler-sync-period` (positive Go durations, as
/// upstream's flags).
fn positive_duration(text: &str) -> Result<Duration, String> {
    skiff_apiserver::request_timeout::parse_go_duration(text)
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("{text:?} is not a positive duration such as 60s or 1m30s"))
}

/// Reads `--write-kubeconfig-mode`: an octal file mode, as chmod takes it
/// (`644`, `0644`).
fn file_mode(text: &str) -> Result<u32, String> {
    u32::from_str_radix(text, 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| {
            format!("{text:?} is not a file mode; want octal digits such as 0600 or 644")
        })
}

/// Reads `--service-node-port-range` as upstream's flag does: `FIRST-LAST`,
/// `FIRST+COUNT` (the ports after FIRST) or one port, inclusive.
fn port_range(text: &str) -> Result<std::ops::RangeInclusive<u16>, String> {
    let bad = || format!("{text:?} is not a port range; want FIRST-LAST such as 30000-32767");
    let port = |t: &str| t.trim().parse::<u16>().ok().filter(|p| *p > 0);
    let (first, last) = if let Some((a, b)) = text.split_once('-') {
        (port(a).ok_or_else(bad)?, port(b).ok_or_else(bad)?)
    } else if let Some((a, n)) = text.split_once('+') {
        let first = port(a).ok_or_else(bad)?;
        let count: u16 = n.trim().parse().map_err(|_| bad())?;
        (first, first.checked_add(count).ok_or_else(bad)?)
    } else {
        let only = port(text).ok_or_else(bad)?;
        (only, only)
    };
    if first > last {
        return Err(format!("{text:?} ends before it starts"));
    }
    Ok(first..=last)
}

/// How long stopping may take in all after SIGTERM: components, draining
/// connections and the store's final flush each get a share, and what is
/// still running then is abandoned (see `run`).
const SHUTDOWN_BUDGET: Duration = Duration::from_secs(8);

/// Runs the server until a termination signal, then stops cleanly.
/// The controllers `--disable` turns off, by their names in the manager.
pub(crate) fn disabled_controllers(disable: &[String]) -> Vec<&'static str> {
    let mut off = Vec::new();
    if disable.iter().any(|d| d == "servicelb") {
        off.push("servicelb");
    }
    if disable.iter().any(|d| d == "local-storage") {
        off.push("local-path-provisioner");
    }
    off
}

/// Folds k3s's `--disable` names into skiff's own switches.
pub(crate) fn apply_disable(args: &mut ServerArgs) {
    for component in &args.disable {
        match component.as_str() {
            "coredns" => args.disable_cluster_dns = true,
            "traefik" => args.ingress.disable_ingress = true,
            "metrics-server" => tracing::warn!(
                "--disable metrics-server: the metrics API is part of skiff's API server and keeps running"
            ),
            _ => {}
        }
    }
}

pub(crate) async fn run(mut args: ServerArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    apply_disable(&mut args);
    if args.cluster_reset {
        return cluster_reset(&args);
    }
    let schedule = if args.disable_snapshots || args.snapshot_schedule_cron.trim().is_empty() {
        None
    } else {
        Some(
            skiff_common::cron::Schedule::parse_local(&args.snapshot_schedule_cron).with_context(
                || format!("--snapshot-schedule-cron {:?}", args.snapshot_schedule_cron),
            )?,
        )
    };
    if !skiff_store::snapshot::valid_name(&args.snapshot_name) {
        anyhow::bail!(
            "--snapshot-name {:?} is not a valid snapshot name",
            args.snapshot_name
        );
    }
    crate::agent::create_data_dir(&args.data_dir)?;

    let phase = Instant::now();
    let store = open_store(&args).await?;
    tracing::info!(
        elapsed_ms = phase.elapsed().as_millis() as u64,
        revision = store.current_revision(),
        backend = if args.datastore_endpoint.is_empty() {
            "embedded"
        } else {
            "etcd"
        },
        "store open"
    );

    // Servers on one datastore share their CAs and keys (bootstrap data,
    // encrypted with the token); a wrong token stops the start here.
    let token = crate::bootstrap::token(&args.data_dir, args.token.as_deref())?;
    let bootstrap = if args.datastore_endpoint.is_empty() {
        None
    } else {
        let joining = args.server.is_some();
        Some(
            crate::bootstrap::prepare(&*store, &args.data_dir, &token, joining)
                .await
                .context("reading the cluster's bootstrap data")?,
        )
    };

    let phase = Instant::now();
    // The `kubernetes` Service's address: the service range's first.
    let api_service_ip = skiff_common::cidr::parse_v4(&args.service_cidr)
        .ok()
        .and_then(|net| net.hosts().next())
        .map(std::net::IpAddr::V4);
    let certs = ClusterCerts::load_or_create_with(
        &args.data_dir,
        &tls::default_sans(api_service_ip, &args.tls_san),
        &crate::certificate::lifetimes(args.certificate_lifetime_days),
    )
    .context("preparing certificates")?;
    let tls_config = certs.server_config().context("building TLS")?;
    let mut authn = Authenticator::load_or_create_token_file(&args.data_dir.join("token.csv"))
        .context("loading the token file")?;
    let (issuers, anonymous) = authentication(&args)?;
    if !issuers.is_empty() {
        authn = authn.with_oidc(skiff_apiserver::oidc::OidcAuthenticator::start(issuers));
    }
    authn = authn.with_anonymous(anonymous);
    // k3s's DATA_DIR/token: agents join with it (`skiff agent --token`), and
    // other servers (`skiff server --server --token`): a joining server
    // keeps the cluster's secret.
    crate::bootstrap::keep_token(&args.data_dir, &token, &certs.ca_cert_pem)?;
    let server_token_secret = skiff_apiserver::bootstrap_tokens::load_or_create_server_token(
        &args.data_dir.join("token"),
        &certs.ca_cert_pem,
    )
    .context("preparing the server token")?;
    tracing::info!(elapsed_ms = phase.elapsed().as_millis() as u64, dir = %certs.dir.display(), "certificates ready");

    let phase = Instant::now();
    // Logs, exec, attach and port-forward reach node servers over TLS with
    // the API server's own client certificate.
    let kubelet_client = certs
        .kubelet_client()
        .context("loading the API server's client certificate for nodes")?;
    // Snapshots read the store under the encryption layer: Secrets stay
    // ciphertext in the file, and the key travels beside them.
    let snapshots = Arc::new(SnapshotDir::new(
        args.snapshot_dir
            .clone()
            .unwrap_or_else(|| args.data_dir.join("server").join("db").join("snapshots")),
        args.node.node_name(&args.data_dir),
        store.clone(),
        crate::snapshot::attachment_sources(&args.data_dir),
    ));
    // Requests for Service-backed APIServices reach extension API servers
    // with the front-proxy client certificate.
    let front_proxy = certs
        .front_proxy()
        .context("loading the API server's front-proxy client certificate")?;
    // The in-process components `kubectl get cs` reports on.
    let component_health = skiff_apiserver::component_status::ComponentHealth::default();
    let api_config = ApiServerConfig {
        component_health: component_health.clone(),
        snapshots: Some(snapshots.clone()),
        snapshot_retention: args.snapshot_retention,
        kubelet_client: Some(Arc::new(kubelet_client)),
        front_proxy: Some(Arc::new(front_proxy)),
        // Webhooks without a caBundle may present a certificate the cluster
        // CA signed (besides one from the system roots).
        webhook_ca_pem: Some(certs.ca_cert_pem.clone()),
        cacerts_pem: Some(certs.ca_cert_pem.clone()),
        service_cidr: args.service_cidr.clone(),
        node_port_range: args.service_node_port_range.clone(),
        shared_store: !args.datastore_endpoint.is_empty(),
        advertise_address: Some(advertise_address(&args)),
        service_account_key: Some(args.data_dir.join("tls").join("service-account.key")),
        admission_control_config_file: args.admission_control_config_file.clone(),
        encryption: EncryptionSource::from_flags(
            &args.data_dir,
            args.secrets_encryption,
            args.secrets_encryption_provider,
            args.encryption_provider_config.clone(),
        ),
        request_timeout: args.request_timeout,
        metrics_resolution: args.metric_resolution,
        max_requests_inflight: args.max_requests_inflight,
        max_mutating_requests_inflight: args.max_mutating_requests_inflight,
        default_watch_timeout: Duration::from_secs(args.min_request_timeout.max(1)),
        audit: skiff_apiserver::audit::AuditConfig {
            log_path: args.audit_log_path.clone(),
            policy_file: args.audit_policy_file.clone(),
            max_age_days: args.audit_log_maxage,
            max_backups: args.audit_log_maxbackup,
            max_size_mb: args.audit_log_maxsize,
        },
        ..ApiServerConfig::default()
    };
    let api = ApiServer::new(store.clone(), api_config)
        .await
        .context("starting the API server")?;
    if let Some(prepared) = bootstrap {
        crate::bootstrap::publish(&*store, &args.data_dir, &token, prepared)
            .await
            .context("storing the cluster's bootstrap data")?;
    }
    let authn = Arc::new(
        authn
            .with_service_account_tokens(api.service_account_tokens())
            .with_bootstrap_tokens(api.bootstrap_tokens(Some(server_token_secret))),
    );
    // TokenReviews check tokens exactly as the listener does.
    api.set_authenticator(authn.clone());
    tracing::info!(
        elapsed_ms = phase.elapsed().as_millis() as u64,
        "API server ready"
    );

    let address = SocketAddr::new(args.bind_address, args.https_listen_port);
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("listening on {address}"))?;
    let local = listener
        .local_addr()
        .context("reading the listen address")?;
    let kubeconfig = write_kubeconfig(&args, &certs, local)?;
    tracing::info!(
        address = %local,
        kubeconfig = %kubeconfig.display(),
        "listening; kubeconfig written"
    );
    let (stop_tx, stop_rx) = watch::channel(false);
    let server = tokio::spawn(skiff_apiserver::serve::serve_https(
        listener,
        tls_config,
        authn,
        api.router(),
        stopped(stop_rx.clone()),
        DRAIN,
        skiff_apiserver::serve::ConnectionTimeouts::default(),
    ));

    // Every in-process component shares one informer factory, and so one
    // watch per resource type; it lists and watches as the controller
    // manager. Everything a component writes or reads directly goes out
    // under its own identity (see `identities`).
    let identities = Identities::new(api.router());
    let factory = SharedInformerFactory::new(identities.controller_manager());
    let mut components = tokio::task::JoinSet::new();
    let mut proxy_factory = None;
    let mut netpol_factory = None;
    let mut ingress_factory = None;
    {
        let mut context =
            skiff_controllers::Context::new(identities.controller_manager(), factory.clone())
                .with_accounts(identities.controller_accounts());
        context.root_ca_pem = Some(Arc::from(certs.ca_cert_pem.as_str()));
        // Remote agents' serving certificate requests are approved and
        // signed with the cluster CA.
        context.cluster_signer = Some(Arc::new(
            skiff_controllers::certificates::kubelet_serving::ClusterSigner::from_pem(
                &certs.ca_cert_pem,
                &certs.ca_key_pem,
            )
            .context("loading the cluster CA for the certificate controller")?,
        ));
        // Node IPAM carves pod CIDRs out of --cluster-cidr; the autoscaler
        // runs at --horizontal-pod-autoscaler-sync-period.
        let mut off = vec!["node-ipam", "horizontalpodautoscaling"];
        off.extend(disabled_controllers(&args.disable));
        let mut manager = skiff_controllers::ControllerManager::with_defaults(context, &off);
        let ipam = skiff_controllers::node_ipam::IpamConfig {
            cluster_cidr: args.cluster_cidr.clone(),
            ..Default::default()
        };
        manager.register("node-ipam", "node-controller", move |ctx, stop| {
            skiff_controllers::node_ipam::run_with(ctx, stop, ipam)
        });
        let hpa = skiff_controllers::horizontal_pod_autoscaler::HpaConfig {
            sync_period: args.horizontal_pod_autoscaler_sync_period,
            ..Default::default()
        };
        manager.register(
            "horizontalpodautoscaling",
            "horizontal-pod-autoscaler",
            move |ctx, stop| skiff_controllers::horizontal_pod_autoscaler::run_with(ctx, stop, hpa),
        );
        let leadership = elect(
            &args,
            &mut components,
            identities.controller_manager(),
            "kube-controller-manager",
            &stop_rx,
        )?;
        let stop = stop_rx.clone();
        let running = component_health.running("controller-manager");
        components.spawn(while_leading(leadership, stop_rx.clone(), async move {
            let _running = running;
            tracing::info!(controllers = ?manager.names(), "controller manager starting");
            manager.run(stop).await;
        }));
    }
    {
        let factory = factory.clone();
        let client = identities.scheduler();
        let stop = stopped(stop_rx.clone());
        let config = skiff_scheduler::SchedulerConfig::default();
        let leadership = elect(
            &args,
            &mut components,
            identities.scheduler(),
            "kube-scheduler",
            &stop_rx,
        )?;
        let running = component_health.running("scheduler");
        components.spawn(while_leading(leadership, stop_rx.clone(), async move {
            let _running = running;
            if let Err(error) =
                skiff_scheduler::informers::run(client, &factory, &config, stop).await
            {
                tracing::error!(%error, "scheduler stopped");
            }
        }));
    }
    if !args.disable_cluster_dns {
        let config = cluster_dns_config(&args);
        let factory = factory.clone();
        let client = identities.dns();
        let stop = stopped(stop_rx.clone());
        components.spawn(async move {
            // A DNS that cannot start (port 53 taken) leaves the rest running.
            if let Err(error) = skiff_dns::run(client, &factory, config, stop).await {
                tracing::error!(%error, "cluster DNS not running");
            }
        });
    }
    if let Some(config) = args.ingress.config(args.node.node_ip()) {
        // Informers of its own, as system:skiff:ingress: it reads Secrets,
        // which the controller manager's shared informers need not hold.
        let own = SharedInformerFactory::new(identities.ingress());
        crate::ingress::spawn(&mut components, &own, config, stop_rx.clone());
        ingress_factory = Some(own);
    }
    {
        // k3s's auto-deploying manifests directory.
        let dir = args.data_dir.join("server").join("manifests");
        let client = identities.deploy();
        let stop = stopped(stop_rx.clone());
        components.spawn(skiff_controllers::deploy::run(client, dir, stop));
    }
    if args.simulated_nodes > 0 {
        let config = SimulatedConfig::new(args.simulated_nodes);
        let factory = factory.clone();
        let client = identities.simulated_nodes();
        let stop = stopped(stop_rx.clone());
        components.spawn(async move {
            let clients = simulated::NodeClients::Shared(client);
            if let Err(error) = simulated::run(clients, &factory, config, stop).await {
                tracing::error!(%error, "simulated nodes stopped");
            }
        });
    }
    if !args.disable_agent {
        let mut config = args.node.agent_config(&args.data_dir)?;
        config.server_tls = Some(in_process_node_tls(&certs)?);
        if let Some(proxy) = args.node.proxy_config(&config.node_name) {
            // The proxy reads Services, EndpointSlices and Nodes through
            // informers of its own, as system:kube-proxy (upstream's
            // system:node-proxier), not through the controller manager's.
            let own = SharedInformerFactory::new(identities.kube_proxy());
            crate::agent::spawn_proxy(&mut components, &own, proxy, stop_rx.clone());
            proxy_factory = Some(own);
        }
        // The network policy controller: informers of its own too, as
        // system:skiff:network-policy (reads pods, namespaces, policies).
        let own = SharedInformerFactory::new(identities.network_policy());
        crate::agent::spawn_netpol(
            &mut components,
            &own,
            &args.node,
            &config.node_name,
            stop_rx.clone(),
        );
        netpol_factory = Some(own);
        let client = identities.node_agent(&config.node_name);
        let node_name = config.node_name.clone();
        crate::agent::spawn_in_server(&mut components, &factory, client, config, stop_rx.clone());
        let server = identities.server();
        let stop = stop_rx.clone();
        components.spawn(async move {
            skiff_node::agent::node::registration::mark_control_plane(server, &node_name, stop)
                .await;
        });
    }
    if let Some(schedule) = schedule {
        tracing::info!(cron = %args.snapshot_schedule_cron, dir = %snapshots.path().display(), retention = args.snapshot_retention, "scheduled snapshots on");
        let name = args.snapshot_name.clone();
        let retention = args.snapshot_retention;
        let stop = stopped(stop_rx.clone());
        components.spawn(async move {
            snapshots
                .run_schedule(
                    || schedule.wait_from(jiff::Timestamp::now()),
                    name,
                    retention,
                    stop,
                )
                .await;
        });
    }
    tracing::info!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        "skiff server started"
    );
    if !args.keep_startup_code {
        components.spawn(crate::code_pages::release_after(
            STARTUP_SETTLE,
            stopped(stop_rx.clone()),
        ));
    }

    crate::termination_signal().await;
    // Stop accepting and stop the components; then end watches so draining
    // connections can close, and flush the store last. Each step is bounded
    // so that the whole stop fits in SHUTDOWN_BUDGET even when a component
    // or the disk is stuck (a full disk, a hung flush).
    tracing::info!("stopping");
    let stopping = Instant::now();
    let _ = stop_tx.send(true);
    factory.shutdown();
    for own in proxy_factory
        .iter()
        .chain(netpol_factory.iter())
        .chain(ingress_factory.iter())
    {
        own.shutdown();
    }
    let components_done = async { while components.join_next().await.is_some() {} };
    if tokio::time::timeout(COMPONENTS_STOP, components_done)
        .await
        .is_err()
    {
        tracing::warn!("components still stopping after {COMPONENTS_STOP:?}; leaving them");
        components.abort_all();
    }
    api.shutdown();
    // The listener drains for at most DRAIN itself.
    server.await.context("HTTPS server task")?;
    api.close_audit_log().await;
    let left = SHUTDOWN_BUDGET
        .saturating_sub(stopping.elapsed())
        .max(Duration::from_secs(1));
    match tokio::time::timeout(left, store.close()).await {
        Ok(closed) => closed.context("flushing the store")?,
        Err(_) => {
            // Every acknowledged write is already durable (a write is
            // answered only after its flush); what a stuck final flush
            // holds is at most background work (compaction progress, which
            // resumes at the next start). Waiting longer would only make
            // the supervisor's SIGKILL do the same.
            tracing::error!(
                "the store's final flush did not finish within {left:?}; exiting without it"
            );
            std::process::exit(1);
        }
    }
    tracing::info!("stopped");
    Ok(())
}

/// `--cluster-reset --cluster-reset-restore-path FILE`, as k3s's: restores
/// the snapshot into the data dir, moving the store there aside, and exits.
fn cluster_reset(args: &ServerArgs) -> anyhow::Result<()> {
    if !args.datastore_endpoint.is_empty() {
        anyhow::bail!(
            "--cluster-reset restores the embedded store; with --datastore-endpoint restore the etcd cluster with etcd's own tools"
        );
    }
    let Some(file) = &args.cluster_reset_restore_path else {
        anyhow::bail!(
            "--cluster-reset needs --cluster-reset-restore-path: the embedded store has no cluster membership to reset"
        );
    };
    let restored = crate::snapshot::restore(&args.data_dir, file, true)?;
    tracing::info!("{}", restored.summary(&args.data_dir));
    tracing::info!("cluster reset done; start again without --cluster-reset");
    Ok(())
}

/// The store: etcd with `--datastore-endpoint`, else the embedded one in
/// DATA_DIR/db. Both compact by the same policy.
async fn open_store(args: &ServerArgs) -> anyhow::Result<Arc<dyn Store>> {
    let compaction = CompactionPolicy {
        interval: Duration::from_secs(args.store_compaction_interval.max(1)),
        min_age: Duration::from_secs(args.store_history_min_age),
        min_revisions: args.store_history_min_revisions,
    };
    if args.datastore_endpoint.is_empty() {
        let store_dir = args.data_dir.join("db");
        let store = SledStore::open(
            SledConfig::new(&store_dir)
                .cache_capacity(args.store_cache_mb << 20)
                .compaction(Some(compaction))
                .space_reserve(
                    (args.store_reserve_mb > 0)
                        .then(|| SpaceReserve::new(args.store_reserve_mb << 20)),
                ),
        )
        .with_context(|| format!("opening the store in {}", store_dir.display()))?;
        return Ok(Arc::new(store));
    }
    if args.store_cache_mb != DEFAULT_STORE_CACHE_MB
        || args.store_reserve_mb != DEFAULT_STORE_RESERVE_MB
    {
        tracing::warn!(
            "--store-cache-mb and --store-reserve-mb apply to the embedded store only; ignored with --datastore-endpoint"
        );
    }
    let endpoints = args.datastore_endpoint.join(",");
    let config = EtcdConfig::new(args.datastore_endpoint.iter().cloned())
        .tls_files(
            args.datastore_cafile.clone(),
            args.datastore_certfile.clone(),
            args.datastore_keyfile.clone(),
        )
        .connect_timeout(Duration::from_secs(args.datastore_connect_timeout.max(1)))
        .compaction(Some(compaction));
    tracing::info!(%endpoints, "connecting to the etcd datastore");
    let store = EtcdStore::connect(config)
        .await
        .with_context(|| format!("connecting to the datastore at {endpoints}"))?;
    Ok(Arc::new(store))
}

/// Leadership of the Lease `kube-system/<lease>`: with the embedded store
/// one server is the cluster, so it leads at once; on a shared datastore
/// (several servers) an elector competes for the Lease as `client`, as
/// upstream's kube-controller-manager and kube-scheduler do.
fn elect(
    args: &ServerArgs,
    components: &mut tokio::task::JoinSet<()>,
    client: kube::Client,
    lease: &str,
    stop: &watch::Receiver<bool>,
) -> anyhow::Result<Leadership> {
    if args.datastore_endpoint.is_empty() {
        return Ok(Leadership::always());
    }
    let identity = ElectionConfig::unique_identity();
    tracing::info!(%lease, %identity, "competing for the lease");
    let (elector, leadership) =
        LeaderElector::new(client, "kube-system", lease, ElectionConfig::new(identity))
            .with_context(|| format!("electing the {lease} leader"))?;
    components.spawn(elector.run(stopped(stop.clone())));
    Ok(leadership)
}

/// Runs `component` once this server leads. Losing the lease while the
/// server is not stopping ends the process, as upstream's components exit
/// then: another server has taken over, and a component that went on would
/// act beside it (the supervisor starts this server again, as a follower).
async fn while_leading(
    leadership: Leadership,
    stop: watch::Receiver<bool>,
    component: impl std::future::Future<Output = ()>,
) {
    tokio::select! {
        acquired = leadership.acquired() => if !acquired { return },
        _ = stopped(stop.clone()) => return,
    }
    tokio::select! {
        _ = component => {}
        _ = leadership.lost() => {
            if !*stop.borrow() {
                tracing::error!("leader lease lost; exiting so that only the new leader acts");
                std::process::exit(1);
            }
        }
    }
}

/// How long open connections may take to finish after SIGTERM.
const DRAIN: Duration = Duration::from_secs(3);

/// How long the in-process components may take to stop after SIGTERM.
const COMPONENTS_STOP: Duration = Duration::from_secs(3);

/// The users the in-process components act as, each bound by the bootstrap
/// RBAC policy to no more than its job needs, as upstream names them.
struct Identities {
    router: axum::Router,
}

impl Identities {
    fn new(router: axum::Router) -> Self {
        Self { router }
    }

    /// A client acting as `user` on the server's own router.
    fn client(&self, user: UserInfo) -> kube::Client {
        skiff_apiserver::inprocess::client(self.router.clone(), user)
    }

    fn user(&self, name: &str, groups: &[&str]) -> kube::Client {
        self.client(UserInfo::new(name, groups.iter().map(|g| g.to_string())))
    }

    /// The controller manager itself: the shared informers' lists and
    /// watches, and creating the controllers' service accounts.
    fn controller_manager(&self) -> kube::Client {
        self.user("system:kube-controller-manager", &[])
    }

    /// Each controller as `system:serviceaccount:kube-system:<account>`.
    fn controller_accounts(&self) -> skiff_controllers::ClientForAccount {
        let router = self.router.clone();
        Arc::new(move |account: &str| {
            skiff_apiserver::inprocess::client(
                router.clone(),
                UserInfo::service_account(skiff_controllers::ACCOUNTS_NAMESPACE, account),
            )
        })
    }

    fn scheduler(&self) -> kube::Client {
        self.user("system:kube-scheduler", &[])
    }

    /// The cluster DNS, as upstream's kube-dns service account.
    fn dns(&self) -> kube::Client {
        self.client(UserInfo::service_account("kube-system", "kube-dns"))
    }

    /// The service proxy, as upstream's kube-proxy user.
    fn kube_proxy(&self) -> kube::Client {
        self.user("system:kube-proxy", &[])
    }

    /// The network policy controller.
    fn network_policy(&self) -> kube::Client {
        self.user("system:skiff:network-policy", &[])
    }

    /// The built-in ingress controller.
    fn ingress(&self) -> kube::Client {
        self.user("system:skiff:ingress", &[])
    }

    /// The server itself, for what it does to its own node that the node
    /// may not do (the control-plane role labels).
    fn server(&self) -> kube::Client {
        self.user("system:skiff:server", &[])
    }

    /// The applier of `DATA_DIR/server/manifests` (bound to cluster-admin:
    /// the files may hold any kind; see the bootstrap policy).
    fn deploy(&self) -> kube::Client {
        self.user("system:skiff:deploy", &[])
    }

    /// The kwok-style hollow nodes of `--simulated-nodes` (a benchmarking
    /// mode): one user for all of them, with a role of its own.
    fn simulated_nodes(&self) -> kube::Client {
        self.user("system:skiff:simulated-nodes", &[])
    }

    /// The node agent, as `system:node:<name>` in `system:nodes`.
    fn node_agent(&self, node: &str) -> kube::Client {
        self.user(&format!("system:node:{node}"), &["system:nodes"])
    }
}

/// The in-process agent's node server TLS: its serving certificate is
/// signed on the spot with the cluster CA, under the same rules the
/// `kubernetes.io/kubelet-serving` signer applies to remote nodes.
fn in_process_node_tls(certs: &ClusterCerts) -> anyhow::Result<skiff_node::agent::NodeServerTls> {
    use skiff_controllers::certificates::kubelet_serving::ClusterSigner;
    use skiff_node::agent::identity::serving_cert::{LocalSigner, ServingCertRequest};
    let signer = ClusterSigner::from_pem(&certs.ca_cert_pem, &certs.ca_key_pem)
        .context("loading the cluster CA to sign the node's serving certificate")?;
    let sign = move |request: &ServingCertRequest| {
        let (cert, issued) = signer
            .sign_kubelet_serving(&request.csr_pem)
            .map_err(|e| e.to_string())?;
        if issued.node_name != request.node_name {
            return Err(format!(
                "the request is for node {:?}, not {:?}",
                issued.node_name, request.node_name
            ));
        }
        Ok(cert)
    };
    Ok(skiff_node::agent::NodeServerTls {
        ca_pem: certs.ca_cert_pem.clone(),
        signer: Arc::new(LocalSigner(sign)),
    })
}

/// Where the `kubernetes` Service's endpoints point: the bind address, or
/// the node's address when binding every address.
fn advertise_address(args: &ServerArgs) -> SocketAddr {
    let ip = if args.bind_address.is_unspecified() {
        args.node.node_ip()
    } else {
        args.bind_address
    };
    SocketAddr::new(ip, args.https_listen_port)
}

/// The cluster DNS: the node's resolv.conf nameservers as upstreams (never
/// itself), published at the node's address.
fn cluster_dns_config(args: &ServerArgs) -> skiff_dns::DnsConfig {
    let flags = &args.node;
    let listen = args.cluster_dns_listen;
    let node_ip = flags.node_ip();
    let mut config = skiff_dns::DnsConfig::new(&flags.cluster_domain, listen);
    if listen.ip().is_unspecified() {
        // Answers must leave from the address the service proxy DNATs to,
        // or conntrack cannot map them back to the kube-dns ClusterIP; a
        // socket on 0.0.0.0 would answer pods from the bridge address.
        config.listen = vec![SocketAddr::new(node_ip, listen.port())];
        if !node_ip.is_loopback() {
            config.listen.push(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                listen.port(),
            ));
        }
    }
    let metrics = args.cluster_dns_metrics_listen;
    config.metrics_listen = if metrics.ip().is_unspecified() {
        // Beside the DNS: the node address the slice publishes (and
        // loopback for the host's own scraper).
        let mut on = vec![SocketAddr::new(node_ip, metrics.port())];
        if !node_ip.is_loopback() {
            on.push(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                metrics.port(),
            ));
        }
        on
    } else {
        vec![metrics]
    };
    let resolv = std::fs::read_to_string(&flags.resolv_conf).unwrap_or_default();
    config.upstreams = skiff_dns::forward::nameservers(&resolv)
        .into_iter()
        .filter(|u| !flags.cluster_dns.contains(&u.ip()))
        .filter(|u| {
            let loops = u.port() == listen.port()
                && (listen.ip().is_unspecified() || listen.ip() == u.ip() || u.ip().is_loopback());
            !loops
        })
        .collect();
    config.publish = skiff_dns::PublishConfig {
        advertise: Some(node_ip),
        node_name: flags.node_name.clone(),
        // The slice goes with this server's identity Lease.
        owner_lease: Some(skiff_apiserver::peer_endpoints::lease_name(
            advertise_address(args),
        )),
        service_ip: flags.cluster_dns.first().copied(),
    };
    config
}

/// Resolves once the stop flag is raised.
async fn stopped(mut flag: watch::Receiver<bool>) {
    let _ = flag.wait_for(|stop| *stop).await;
}

/// Writes the admin kubeconfig pointing at the listen address: to
/// DATA_DIR/kubeconfig.yaml (mode 0600, or --write-kubeconfig-mode when it
/// is the user's copy) and to --write-kubeconfig's file; returns the
/// user's copy.
fn write_kubeconfig(
    args: &ServerArgs,
    certs: &ClusterCerts,
    local: SocketAddr,
) -> anyhow::Result<PathBuf> {
    let host = if local.ip().is_unspecified() {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        local.ip()
    };
    let url = format!("https://{}", SocketAddr::new(host, local.port()));
    let kubeconfig = certs.admin_kubeconfig(&url);
    let in_data_dir = args.data_dir.join("kubeconfig.yaml");
    let mode = args.write_kubeconfig_mode.unwrap_or(0o600);
    match &args.write_kubeconfig {
        Some(path) => {
            skiff_common::files::write_private(&in_data_dir, kubeconfig.as_bytes())?;
            skiff_common::files::write_with_mode(path, kubeconfig.as_bytes(), mode)?;
            Ok(path.clone())
        }
        None => {
            skiff_common::files::write_with_mode(&in_data_dir, kubeconfig.as_bytes(), mode)?;
            Ok(in_data_dir)
        }
    }
}

/// The OpenID Connect issuers of `--authentication-config`, or of the
/// older `--oidc-*` flags (never both, as upstream refuses), and which
/// requests without credentials go on as `system:anonymous`: the file's
/// `anonymous` section or `--anonymous-auth` (again never both).
fn authentication(
    args: &ServerArgs,
) -> anyhow::Result<(
    Vec<skiff_apiserver::oidc::IssuerConfig>,
    skiff_apiserver::authn::AnonymousAuth,
)> {
    use skiff_apiserver::authn::AnonymousAuth;
    use skiff_apiserver::oidc::{OidcFlags, config};
    let flag = match args.anonymous_auth {
        Some(false) => AnonymousAuth::Disabled,
        Some(true) | None => AnonymousAuth::Enabled,
    };
    let flags_given = args.oidc_issuer_url.is_some() || args.oidc_client_id.is_some();
    match (&args.authentication_config, flags_given) {
        (Some(_), true) => {
            anyhow::bail!("--authentication-config and the --oidc-* flags are mutually exclusive")
        }
        (Some(path), false) => {
            let file = config::load(path)?;
            let anonymous = match (file.anonymous, args.anonymous_auth) {
                (Some(_), Some(_)) => anyhow::bail!(
                    "anonymous: Forbidden: --anonymous-auth flag cannot be set when anonymous \
                     field is configured in authentication configuration file"
                ),
                (Some(anonymous), None) => anonymous,
                (None, _) => flag,
            };
            Ok((file.issuers, anonymous))
        }
        (None, true) => Ok((
            vec![config::from_flags(OidcFlags {
                issuer_url: args.oidc_issuer_url.clone().unwrap_or_default(),
                client_id: args.oidc_client_id.clone().unwrap_or_default(),
                username_claim: args.oidc_username_claim.clone(),
                username_prefix: args.oidc_username_prefix.clone(),
                groups_claim: args.oidc_groups_claim.clone(),
                groups_prefix: args.oidc_groups_prefix.clone(),
                ca_file: args.oidc_ca_file.clone(),
                required_claims: args.oidc_required_claim.clone(),
                signing_algs: args.oidc_signing_algs.clone(),
            })?],
            flag,
        )),
        (None, false) => Ok((Vec::new(), flag)),
    }
}
