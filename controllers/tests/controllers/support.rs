//! A cluster in the test process (skiff-testkit: the real API server on a
//! temporary store, an in-process client, shared informers) with a
//! controller manager running the controllers under test; one controller on
//! a manager of its own (`OwnController`); and the requests every test
//! makes, the test stopping if the API refuses (merge patches, listing).

use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::serde::Serialize;
use k8s_openapi::serde::de::DeserializeOwned;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};

use skiff_controllers::{Context, ControllerManager};
use skiff_informer::SharedInformerFactory;
use skiff_testkit::UserInfo;
use tokio::sync::watch;

pub use skiff_testkit::{eventually, eventually_gone, present_after_a_moment};

/// The cluster CA the test clusters publish (any PEM text will do).
pub const TEST_CA_PEM: &str =
    "-----BEGIN CERTIFICATE-----\nc2tpZmYtdGVzdA==\n-----END CERTIFICATE-----\n";

pub struct TestCluster {
    pub client: kube::Client,
    pub factory: SharedInformerFactory,
    cluster: skiff_testkit::TestCluster,
    stop: watch::Sender<bool>,
    manager: Option<tokio::task::JoinHandle<()>>,
    /// The built-in controllers this cluster does not run.
    disabled: Vec<&'static str>,
}

impl TestCluster {
    /// Starts the API server and the named controllers (all built-in ones
    /// when `controllers` is None), acting as the controller manager.
    pub async fn start(controllers: Option<&[&str]>) -> Self {
        let cluster = skiff_testkit::TestCluster::builder()
            // Every controller shares one client here, so it needs the
            // union of their rights.
            .user(UserInfo::new(
                "system:kube-controller-manager",
                ["system:masters".to_string()],
            ))
            .start()
            .await;
        let (client, factory) = (cluster.client.clone(), cluster.factory.clone());
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
        let (stop, manager) = Self::run_manager(context, &disabled);
        factory.wait_for_sync().await;
        Self {
            client,
            factory,
            cluster,
            stop,
            manager: Some(manager),
            disabled,
        }
    }

    fn run_manager(
        context: Context,
        disabled: &[&'static str],
    ) -> (watch::Sender<bool>, tokio::task::JoinHandle<()>) {
        let manager = ControllerManager::with_defaults(context, disabled);
        let (stop, stop_rx) = watch::channel(false);
        (stop, tokio::spawn(manager.run(stop_rx)))
    }

    /// Stops the controllers, runs `meanwhile` while none runs, then starts
    /// them again on informers of their own, as a restarted controller
    /// manager: what a controller finds after a crash between two writes.
    pub async fn restart_controllers<F: std::future::Future<Output = ()>>(&mut self, meanwhile: F) {
        let _ = self.stop.send(true);
        self.factory.shutdown();
        if let Some(manager) = self.manager.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), manager).await;
        }
        meanwhile.await;
        self.factory = SharedInformerFactory::new(self.client.clone());
        let context =
            Context::new(self.client.clone(), self.factory.clone()).with_root_ca(TEST_CA_PEM);
        let (stop, manager) = Self::run_manager(context, &self.disabled);
        (self.stop, self.manager) = (stop, Some(manager));
        self.factory.wait_for_sync().await;
    }

    /// Starts the API server and only the named controllers, and hands back
    /// a client of it too: what most tests begin with.
    pub async fn start_with_client(controllers: &[&str]) -> (Self, kube::Client) {
        let cluster = Self::start(Some(controllers)).await;
        let client = cluster.client.clone();
        (cluster, client)
    }

    /// A client acting as `user` (nodes, service accounts, ...).
    pub fn client_as(&self, user: UserInfo) -> kube::Client {
        self.cluster.client_as(user)
    }

    /// Stops the controllers and the API server.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        self.factory.shutdown();
        if let Some(manager) = self.manager.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), manager).await;
        }
        self.cluster.shutdown();
    }
}

/// The object `value` describes; the test stops if it does not fit `K`.
pub fn object<K: DeserializeOwned>(value: serde_json::Value) -> K {
    serde_json::from_value(value).unwrap()
}

/// What kube's `Api` asks of the objects the tests read and write.
pub trait Object: Clone + DeserializeOwned + Debug {}

impl<K: Clone + DeserializeOwned + Debug> Object for K {}

/// Creates the object `value` describes through `api`; the test stops if
/// the API refuses.
pub async fn create_object<K: Object + Serialize>(api: &Api<K>, value: serde_json::Value) -> K {
    api.create(&PostParams::default(), &object(value))
        .await
        .unwrap()
}

/// Merges `patch` into the object `name` through `api` (as `kubectl patch
/// --type merge`); the test stops if the API refuses.
pub async fn merge_patch<K: Object>(api: &Api<K>, name: &str, patch: impl Serialize + Debug) -> K {
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap()
}

/// Merges `patch` into the status of the object `name` through `api`, as the
/// node or another controller would write it.
pub async fn merge_patch_status<K: Object>(
    api: &Api<K>,
    name: &str,
    patch: impl Serialize + Debug,
) -> K {
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap()
}

/// Sets the replicas of the object `name` through its scale subresource,
/// as `kubectl scale --replicas` does.
pub async fn scale<K: Object>(api: &Api<K>, name: &str, replicas: i32) -> Scale {
    let patch = Patch::Merge(serde_json::json!({"spec": {"replicas": replicas}}));
    api.patch_scale(name, &PatchParams::default(), &patch)
        .await
        .unwrap()
}

/// Every object `api` lists (the test stops if the API refuses).
pub async fn list_all<K: Object>(api: &Api<K>) -> Vec<K> {
    api.list(&ListParams::default()).await.unwrap().items
}

/// One controller run by a manager of its own with `client` (a service
/// account's, so the test proves that account's rights are enough), on
/// informers of its own, until [`stop`](Self::stop).
pub struct OwnController {
    factory: SharedInformerFactory,
    stop: watch::Sender<bool>,
    running: tokio::task::JoinHandle<()>,
}

impl OwnController {
    /// Starts the controller `name` acting as `account` (as the manager
    /// registers it); `run` is its entry point.
    pub fn start<F, Fut>(
        client: kube::Client,
        name: &'static str,
        account: &'static str,
        run: F,
    ) -> Self
    where
        F: FnOnce(Context, skiff_controllers::Stop) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let factory = SharedInformerFactory::new(client.clone());
        let mut manager = ControllerManager::new(Context::new(client, factory.clone()));
        manager.register(name, account, run);
        let (stop, stop_rx) = watch::channel(false);
        let running = tokio::spawn(manager.run(stop_rx));
        Self {
            factory,
            stop,
            running,
        }
    }

    /// Stops the controller and waits (up to ten seconds) for it to return.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        self.factory.shutdown();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.running).await;
    }
}
