//! One informer: a watch of one resource type (in one scope) keeping a cache
//! current and telling every registered listener about each change.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use crate::cache::{Cache, CacheError};
use crate::handler::EventHandler;
use crate::indexes::IndexFn;
use crate::listener::{ListenerHandle, Processor};
use crate::reflector::Reflector;

/// How often the run loop checks whether a listener's resync period elapsed.
const RESYNC_CHECK_PERIOD: Duration = Duration::from_secs(1);

/// Errors from starting an informer or registering listeners.
#[derive(Debug, thiserror::Error)]
pub enum InformerError {
    /// Listeners and watches run as tokio tasks.
    #[error("informer {0}: must be called from within a tokio runtime")]
    NoRuntime(&'static str),
    /// The informer was built without an API to watch (it is fed events directly).
    #[error("informer has no API source; feed it with run_stream or handle_event")]
    NoSource,
    /// An index a handler relies on could not be added to the cache.
    #[error("informer cache: {0}")]
    Index(#[from] CacheError),
}

/// Label and field selectors narrowing what an informer lists and watches.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct WatchConfig {
    /// Label selector in API syntax, e.g. `app=web,tier!=db`.
    pub label_selector: Option<String>,
    /// Field selector in API syntax, e.g. `spec.nodeName=node-1`.
    pub field_selector: Option<String>,
}

impl WatchConfig {
    /// Only objects whose labels match `selector`.
    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.to_owned());
        self
    }

    /// Only objects whose fields match `selector`.
    pub fn fields(mut self, selector: &str) -> Self {
        self.field_selector = Some(selector.to_owned());
        self
    }

    fn to_watcher_config(&self) -> watcher::Config {
        let mut config = watcher::Config::default();
        if let Some(labels) = &self.label_selector {
            config = config.labels(labels);
        }
        if let Some(fields) = &self.field_selector {
            config = config.fields(fields);
        }
        config
    }
}

/// A shared, cloneable informer of `K`; clones are the same informer.
pub struct Informer<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for Informer<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

struct Inner<K> {
    cache: Arc<Cache<K>>,
    /// Held while an event is applied and fanned out, and while a listener
    /// registers, so every listener sees one consistent sequence.
    core: Mutex<Core<K>>,
    synced: watch::Sender<bool>,
    counters: Counters,
    source: Option<Source<K>>,
    task: Mutex<Option<JoinHandle<()>>>,
}

/// Activity counters of one informer, for logs and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InformerStats {
    /// Watcher events applied (list items included).
    pub events: u64,
    /// Notifications produced (each is delivered to every listener).
    pub notifications: u64,
    /// Complete lists applied: the first sync plus every relist.
    pub lists: u64,
    /// Errors reported by the watch (each followed by a backoff and a retry).
    pub watch_errors: u64,
}

#[derive(Default)]
struct Counters {
    events: AtomicU64,
    notifications: AtomicU64,
    lists: AtomicU64,
    watch_errors: AtomicU64,
}

struct Core<K> {
    reflector: Reflector<K>,
    processor: Processor<K>,
}

struct Source<K> {
    api: Api<K>,
    config: watcher::Config,
}

