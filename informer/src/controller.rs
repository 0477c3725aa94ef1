//! The controller runner: N workers pulling keys from a work queue and calling
//! an async reconcile function, retrying failures with backoff.
//!
//! A controller is declared by what it watches ([`Controller::watch`] registers
//! an event handler and waits for that informer's first list) and how it
//! reconciles ([`Controller::run_shared`] / [`Controller::run_until`]); the
//! start-up every controller shares (refuse to run when a handler could not be
//! registered, wait for the caches or the stop signal, one tracing span per
//! reconcile named after the controller and the key) lives here once.

use std::fmt::{Debug, Display};
use std::future::Future;
use std::hash::Hash;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::FutureExt;
use kube::Resource;
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tracing::Instrument;

use crate::handler::EventHandler;
use crate::informer::{Informer, InformerError};
use crate::workqueue::WorkQueue;

/// What a successful reconcile asks for next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing until the key is added again (by an event).
    Done,
    /// Reconcile the key again after this long (e.g. to check a deadline).
    RequeueAfter(Duration),
}

/// Counters of one controller, readable while it runs.
#[derive(Debug, Default)]
pub struct ControllerMetrics {
    reconciles: AtomicU64,
    errors: AtomicU64,
    panics: AtomicU64,
    requeues_after: AtomicU64,
}

/// A point-in-time copy of [`ControllerMetrics`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    /// Reconcile calls finished (successful, failed or panicked).
    pub reconciles: u64,
    /// Reconciles that returned an error or panicked.
    pub errors: u64,
    /// Reconciles that panicked (also counted in `errors`).
    pub panics: u64,
    /// Successful reconciles that asked to run again after a delay.
    pub requeues_after: u64,
}

impl ControllerMetrics {
    /// Current values.
    pub fn snapshot(&self) -> MetricsSnapshot {
        MetricsSnapshot {
            reconciles: self.reconciles.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            panics: self.panics.load(Ordering::Relaxed),
            requeues_after: self.requeues_after.load(Ordering::Relaxed),
        }
    }
}

/// Runs reconcile over the keys of a work queue with a fixed number of workers.
///
/// Per key: a success forgets the key's failure history (and re-adds it after
/// the requested delay, if any); an error or a panic re-adds it rate-limited.
/// The queue guarantees a key is never reconciled by two workers at once.
pub struct Controller<T> {
    name: String,
    queue: WorkQueue<T>,
    workers: usize,
    metrics: Arc<ControllerMetrics>,
    /// The informers whose first list must be in their caches before any
    /// reconcile runs.
    gates: Vec<watch::Receiver<bool>>,
    /// The first event handler that could not be registered: the controller
    /// would miss events, so it does not start.
    watch_error: Option<InformerError>,
}

