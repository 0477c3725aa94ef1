//! skiff-testkit starts a cluster inside a test process: a sled store in a
//! temporary directory, the real API server on it, in-process clients for
//! any identity and shared informers, plus [`eventually`] to wait for what
//! the components do. The controllers', node agent's, DNS's and proxy's
//! tests and the benches build on it instead of each wiring its own. For
//! the tests that apply real nftables rules (the proxy's, the network
//! policy controller's), [`netns`] holds network namespaces to apply them in.
//! The suites that start containerd clean the host up after it with [`host`];
//! fake binaries for a component to run are written by [`write_executable`].
//! Fake TLS servers (webhooks, extension API servers, kubelets) get their
//! certificates from [`pki`] (a fake OpenID Connect issuer its signing key; webhooks their answers' envelope from
//! [`admission`]); [`https`] serves a test's handler over HTTPS; the Pod Security tests at every layer try
//! the pod of [`pod_security`]. The full-disk tests fill a [`tmpfs`];
//! the JSON the API serves is read with [`json`].
//!
//! It is a development-only crate (`publish = false`) and must only ever be
//! a dev-dependency: it imports the API server and the store, which no
//! component may. It starts no component itself; each test starts the ones
//! it exercises on [`TestCluster::factory`].

pub mod admission;
pub mod host;
pub mod https;
pub mod json;
pub mod netns;
pub mod pki;
pub mod pod_security;
pub mod tmpfs;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use skiff_apiserver::{ApiServer, ApiServerConfig};
use skiff_informer::SharedInformerFactory;
use skiff_store::{SledConfig, SledStore, Store};

pub use skiff_apiserver::authn::UserInfo;

/// The administrator the clusters' default client acts as (in
/// `system:masters`, so every request is allowed).
pub const ADMIN: &str = "system:admin";

/// A running in-process cluster; dropping it leaves the API server's
/// tasks to the runtime, [`shutdown`](Self::shutdown) stops them.
pub struct TestCluster {
    /// The API server.
    pub api: ApiServer,
    /// The store under it (for tests that look at what was written).
    pub store: Arc<SledStore>,
    /// A client acting as the cluster's default identity (the administrator
    /// unless [`Builder::user`] chose another).
    pub client: kube::Client,
    /// Shared informers listing and watching through [`client`](Self::client);
    /// not started: the components under test start them.
    pub factory: SharedInformerFactory,
    dir: tempfile::TempDir,
}

/// How to start a [`TestCluster`].
#[derive(Default)]
pub struct Builder {
    config: ApiServerConfig,
    user: Option<UserInfo>,
    dir: Option<tempfile::TempDir>,
}

impl Builder {
    /// Changes the API server's configuration before it starts.
    pub fn config(mut self, change: impl FnOnce(&mut ApiServerConfig)) -> Self {
        change(&mut self.config);
        self
    }

    /// The identity of the cluster's default client and informers.
    pub fn user(mut self, user: UserInfo) -> Self {
        self.user = Some(user);
        self
    }

    /// Keeps the cluster in `dir` (made by the caller, e.g. with a short name
    /// for sockets, or holding certificates the configuration points at)
    /// instead of a fresh temporary directory.
    pub fn in_dir(mut self, dir: tempfile::TempDir) -> Self {
        self.dir = Some(dir);
        self
    }

    /// Opens the store in `<dir>/db` and starts the API server on it.
    ///
    /// Panics when the cluster cannot start: this is test set-up.
    pub async fn start(self) -> TestCluster {
        let dir = match self.dir {
            Some(dir) => dir,
            None => tempfile::tempdir().expect("a temporary directory"),
        };
        let store = Arc::new(
            SledStore::open(SledConfig::new(dir.path().join("db"))).expect("the test store"),
        );
        let api = ApiServer::new(Arc::clone(&store) as Arc<dyn Store>, self.config)
            .await
            .expect("the API server");
        let user = self.user.unwrap_or_else(admin);
        let client = skiff_apiserver::inprocess::client(api.router(), user);
        let factory = SharedInformerFactory::new(client.clone());
        TestCluster {
            api,
            store,
            client,
            factory,
            dir,
        }
    }
}

impl TestCluster {
    /// A cluster with the default configuration, its client acting as
    /// [`ADMIN`].
    pub async fn start() -> Self {
        Self::builder().start().await
    }

    /// Choose configuration, identity or directory before starting.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// A client acting as the administrator (`system:masters`).
    pub fn admin(&self) -> kube::Client {
        self.client_as(admin())
    }

    /// A client acting as `user`, as an in-process component would.
    pub fn client_as(&self, user: UserInfo) -> kube::Client {
        skiff_apiserver::inprocess::client(self.api.router(), user)
    }

    /// The temporary directory the store lives in (`db/`); tests may put
    /// their own state next to it. Removed when the cluster is dropped.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Stops the informers and the API server.
    pub fn shutdown(&self) {
        self.factory.shutdown();
        self.api.shutdown();
    }
}

fn admin() -> UserInfo {
    UserInfo::new(ADMIN, ["system:masters".to_string()])
}

/// Waits until `api` no longer finds `name` (deleted, finalizers done);
/// panics after `timeout`.
pub async fn eventually_gone<K>(timeout: Duration, api: &kube::Api<K>, name: &str)
where
    K: Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    let what = format!("{name} to be gone");
    eventually(timeout, &what, || async {
        match api.get_opt(name).await {
            Ok(None) => Some(()),
            _ => None,
        }
    })
    .await;
}

/// Whether `api` finds `name` once the components have had a moment (half
/// a second) to act: how a test shows what they must not do, such as
/// delete an object or make one.
pub async fn present_after_a_moment<K>(api: &kube::Api<K>, name: &str) -> bool
where
    K: Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    tokio::time::sleep(Duration::from_millis(500)).await;
    api.get_opt(name).await.expect("read the object").is_some()
}

/// Polls `check` every 50 ms until it returns `Some`, and returns that;
/// panics naming `what` after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
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

/// The shutdown signal [`spawn_until_stopped`] hands a component's run loop.
pub type StopSignal = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

/// A component's run loop in a task, as [`spawn_until_stopped`] started it;
/// dropping it raises the shutdown signal too.
pub struct Spawned<T> {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<T>,
}

impl<T> Spawned<T> {
    /// Raises the shutdown signal and returns how the loop ended; panics
    /// if it panicked.
    pub async fn stop(self) -> T {
        let _ = self.stop.send(());
        self.task.await.expect("the run loop panicked")
    }
}

/// Spawns a component's run loop (`run` is given its shutdown signal), so a
/// test can stop it and then check how it ended.
pub fn spawn_until_stopped<T, Fut>(run: impl FnOnce(StopSignal) -> Fut) -> Spawned<T>
where
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let signal: StopSignal = Box::pin(async move {
        let _ = stopped.await;
    });
    Spawned {
        stop,
        task: tokio::spawn(run(signal)),
    }
}

/// Writes `contents` to `path` as an executable (mode 0755): the fake
/// binaries (a containerd, a ctr, a pause) tests put where a component will
/// run them. Panics when it cannot: this is test set-up.
pub fn write_executable(path: &Path, contents: impl AsRef<[u8]>) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(path, contents)
        .and_then(|()| std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)))
        .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}
