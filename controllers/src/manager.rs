//! The controller manager: starts every enabled controller on the shared
//! informers and stops them together.

use std::future::Future;
use std::pin::Pin;

use skiff_informer::SharedInformerFactory;
use tokio::sync::watch;

/// What every controller is given: the API client and the process-wide shared
/// informers (so all controllers, the scheduler and the node agent share one
/// watch per resource type).
#[derive(Clone)]
pub struct Context {
    pub client: kube::Client,
    pub factory: SharedInformerFactory,
    /// The cluster CA certificate (PEM) published in every namespace as the
    /// `kube-root-ca.crt` ConfigMap; None when the server has none to share.
    pub root_ca_pem: Option<std::sync::Arc<str>>,
}

impl Context {
    /// A context without a cluster CA to publish.
    pub fn new(client: kube::Client, factory: SharedInformerFactory) -> Self {
        Self {
            client,
            factory,
            root_ca_pem: None,
        }
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
pub async fn stopped(mut stop: Stop) {
    let _ = stop.wait_for(|s| *s).await;
}

pub(crate) type Starter =
    Box<dyn FnOnce(Context, Stop) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// A set of named controllers to run together.
pub struct ControllerManager {
    context: Context,
    controllers: Vec<(&'static str, Starter)>,
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
        for (name, starter) in crate::defaults() {
            if !disabled.contains(&name) {
                manager.controllers.push((name, starter));
            }
        }
        manager
    }

    /// Adds a controller; `start` runs it until the stop signal.
    pub fn register<F, Fut>(&mut self, name: &'static str, start: F)
    where
        F: FnOnce(Context, Stop) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.controllers
            .push((name, Box::new(move |ctx, stop| Box::pin(start(ctx, stop)))));
    }

    /// The names of the registered controllers, in start order.
    pub fn names(&self) -> Vec<&'static str> {
        self.controllers.iter().map(|(n, _)| *n).collect()
    }

    /// Runs every controller until `stop` turns true and all have returned.
    pub async fn run(self, stop: Stop) {
        let mut running = tokio::task::JoinSet::new();
        for (name, start) in self.controllers {
            let future = start(self.context.clone(), stop.clone());
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
pub(crate) fn starter<F, Fut>(name: &'static str, start: F) -> (&'static str, Starter)
where
    F: FnOnce(Context, Stop) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    (name, Box::new(move |ctx, stop| Box::pin(start(ctx, stop))))
}
