//! The controller manager: starts every enabled controller on the shared
//! informers and stops them together; and the loop most controllers run, a
//! queue of object keys each synced by a [`Reconciler`] until the stop signal.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{ObjectMeta, PostParams};

use skiff_informer::{
    Action, Controller, EnqueueKeys, Informer, ObjectKey, SharedInformerFactory, WorkQueue,
};
use tokio::sync::watch;

/// The namespace the controllers' service accounts live in.
pub const ACCOUNTS_NAMESPACE: &str = "kube-system";

/// Builds the client a controller acts with from its service account's
/// name (in [`ACCOUNTS_NAMESPACE`]), as upstream's
/// `--use-service-account-credentials`.
pub type ClientForAccount = Arc<dyn Fn(&str) -> kube::Client + Send + Sync>;

/// What every controller is given: the API client and the process-wide shared
/// informers (so all controllers, the scheduler and the node agent share one
/// watch per resource type).
#[derive(Clone)]
pub struct Context {
    /// The client this controller writes (and reads directly) with: its own
    /// service account's when the manager has [`Context::with_accounts`].
    pub client: kube::Client,
    /// The shared informers, so every controller's watches of one resource type are one watch.
    pub factory: SharedInformerFactory,
    /// The cluster CA certificate (PEM) published in every namespace as the
    /// `kube-root-ca.crt` ConfigMap; None when the server has none to share.
    pub root_ca_pem: Option<std::sync::Arc<str>>,
    /// The cluster CA, able to sign: kubelet serving certificate requests
    /// are approved and signed only when it is given.
    pub cluster_signer: Option<std::sync::Arc<crate::certificates::kubelet_serving::ClusterSigner>>,
    accounts: Option<ClientForAccount>,
}

impl Context {
    /// A context without a cluster CA to publish, in which every controller
    /// acts with `client`.
    pub fn new(client: kube::Client, factory: SharedInformerFactory) -> Self {
        Self {
            client,
            factory,
            root_ca_pem: None,
            cluster_signer: None,
            accounts: None,
        }
    }

    /// The same context in which each controller acts as its own service
    /// account, with the client `client_for` builds for it; the manager's
    /// own client then only creates those accounts.
    pub fn with_accounts(mut self, client_for: ClientForAccount) -> Self {
        self.accounts = Some(client_for);
        self
    }

    /// The context one controller runs with.
    fn for_account(&self, account: &str) -> Self {
        let mut context = self.clone();
        if let Some(client_for) = &self.accounts {
            context.client = client_for(account);
        }
        context
    }

    /// The same context publishing `pem` as the cluster CA.
    pub fn with_root_ca(mut self, pem: &str) -> Self {
        self.root_ca_pem = Some(std::sync::Arc::from(pem));
        self
    }
}

/// The stop signal: controllers finish their in-flight work and return once
/// it turns true.
pub type Stop = watch::Receiver<bool>;

/// Resolves once `stop` turns true (or its sender is gone).
pub(crate) async fn stopped(mut stop: Stop) {
    let _ = stop.wait_for(|s| *s).await;
}

/// A controller's sync of one queued key: the state its workers share and
/// what they run for each key they take, so every such controller starts
/// the same way ([`run_until_stopped`]).
pub(crate) trait Reconciler: Send + Sync + 'static {
    /// Why a sync failed (logged; the key is retried with backoff).
    type Error: std::fmt::Display + Send + 'static;

    /// Brings the object under `key` to what it asks for.
    fn sync(&self, key: ObjectKey) -> impl Future<Output = Result<Action, Self::Error>> + Send;
}

/// A controller named `name` keyed by the objects of `primary`: the key of
/// each one added, changed or deleted is queued (more watches wake it for
/// the objects it owns).
pub(crate) fn keyed_by<K>(name: &str, primary: &Informer<K>) -> Controller<ObjectKey>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let queue = WorkQueue::<ObjectKey>::new();
    Controller::new(name, queue.clone()).watch(primary, EnqueueKeys::new(queue))
}