impl<T> Controller<T>
where
    T: Eq + Hash + Clone + Debug + Send + Sync + 'static,
{
    /// A controller called `name` (for logs) working off `queue` with one worker.
    /// The queue is named after the controller in the `workqueue_*` metrics.
    pub fn new(name: impl Into<String>, queue: WorkQueue<T>) -> Self {
        let name = name.into();
        queue.instrument_as(&name);
        Self {
            name,
            queue,
            workers: 1,
            metrics: Arc::default(),
            gates: Vec::new(),
            watch_error: None,
        }
    }

    /// Registers `handler` on `informer` and waits for the informer's first
    /// list before reconciling. A registration failure is kept and reported
    /// by the run methods, which then return without reconciling.
    pub fn watch<K>(mut self, informer: &Informer<K>, handler: impl EventHandler<K>) -> Self
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        if let Err(error) = informer.add_event_handler(handler) {
            self.watch_error.get_or_insert(error);
        }
        self.after_sync(informer)
    }

    /// Waits for `informer`'s first list before reconciling (for an informer
    /// the controller reads from its cache without watching it).
    pub fn after_sync(mut self, informer: &dyn Syncable) -> Self {
        self.gates.push(informer.synced_watch());
        self
    }

    /// Keeps a failure to register an event handler that happened outside
    /// [`watch`](Self::watch) (e.g. adding an index), with the same effect.
    pub fn watch_result<R>(mut self, result: Result<R, impl Into<InformerError>>) -> Self {
        if let Err(error) = result {
            self.watch_error.get_or_insert(error.into());
        }
        self
    }

    /// Uses `workers` concurrent workers (at least one).
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }

    /// The controller's counters.
    pub fn metrics(&self) -> Arc<ControllerMetrics> {
        Arc::clone(&self.metrics)
    }

    /// The queue the workers pull from (event handlers add keys to it).
    pub fn queue(&self) -> &WorkQueue<T> {
        &self.queue
    }

    /// Runs the workers until the queue is shut down and they have finished.
    pub async fn run<F, Fut, E>(self, reconcile: F)
    where
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Display + Send + 'static,
    {
        let reconcile = Arc::new(reconcile);
        let name: Arc<str> = Arc::from(self.name.as_str());
        let workers: Vec<_> = (0..self.workers)
            .map(|_| {
                let worker = Worker {
                    name: Arc::clone(&name),
                    queue: self.queue.clone(),
                    metrics: Arc::clone(&self.metrics),
                };
                let reconcile = Arc::clone(&reconcile);
                tokio::spawn(async move { worker.run(reconcile.as_ref()).await })
            })
            .collect();
        for worker in workers {
            if let Err(error) = worker.await {
                tracing::error!(controller = %name, %error, "worker task failed");
            }
        }
        tracing::debug!(controller = %name, "workers stopped");
    }

    /// Runs the workers until `stop` completes, then drains the queue (in-flight
    /// and queued keys finish) and returns. Reconciling starts once every
    /// watched informer has synced; a stop before that returns at once, and
    /// so does a handler that could not be registered (logged).
    pub async fn run_until<F, Fut, E>(mut self, reconcile: F, stop: impl Future<Output = ()>)
    where
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Display + Send + 'static,
    {
        if let Some(error) = self.watch_error.take() {
            tracing::error!(controller = %self.name, %error, "cannot watch; not started");
            return;
        }
        tokio::pin!(stop);
        let gates = std::mem::take(&mut self.gates);
        tokio::select! {
            () = wait_all(gates) => {}
            () = &mut stop => return,
        }
        let queue = self.queue.clone();
        let running = self.run(reconcile);
        tokio::pin!(running);
        tokio::select! {
            _ = &mut running => return,
            _ = stop => {}
        }
        queue.shutdown_with_drain().await;
        running.await;
    }

    /// As [`run_until`](Self::run_until), with the reconcile written as a
    /// function of shared state (a syncer holding the client and caches) and
    /// the key.
    pub async fn run_shared<S, F, Fut, E>(
        self,
        state: Arc<S>,
        reconcile: F,
        stop: impl Future<Output = ()>,
    ) where
        S: Send + Sync + 'static,
        F: Fn(Arc<S>, T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Display + Send + 'static,
    {
        self.run_until(move |key| reconcile(Arc::clone(&state), key), stop)
            .await;
    }
}

/// Resolves once every channel reads true (or its informer is gone).
async fn wait_all(gates: Vec<watch::Receiver<bool>>) {
    for mut gate in gates {
        let _ = gate.wait_for(|synced| *synced).await;
    }
}

/// Something whose first complete list can be waited for: an informer.
pub trait Syncable: Send + Sync {
    /// A channel that turns true once the first list is in the cache.
    fn synced_watch(&self) -> watch::Receiver<bool>;
}

impl<K> Syncable for Informer<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    fn synced_watch(&self) -> watch::Receiver<bool> {
        Informer::synced_watch(self)
    }
}

/// Waits until every one of `informers` has applied its first list, or
/// `stop` resolves first; true when synced. For components that read caches
/// without running a [`Controller`].
pub fn wait_synced<S: Future<Output = ()>>(
    informers: &[&dyn Syncable],
    stop: S,
) -> impl Future<Output = bool> + use<S> {
    let gates = informers.iter().map(|i| i.synced_watch()).collect();
    async move {
        tokio::select! {
            () = wait_all(gates) => true,
            () = stop => false,
        }
    }
}

struct Worker<T> {
    name: Arc<str>,
    queue: WorkQueue<T>,
    metrics: Arc<ControllerMetrics>,
}

