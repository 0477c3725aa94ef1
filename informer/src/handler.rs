//! What informers tell their listeners: notifications and the handler trait.
//!
//! Handlers run on their listener's own task, one notification at a time in the
//! order the informer saw the changes. They should be quick (typically: put a key
//! on a work queue); a slow handler only delays its own listener.

use std::sync::Arc;

use kube::Resource;

use crate::key::ObjectKey;
use crate::workqueue::WorkQueue;

/// One change delivered to a listener.
#[derive(Debug)]
pub enum Notification<K> {
    /// The object appeared (first list, watch ADDED, or present for a late listener).
    Add(Arc<K>),
    /// The object changed, or is re-delivered unchanged by a relist or resync.
    Update {
        /// State the listener saw last.
        old: Arc<K>,
        /// Current state.
        new: Arc<K>,
    },
    /// The object is gone; this is its last known state. When the deletion
    /// happened while the watch was down, it is the state before the gap.
    Delete(Arc<K>),
}

impl<K> Clone for Notification<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Add(obj) => Self::Add(Arc::clone(obj)),
            Self::Update { old, new } => Self::Update {
                old: Arc::clone(old),
                new: Arc::clone(new),
            },
            Self::Delete(obj) => Self::Delete(Arc::clone(obj)),
        }
    }
}

/// Reacts to changes of one resource type. Every method defaults to doing nothing.
pub trait EventHandler<K>: Send + Sync + 'static {
    /// An object appeared.
    fn on_add(&self, _obj: &Arc<K>) {}
    /// An object changed (`old` may equal `new` on resync).
    fn on_update(&self, _old: &Arc<K>, _new: &Arc<K>) {}
    /// An object was deleted; `obj` is its last known state.
    fn on_delete(&self, _obj: &Arc<K>) {}
}

/// Delivers `notification` to the matching method of `handler`.
pub fn dispatch<K: 'static>(handler: &dyn EventHandler<K>, notification: &Notification<K>) {
    match notification {
        Notification::Add(obj) => handler.on_add(obj),
        Notification::Update { old, new } => handler.on_update(old, new),
        Notification::Delete(obj) => handler.on_delete(obj),
    }
}

type ObjFn<K> = Box<dyn Fn(&Arc<K>) + Send + Sync>;
type PairFn<K> = Box<dyn Fn(&Arc<K>, &Arc<K>) + Send + Sync>;

/// An [`EventHandler`] built from closures.
pub struct HandlerFns<K> {
    add: Option<ObjFn<K>>,
    update: Option<PairFn<K>>,
    delete: Option<ObjFn<K>>,
}

impl<K> Default for HandlerFns<K> {
    fn default() -> Self {
        Self {
            add: None,
            update: None,
            delete: None,
        }
    }
}

impl<K> HandlerFns<K> {
    /// A handler that ignores everything until closures are attached.
    pub fn new() -> Self {
        Self::default()
    }

    /// Calls `f` for every added object.
    pub fn on_add(mut self, f: impl Fn(&Arc<K>) + Send + Sync + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }

    /// Calls `f(old, new)` for every update.
    pub fn on_update(mut self, f: impl Fn(&Arc<K>, &Arc<K>) + Send + Sync + 'static) -> Self {
        self.update = Some(Box::new(f));
        self
    }

    /// Calls `f` with the last known state of every deleted object.
    pub fn on_delete(mut self, f: impl Fn(&Arc<K>) + Send + Sync + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }
}

impl<K: Send + Sync + 'static> HandlerFns<K> {
    /// A handler that wakes `changed` on every add, update and delete: for
    /// components that rebuild their whole state from the caches on any
    /// change (the service proxy, the ingress) rather than per object.
    pub fn notifying(changed: &Arc<tokio::sync::Notify>) -> Self {
        let (a, u, d) = (changed.clone(), changed.clone(), changed.clone());
        Self::new()
            .on_add(move |_| a.notify_one())
            .on_update(move |_, _| u.notify_one())
            .on_delete(move |_| d.notify_one())
    }
}

impl<K: Send + Sync + 'static> EventHandler<K> for HandlerFns<K> {
    fn on_add(&self, obj: &Arc<K>) {
        if let Some(f) = &self.add {
            f(obj);
        }
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        if let Some(f) = &self.update {
            f(old, new);
        }
    }

    fn on_delete(&self, obj: &Arc<K>) {
        if let Some(f) = &self.delete {
            f(obj);
        }
    }
}