/// Runs `controller`'s workers until `stop`, each syncing the keys it takes
/// from the queue with the one `reconciler` they share.
pub(crate) async fn run_until_stopped<R: Reconciler>(
    controller: Controller<ObjectKey>,
    reconciler: Arc<R>,
    stop: Stop,
) {
    controller
        .run_shared(
            reconciler,
            |r, key| async move { r.sync(key).await },
            stopped(stop),
        )
        .await;
}

pub(crate) type Starter =
    Box<dyn FnOnce(Context, Stop) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// One controller as the manager knows it.
pub(crate) struct Registered {
    pub name: &'static str,
    /// The service account it acts as (upstream's names, e.g.
    /// `replicaset-controller`).
    pub account: &'static str,
    pub start: Starter,
}

/// A set of named controllers to run together.
pub struct ControllerManager {
    context: Context,
    controllers: Vec<Registered>,
}

impl ControllerManager {
    /// A manager with no controllers yet.
    pub fn new(context: Context) -> Self {
        Self {
            context,
            controllers: Vec::new(),
        }
    }

    /// A manager with every built-in controller, except those named in
    /// `disabled`.
    pub fn with_defaults(context: Context, disabled: &[&str]) -> Self {
        let mut manager = Self::new(context);
        manager.controllers = crate::defaults()
            .into_iter()
            .filter(|c| !disabled.contains(&c.name))
            .collect();
        manager
    }

    /// Adds a controller acting as service account `account`; `start` runs
    /// it until the stop signal.
    pub fn register<F, Fut>(&mut self, name: &'static str, account: &'static str, start: F)
    where
        F: FnOnce(Context, Stop) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.controllers.push(starter(name, account, start));
    }

    /// The names of the registered controllers, in start order.
    pub fn names(&self) -> Vec<&'static str> {
        self.controllers.iter().map(|c| c.name).collect()
    }

    /// The service accounts the registered controllers act as, each once.
    pub fn accounts(&self) -> Vec<&'static str> {
        let mut accounts: Vec<&'static str> = self.controllers.iter().map(|c| c.account).collect();
        accounts.sort_unstable();
        accounts.dedup();
        accounts
    }

    /// Runs every controller until `stop` turns true and all have returned.
    pub async fn run(self, stop: Stop) {
        if self.context.accounts.is_some() {
            ensure_accounts(&self.context.client, &self.accounts()).await;
        }
        // Stopped while the accounts were being created: an informer a
        // controller registered now would never be started (the factory is
        // already shut down), and its wait for sync would never end.
        if *stop.borrow() {
            return;
        }
        let mut running = tokio::task::JoinSet::new();
        for Registered {
            name,
            account,
            start,
        } in self.controllers
        {
            let future = start(self.context.for_account(account), stop.clone());
            running.spawn(async move {
                future.await;
                tracing::debug!(controller = name, "stopped");
            });
        }
        if let Err(error) = self.context.factory.start() {
            tracing::error!(%error, "starting the shared informers failed");
        }
        while let Some(result) = running.join_next().await {
            if let Err(error) = result {
                tracing::error!(%error, "a controller task failed");
            }
        }
    }
}

/// Helps building the [`defaults`](crate::defaults) list.
pub(crate) fn starter<F, Fut>(name: &'static str, account: &'static str, start: F) -> Registered
where
    F: FnOnce(Context, Stop) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    Registered {
        name,
        account,
        start: Box::new(move |ctx, stop| Box::pin(start(ctx, stop))),
    }
}

/// Creates the controllers' service accounts that do not exist yet, so
/// `kubectl get sa -n kube-system` shows who acts, as upstream. A failure
/// is logged and does not stop the controllers: their identity does not
/// depend on the object.
async fn ensure_accounts(client: &kube::Client, accounts: &[&str]) {
    let api: kube::Api<ServiceAccount> = kube::Api::namespaced(client.clone(), ACCOUNTS_NAMESPACE);
    for account in accounts {
        let object = ServiceAccount {
            metadata: ObjectMeta {
                name: Some(account.to_string()),
                namespace: Some(ACCOUNTS_NAMESPACE.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        match api.create(&PostParams::default(), &object).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => {
                tracing::warn!(%error, account, "creating a controller's service account failed")
            }
        }
    }
}