impl<T> Worker<T>
where
    T: Eq + Hash + Clone + Debug + Send + Sync + 'static,
{
    async fn run<F, Fut, E>(&self, reconcile: &F)
    where
        F: Fn(T) -> Fut,
        Fut: Future<Output = Result<Action, E>>,
        E: Display,
    {
        while let Some(key) = self.queue.get().await {
            // One span per reconcile, so every line a reconcile logs (and the
            // client requests it makes) carries the controller and the key.
            let span = tracing::info_span!("reconcile", controller = %self.name, key = ?key);
            let outcome = AssertUnwindSafe(async { reconcile(key.clone()).await })
                .catch_unwind()
                .instrument(span)
                .await;
            self.metrics.reconciles.fetch_add(1, Ordering::Relaxed);
            match outcome {
                Ok(Ok(action)) => {
                    self.queue.forget(&key);
                    if let Action::RequeueAfter(delay) = action {
                        self.metrics.requeues_after.fetch_add(1, Ordering::Relaxed);
                        self.queue.add_after(key.clone(), delay);
                    }
                }
                Ok(Err(error)) => {
                    self.metrics.errors.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        controller = %self.name,
                        key = ?key,
                        %error,
                        retries = self.queue.num_requeues(&key),
                        "reconcile failed; retrying with backoff"
                    );
                    self.queue.add_rate_limited(key.clone());
                }
                Err(_) => {
                    self.metrics.errors.fetch_add(1, Ordering::Relaxed);
                    self.metrics.panics.fetch_add(1, Ordering::Relaxed);
                    tracing::error!(
                        controller = %self.name,
                        key = ?key,
                        "reconcile panicked; retrying with backoff"
                    );
                    self.queue.add_rate_limited(key.clone());
                }
            }
            self.queue.done(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    use parking_lot::Mutex;
    use tokio::time::Instant;

    use crate::workqueue::ItemExponentialBackoff;

    fn backoff_queue<T: Eq + Hash + Clone + Send + Sync + 'static>() -> WorkQueue<T> {
        WorkQueue::with_rate_limiter(Box::new(ItemExponentialBackoff::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        )))
    }

    #[tokio::test(start_paused = true)]
    async fn errors_retry_with_growing_backoff_and_success_forgets() {
        let queue = backoff_queue();
        let controller = Controller::new("test", queue.clone());
        let metrics = controller.metrics();
        let start = Instant::now();
        let attempts = Arc::new(Mutex::new(Vec::new()));
        let seen = attempts.clone();
        let observer = queue.clone();
        queue.add("k");
        let run = tokio::spawn(controller.run(move |key: &'static str| {
            let seen = seen.clone();
            let observer = observer.clone();
            async move {
                let mut seen = seen.lock();
                seen.push((start.elapsed(), observer.num_requeues(&key)));
                if seen.len() < 4 {
                    Err("not yet")
                } else {
                    Ok(Action::Done)
                }
            }
        }));
        while metrics.snapshot().reconciles < 4 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let ms = Duration::from_millis;
        assert_eq!(
            *attempts.lock(),
            [(ms(0), 0), (ms(5), 1), (ms(15), 2), (ms(35), 3)]
        );
        assert_eq!(queue.num_requeues(&"k"), 0, "success forgets the failures");
        let snapshot = metrics.snapshot();
        assert_eq!((snapshot.reconciles, snapshot.errors), (4, 3));
        queue.shutdown_with_drain().await;
        run.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn requeue_after_runs_the_key_again_after_the_delay() {
        let queue = WorkQueue::new();
        let controller = Controller::new("test", queue.clone());
        let metrics = controller.metrics();
        let start = Instant::now();
        let runs = Arc::new(Mutex::new(Vec::new()));
        let seen = runs.clone();
        queue.add("k");
        let run = tokio::spawn(controller.run(move |_key: &'static str| {
            let seen = seen.clone();
            async move {
                let mut seen = seen.lock();
                seen.push(start.elapsed());
                Ok::<_, String>(if seen.len() < 3 {
                    Action::RequeueAfter(Duration::from_secs(30))
                } else {
                    Action::Done
                })
            }
        }));
        while metrics.snapshot().reconciles < 3 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(*runs.lock(), [0, 30, 60].map(Duration::from_secs).to_vec());
        assert_eq!(metrics.snapshot().requeues_after, 2);
        queue.shutdown();
        run.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_reconcile_is_retried_and_counted() {
        let queue = backoff_queue();
        let controller = Controller::new("test", queue.clone());
        let metrics = controller.metrics();
        let calls = Arc::new(AtomicU64::new(0));
        let counted = calls.clone();
        queue.add(1u32);
        let run = tokio::spawn(controller.run(move |_key| {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            async move {
                if n == 0 {
                    panic!("reconcile bug");
                }
                Ok::<_, String>(Action::Done)
            }
        }));
        while metrics.snapshot().reconciles < 2 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let snapshot = metrics.snapshot();
        assert_eq!((snapshot.errors, snapshot.panics), (1, 1));
        queue.shutdown();
        run.await.unwrap();
    }

    fn config_map(name: &str) -> k8s_openapi::api::core::v1::ConfigMap {
        let mut cm = k8s_openapi::api::core::v1::ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.metadata.namespace = Some("ns".into());
        cm.metadata.resource_version = Some("1".into());
        cm
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_is_reconciled_before_the_watched_cache_has_synced() {
        use kube::runtime::watcher::Event;
        let informer = Informer::without_source();
        let queue = WorkQueue::new();
        let controller = Controller::new("test", queue.clone())
            .watch(&informer, crate::EnqueueKeys::new(queue.clone()));
        let metrics = controller.metrics();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let run = tokio::spawn(controller.run_until(
            move |key: crate::ObjectKey| {
                record.lock().push(key.to_string());
                async { Ok::<_, String>(Action::Done) }
            },
            std::future::pending(),
        ));
        informer.handle_event(Event::Init);
        informer.handle_event(Event::InitApply(config_map("a")));
        queue.add(crate::ObjectKey::new(Some("ns"), "early"));
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(metrics.snapshot().reconciles, 0, "ran before the sync");
        informer.handle_event(Event::InitDone);
        while metrics.snapshot().reconciles < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut seen = seen.lock().clone();
        seen.sort();
        assert_eq!(seen, ["ns/a", "ns/early"]);
        queue.shutdown();
        run.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_stop_before_the_sync_returns_without_reconciling() {
        let informer = Informer::<k8s_openapi::api::core::v1::ConfigMap>::without_source();
        let queue = WorkQueue::<u32>::new();
        queue.add(1);
        let calls = Arc::new(AtomicU64::new(0));
        let counted = calls.clone();
        let run = Controller::new("test", queue.clone())
            .after_sync(&informer)
            .run_until(
                move |_key| {
                    counted.fetch_add(1, Ordering::SeqCst);
                    async { Ok::<_, String>(Action::Done) }
                },
                tokio::time::sleep(Duration::from_secs(1)),
            );
        tokio::time::timeout(Duration::from_secs(10), run)
            .await
            .expect("returned at the stop signal");
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        let synced = wait_synced(&[&informer], tokio::time::sleep(Duration::from_secs(1)));
        assert!(!synced.await, "an unsynced informer is reported as such");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn workers_share_the_load_but_never_a_key() {
        let queue = WorkQueue::<u32>::new();
        let controller = Controller::new("test", queue.clone()).workers(4);
        let in_flight = Arc::new(Mutex::new(HashSet::new()));
        let overlaps = Arc::new(AtomicU64::new(0));
        let per_key = Arc::new(Mutex::new(HashMap::<u32, u32>::new()));
        let (inf, ovl, pk) = (in_flight.clone(), overlaps.clone(), per_key.clone());
        let run = tokio::spawn(controller.run_until(
            move |key: u32| {
                let (inf, ovl, pk) = (inf.clone(), ovl.clone(), pk.clone());
                async move {
                    if !inf.lock().insert(key) {
                        ovl.fetch_add(1, Ordering::SeqCst);
                    }
                    tokio::time::sleep(Duration::from_micros(300)).await;
                    *pk.lock().entry(key).or_default() += 1;
                    inf.lock().remove(&key);
                    Ok::<_, String>(Action::Done)
                }
            },
            {
                let queue = queue.clone();
                async move {
                    for round in 0..50 {
                        for key in 0..8 {
                            queue.add(key);
                        }
                        if round % 5 == 0 {
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                    }
                }
            },
        ));
        run.await.unwrap();
        assert_eq!(overlaps.load(Ordering::SeqCst), 0);
        let per_key = per_key.lock();
        assert_eq!(per_key.len(), 8, "every key reconciled");
        assert!(queue.is_shutting_down());
    }
}
