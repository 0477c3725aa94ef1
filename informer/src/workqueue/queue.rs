//! The de-duplicating work queue controllers pull keys from.
//!
//! Three sets keep the guarantees: `dirty` (keys that need processing), `queue`
//! (the order they are handed out, each key at most once) and `processing` (keys a
//! worker holds). A key re-added while a worker holds it stays only in `dirty` and
//! is queued again when the worker calls [`WorkQueue::done`], so no key is ever
//! worked on by two workers at once and no change is lost.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, LazyLock, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use skiff_common::metrics::prometheus::{
    Gauge, GaugeVec, Histogram, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
};
use skiff_common::metrics::{self as m, Component};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::rate_limiter::{RateLimiter, default_rate_limiter};

/// A de-duplicating, delaying, rate-limited queue of keys; clones share one queue.
pub struct WorkQueue<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for WorkQueue<T> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

struct Shared<T> {
    state: Mutex<State<T>>,
    /// Wakes getters (and a draining `shutdown_with_drain`) when the state changed.
    changed: Notify,
    limiter: Box<dyn RateLimiter<T>>,
}

/// Whether the queue still accepts work.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Lifecycle {
    Running,
    /// Hands out what is queued (and re-queued by `done`), accepts nothing new.
    Draining,
    Stopped,
}

struct State<T> {
    queue: VecDeque<T>,
    dirty: HashSet<T>,
    processing: HashSet<T>,
    /// Delayed items ordered by when they become ready; the sequence breaks ties in
    /// insertion order.
    waiting: BTreeMap<(Instant, u64), T>,
    waiting_by_item: HashMap<T, (Instant, u64)>,
    next_seq: u64,
    lifecycle: Lifecycle,
    /// Set once the queue is named ([`WorkQueue::instrument_as`]).
    metrics: Option<QueueMetrics>,
    /// When each dirty key was first added, and when each key a worker
    /// holds was handed out: kept only for the metrics.
    added_at: HashMap<T, Instant>,
    started_at: HashMap<T, Instant>,
}

/// Upstream's `workqueue_*` metrics, each labelled with the queue's `name`.
struct Family {
    adds: IntCounterVec,
    depth: IntGaugeVec,
    queue_duration: HistogramVec,
    work_duration: HistogramVec,
    retries: IntCounterVec,
    unfinished: GaugeVec,
    longest: GaugeVec,
}

static FAMILY: LazyLock<Family> = LazyLock::new(|| {
    const C: Component = Component::ControllerManager;
    // Upstream's buckets: 10 ns to 1000 s.
    let buckets = || m::exponential_buckets(10e-9, 10.0, 12);
    Family {
        adds: m::counter_vec(
            C,
            "workqueue_adds_total",
            "Total number of adds handled by workqueue",
            &["name"],
        ),
        depth: m::gauge_vec(
            C,
            "workqueue_depth",
            "Current depth of workqueue",
            &["name"],
        ),
        queue_duration: m::histogram_vec(
            C,
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            &["name"],
            buckets(),
        ),
        work_duration: m::histogram_vec(
            C,
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            &["name"],
            buckets(),
        ),
        retries: m::counter_vec(
            C,
            "workqueue_retries_total",
            "Total number of retries handled by workqueue",
            &["name"],
        ),
        unfinished: m::float_gauge_vec(
            C,
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
            &["name"],
        ),
        longest: m::float_gauge_vec(
            C,
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            &["name"],
        ),
    }
});

/// One queue's labelled children of [`FAMILY`].
struct QueueMetrics {
    adds: IntCounter,
    depth: IntGauge,
    queue_duration: Histogram,
    work_duration: Histogram,
    retries: IntCounter,
    unfinished: Gauge,
    longest: Gauge,
}

impl QueueMetrics {
    fn new(name: &str) -> Self {
        let f = &*FAMILY;
        Self {
            adds: f.adds.with_label_values(&[name]),
            depth: f.depth.with_label_values(&[name]),
            queue_duration: f.queue_duration.with_label_values(&[name]),
            work_duration: f.work_duration.with_label_values(&[name]),
            retries: f.retries.with_label_values(&[name]),
            unfinished: f.unfinished.with_label_values(&[name]),
            longest: f.longest.with_label_values(&[name]),
        }
    }
}

