//! The API server object: registry, watch caches and the axum router over a
//! store. Whoever owns the server also owns shutdown: call
//! [`ApiServer::shutdown`] (ends every watch and stops the caches), stop
//! serving, then [`skiff_store::Store::close`] to flush the store.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::StatusCode;
use serde_json::{Value, json};
use skiff_store::Store;
use tokio::sync::watch;

use crate::admission::WriteInfo;
use crate::kinds::{self, GroupResource};
use crate::registry::{LiveRegistry, ResourceInfo};
use crate::service_alloc::{AllocConfigError, ServiceAllocator};
use crate::status::{ApiError, json_response};
use crate::watch_cache::{CacheLimits, FeedError, WatchCache};

/// Tunables of the API server.
#[derive(Debug, Clone)]
pub struct ApiServerConfig {
    /// Events each watch cache keeps for watches from an older resourceVersion, at most.
    pub watch_history: usize,
    /// How long an event stays in a watch cache's history (older ones are
    /// served from the store); see [`CacheLimits::history_max_age`].
    pub watch_history_max_age: Duration,
    /// How long a paginated list's snapshot stays in memory for `continue`;
    /// later pages read the store's history at the same revision until
    /// compaction drops it.
    pub continue_ttl: Duration,
    /// How often watchers that asked for bookmarks get one.
    pub bookmark_interval: Duration,
    /// Watch duration when the client sets no `timeoutSeconds`: each watch
    /// runs a random time between this and twice this (upstream's
    /// `--min-request-timeout`, 1800 s).
    pub default_watch_timeout: Duration,
    /// Deadline of every request that is not long-running (upstream's
    /// `--request-timeout`, 60 s); see [`crate::request_timeout`].
    pub request_timeout: Duration,
    /// Seats of API Priority and Fairness: the sum of this and
    /// [`Self::max_mutating_requests_inflight`] is shared among the limited
    /// priority levels (upstream's `--max-requests-inflight`, 400); when
    /// both are 0 nothing is limited.
    pub max_requests_inflight: usize,
    /// Upstream's `--max-mutating-requests-inflight` (200); see
    /// [`Self::max_requests_inflight`].
    pub max_mutating_requests_inflight: usize,
    /// Live events buffered per watcher; one that falls further behind
    /// resumes from the cache's history instead of slowing the others.
    pub watch_fanout_buffer: usize,
    /// Range Service cluster IPs come from (IPv4).
    pub service_cidr: String,
    /// Range NodePort/LoadBalancer Services' node ports come from.
    pub node_port_range: std::ops::RangeInclusive<u16>,
    /// Other API servers write the same store (an etcd datastore shared by
    /// several servers): quota charges are then also made durable
    /// (ResourceQuota `status.used`, compare-and-swap), as upstream does.
    pub shared_store: bool,
    /// How long events live after their last activity (upstream: 1 h).
    pub event_ttl: Duration,
    /// Where clients reach this server; when set, the `kubernetes` Service in
    /// `default` (first service IP, port 443) and its endpoints point here.
    pub advertise_address: Option<std::net::SocketAddr>,
    /// The in-process components `componentstatuses` reports on, as the
    /// binary registers them.
    pub component_health: crate::component_status::ComponentHealth,
    /// How the API server reaches node servers for `pods/log`,
    /// `pods/exec`, `pods/attach` and `pods/portforward` (TLS both ways);
    /// without it those requests fail.
    pub kubelet_client: Option<Arc<crate::kubelet_client::KubeletClientTls>>,
    /// How the aggregator reaches extension API servers (its front-proxy
    /// client certificate); without it requests for Service-backed
    /// APIServices fail with 503.
    pub front_proxy: Option<Arc<crate::aggregator::FrontProxyTls>>,
    /// Where the service-account signing key is kept (created at first
    /// start); `None` signs with a key that lives as long as the process.
    pub service_account_key: Option<std::path::PathBuf>,
    /// Upstream's `AdmissionConfiguration` file (`--admission-control-config-file`):
    /// the admission plugins' settings, such as Pod Security's defaults and
    /// exemptions. `None` runs every plugin with its defaults.
    pub admission_control_config_file: Option<std::path::PathBuf>,
    /// Encryption at rest (`--secrets-encryption` or
    /// `--encryption-provider-config`): the configured resources reach the
    /// store only as ciphertext. `None` stores every value as it is.
    pub encryption: Option<crate::encryption::EncryptionSource>,
    /// The audit log (`--audit-log-path`, `--audit-policy-file`, rotation);
    /// the default keeps none.
    pub audit: crate::audit::AuditConfig,
    /// The cluster CA (PEM), which admission webhooks without a `caBundle`
    /// may chain to besides the system roots.
    pub webhook_ca_pem: Option<String>,
    /// The cluster CA bundle (PEM) served as it is at `/cacerts` (k3s's
    /// path), which joining agents check against their token's hash before
    /// trusting it; `None`: 404.
    pub cacerts_pem: Option<String>,
    /// The snapshot directory `skiff snapshot` works on through
    /// [`crate::snapshots`]; `None` (`--disable-snapshots`) refuses them.
    pub snapshots: Option<Arc<skiff_store::snapshot::SnapshotDir>>,
    /// Snapshots of one name kept by a prune that names no retention
    /// (`--snapshot-retention`).
    pub snapshot_retention: usize,
    /// How often the nodes' resource metrics are scraped for
    /// `metrics.k8s.io` (metrics-server's `--metric-resolution`, 15 s);
    /// nothing is scraped without [`Self::kubelet_client`].
    pub metrics_resolution: Duration,
}

