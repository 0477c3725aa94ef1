//! skiff-ingress is the built-in ingress controller (what Traefik is in
//! k3s): a reverse proxy in the skiff process serving the Ingresses of its
//! IngressClass (`skiff`, controller `skiff.io/ingress`, created at start as
//! the default class) on an HTTP and an HTTPS port. Host and path rules,
//! default backends, TLS certificates from Secrets chosen by SNI, WebSocket
//! upgrades, round-robin over ready endpoints, and `status.loadBalancer`.
//!
//! It must never import the API server or the store: it reads the cluster
//! through informers of its own (Ingresses, IngressClasses, Services,
//! EndpointSlices, Secrets) and writes only Ingress status and its
//! IngressClass, under its own identity (`system:skiff:ingress`).
//!
//! Requests go straight to pod endpoints (as Traefik and ingress-nginx do),
//! not through the Services' cluster IPs, so the service proxy's rules are
//! not on the path.

#![warn(missing_docs)]

pub(crate) mod backends;
pub(crate) mod certs;
pub(crate) mod class;
pub(crate) mod proxy;
pub(crate) mod routes;
pub(crate) mod server;
pub(crate) mod status;

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use skiff_common::wakeups::SyncWakeups;
use skiff_informer::{Informer, SharedInformerFactory};
use tokio::sync::{Notify, watch};

pub use certs::CertStore;
pub use class::ClassFilter;
pub use proxy::{Proxy, Snapshot};
pub use routes::{BackendRef, PortRef, RouteTable};

/// The IngressClass skiff creates and serves.
pub const DEFAULT_CLASS: &str = "skiff";
/// The `spec.controller` of skiff's IngressClasses.
pub const CONTROLLER_NAME: &str = "skiff.io/ingress";

/// How the ingress runs.
#[derive(Debug, Clone)]
pub struct IngressConfig {
    /// Where plain HTTP is served (None: not at all).
    pub http: Option<SocketAddr>,
    /// Where HTTPS is served (None: not at all).
    pub https: Option<SocketAddr>,
    /// The IngressClass created at start.
    pub class_name: String,
    /// The controller name classes served carry.
    pub controller: String,
    /// Addresses written into served Ingresses' `status.loadBalancer`.
    pub addresses: Vec<IpAddr>,
    /// How long a burst of changes is gathered before the table is rebuilt.
    pub coalesce: Duration,
    /// How often everything is rebuilt and status writes retried without a
    /// change.
    pub resync: Duration,
}

impl IngressConfig {
    /// Defaults for the class, serving on `http` and `https`, reporting
    /// `addresses`.
    pub fn new(http: SocketAddr, https: SocketAddr, addresses: Vec<IpAddr>) -> Self {
        Self {
            http: Some(http),
            https: Some(https),
            class_name: DEFAULT_CLASS.to_owned(),
            controller: CONTROLLER_NAME.to_owned(),
            addresses,
            coalesce: Duration::from_millis(50),
            resync: Duration::from_secs(30),
        }
    }
}