impl<K> Informer<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// An informer that will list and watch `api` narrowed by `config` once started.
    pub fn new(api: Api<K>, config: &WatchConfig) -> Self {
        Self::build(Some(Source {
            api,
            config: config.to_watcher_config(),
        }))
    }

    /// An informer with no API behind it, fed through [`run_stream`](Self::run_stream)
    /// or [`handle_event`](Self::handle_event) (tests, replays, custom sources).
    pub fn without_source() -> Self {
        Self::build(None)
    }

    fn build(source: Option<Source<K>>) -> Self {
        Self {
            inner: Arc::new(Inner {
                cache: Arc::new(Cache::new()),
                core: Mutex::new(Core {
                    reflector: Reflector::new(),
                    processor: Processor::new(),
                }),
                synced: watch::Sender::new(false),
                counters: Counters::default(),
                source,
                task: Mutex::new(None),
            }),
        }
    }

    /// True if both handles are the same shared informer.
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The informer's cache: `get`, `list`, `by_index` and selector listings.
    pub fn cache(&self) -> &Arc<Cache<K>> {
        &self.inner.cache
    }

    /// Registers index `name`, or does nothing if an index of that name exists
    /// (several users of a shared informer may each ask for the same index).
    pub fn ensure_index(&self, name: &str, index_fn: IndexFn<K>) -> Result<(), CacheError> {
        match self.inner.cache.add_index(name, index_fn) {
            Ok(()) | Err(CacheError::IndexExists(_)) => Ok(()),
            Err(other) => Err(other),
        }
    }

    /// Registers `handler`: it first receives an add for every object already
    /// cached, then every change, on its own task.
    pub fn add_event_handler(
        &self,
        handler: impl EventHandler<K>,
    ) -> Result<ListenerHandle, InformerError> {
        self.register(Arc::new(handler), None)
    }

    /// Like [`add_event_handler`](Self::add_event_handler), and every `period`
    /// (checked each second) re-delivers each cached object as an update with
    /// `old` equal to `new`.
    pub fn add_event_handler_with_resync(
        &self,
        handler: impl EventHandler<K>,
        period: Duration,
    ) -> Result<ListenerHandle, InformerError> {
        self.register(Arc::new(handler), Some(period))
    }

    fn register(
        &self,
        handler: Arc<dyn EventHandler<K>>,
        resync: Option<Duration>,
    ) -> Result<ListenerHandle, InformerError> {
        let runtime =
            Handle::try_current().map_err(|_| InformerError::NoRuntime("add_event_handler"))?;
        let mut core = self.inner.core.lock();
        let existing = self.inner.cache.list();
        Ok(core.processor.add(&runtime, handler, resync, existing))
    }

    /// Stops delivering to the listener; it still handles what was buffered.
    pub fn remove_event_handler(&self, handle: &ListenerHandle) {
        self.inner.core.lock().processor.remove(handle);
    }

    /// Number of registered listeners.
    pub fn listener_count(&self) -> usize {
        self.inner.core.lock().processor.len()
    }

    /// What the informer has done so far.
    pub fn stats(&self) -> InformerStats {
        let c = &self.inner.counters;
        InformerStats {
            events: c.events.load(Ordering::Relaxed),
            notifications: c.notifications.load(Ordering::Relaxed),
            lists: c.lists.load(Ordering::Relaxed),
            watch_errors: c.watch_errors.load(Ordering::Relaxed),
        }
    }

    /// True once the first complete list has been applied to the cache.
    pub fn has_synced(&self) -> bool {
        *self.inner.synced.borrow()
    }

    /// Waits until the first complete list has been applied to the cache.
    pub async fn wait_for_sync(&self) {
        let mut rx = self.inner.synced.subscribe();
        // The sender lives in `self`, so the channel cannot close while we wait.
        let _ = rx.wait_for(|synced| *synced).await;
    }

    /// A channel that turns true when the informer has synced.
    pub fn synced_watch(&self) -> watch::Receiver<bool> {
        self.inner.synced.subscribe()
    }

    /// True while the watch task started by [`start`](Self::start) runs.
    pub fn is_running(&self) -> bool {
        self.inner
            .task
            .lock()
            .as_ref()
            .is_some_and(|task| !task.is_finished())
    }

    /// Starts listing and watching in a background task (list, watch from the
    /// list's resourceVersion, relist on 410 Gone, bookmarks, jittered backoff
    /// on errors). Starting a running informer does nothing.
    pub fn start(&self) -> Result<(), InformerError> {
        let source = self.inner.source.as_ref().ok_or(InformerError::NoSource)?;
        let runtime = Handle::try_current().map_err(|_| InformerError::NoRuntime("start"))?;
        let mut task = self.inner.task.lock();
        if task.as_ref().is_some_and(|t| !t.is_finished()) {
            return Ok(());
        }
        let events = watcher(source.api.clone(), source.config.clone()).default_backoff();
        let this = self.clone();
        *task = Some(runtime.spawn(async move { this.run_stream(events).await }));
        Ok(())
    }

    /// Stops the watch task; the cache keeps its last content.
    pub fn stop(&self) {
        if let Some(task) = self.inner.task.lock().take() {
            task.abort();
        }
    }

    /// Consumes watcher events until the stream ends, applying each to the cache
    /// and listeners and running due resyncs in between. Errors are logged; the
    /// watcher recovers from them itself.
    pub async fn run_stream<S>(&self, events: S)
    where
        S: Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    {
        let mut events = std::pin::pin!(events);
        let mut resync_check = tokio::time::interval(RESYNC_CHECK_PERIOD);
        resync_check.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                event = events.next() => match event {
                    Some(Ok(event)) => self.handle_event(event),
                    Some(Err(error)) => {
                        self.inner.counters.watch_errors.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(
                            kind = %K::kind(&()),
                            %error,
                            "watch failed; retrying with backoff"
                        );
                    }
                    None => return,
                },
                _ = resync_check.tick() => self.resync_due(Instant::now()),
            }
        }
    }

    /// Applies one watcher event to the cache and fans the result out.
    pub fn handle_event(&self, event: watcher::Event<K>) {
        let mut core = self.inner.core.lock();
        let applied = core.reflector.apply(&self.inner.cache, event);
        for notification in &applied.notifications {
            core.processor.distribute(notification);
        }
        drop(core);
        let counters = &self.inner.counters;
        counters.events.fetch_add(1, Ordering::Relaxed);
        counters
            .notifications
            .fetch_add(applied.notifications.len() as u64, Ordering::Relaxed);
        if applied.list_completed {
            counters.lists.fetch_add(1, Ordering::Relaxed);
            self.inner.synced.send_replace(true);
        }
    }

    /// The kind this informer watches (for logs).
    pub fn kind(&self) -> String {
        K::kind(&()).into_owned()
    }

    /// Runs the resync of every listener whose period elapsed at `now`.
    fn resync_due(&self, now: Instant) {
        if !self.has_synced() {
            return;
        }
        let mut core = self.inner.core.lock();
        let cache = &self.inner.cache;
        core.processor.resync_due(now, || cache.list());
    }
}

#[cfg(test)]
#[path = "informer_tests.rs"]
mod tests;