impl ApiServerConfig {
    /// The sizes every watch cache of this server gets.
    pub(crate) fn cache_limits(&self) -> CacheLimits {
        CacheLimits {
            history: self.watch_history,
            history_max_age: self.watch_history_max_age,
            fanout_buffer: self.watch_fanout_buffer,
            snapshot_ttl: self.continue_ttl,
        }
    }
}

impl Default for ApiServerConfig {
    fn default() -> Self {
        Self {
            watch_history: 10_000,
            watch_history_max_age: Duration::from_secs(75),
            continue_ttl: Duration::from_secs(300),
            bookmark_interval: Duration::from_secs(60),
            default_watch_timeout: Duration::from_secs(1800),
            request_timeout: crate::request_timeout::DEFAULT_REQUEST_TIMEOUT,
            max_requests_inflight: 400,
            max_mutating_requests_inflight: 200,
            watch_fanout_buffer: 1024,
            service_cidr: "10.43.0.0/16".to_string(),
            node_port_range: 30000..=32767,
            shared_store: false,
            advertise_address: None,
            component_health: Default::default(),
            kubelet_client: None,
            front_proxy: None,
            event_ttl: Duration::from_secs(3600),
            service_account_key: None,
            admission_control_config_file: None,
            encryption: None,
            audit: Default::default(),
            webhook_ca_pem: None,
            cacerts_pem: None,
            snapshots: None,
            snapshot_retention: 5,
            metrics_resolution: crate::resource_metrics::DEFAULT_RESOLUTION,
        }
    }
}