/// Passes on only objects accepted by a filter, translating updates that cross
/// the filter: an object that starts matching is an add, one that stops matching
/// is a delete.
pub struct FilteringHandler<K, H> {
    filter: Box<dyn Fn(&K) -> bool + Send + Sync>,
    inner: H,
}

impl<K, H: EventHandler<K>> FilteringHandler<K, H> {
    /// Wraps `inner` so it sees only objects for which `filter` is true.
    pub fn new(filter: impl Fn(&K) -> bool + Send + Sync + 'static, inner: H) -> Self {
        Self {
            filter: Box::new(filter),
            inner,
        }
    }
}

impl<K: Send + Sync + 'static, H: EventHandler<K>> EventHandler<K> for FilteringHandler<K, H> {
    fn on_add(&self, obj: &Arc<K>) {
        if (self.filter)(obj) {
            self.inner.on_add(obj);
        }
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        match ((self.filter)(old), (self.filter)(new)) {
            (true, true) => self.inner.on_update(old, new),
            (false, true) => self.inner.on_add(new),
            (true, false) => self.inner.on_delete(old),
            (false, false) => {}
        }
    }

    fn on_delete(&self, obj: &Arc<K>) {
        if (self.filter)(obj) {
            self.inner.on_delete(obj);
        }
    }
}

/// Puts the [`ObjectKey`] of every added, updated or deleted object on a work queue:
/// the usual handler of a controller that reconciles the informer's own kind.
pub struct EnqueueKeys {
    queue: WorkQueue<ObjectKey>,
}

impl EnqueueKeys {
    /// Enqueues into `queue`.
    pub fn new(queue: WorkQueue<ObjectKey>) -> Self {
        Self { queue }
    }
}

impl<K: Resource + Send + Sync + 'static> EventHandler<K> for EnqueueKeys {
    fn on_add(&self, obj: &Arc<K>) {
        self.queue.add(ObjectKey::from_object(obj.as_ref()));
    }

    fn on_update(&self, _old: &Arc<K>, new: &Arc<K>) {
        self.queue.add(ObjectKey::from_object(new.as_ref()));
    }

    fn on_delete(&self, obj: &Arc<K>) {
        self.queue.add(ObjectKey::from_object(obj.as_ref()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use parking_lot::Mutex;

    fn cm(name: &str, labelled: bool) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some(name.into()),
                labels: labelled.then(|| [("pick".to_string(), "me".to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn recorder() -> (Arc<Mutex<Vec<String>>>, HandlerFns<ConfigMap>) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let (a, u, d) = (log.clone(), log.clone(), log.clone());
        let name = |o: &Arc<ConfigMap>| o.metadata.name.clone().unwrap_or_default();
        let handler = HandlerFns::new()
            .on_add(move |o| a.lock().push(format!("add {}", name(o))))
            .on_update(move |_, n| u.lock().push(format!("update {}", name(n))))
            .on_delete(move |o| d.lock().push(format!("delete {}", name(o))));
        (log, handler)
    }

    #[test]
    fn filtering_handler_translates_updates_crossing_the_filter() {
        let (log, inner) = recorder();
        let handler = FilteringHandler::new(|c: &ConfigMap| c.metadata.labels.is_some(), inner);
        handler.on_add(&cm("a", false));
        handler.on_add(&cm("b", true));
        handler.on_update(&cm("a", false), &cm("a", true));
        handler.on_update(&cm("b", true), &cm("b", true));
        handler.on_update(&cm("b", true), &cm("b", false));
        handler.on_update(&cm("c", false), &cm("c", false));
        handler.on_delete(&cm("a", true));
        handler.on_delete(&cm("d", false));
        assert_eq!(
            *log.lock(),
            ["add b", "add a", "update b", "delete b", "delete a"]
        );
    }

    #[tokio::test]
    async fn enqueue_keys_puts_object_keys_on_the_queue() {
        let queue = WorkQueue::new();
        let handler = EnqueueKeys::new(queue.clone());
        dispatch::<ConfigMap>(&handler, &Notification::Add(cm("a", false)));
        dispatch::<ConfigMap>(
            &handler,
            &Notification::Update {
                old: cm("a", false),
                new: cm("a", true),
            },
        );
        dispatch::<ConfigMap>(&handler, &Notification::Delete(cm("b", false)));
        assert_eq!(queue.len(), 2);
        assert_eq!(queue.get().await, Some(ObjectKey::parse("ns/a")));
        assert_eq!(queue.get().await, Some(ObjectKey::parse("ns/b")));
    }
}