impl<T: Eq + Hash + Clone> State<T> {
    /// Returns true if the item was newly queued (so one getter should wake).
    fn add(&mut self, item: T) -> bool {
        if self.lifecycle != Lifecycle::Running || self.dirty.contains(&item) {
            return false;
        }
        if let Some(metrics) = &self.metrics {
            // As upstream: a key re-added while a worker holds it counts in
            // the depth already, and waits from now.
            metrics.adds.inc();
            metrics.depth.inc();
            self.added_at
                .entry(item.clone())
                .or_insert_with(Instant::now);
        }
        self.dirty.insert(item.clone());
        if self.processing.contains(&item) {
            // Queued again by `done`; handing it out now would let two workers hold it.
            return false;
        }
        self.queue.push_back(item);
        true
    }

    /// Moves every delayed item whose time has come into the queue.
    fn promote_due(&mut self, now: Instant) -> bool {
        let mut promoted = false;
        while let Some(entry) = self.waiting.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let item = entry.remove();
            self.waiting_by_item.remove(&item);
            promoted |= self.add(item);
        }
        promoted
    }

    fn next_ready_at(&self) -> Option<Instant> {
        self.waiting.keys().next().map(|(at, _)| *at)
    }

    fn fully_drained(&self) -> bool {
        self.queue.is_empty() && self.processing.is_empty()
    }

    /// Hands out the next queued key.
    fn pop(&mut self) -> Option<T> {
        let item = self.queue.pop_front()?;
        self.dirty.remove(&item);
        self.processing.insert(item.clone());
        if let Some(metrics) = &self.metrics {
            let now = Instant::now();
            metrics.depth.dec();
            if let Some(added) = self.added_at.remove(&item) {
                metrics
                    .queue_duration
                    .observe(now.duration_since(added).as_secs_f64());
            }
            self.started_at.insert(item.clone(), now);
        }
        Some(item)
    }

    /// Work in progress as upstream reports it: the seconds held so far,
    /// summed and the longest.
    fn record_unfinished(&self) {
        if let Some(metrics) = &self.metrics {
            let now = Instant::now();
            let held = self
                .started_at
                .values()
                .map(|started| now.duration_since(*started).as_secs_f64());
            let (sum, longest) = held.fold((0.0, 0.0f64), |(s, l), h| (s + h, l.max(h)));
            metrics.unfinished.set(sum);
            metrics.longest.set(longest);
        }
    }
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> Default for WorkQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> WorkQueue<T> {
    /// A queue using the default controller rate limiter (5 ms → 1000 s per item,
    /// 10 qps burst 100 overall).
    pub fn new() -> Self {
        Self::with_rate_limiter(Box::new(default_rate_limiter()))
    }

    /// A queue whose `add_rate_limited` delays come from `limiter`.
    pub fn with_rate_limiter(limiter: Box<dyn RateLimiter<T>>) -> Self {
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    dirty: HashSet::new(),
                    processing: HashSet::new(),
                    waiting: BTreeMap::new(),
                    waiting_by_item: HashMap::new(),
                    next_seq: 0,
                    lifecycle: Lifecycle::Running,
                    metrics: None,
                    added_at: HashMap::new(),
                    started_at: HashMap::new(),
                }),
                changed: Notify::new(),
                limiter,
            }),
        }
    }

    /// Names the queue in upstream's `workqueue_*` metrics (label `name`)
    /// and starts recording them; a queue already named keeps its name.
    /// [`crate::Controller::new`] names its queue after the controller.
    pub fn instrument_as(&self, name: &str) {
        {
            let mut state = self.shared.state.lock();
            if state.metrics.is_some() {
                return;
            }
            let metrics = QueueMetrics::new(name);
            let now = Instant::now();
            // What is queued already counts from now on.
            metrics
                .depth
                .add(i64::try_from(state.dirty.len()).unwrap_or(0));
            let dirty: Vec<T> = state.dirty.iter().cloned().collect();
            state
                .added_at
                .extend(dirty.into_iter().map(|item| (item, now)));
            let processing: Vec<T> = state.processing.iter().cloned().collect();
            state
                .started_at
                .extend(processing.into_iter().map(|item| (item, now)));
            state.metrics = Some(metrics);
        }
        let weak: Weak<Shared<T>> = Arc::downgrade(&self.shared);
        m::on_scrape(Component::ControllerManager, move || match weak.upgrade() {
            Some(shared) => {
                shared.state.lock().record_unfinished();
                true
            }
            None => false,
        });
    }

    /// Queues `item` unless it is already queued; ignored after shutdown.
    pub fn add(&self, item: T) {
        let woke = self.shared.state.lock().add(item);
        if woke {
            self.shared.changed.notify_one();
        }
    }

    /// Queues `item` once `delay` has passed. If the item is already waiting, the
    /// earlier of the two times wins.
    pub fn add_after(&self, item: T, delay: Duration) {
        if delay.is_zero() {
            self.add(item);
            return;
        }
        let ready_at = Instant::now() + delay;
        {
            let mut state = self.shared.state.lock();
            if state.lifecycle != Lifecycle::Running {
                return;
            }
            if let Some(existing) = state.waiting_by_item.get(&item).copied() {
                if existing.0 <= ready_at {
                    return;
                }
                state.waiting.remove(&existing);
            }
            let seq = state.next_seq;
            state.next_seq += 1;
            state.waiting.insert((ready_at, seq), item.clone());
            state.waiting_by_item.insert(item, (ready_at, seq));
        }
        // Sleeping getters may be waiting for a later deadline; let them recompute.
        self.shared.changed.notify_waiters();
    }

    /// Queues `item` after the delay its rate limiter assigns (one more failure).
    pub fn add_rate_limited(&self, item: T) {
        if let Some(metrics) = &self.shared.state.lock().metrics {
            metrics.retries.inc();
        }
        let delay = self.shared.limiter.when(&item);
        self.add_after(item, delay);
    }

    /// Clears the rate limiter's failure history for `item`.
    pub fn forget(&self, item: &T) {
        self.shared.limiter.forget(item);
    }

    /// How many times `item` has been re-queued by `add_rate_limited` since the last `forget`.
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.shared.limiter.num_requeues(item)
    }

    /// Waits for the next item and marks it as being processed; the caller must
    /// call [`done`](Self::done) with it. Returns `None` once the queue is shut
    /// down (after a drain: once every queued item was handed out and finished).
    pub async fn get(&self) -> Option<T> {
        loop {
            let notified = self.shared.changed.notified();
            tokio::pin!(notified);
            // Register before looking at the state so no wake-up between the two is lost.
            notified.as_mut().enable();
            let next_ready = {
                let mut state = self.shared.state.lock();
                match state.lifecycle {
                    Lifecycle::Stopped => return None,
                    Lifecycle::Running => {
                        state.promote_due(Instant::now());
                    }
                    Lifecycle::Draining => {}
                }
                if let Some(item) = state.pop() {
                    return Some(item);
                }
                if state.lifecycle == Lifecycle::Draining && state.fully_drained() {
                    return None;
                }
                state.next_ready_at()
            };
            match next_ready {
                Some(at) => {
                    tokio::select! {
                        _ = &mut notified => {}
                        _ = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Marks `item` as finished; if it was re-added meanwhile it is queued again.
    pub fn done(&self, item: &T) {
        let mut state = self.shared.state.lock();
        if !state.processing.remove(item) {
            return;
        }
        if let Some(started) = state.started_at.remove(item)
            && let Some(metrics) = &state.metrics
        {
            metrics
                .work_duration
                .observe(Instant::now().duration_since(started).as_secs_f64());
        }
        let requeue = state.dirty.contains(item) && state.lifecycle != Lifecycle::Stopped;
        if requeue {
            state.queue.push_back(item.clone());
        }
        let drained = state.lifecycle == Lifecycle::Draining && state.fully_drained();
        drop(state);
        if drained {
            self.shared.changed.notify_waiters();
        } else if requeue {
            self.shared.changed.notify_one();
        }
    }

    /// Number of items ready to be handed out (delayed items not yet due excluded).
    pub fn len(&self) -> usize {
        let mut state = self.shared.state.lock();
        if state.lifecycle == Lifecycle::Running {
            state.promote_due(Instant::now());
        }
        state.queue.len()
    }

    /// True when no item is ready to be handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True once `shutdown` or `shutdown_with_drain` was called.
    pub fn is_shutting_down(&self) -> bool {
        self.shared.state.lock().lifecycle != Lifecycle::Running
    }

    /// Stops the queue now: every `get` returns `None`, queued and delayed items
    /// are dropped, later adds are ignored. Workers still call `done` for what they hold.
    pub fn shutdown(&self) {
        {
            let mut state = self.shared.state.lock();
            state.lifecycle = Lifecycle::Stopped;
            state.queue.clear();
            if let Some(metrics) = &state.metrics {
                metrics
                    .depth
                    .sub(i64::try_from(state.dirty.len()).unwrap_or(0));
            }
            state.added_at.clear();
            state.dirty.clear();
            state.waiting.clear();
            state.waiting_by_item.clear();
        }
        self.shared.changed.notify_waiters();
    }

    /// Stops accepting new items, lets workers finish everything already queued
    /// (including keys re-added while they were being processed), and returns
    /// once nothing is queued or processing. Delayed items not yet due are dropped.
    pub async fn shutdown_with_drain(&self) {
        {
            let mut state = self.shared.state.lock();
            if state.lifecycle == Lifecycle::Running {
                state.lifecycle = Lifecycle::Draining;
                state.waiting.clear();
                state.waiting_by_item.clear();
            }
        }
        self.shared.changed.notify_waiters();
        loop {
            let notified = self.shared.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = self.shared.state.lock();
                if state.lifecycle == Lifecycle::Stopped {
                    return;
                }
                if state.fully_drained() {
                    state.lifecycle = Lifecycle::Stopped;
                    drop(state);
                    self.shared.changed.notify_waiters();
                    return;
                }
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_named_queue_reports_upstreams_workqueue_metrics() {
        use skiff_common::metrics::exposition;
        let q = WorkQueue::new();
        q.add("early");
        q.instrument_as("metrics-test-queue");
        q.add("a");
        q.add("a");
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(q.get().await, Some("early"));
        assert_eq!(q.get().await, Some("a"));
        q.add("a");
        tokio::time::advance(Duration::from_secs(3)).await;
        q.done(&"early");
        q.add_rate_limited("b");
        let samples = exposition::parse(&m::gather(&[Component::ControllerManager])).unwrap();
        let value = |name: &str| {
            exposition::value(&samples, name, &[("name", "metrics-test-queue")]).unwrap_or(-1.0)
        };
        // "early" was queued before the name: it counts in the depth, not the adds.
        assert_eq!(value("workqueue_adds_total"), 2.0);
        // "a" again, re-added while a worker holds it.
        assert_eq!(value("workqueue_depth"), 1.0);
        assert_eq!(value("workqueue_retries_total"), 1.0);
        assert_eq!(value("workqueue_queue_duration_seconds_count"), 2.0);
        assert_eq!(value("workqueue_queue_duration_seconds_sum"), 4.0);
        assert_eq!(value("workqueue_work_duration_seconds_count"), 1.0);
        assert_eq!(value("workqueue_work_duration_seconds_sum"), 3.0);
        // "a" has been held 3 s and is still being worked on.
        assert_eq!(value("workqueue_unfinished_work_seconds"), 3.0);
        assert_eq!(value("workqueue_longest_running_processor_seconds"), 3.0);
    }
    use std::sync::atomic::{AtomicUsize, Ordering};

    use crate::workqueue::ItemExponentialBackoff;

    /// A queue whose only key, `key`, a worker has taken and not yet marked done.
    async fn taken<T: Eq + Hash + Clone + Send + Sync + 'static>(key: T) -> (WorkQueue<T>, T) {
        let q = WorkQueue::new();
        q.add(key);
        let item = q.get().await.unwrap();
        (q, item)
    }

    #[tokio::test]
    async fn a_queued_key_is_queued_once() {
        let q = WorkQueue::new();
        q.add("a");
        q.add("b");
        q.add("a");
        assert_eq!(q.len(), 2);
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(q.get().await, Some("b"));
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn a_key_readded_while_processing_runs_again_after_done() {
        let (q, item) = taken("a").await;
        q.add("a");
        q.add("a");
        // Held by a worker: not handed out to anyone else yet.
        assert_eq!(q.len(), 0);
        q.done(&item);
        assert_eq!(q.len(), 1);
        assert_eq!(q.get().await, Some("a"));
        q.done(&"a");
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn done_without_readd_does_not_requeue() {
        let (q, item) = taken(1).await;
        q.done(&item);
        assert!(q.is_empty());
        // A stray done for an unknown key changes nothing.
        q.done(&7);
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn get_waits_for_an_add() {
        let q = WorkQueue::<u32>::new();
        let getter = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        tokio::task::yield_now().await;
        q.add(42);
        assert_eq!(getter.await.unwrap(), Some(42));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn never_two_workers_on_one_key_under_concurrent_adds() {
        let q = WorkQueue::<u32>::new();
        let in_flight: Arc<Mutex<HashSet<u32>>> = Arc::default();
        let overlaps = Arc::new(AtomicUsize::new(0));
        let runs = Arc::new(AtomicUsize::new(0));
        let mut workers = Vec::new();
        for _ in 0..4 {
            let (q, in_flight, overlaps, runs) =
                (q.clone(), in_flight.clone(), overlaps.clone(), runs.clone());
            workers.push(tokio::spawn(async move {
                while let Some(key) = q.get().await {
                    if !in_flight.lock().insert(key) {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::task::yield_now().await;
                    tokio::time::sleep(Duration::from_micros(200)).await;
                    in_flight.lock().remove(&key);
                    q.done(&key);
                }
            }));
        }
        let mut adders = Vec::new();
        for a in 0..4 {
            let q = q.clone();
            adders.push(tokio::spawn(async move {
                for i in 0..500u32 {
                    q.add((i + a) % 3);
                    if i % 16 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            }));
        }
        for adder in adders {
            adder.await.unwrap();
        }
        q.shutdown_with_drain().await;
        for worker in workers {
            worker.await.unwrap();
        }
        assert_eq!(overlaps.load(Ordering::SeqCst), 0);
        // Every key added at least once ran at least once after its last add.
        assert!(runs.load(Ordering::SeqCst) >= 3);
        assert!(q.is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn readd_during_processing_is_not_lost_under_contention() {
        // Each worker round re-adds its key while holding it; the final add must
        // always be followed by one more run.
        let q = WorkQueue::<&'static str>::new();
        let runs = Arc::new(AtomicUsize::new(0));
        q.add("k");
        let worker = tokio::spawn({
            let (q, runs) = (q.clone(), runs.clone());
            async move {
                while let Some(key) = q.get().await {
                    let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
                    if n < 10 {
                        q.add(key);
                    }
                    q.done(&key);
                }
            }
        });
        while runs.load(Ordering::SeqCst) < 10 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        q.shutdown_with_drain().await;
        worker.await.unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 10);
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_hands_items_out_in_ready_order() {
        let q = WorkQueue::new();
        let start = Instant::now();
        q.add_after("late", Duration::from_millis(300));
        q.add_after("early", Duration::from_millis(100));
        q.add_after("middle", Duration::from_millis(200));
        assert_eq!(q.len(), 0);
        assert_eq!(q.get().await, Some("early"));
        assert_eq!(start.elapsed(), Duration::from_millis(100));
        assert_eq!(q.get().await, Some("middle"));
        assert_eq!(start.elapsed(), Duration::from_millis(200));
        assert_eq!(q.get().await, Some("late"));
        assert_eq!(start.elapsed(), Duration::from_millis(300));
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_keeps_the_earlier_time_for_a_waiting_item() {
        let q = WorkQueue::new();
        let start = Instant::now();
        q.add_after("a", Duration::from_secs(10));
        q.add_after("a", Duration::from_secs(1));
        q.add_after("a", Duration::from_secs(5));
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        q.done(&"a");
        tokio::time::sleep(Duration::from_secs(20)).await;
        // It was waiting once, so it is not handed out again.
        assert_eq!(q.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn an_earlier_add_after_wakes_a_sleeping_getter() {
        let q = WorkQueue::new();
        let start = Instant::now();
        q.add_after("slow", Duration::from_secs(60));
        let getter = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        tokio::task::yield_now().await;
        q.add_after("fast", Duration::from_secs(1));
        assert_eq!(getter.await.unwrap(), Some("fast"));
        assert_eq!(start.elapsed(), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn add_rate_limited_backs_off_per_item_and_forget_resets() {
        let q = WorkQueue::with_rate_limiter(Box::new(ItemExponentialBackoff::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        )));
        let start = Instant::now();
        q.add_rate_limited("a");
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(start.elapsed(), Duration::from_millis(5));
        q.done(&"a");
        q.add_rate_limited("a");
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(start.elapsed(), Duration::from_millis(15));
        q.done(&"a");
        assert_eq!(q.num_requeues(&"a"), 2);
        q.forget(&"a");
        assert_eq!(q.num_requeues(&"a"), 0);
        let before = Instant::now();
        q.add_rate_limited("a");
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(before.elapsed(), Duration::from_millis(5));
    }

    #[tokio::test]
    async fn shutdown_wakes_getters_with_none_and_ignores_later_adds() {
        let q = WorkQueue::<u8>::new();
        let getters: Vec<_> = (0..3)
            .map(|_| {
                let q = q.clone();
                tokio::spawn(async move { q.get().await })
            })
            .collect();
        tokio::task::yield_now().await;
        q.shutdown();
        for getter in getters {
            assert_eq!(getter.await.unwrap(), None);
        }
        q.add(1);
        assert!(q.is_empty());
        assert_eq!(q.get().await, None);
        assert!(q.is_shutting_down());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shutdown_with_drain_finishes_queued_and_in_flight_work() {
        let q = WorkQueue::<u32>::new();
        for i in 0..50 {
            q.add(i);
        }
        let processed = Arc::new(Mutex::new(Vec::new()));
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let (q, processed) = (q.clone(), processed.clone());
                tokio::spawn(async move {
                    while let Some(item) = q.get().await {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        processed.lock().push(item);
                        q.done(&item);
                    }
                })
            })
            .collect();
        // Delayed items not yet due when the drain starts are dropped, not waited for.
        tokio::time::sleep(Duration::from_millis(2)).await;
        q.add_after(999, Duration::from_secs(3600));
        q.shutdown_with_drain().await;
        q.add(1000);
        for worker in workers {
            worker.await.unwrap();
        }
        let mut processed = processed.lock().clone();
        processed.sort_unstable();
        processed.dedup();
        assert_eq!(processed, (0..50).collect::<Vec<_>>());
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn drain_requeues_keys_readded_before_the_drain() {
        let (q, held) = taken("a").await;
        q.add("a");
        let drain = tokio::spawn({
            let q = q.clone();
            async move { q.shutdown_with_drain().await }
        });
        tokio::task::yield_now().await;
        assert!(!drain.is_finished());
        q.done(&held);
        // The re-add made before the drain runs once more.
        assert_eq!(q.get().await, Some("a"));
        q.done(&"a");
        drain.await.unwrap();
        assert_eq!(q.get().await, None);
    }
}