/// Failures while starting the API server.
#[derive(Debug, thiserror::Error)]
pub enum ApiServerError {
    /// The watch caches could not be filled.
    #[error(transparent)]
    Cache(#[from] FeedError),
    /// The service CIDR or node-port range is unusable.
    #[error(transparent)]
    Config(#[from] AllocConfigError),
    /// The service-account token signer could not be set up.
    #[error(transparent)]
    Tokens(#[from] crate::tokens::SignerError),
    /// The admission configuration is unusable.
    #[error(transparent)]
    Admission(#[from] crate::admission_plugins::config::AdmissionConfigError),
    /// Encryption at rest could not be set up.
    #[error(transparent)]
    Encryption(#[from] crate::encryption::EncryptionError),
    /// The audit log could not be set up.
    #[error(transparent)]
    Audit(#[from] crate::audit::AuditError),
    /// A resource authorization reads has no watch cache.
    #[error("no watch cache for {0}, which authorization reads")]
    MissingCache(String),
    /// The default RBAC policy could not be written.
    #[error("the default RBAC policy: {0}")]
    Policy(#[from] crate::authz::bootstrap::BootstrapError),
    /// The default priority and fairness objects could not be written.
    #[error("the priority and fairness configuration: {0}")]
    FlowControl(#[source] crate::authz::bootstrap::BootstrapError),
    /// A system object (a system namespace or priority class) could not be created.
    #[error("creating the system object {name} failed: {source}")]
    Bootstrap {
        /// The object's name.
        name: String,
        /// Why it could not be created.
        #[source]
        source: ApiError,
    },
}

/// Namespaces every cluster starts with.
pub const SYSTEM_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

/// Priority classes every cluster has (created at start-up).
pub(crate) const SYSTEM_PRIORITY_CLASSES: &[(&str, i64, &str)] = &[
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
];

/// How long a write waits for its watch cache to catch up, so the writer's
/// next list sees its own write.
pub(crate) const CACHE_CATCH_UP: Duration = Duration::from_secs(5);

/// Sleeps `period` unless the server shuts down first; `false` once it
/// has: the pause of the API server's own polling loops.
pub(crate) async fn paused(shutdown: &mut watch::Receiver<bool>, period: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(period) => true,
        _ = shutdown.wait_for(|s| *s) => false,
    }
}

/// How often [`follow_caches`] compares the caches' revisions.
const FOLLOW_POLL: Duration = Duration::from_millis(500);

/// Runs `sync` whenever the revisions of the `followed` (v1) resources'
/// caches it reads move (and every `resync`, when given) until the server
/// shuts down; a round that fails is tried again at the next poll.
/// `synced`: the server ran the first round before serving. The loop of the
/// server's own status writers (APIService availability, FlowSchema
/// conditions); their writes move the revisions too, and the round after
/// finds nothing to do.
pub(crate) async fn follow_caches<S, F>(
    inner: &Inner,
    synced: bool,
    resync: Option<Duration>,
    followed: &[GroupResource<'_>],
    mut sync: S,
) where
    S: FnMut() -> F,
    F: std::future::Future<Output = bool>,
{
    let revisions = |inner: &Inner| -> Vec<u64> {
        followed
            .iter()
            .filter_map(|r| inner.registry.get(r.group, "v1", r.resource))
            .filter_map(|info| inner.cache(&info).ok())
            .map(|cache| cache.revision())
            .collect()
    };
    let mut shutdown = inner.shutdown.subscribe();
    let mut seen = synced.then(|| revisions(inner));
    let mut last_full = tokio::time::Instant::now();
    loop {
        let now = revisions(inner);
        let due = resync.is_some_and(|every| last_full.elapsed() >= every);
        if seen.as_ref() != Some(&now) || due {
            if sync().await {
                seen = Some(now);
            }
            last_full = tokio::time::Instant::now();
        }
        if !paused(&mut shutdown, FOLLOW_POLL).await {
            return;
        }
    }
}

pub(crate) struct Inner {
    pub store: Arc<dyn Store>,
    pub registry: LiveRegistry,
    pub caches: HashMap<String, Arc<WatchCache>>,
    /// Watch caches of custom resources, added as CRDs are established.
    pub custom_caches: parking_lot::RwLock<HashMap<String, Arc<WatchCache>>>,
    pub config: ApiServerConfig,
    pub shutdown: watch::Sender<bool>,
    pub services: ServiceAllocator,
    pub key_locks: crate::key_locks::KeyLocks,
    /// Quota charges of admitted writes the caches may not show yet, and
    /// the per-namespace lock a quota check runs under
    /// (`admission_plugins::resource_quota`).
    pub quota_ledger: crate::admission_plugins::resource_quota::ledger::QuotaLedger,
    pub openapi: crate::openapi::OpenApiCache,
    pub tokens: crate::tokens::TokenSigner,
    /// Decides every request before a handler sees it.
    pub authorizer: crate::authz::Chain,
    /// The authenticator of network requests, for TokenReview (set by
    /// whoever builds it: it needs this server's service-account tokens).
    pub authenticator: parking_lot::RwLock<Option<Arc<crate::authn::Authenticator>>>,
    /// The admission plugins' settings.
    pub admission: crate::admission_plugins::PluginSettings,
    /// The RBAC link of `authorizer`, also the rule resolver of the
    /// escalation checks.
    pub rbac: Arc<crate::authz::rbac::Rbac>,
    /// Encryption at rest, when configured; `store` is this same store then.
    pub encryption: Option<crate::encryption::EncryptedStore>,
    /// The audit policy and log, when one is kept.
    pub audit: Option<crate::audit::Auditor>,
    /// The admission webhooks the stored configurations declare.
    pub webhooks: crate::admission_plugins::webhook::WebhookSource,
    /// Whom webhooks without a `caBundle` are trusted by.
    pub webhook_trust: crate::admission_plugins::webhook::WebhookTrust,
    /// API Priority and Fairness; `None` when no seats are configured.
    pub flow_control: Option<crate::flowcontrol::config::FlowControl>,
    /// The nodes' last scraped resource figures (`metrics.k8s.io`).
    pub resource_metrics: crate::resource_metrics::MetricsStore,
    /// What each available Service-backed APIService serves, by name, for
    /// discovery.
    pub aggregated: parking_lot::RwLock<
        std::collections::BTreeMap<String, crate::aggregator::discovery::Remote>,
    >,
}

impl Inner {
    /// The watch cache behind a resource (shared by its versions).
    pub(crate) fn cache(&self, info: &ResourceInfo) -> Result<Arc<WatchCache>, ApiError> {
        if let Some(cache) = self.caches.get(&info.storage_prefix) {
            return Ok(cache.clone());
        }
        self.custom_caches
            .read()
            .get(&info.storage_prefix)
            .cloned()
            .ok_or_else(|| {
                ApiError::Internal(format!("no watch cache for {}", info.storage_prefix))
            })
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// The objects of a resource (built-in or custom) as its watch cache
    /// has them now (none when it is not served).
    pub(crate) fn cached_objects(&self, group: &str, version: &str, resource: &str) -> Vec<Value> {
        let Some(info) = self.registry.get(group, version, resource) else {
            return Vec::new();
        };
        match self.cache(&info) {
            Ok(cache) => cache
                .snapshot()
                .objects
                .values()
                .map(|v| v.to_value())
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    /// The network authenticator, once set.
    pub(crate) fn authenticator(&self) -> Option<Arc<crate::authn::Authenticator>> {
        self.authenticator.read().clone()
    }
}

/// The Kubernetes API over one store.
#[derive(Clone)]
pub struct ApiServer {
    inner: Arc<Inner>,
}

impl ApiServer {
    /// The shared state, for unit tests that drive the handlers' helpers.
    #[cfg(test)]
    pub(crate) fn inner(&self) -> &Inner {
        &self.inner
    }

    /// Fills a watch cache per resource from the store, starts following it,
    /// and makes sure the system namespaces exist.
    pub async fn new(
        store: Arc<dyn Store>,
        config: ApiServerConfig,
    ) -> Result<Self, ApiServerError> {
        let admission = crate::admission_plugins::PluginSettings::load(
            config.admission_control_config_file.as_deref(),
        )?;
        let audit = crate::audit::Auditor::from_config(&config.audit)?;
        let registry = LiveRegistry::new();
        let services = ServiceAllocator::new(&config.service_cidr, config.node_port_range.clone())?;
        let tokens = match &config.service_account_key {
            Some(path) => crate::tokens::TokenSigner::load_or_create(path)?,
            None => crate::tokens::TokenSigner::ephemeral()?,
        };
        // Everything below, watch caches included, reads and writes through
        // the encrypting store, so only it sees ciphertext.
        let encryption = match config.encryption.clone() {
            Some(source) => Some(crate::encryption::EncryptedStore::open(
                store.clone(),
                source,
            )?),
            None => None,
        };
        let store: Arc<dyn Store> = match &encryption {
            Some(encrypted) => Arc::new(encrypted.clone()),
            None => store,
        };
        let (shutdown, _) = watch::channel(false);
        let mut caches = HashMap::new();
        let limits = config.cache_limits();
        for prefix in registry.current().storage_prefixes() {
            let form = registry.current().cache_form(&prefix);
            let cache = WatchCache::with_form(prefix.clone(), &limits, form);
            cache.load(store.as_ref()).await?;
            caches.insert(prefix, cache);
        }
        for cache in caches.values() {
            tokio::spawn(cache.clone().follow(store.clone(), shutdown.subscribe()));
        }
        let node_authorizer =
            node_authorizer(&registry, &caches).map_err(ApiServerError::MissingCache)?;
        let rbac = Arc::new(crate::authz::rbac::Rbac::new(
            rbac_sources(&registry, &caches).map_err(ApiServerError::MissingCache)?,
        ));
        let webhook_trust =
            crate::admission_plugins::webhook::WebhookTrust::new(config.webhook_ca_pem.as_deref());
        let flow_control =
            flow_control(&registry, &caches, &config).map_err(ApiServerError::MissingCache)?;
        let inner = Arc::new(Inner {
            store,
            registry,
            caches,
            custom_caches: Default::default(),
            config,
            shutdown,
            services,
            key_locks: Default::default(),
            quota_ledger: Default::default(),
            openapi: Default::default(),
            tokens,
            authorizer: crate::authz::Chain::new(vec![
                Arc::new(crate::authz::Masters),
                Arc::new(node_authorizer),
                rbac.clone(),
            ]),
            authenticator: Default::default(),
            admission,
            rbac,
            encryption,
            audit,
            webhooks: Default::default(),
            webhook_trust,
            flow_control,
            resource_metrics: Default::default(),
            aggregated: Default::default(),
        });
        crate::metrics::follow_storage(&inner);
        let server = Self { inner };
        // Custom resources are served from the first request on.
        crate::crd::controller::sync(&server.inner).await?;
        server.bootstrap().await?;
        let own_client = crate::inprocess::client(
            server.router(),
            crate::authn::UserInfo::new(
                "system:apiserver",
                [crate::authz::MASTERS_GROUP.to_string()],
            ),
        );
        crate::authz::bootstrap::ensure(&own_client).await?;
        crate::flowcontrol::bootstrap::ensure(&own_client)
            .await
            .map_err(ApiServerError::FlowControl)?;
        // The local APIServices, available from the first request (a
        // failure is retried by the loop below).
        crate::aggregator::sync(&server.inner, &own_client).await;
        // The start-up objects are written; from here on every write is
        // put to the configured admission webhooks.
        server.inner.webhooks.activate();
        tokio::spawn(crate::aggregator::run(
            server.inner.clone(),
            own_client.clone(),
        ));
        if server.inner.flow_control.is_some() {
            // Written before serving, as the APIServices' conditions are;
            // a failure is retried by the loop.
            let synced = crate::flowcontrol::status::sync(&server.inner, &own_client).await;
            tokio::spawn(crate::flowcontrol::status::run(
                server.inner.clone(),
                own_client.clone(),
                synced,
            ));
        }
        if let Some(address) = server.inner.config.advertise_address {
            // The endpoints exist (with this server) once start returns.
            if let Err(error) = crate::peer_endpoints::reconcile_once(&own_client, address).await {
                tracing::warn!(%error, "kubernetes endpoints not written at start");
            }
            tokio::spawn(crate::peer_endpoints::run(
                own_client.clone(),
                address,
                server.inner.shutdown.subscribe(),
            ));
        }
        tokio::spawn(crate::crd::controller::run(
            server.inner.clone(),
            own_client,
        ));
        if let Some(tls) = server.inner.config.kubelet_client.clone() {
            tokio::spawn(crate::resource_metrics::scrape::run(
                server.inner.clone(),
                tls,
                server.inner.config.metrics_resolution,
            ));
        }
        // Service allocations: released with their Services, repaired.
        tokio::spawn(crate::service_alloc::repair::run(server.inner.clone()));
        let reap_every = (server.inner.config.event_ttl / 10)
            .clamp(Duration::from_millis(100), Duration::from_secs(60));
        tokio::spawn(crate::event_ttl::reap(
            server.inner.clone(),
            server.inner.config.event_ttl,
            reap_every,
        ));
        Ok(server)
    }

    async fn bootstrap(&self) -> Result<(), ApiServerError> {
        let write = WriteInfo {
            manager: "skiff-apiserver".into(),
            subresource: None,
            apply: false,
            user: crate::authn::UserInfo::new(
                "system:apiserver",
                [crate::authz::MASTERS_GROUP.to_string()],
            ),
            notes: Default::default(),
        };
        let mut objects: Vec<(&str, &str, &str, Value)> = SYSTEM_NAMESPACES
            .iter()
            .map(|name| {
                let ns =
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
                ("", "v1", "namespaces", ns)
            })
            .collect();
        for (name, value, description) in SYSTEM_PRIORITY_CLASSES {
            let class = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": name}, "value": value, "description": description,
                "preemptionPolicy": "PreemptLowerPriority"});
            objects.push(("scheduling.k8s.io", "v1", "priorityclasses", class));
        }
        for (group, version, resource, object) in objects {
            let info = self
                .inner
                .registry
                .get(group, version, resource)
                .expect("system objects are of registered kinds");
            let name = crate::object::meta_str(&object, "name")
                .unwrap_or("")
                .to_string();
            match crate::handlers::create::create_object(
                &self.inner,
                &info,
                None,
                object,
                &write,
                false,
            )
            .await
            {
                Ok(_) | Err(ApiError::AlreadyExists { .. }) => {}
                Err(source) => return Err(ApiServerError::Bootstrap { name, source }),
            }
        }
        if let Some(address) = self.inner.config.advertise_address {
            self.publish_self(address, &write).await?;
        }
        if let Some(front_proxy) = &self.inner.config.front_proxy {
            self.publish_request_header_config(front_proxy, &write)
                .await?;
        }
        Ok(())
    }

    /// `kube-system/extension-apiserver-authentication`: what extension API
    /// servers read to trust the aggregator's identity headers (only from a
    /// `front-proxy-client` certificate of the front-proxy CA) and to
    /// verify client certificates themselves.
    async fn publish_request_header_config(
        &self,
        front_proxy: &crate::aggregator::FrontProxyTls,
        write: &WriteInfo,
    ) -> Result<(), ApiServerError> {
        let list = |items: &[&str]| serde_json::to_string(items).unwrap_or_default();
        let mut data = serde_json::Map::new();
        if let Some(ca) = &self.inner.config.webhook_ca_pem {
            data.insert("client-ca-file".into(), json!(ca));
        }
        data.insert(
            "requestheader-client-ca-file".into(),
            json!(front_proxy.ca_pem),
        );
        data.insert(
            "requestheader-allowed-names".into(),
            json!(list(&[crate::tls::FRONT_PROXY_CLIENT_USER])),
        );
        data.insert(
            "requestheader-extra-headers-prefix".into(),
            json!(list(&["X-Remote-Extra-"])),
        );
        data.insert(
            "requestheader-group-headers".into(),
            json!(list(&["X-Remote-Group"])),
        );
        data.insert(
            "requestheader-username-headers".into(),
            json!(list(&["X-Remote-User"])),
        );
        let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
            "data": data});
        let info = self
            .inner
            .registry
            .get("", "v1", "configmaps")
            .expect("system objects are of registered kinds");
        crate::handlers::upsert(&self.inner, &info, config_map, write)
            .await
            .map(|_| ())
            .map_err(|source| ApiServerError::Bootstrap {
                name: "configmaps/extension-apiserver-authentication".into(),
                source,
            })
    }

    /// The `kubernetes` Service in `default`, targeting `address`'s port;
    /// its endpoints list every live server (`peer_endpoints`).
    async fn publish_self(
        &self,
        address: std::net::SocketAddr,
        write: &WriteInfo,
    ) -> Result<(), ApiServerError> {
        let labels = json!({"component": "apiserver", "provider": "kubernetes"});
        let service = json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kubernetes", "namespace": "default", "labels": labels},
            "spec": {"type": "ClusterIP", "clusterIP": self.inner.services.first_ip().to_string(),
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": address.port()}]}});
        let info = self
            .inner
            .registry
            .get("", "v1", "services")
            .expect("system objects are of registered kinds");
        match crate::handlers::create::create_object(
            &self.inner,
            &info,
            None,
            service,
            write,
            false,
        )
        .await
        {
            Ok(_) | Err(ApiError::AlreadyExists { .. }) => Ok(()),
            Err(source) => Err(ApiServerError::Bootstrap {
                name: "services/kubernetes".into(),
                source,
            }),
        }
    }

    /// Every API path: discovery, version, health and resources.
    pub fn router(&self) -> Router {
        let routes = crate::health::routes(Router::new())
            .route(
                "/version",
                get(|| async { json_response(StatusCode::OK, &crate::discovery::version()) }),
            )
            .route(
                crate::tokens::discovery::CONFIGURATION_PATH,
                get(crate::tokens::discovery::serve_configuration),
            )
            .route(
                crate::tokens::discovery::JWKS_PATH,
                get(crate::tokens::discovery::serve_jwks),
            )
            .route("/openapi/v2", get(crate::openapi::v2))
            .route("/openapi/v3", get(crate::openapi::v3_index))
            .route("/openapi/v3/{*path}", get(crate::openapi::v3_document))
            .route(
                "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                axum::routing::post(crate::tokens::create_token),
            )
            .route(
                crate::encryption::STATUS_PATH,
                get(crate::encryption::status_handler),
            )
            .route(
                crate::encryption::ROTATE_KEYS_PATH,
                axum::routing::post(crate::encryption::rotate_keys_handler),
            )
            .route(
                crate::encryption::REENCRYPT_PATH,
                axum::routing::post(crate::encryption::reencrypt_handler),
            )
            .route(
                crate::snapshots::SNAPSHOTS_PATH,
                get(crate::snapshots::list_handler).post(crate::snapshots::save_handler),
            )
            .route(
                &format!("{}/{{name}}", crate::snapshots::SNAPSHOTS_PATH),
                axum::routing::delete(crate::snapshots::delete_handler),
            )
            .route(
                crate::snapshots::PRUNE_PATH,
                axum::routing::post(crate::snapshots::prune_handler),
            )
            .route("/cacerts", get(cacerts))
            .route("/metrics", get(crate::metrics::serve))
            .fallback(crate::handlers::dispatch)
            .with_state(self.inner.clone());
        // The layers wrap the router once, in front of routing, rather than
        // each route (`Router::layer`): a route's service is then one boxed
        // chain of concrete layers, not a box per layer per route that every
        // request clones and drops again. The first named is the outermost.
        let layered = tower::ServiceBuilder::new()
            .layer(axum::middleware::from_fn(crate::request_span::trace))
            // Outside everything that may refuse a request, so refusals
            // are counted too.
            .layer(axum::middleware::from_fn_with_state(
                self.inner.clone(),
                crate::metrics::instrument,
            ))
            .layer(axum::middleware::from_fn_with_state(
                self.inner.clone(),
                crate::audit::layer::audit,
            ))
            // Inside the audit layer, so a request cut at its deadline is
            // audited with its 504.
            .layer(axum::middleware::from_fn_with_state(
                self.inner.config.request_timeout,
                crate::request_timeout::enforce,
            ))
            .layer(axum::middleware::from_fn_with_state(
                self.inner.clone(),
                crate::authz::middleware::authorize,
            ))
            // Inside authorization, which has switched to the impersonated
            // user the request is classified by.
            .layer(axum::middleware::from_fn_with_state(
                self.inner.clone(),
                crate::flowcontrol::filter::limit,
            ))
            .service(routes);
        Router::new().fallback_service(layered)
    }

    /// Ends every open watch (their streams finish cleanly), stops the watch
    /// caches and makes `/readyz` fail. Does not close the store: the caller
    /// does that after the listeners have drained.
    pub fn shutdown(&self) {
        self.inner.shutdown.send_replace(true);
    }

    /// Writes the audit events still queued and stops the audit log (call
    /// it once the listeners have drained; later events are dropped).
    pub async fn close_audit_log(&self) {
        if let Some(audit) = &self.inner.audit {
            audit.close().await;
        }
    }

    /// Audit events dropped because the log's writer was behind (0 when no
    /// log is kept).
    pub fn audit_events_dropped(&self) -> u64 {
        self.inner.audit.as_ref().map_or(0, |a| a.sink.dropped())
    }

    /// The authenticator of the service-account tokens this server signs
    /// (for [`crate::authn::Authenticator::with_service_account_tokens`]).
    pub fn service_account_tokens(&self) -> crate::tokens::ServiceAccountTokens {
        crate::tokens::ServiceAccountTokens::new(self.inner.clone())
    }

    /// The authenticator of bootstrap tokens (Secrets in kube-system, read
    /// from this server's cache) and of the server token's `secret` (for
    /// [`crate::authn::Authenticator::with_bootstrap_tokens`]).
    pub fn bootstrap_tokens(
        &self,
        server_secret: Option<String>,
    ) -> crate::bootstrap_tokens::BootstrapTokens {
        crate::bootstrap_tokens::BootstrapTokens::new(self.inner.clone(), server_secret)
    }

    /// Lets TokenReviews check tokens with the authenticator the HTTPS
    /// listener uses (the token file and this server's service-account
    /// tokens). Until it is set, only service-account tokens are reviewed.
    pub fn set_authenticator(&self, authenticator: Arc<crate::authn::Authenticator>) {
        *self.inner.authenticator.write() = Some(authenticator);
    }

    /// The authorizer chain every request is put to (for reviews, embedders
    /// and benchmarks that ask it directly).
    pub fn authorizer(&self) -> crate::authz::Chain {
        self.inner.authorizer.clone()
    }

    /// The store this server writes to.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }
}

/// The Node authorizer on the caches of the objects it follows (or the
/// resource whose cache is missing).
fn node_authorizer(
    registry: &LiveRegistry,
    caches: &HashMap<String, Arc<WatchCache>>,
) -> Result<crate::authz::node::NodeAuthorizer, String> {
    let cache = |GroupResource { group, resource }| {
        registry
            .get(group, "v1", resource)
            .and_then(|info| caches.get(&info.storage_prefix).cloned())
            .ok_or_else(|| format!("{group}/{resource}"))
    };
    Ok(crate::authz::node::NodeAuthorizer::new(
        cache(kinds::Pods::RESOURCE)?,
        cache(kinds::PersistentVolumeClaims::RESOURCE)?,
        cache(kinds::PersistentVolumes::RESOURCE)?,
        cache(kinds::VolumeAttachments::RESOURCE)?,
    ))
}

/// Priority and fairness over the FlowSchema and PriorityLevelConfiguration
/// caches (or the resource whose cache is missing); `None` without seats.
fn flow_control(
    registry: &LiveRegistry,
    caches: &HashMap<String, Arc<WatchCache>>,
    config: &ApiServerConfig,
) -> Result<Option<crate::flowcontrol::config::FlowControl>, String> {
    let seats = config.max_requests_inflight + config.max_mutating_requests_inflight;
    if seats == 0 {
        return Ok(None);
    }
    let cache = |resource: &str| {
        registry
            .get("flowcontrol.apiserver.k8s.io", "v1", resource)
            .and_then(|info| caches.get(&info.storage_prefix).cloned())
            .ok_or_else(|| format!("flowcontrol.apiserver.k8s.io/{resource}"))
    };
    Ok(Some(crate::flowcontrol::config::FlowControl::new(
        cache("flowschemas")?,
        cache("prioritylevelconfigurations")?,
        seats,
    )))
}

/// The watch caches of the four RBAC resources, or the one missing.
fn rbac_sources(
    registry: &LiveRegistry,
    caches: &HashMap<String, Arc<WatchCache>>,
) -> Result<crate::authz::rbac::Sources, String> {
    let cache = |resource: &str| {
        registry
            .get(crate::authz::rbac::GROUP, "v1", resource)
            .and_then(|info| caches.get(&info.storage_prefix).cloned())
            .ok_or_else(|| format!("{}/{resource}", crate::authz::rbac::GROUP))
    };
    Ok(crate::authz::rbac::Sources {
        roles: cache("roles")?,
        cluster_roles: cache("clusterroles")?,
        role_bindings: cache("rolebindings")?,
        cluster_role_bindings: cache("clusterrolebindings")?,
    })
}

/// `/cacerts`: the cluster CA bundle, byte for byte as the join token
/// hashes it. Public (k3s's agents fetch it before they trust anything;
/// RBAC's `system:skiff:cacerts` grants it to everyone): it holds no secret.
async fn cacerts(axum::extract::State(inner): axum::extract::State<Arc<Inner>>) -> Response {
    match &inner.config.cacerts_pem {
        Some(pem) => (
            StatusCode::OK,
            [(http::header::CONTENT_TYPE, "application/x-pem-file")],
            pem.clone(),
        )
            .into_response(),
        None => ApiError::PathNotFound.into_response(),
    }
}
