//! kube-scheduler's Prometheus metrics on upstream's names: scheduling
//! attempts by result and profile, the pod scheduling SLI (from the pod's
//! first attempt to its binding) by number of attempts, and the pending
//! pods per queue, read from each running scheduler at scrape time.

use std::sync::{Arc, LazyLock, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use skiff_common::metrics::prometheus::{HistogramVec, IntCounterVec, IntGaugeVec};
use skiff_common::metrics::{self as m, Component};

use crate::scheduler::Scheduler;

const C: Component = Component::Scheduler;

static ATTEMPTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    m::counter_vec(
        C,
        "scheduler_schedule_attempts_total",
        "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
        &["result", "profile"],
    )
});

static SLI_DURATION: LazyLock<HistogramVec> = LazyLock::new(|| {
    m::histogram_vec(
        C,
        "scheduler_pod_scheduling_sli_duration_seconds",
        "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and might involve multiple scheduling attempts.",
        &["attempts"],
        m::exponential_buckets(0.01, 2.0, 20),
    )
});

static PENDING: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    let gauge = m::gauge_vec(
        C,
        "scheduler_pending_pods",
        "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that the scheduler never attempted to schedule because they are gated.",
        &["queue"],
    );
    m::on_scrape(C, count_pending);
    gauge
});

/// The running schedulers (one in a real process; tests run several,
/// whose pending pods add up).
static RUNNING: LazyLock<Mutex<Vec<Weak<Scheduler>>>> = LazyLock::new(Default::default);

/// How a scheduling attempt ended, in upstream's `result` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptResult {
    /// Bound to a node.
    Scheduled,
    /// No node fits (or a plugin rejected it).
    Unschedulable,
    /// An internal error.
    Error,
}

impl AttemptResult {
    fn label(self) -> &'static str {
        match self {
            AttemptResult::Scheduled => "scheduled",
            AttemptResult::Unschedulable => "unschedulable",
            AttemptResult::Error => "error",
        }
    }
}

/// Counts one attempt of `profile`.
pub fn attempt(result: AttemptResult, profile: &str) {
    ATTEMPTS.with_label_values(&[result.label(), profile]).inc();
}

/// Records a pod bound after `attempts` attempts, `waited` after its first.
pub fn scheduled(attempts: u32, waited: Duration) {
    SLI_DURATION
        .with_label_values(&[&attempts.to_string()])
        .observe(waited.as_secs_f64());
}

/// Reports `scheduler`'s queues in `scheduler_pending_pods` while it lives.
pub fn follow(scheduler: &Arc<Scheduler>) {
    LazyLock::force(&PENDING);
    RUNNING.lock().push(Arc::downgrade(scheduler));
}

fn count_pending() -> bool {
    let mut totals = [0usize; 4];
    RUNNING.lock().retain(|weak| {
        let Some(scheduler) = weak.upgrade() else {
            return false;
        };
        let counts = scheduler.with_queue(|q| q.pending());
        for (total, count) in totals.iter_mut().zip(counts) {
            *total += count;
        }
        true
    });
    for (queue, total) in ["active", "backoff", "unschedulable", "gated"]
        .into_iter()
        .zip(totals)
    {
        PENDING
            .with_label_values(&[queue])
            .set(i64::try_from(total).unwrap_or(i64::MAX));
    }
    true
}
