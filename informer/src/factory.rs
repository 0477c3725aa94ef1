//! The per-process registry of shared informers: one watch per resource type and
//! scope, however many controllers ask for it.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;

use kube::core::NamespaceScope;
use kube::{Api, Client, Resource};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::informer::{Informer, InformerError, WatchConfig};

/// Creates informers on first request and shares them afterwards; clones share
/// one registry.
#[derive(Clone)]
pub struct SharedInformerFactory {
    inner: Arc<FactoryInner>,
}

struct FactoryInner {
    client: Client,
    state: Mutex<FactoryState>,
}

#[derive(Default)]
struct FactoryState {
    informers: HashMap<InformerKey, Arc<dyn ErasedInformer>>,
    started: bool,
}

/// What makes two requests share an informer: the type and the exact scope.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct InformerKey {
    type_id: TypeId,
    namespace: Option<String>,
    config: WatchConfig,
}

/// The type-independent face of an informer the factory needs.
trait ErasedInformer: Send + Sync {
    fn start(&self) -> Result<(), InformerError>;
    fn stop(&self);
    fn synced_watch(&self) -> watch::Receiver<bool>;
    fn kind(&self) -> String;
    fn as_any(&self) -> &dyn Any;
}

impl<K> ErasedInformer for Informer<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    fn start(&self) -> Result<(), InformerError> {
        Informer::start(self)
    }

    fn stop(&self) {
        Informer::stop(self)
    }

    fn synced_watch(&self) -> watch::Receiver<bool> {
        Informer::synced_watch(self)
    }

    fn kind(&self) -> String {
        Informer::kind(self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl SharedInformerFactory {
    /// A factory whose informers list and watch through `client`.
    pub fn new(client: Client) -> Self {
        Self {
            inner: Arc::new(FactoryInner {
                client,
                state: Mutex::new(FactoryState::default()),
            }),
        }
    }

    /// The client informers use (for controllers that also write).
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// The shared informer of every `K` in the cluster.
    pub fn informer<K>(&self) -> Informer<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        self.informer_with(WatchConfig::default())
    }

    /// The shared informer of every `K`, waking `changed` on every change:
    /// for components that rebuild their whole state from the caches on any
    /// change (the service proxy, the policy controller, the ingress).
    pub fn notifying_informer<K>(
        &self,
        changed: &Arc<tokio::sync::Notify>,
    ) -> Result<Informer<K>, InformerError>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let informer = self.informer::<K>();
        informer.add_event_handler(crate::handler::HandlerFns::notifying(changed))?;
        Ok(informer)
    }

    /// The shared informer of the `K` objects matching `config`'s selectors.
    pub fn informer_with<K>(&self, config: WatchConfig) -> Informer<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let api = Api::<K>::all(self.inner.client.clone());
        self.get_or_create(None, config, api)
    }

    /// The shared informer of the `K` objects in `namespace` matching `config`.
    pub fn namespaced_informer<K>(&self, namespace: &str, config: WatchConfig) -> Informer<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::Scope: NamespaceScope,
    {
        let api = Api::<K>::all(self.inner.client.clone()).constrain(namespace);
        self.get_or_create(Some(namespace.to_owned()), config, api)
    }

    fn get_or_create<K>(
        &self,
        namespace: Option<String>,
        config: WatchConfig,
        api: Api<K>,
    ) -> Informer<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let key = InformerKey {
            type_id: TypeId::of::<K>(),
            namespace,
            config,
        };
        let mut state = self.inner.state.lock();
        if let Some(existing) = state.informers.get(&key)
            && let Some(informer) = existing.as_any().downcast_ref::<Informer<K>>()
        {
            return informer.clone();
        }
        let informer = Informer::new(api, &key.config);
        if state.started
            && let Err(error) = informer.start()
        {
            tracing::error!(kind = %informer.kind(), %error, "could not start informer");
        }
        state
            .informers
            .insert(key, Arc::new(informer.clone()) as Arc<dyn ErasedInformer>);
        informer
    }

    /// Starts every informer created so far; informers created later start on
    /// creation. Starting twice does nothing more.
    pub fn start(&self) -> Result<(), InformerError> {
        let mut state = self.inner.state.lock();
        state.started = true;
        for informer in state.informers.values() {
            informer.start()?;
        }
        Ok(())
    }

    /// Waits until every informer created so far has completed its first list.
    pub async fn wait_for_sync(&self) {
        let watches: Vec<(String, watch::Receiver<bool>)> = self
            .inner
            .state
            .lock()
            .informers
            .values()
            .map(|i| (i.kind(), i.synced_watch()))
            .collect();
        for (kind, mut synced) in watches {
            if synced.wait_for(|s| *s).await.is_err() {
                tracing::warn!(%kind, "informer dropped before it synced");
            }
        }
    }

    /// True when every informer created so far has completed its first list.
    pub fn has_synced(&self) -> bool {
        self.inner
            .state
            .lock()
            .informers
            .values()
            .all(|i| *i.synced_watch().borrow())
    }

    /// Number of distinct informers created.
    pub fn informer_count(&self) -> usize {
        self.inner.state.lock().informers.len()
    }

    /// Stops every informer's watch; caches keep their content.
    pub fn shutdown(&self) {
        let mut state = self.inner.state.lock();
        state.started = false;
        for informer in state.informers.values() {
            informer.stop();
        }
    }
}

#[cfg(test)]
#[path = "factory_tests.rs"]
mod tests;
