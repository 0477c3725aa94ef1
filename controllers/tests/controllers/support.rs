//! A cluster in the test process: the real API server on a temporary sled
//! store, an in-process kube client, shared informers, and a controller
//! manager running the controllers under test.

use std::sync::Arc;
use std::time::{Duration, Instant};

use skiff_apiserver::authn::UserInfo;
use skiff_apiserver::{ApiServer, ApiServerConfig};
use skiff_controllers::{Context, ControllerManager};
use skiff_informer::SharedInformerFactory;
use skiff_store::{SledConfig, SledStore, Store};
use tokio::sync::watch;

/// The cluster CA the test clusters publish (any PEM text will do).
pub const TEST_CA_PEM: &str =
    "-----BEGIN CERTIFICATE-----\nc2tpZmYtdGVzdA==\n-----END CERTIFICATE-----\n";

pub struct TestCluster {
    pub client: kube::Client,
    pub factory: SharedInformerFactory,
    api: ApiServer,
    stop: watch::Sender<bool>,
    manager: Option<tokio::task::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl TestCluster {
    /// Starts the API server and the named controllers (all built-in ones
    /// when `controllers` is None).
    pub async fn start(controllers: Option<&[&str]>) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let store: Arc<dyn Store> =
            Arc::new(SledStore::open(SledConfig::new(dir.path())).expect("store"));
        let api = ApiServer::new(store, ApiServerConfig::default())
            .await
            .expect("api server");
        let client = skiff_apiserver::inprocess::client(
            api.router(),
            // Every controller shares one client here, so it needs the
            // union of their rights (skiff server runs them as masters too).
            UserInfo::new(
                "system:kube-controller-manager",
                ["system:masters".to_string()],
            ),
        );
        let factory = SharedInformerFactory::new(client.clone());
        let context = Context::new(client.clone(), factory.clone()).with_root_ca(TEST_CA_PEM);
        let all = ControllerManager::with_defaults(context.clone(), &[]);
        let disabled: Vec<&'static str> = match controllers {
            Some(wanted) => all
                .names()
                .into_iter()
                .filter(|n| !wanted.contains(n))
                .collect(),
            None => Vec::new(),
        };
        let manager = ControllerManager::with_defaults(context, &disabled);
        let (stop, stop_rx) = watch::channel(false);
        let manager = tokio::spawn(manager.run(stop_rx));
        factory.wait_for_sync().await;
        Self {
            client,
            factory,
            api,
            stop,
            manager: Some(manager),
            _dir: dir,
        }
    }

    /// A client acting as `user` (nodes, service accounts, ...).
    pub fn client_as(&self, user: UserInfo) -> kube::Client {
        skiff_apiserver::inprocess::client(self.api.router(), user)
    }

    /// Stops the controllers and the API server.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        self.factory.shutdown();
        if let Some(manager) = self.manager.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), manager).await;
        }
        self.api.shutdown();
    }
}

/// Polls `check` until it returns `Some`, panicking after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