/// Why the ingress could not start.
#[derive(Debug, thiserror::Error)]
pub enum IngressError {
    /// A listener could not start.
    #[error(transparent)]
    Serve(#[from] server::ServeError),
    /// The default certificate could not be made.
    #[error(transparent)]
    Cert(#[from] certs::CertError),
    /// The informers could not start.
    #[error("starting the ingress informers: {0}")]
    Informer(#[from] skiff_informer::InformerError),
}

/// The informers the ingress reads.
struct Sources {
    ingresses: Informer<Ingress>,
    classes: Informer<IngressClass>,
    services: Informer<Service>,
    slices: Informer<EndpointSlice>,
    secrets: Informer<Secret>,
}

impl Sources {
    fn watch(
        factory: &SharedInformerFactory,
        changed: &Arc<Notify>,
    ) -> Result<Self, skiff_informer::InformerError> {
        let sources = Self {
            ingresses: factory.notifying_informer(changed)?,
            classes: factory.notifying_informer(changed)?,
            services: factory.notifying_informer(changed)?,
            slices: factory.notifying_informer(changed)?,
            secrets: factory.notifying_informer(changed)?,
        };
        Ok(sources)
    }

    async fn wait_for_sync(&self) {
        self.ingresses.wait_for_sync().await;
        self.classes.wait_for_sync().await;
        self.services.wait_for_sync().await;
        self.slices.wait_for_sync().await;
        self.secrets.wait_for_sync().await;
    }
}

/// A started ingress: its listeners' addresses and a handle to stop it.
pub struct RunningIngress {
    /// The bound HTTP address.
    pub http: Option<SocketAddr>,
    /// The bound HTTPS address.
    pub https: Option<SocketAddr>,
    proxy: Proxy,
    stop: watch::Sender<bool>,
    tasks: tokio::task::JoinSet<()>,
}

impl RunningIngress {
    /// Binds the listeners, starts `factory`'s informers (the factory's
    /// client is the ingress's identity) and keeps the routes, certificates
    /// and statuses up to date. The IngressClass is created first, so the
    /// class filter sees it.
    pub async fn start(
        factory: &SharedInformerFactory,
        config: IngressConfig,
    ) -> Result<Self, IngressError> {
        let client = factory.client().clone();
        if let Err(error) =
            class::ensure_class(client, &config.class_name, &config.controller).await
        {
            // Ingresses naming the class are still served by name.
            tracing::warn!(%error, class = %config.class_name, "creating the IngressClass");
        }
        let certs = Arc::new(CertStore::new(certs::default_certificate()?));
        let http = match config.http {
            Some(address) => Some(server::bind(address).await?),
            None => None,
        };
        let https = match config.https {
            Some(address) => Some(server::bind(address).await?),
            None => None,
        };
        let tls = server::tls_config(certs.clone())?;
        let changed = Arc::new(Notify::new());
        let sources = Sources::watch(factory, &changed)?;
        factory.start()?;

        let proxy = Proxy::new();
        let (stop, stop_rx) = watch::channel(false);
        let mut tasks = tokio::task::JoinSet::new();
        let mut running = Self {
            http: None,
            https: None,
            proxy: proxy.clone(),
            stop,
            tasks: tokio::task::JoinSet::new(),
        };
        if let Some(listener) = http {
            running.http = listener.local_addr().ok();
            tasks.spawn(server::serve(
                listener,
                None,
                proxy.clone(),
                stopped(stop_rx.clone()),
            ));
        }
        if let Some(listener) = https {
            running.https = listener.local_addr().ok();
            tasks.spawn(server::serve(
                listener,
                Some(tls),
                proxy.clone(),
                stopped(stop_rx.clone()),
            ));
        }
        tracing::info!(http = ?running.http, https = ?running.https, "ingress listening");
        let client = factory.client().clone();
        tasks.spawn(sync_loop(
            client, sources, proxy, certs, config, changed, stop_rx,
        ));
        running.tasks = tasks;
        Ok(running)
    }

    /// The routes and endpoints now in use.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.proxy.snapshot()
    }

    /// Stops the listeners (letting open connections finish briefly) and
    /// the sync loop.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        while self.tasks.join_next().await.is_some() {}
    }
}

/// Runs the ingress until `stop` resolves.
pub async fn run(
    factory: &SharedInformerFactory,
    config: IngressConfig,
    stop: impl Future<Output = ()>,
) -> Result<(), IngressError> {
    let running = RunningIngress::start(factory, config).await?;
    stop.await;
    running.shutdown().await;
    Ok(())
}

async fn stopped(mut flag: watch::Receiver<bool>) {
    let _ = flag.wait_for(|stop| *stop).await;
}

async fn sync_loop(
    client: kube::Client,
    sources: Sources,
    proxy: Proxy,
    certs: Arc<CertStore>,
    config: IngressConfig,
    changed: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
) {
    tokio::select! {
        _ = sources.wait_for_sync() => {}
        _ = stop.wait_for(|s| *s) => return,
    }
    let wanted = status::desired(&config.addresses);
    let mut wakeups = SyncWakeups::new(changed, stop, config.resync, config.coalesce);
    loop {
        let classes = sources.classes.cache().list();
        let filter = ClassFilter::new(
            &config.class_name,
            &config.controller,
            classes.iter().map(|c| &**c),
        );
        let served: Vec<Arc<Ingress>> = sources
            .ingresses
            .cache()
            .list()
            .into_iter()
            .filter(|i| filter.serves(i))
            .collect();
        let routes = RouteTable::build(served.iter().map(|i| &**i));
        let pools = backends::resolve_all(
            routes.backends(),
            sources.services.cache(),
            sources.slices.cache(),
        );
        proxy.set(Snapshot { routes, pools });
        certs.update(served.iter().map(|i| &**i), sources.secrets.cache());
        for ingress in served.iter().filter(|i| !status::is_current(i, &wanted)) {
            if let Err(error) = status::write(client.clone(), ingress, &wanted).await {
                tracing::debug!(
                    name = ?ingress.metadata.name,
                    namespace = ?ingress.metadata.namespace,
                    %error,
                    "writing the Ingress status"
                );
            }
        }
        if wakeups.next().await.is_none() {
            return;
        }
    }
}
