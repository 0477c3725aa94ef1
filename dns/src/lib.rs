//! skiff-dns is the cluster DNS (what CoreDNS is in k3s): it answers
//! `<svc>.<ns>.svc.<domain>` (ClusterIPs, or ready endpoint IPs of headless
//! Services), `<host>.<svc>.<ns>.svc.<domain>` (StatefulSet pods through the
//! endpoints' hostnames), `<a-b-c-d>.<ns>.pod.<domain>`, SRV
//! `_<port>._<proto>.<svc>.<ns>.svc.<domain>` for named ports and PTR for
//! Service and Pod IPs, straight from the shared informer caches, so a new
//! Service resolves as soon as its watch event arrives. Unknown cluster names
//! get NXDOMAIN with the zone's SOA; every other name is forwarded to the
//! host's resolvers. It serves UDP and TCP.
//!
//! It must never import the API server or the store: it reads the cluster
//! through informers and writes only its own EndpointSlice.
//!
//! # Contract with the rest of skiff
//!
//! - This crate creates the Service `kube-system/kube-dns` when it is missing
//!   (ClusterIP 10.43.0.10 by default, no selector, ports `dns` 53/UDP,
//!   `dns-tcp` 53/TCP, `metrics` 9153/TCP, label `k8s-app=kube-dns`), right
//!   after the API server starts, before any user Service can take the IP.
//! - This crate publishes the EndpointSlice
//!   `kube-system/kube-dns-skiff-<hash>`, one per server, owned by that
//!   server's identity Lease so that it goes with the server (labels `kubernetes.io/service-name=kube-dns`,
//!   `endpointslice.kubernetes.io/managed-by=skiff-dns`) with one ready
//!   endpoint: the node address it advertises, and ports `dns`/`dns-tcp` set
//!   to the port it really listens on (53 in production, any port in tests),
//!   and `metrics` to the port of its metrics listener (9153) when it has one.
//! - The service proxy DNATs the Service's ports to the slice's ports matched
//!   by name, like any selector-less Service.
//! - CoreDNS's metrics (`coredns_*`, module `metrics`) are served on
//!   `DnsConfig::metrics_listen` over plain HTTP as CoreDNS serves them,
//!   and with every other component's on the API server's `/metrics`.
//! - The node agent writes `nameserver <cluster DNS IP>` into pods'
//!   resolv.conf per `dnsPolicy` (see `skiff_node::agent::pod::dns_config`).

#![warn(missing_docs)]

pub mod forward;
pub mod metrics;
pub(crate) mod names;
pub mod publish;
pub(crate) mod server;
pub(crate) mod zone;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use skiff_informer::SharedInformerFactory;

pub use forward::Forwarder;
pub use server::{DnsHandler, RunningServer};
pub use zone::{ClusterZone, Lookup, ZoneSources};

/// The default cluster domain.
pub const DEFAULT_DOMAIN: &str = "cluster.local";
/// The default ClusterIP of `kube-dns` (the tenth address of 10.43.0.0/16).
pub const DEFAULT_CLUSTER_DNS: &str = "10.43.0.10";

/// How the DNS server runs.
#[derive(Debug, Clone)]
pub struct DnsConfig {
    /// The cluster domain (`cluster.local`).
    pub domain: String,
    /// Addresses to serve UDP and TCP on (port 0: any free port).
    pub listen: Vec<SocketAddr>,
    /// Resolvers for non-cluster names, tried in order.
    pub upstreams: Vec<SocketAddr>,
    /// Per-attempt timeout of a forwarded query.
    pub forward_timeout: Duration,
    /// TTL of cluster answers, in seconds.
    pub ttl: u32,
    /// How the server announces itself in the cluster (the `kube-dns`
    /// Service and its endpoints); the default announces nothing.
    pub publish: PublishConfig,
    /// Where `/metrics` is served over plain HTTP (CoreDNS's
    /// `prometheus :9153`; port 0: any free port); empty: nowhere. The
    /// first one's port is published as the slice's `metrics` port.
    pub metrics_listen: Vec<SocketAddr>,
}

/// Where this server is published as `kube-dns`: the fields travel
/// together from the server's flags to the publishing loop in [`run`].
#[derive(Debug, Clone, Default)]
pub struct PublishConfig {
    /// Where pods reach this server (the node's address); published as the
    /// `kube-dns` endpoints with the listen port. None: publish nothing.
    pub advertise: Option<IpAddr>,
    /// The node the advertised address belongs to.
    pub node_name: Option<String>,
    /// The identity Lease of the API server this DNS runs beside
    /// (`kube-system/apiserver-<hash>`): the published slice is named after
    /// it and owned by it, so it goes when that server is gone. None: the
    /// one slice `kube-dns-skiff`, owned by nobody.
    pub owner_lease: Option<String>,
    /// The `kube-dns` Service's ClusterIP; when set, the Service is created
    /// if missing.
    pub service_ip: Option<IpAddr>,
}

impl DnsConfig {
    /// Defaults for `domain`, listening on `listen`, no upstreams.
    pub fn new(domain: &str, listen: SocketAddr) -> Self {
        Self {
            domain: domain.to_owned(),
            listen: vec![listen],
            upstreams: Vec::new(),
            forward_timeout: Duration::from_secs(2),
            ttl: 5,
            publish: PublishConfig::default(),
            metrics_listen: Vec::new(),
        }
    }
}

