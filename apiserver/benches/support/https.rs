//! What the benches that go through HTTPS share (`api_vs_store`,
//! `api_on_etcd`): an API server on a store behind a real TLS listener on
//! loopback with an admin kube client, and the percentiles read off
//! latencies. Included with `#[path]` only by those benches, so the
//! others do not carry it.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;
use kube::{Api, Client, Config};
use skiff_apiserver::authn::Authenticator;
use skiff_apiserver::tls::ClusterCerts;
use skiff_apiserver::{ApiServer, ApiServerConfig};
use skiff_store::Store;

/// What the benches' setup steps fail with.
pub type BenchResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Concurrent clients (each its own keep-alive connection in kube's pool).
pub const CONCURRENCY: usize = 64;

/// One API server on one store, served over HTTPS, with an admin client.
pub struct Served {
    api: ApiServer,
    store: Arc<dyn Store>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: tokio::task::JoinHandle<()>,
    /// The admin client (kube-rs, as any client would connect): HTTP/1.1,
    /// one keep-alive connection per request in flight.
    pub client: Client,
    /// The same admin client's typed calls over one multiplexed HTTP/2
    /// connection, the transport client-go and kubectl use.
    // Only `api_vs_store` compares the transports; the other bench that
    // includes this file reads the HTTP/1.1 client alone.
    #[allow(dead_code)]
    pub h2_client: Client,
}

/// Serves `store` over HTTPS on a loopback port, with certificates in `dir`.
pub async fn serve(store: Arc<dyn Store>, dir: &std::path::Path) -> BenchResult<Served> {
    let api = ApiServer::new(store.clone(), ApiServerConfig::default()).await?;
    let certs = ClusterCerts::load_or_create(dir, &["localhost".into(), "127.0.0.1".into()])?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(skiff_apiserver::serve::serve_https(
        listener,
        certs.server_config()?,
        Arc::new(Authenticator::default()),
        api.router(),
        async {
            let _ = stopped.await;
        },
        Duration::from_secs(2),
        skiff_apiserver::serve::ConnectionTimeouts::default(),
    ));
    let kubeconfig: kube::config::Kubeconfig =
        serde_yaml::from_str(&certs.admin_kubeconfig(&format!("https://127.0.0.1:{port}")))?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    let h2_client = h2_client(&config)?;
    let client = Client::try_from(config)?;
    Ok(Served {
        api,
        store,
        stop: Some(stop),
        server,
        client,
        h2_client,
    })
}

/// A kube client for `config` whose requests all share one HTTP/2
/// connection (ALPN `h2` only), as client-go's do. kube-rs builds only
/// HTTP/1.1 clients itself, so the transport is put together here and
/// handed to `Client::new`; the typed calls above it are kube-rs's own.
fn h2_client(config: &Config) -> BenchResult<Client> {
    use kube::client::ConfigExt as _;
    // Go sets TCP_NODELAY on every connection; without it, Nagle holds a
    // stream's small frames back while another stream's are unacknowledged.
    let mut tcp = hyper_util::client::legacy::connect::HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config.rustls_client_config()?)
        .https_only()
        .enable_http2()
        .wrap_connector(tcp);
    let transport =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .http2_only(true)
            .build(connector);
    let service = tower::ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .service(transport);
    Ok(Client::new(service, config.default_namespace.clone()))
}

impl Served {
    /// ConfigMaps of the `default` namespace, through the admin client.
    pub fn configmaps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), "default")
    }

    /// Stops serving and closes the store (which flushes it).
    pub async fn stop(mut self) -> BenchResult<()> {
        self.api.shutdown();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = self.server.await;
        self.store.close().await?;
        Ok(())
    }
}

/// A ConfigMap `name` with one data key holding `payload`.
pub fn configmap(name: &str, payload: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        data: Some([("payload".to_owned(), payload.to_owned())].into()),
        ..Default::default()
    }
}

/// The `p` quantile (0 to 1) of `sorted` latencies; zero when there are none.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}