/// Why the DNS server stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum DnsError {
    /// The zone could not be built.
    #[error(transparent)]
    Zone(#[from] zone::ZoneError),
    /// A listener could not be bound.
    #[error(transparent)]
    Serve(#[from] server::ServeError),
    /// The informers could not start.
    #[error("starting the DNS informers: {0}")]
    Informer(#[from] skiff_informer::InformerError),
    /// The metrics listener could not be bound.
    #[error("binding the DNS metrics listener on {address}: {source}")]
    Metrics {
        /// The address.
        address: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
}

/// A running cluster DNS server.
pub struct ClusterDns {
    server: RunningServer,
    /// The metrics listeners' addresses and tasks.
    metrics: Vec<(SocketAddr, tokio::task::JoinHandle<()>)>,
}

impl ClusterDns {
    /// Builds the zone on `factory`'s Service, EndpointSlice and Pod
    /// informers (starting them) and starts serving. Queries before the
    /// caches' first list see an empty cluster.
    pub async fn start(
        factory: &SharedInformerFactory,
        config: &DnsConfig,
    ) -> Result<Self, DnsError> {
        let sources = ZoneSources {
            services: factory.informer::<Service>().cache().clone(),
            slices: factory.informer::<EndpointSlice>().cache().clone(),
            pods: factory.informer::<Pod>().cache().clone(),
        };
        let zone = Arc::new(ClusterZone::new(&config.domain, config.ttl, sources)?);
        factory.start()?;
        let forwarder = Forwarder::new(config.upstreams.clone(), config.forward_timeout);
        let server = RunningServer::bind(&config.listen, DnsHandler::new(zone, forwarder)).await?;
        let mut metrics = Vec::new();
        for &address in &config.metrics_listen {
            let listener = match tokio::net::TcpListener::bind(address).await {
                // Another server on this host (parallel tests) has the
                // port: any free one, which the slice publishes.
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && address.port() != 0 => {
                    tracing::warn!(%address, "DNS metrics port in use; binding a free port instead");
                    let any = SocketAddr::new(address.ip(), 0);
                    tokio::net::TcpListener::bind(any).await
                }
                bound => bound,
            }
            .map_err(|source| DnsError::Metrics { address, source })?;
            let bound = listener
                .local_addr()
                .map_err(|source| DnsError::Metrics { address, source })?;
            metrics.push((bound, tokio::spawn(metrics::serve(listener))));
        }
        Ok(Self { server, metrics })
    }

    /// Where `/metrics` is served.
    pub fn metrics_addrs(&self) -> Vec<SocketAddr> {
        self.metrics.iter().map(|(address, _)| *address).collect()
    }

    /// The bound addresses.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        self.server.local_addrs()
    }

    /// Stops serving.
    pub async fn shutdown(self) {
        for (_, task) in &self.metrics {
            task.abort();
        }
        self.server.shutdown().await
    }
}

/// How often a published slice is checked again.
const REPUBLISH_EVERY: Duration = Duration::from_secs(30);

/// Runs the DNS server until `stop` resolves, keeping the `kube-dns`
/// endpoints pointed at it when `config.publish.advertise` is set. Reads
/// come from the shared informers; `client` (the DNS's own identity)
/// writes its Service and EndpointSlice.
pub async fn run(
    client: kube::Client,
    factory: &SharedInformerFactory,
    config: DnsConfig,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), DnsError> {
    let dns = ClusterDns::start(factory, &config).await?;
    let metrics_port = dns.metrics_addrs().first().map(|a| a.port());
    tracing::info!(listen = ?dns.local_addrs(), metrics = ?dns.metrics_addrs(), upstreams = ?config.upstreams, domain = %config.domain, "cluster DNS serving");
    let PublishConfig {
        advertise,
        node_name: node,
        owner_lease: owner,
        service_ip,
    } = config.publish;
    let advertised = advertise
        .zip(dns.local_addrs().first())
        .map(|(ip, local)| SocketAddr::new(ip, local.port()));
    let publisher = tokio::spawn(async move {
        // The API may not accept writes yet at start-up, nor hold the
        // owner Lease; retry until it does. After that, check again now
        // and then: a slice deleted with a Lease that lapsed (a long
        // pause) comes back once the Lease is renewed.
        loop {
            let mut result = Ok(());
            if let Some(ip) = service_ip {
                result = publish::ensure_service(&client, ip).await;
            }
            if let (Ok(()), Some(address)) = (&result, advertised) {
                result = publish::publish(
                    &client,
                    address,
                    metrics_port,
                    node.as_deref(),
                    owner.as_deref(),
                )
                .await;
            }
            let wait = match result {
                Ok(()) => REPUBLISH_EVERY,
                Err(error) => {
                    tracing::warn!(%error, "retrying in 2 s");
                    Duration::from_secs(2)
                }
            };
            tokio::time::sleep(wait).await;
        }
    });
    stop.await;
    publisher.abort();
    dns.shutdown().await;
    Ok(())
}
