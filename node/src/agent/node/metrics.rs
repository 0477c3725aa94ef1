//! The kubelet's Prometheus metrics on upstream's names: pods with a
//! running sandbox, containers by state (from each relist), the relist's
//! duration, and how long a pod took from the agent first seeing it to
//! running. Served by the node server's `/metrics` and, in `skiff server`,
//! by the API server's with every other component's.
//!
//! Several agents in one process (tests) each add what they see: a relist
//! moves the gauges by its change since the last one, and an agent that
//! stops takes its share back.

use std::sync::LazyLock;
use std::time::Duration;

use skiff_common::metrics::prometheus::{Histogram, HistogramVec, IntGauge, IntGaugeVec};
use skiff_common::metrics::{self as m, Component};

use crate::runtime::cri_api as api;

const C: Component = Component::Kubelet;

/// Upstream's container states, indexed by CRI's `ContainerState`.
const CONTAINER_STATES: [&str; 4] = ["created", "running", "exited", "unknown"];

static RUNNING_PODS: LazyLock<IntGauge> = LazyLock::new(|| {
    m::gauge(
        C,
        "kubelet_running_pods",
        "Number of pods that have a running pod sandbox",
    )
});

static RUNNING_CONTAINERS: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    m::gauge_vec(
        C,
        "kubelet_running_containers",
        "Number of containers currently running",
        &["container_state"],
    )
});

static RELIST_DURATION: LazyLock<Histogram> = LazyLock::new(|| {
    single(m::histogram_vec(
        C,
        "kubelet_pleg_relist_duration_seconds",
        "Duration in seconds for relisting pods in PLEG.",
        &[],
        // Prometheus' default buckets, as upstream's.
        vec![
            0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
        ],
    ))
});

static POD_START_DURATION: LazyLock<Histogram> = LazyLock::new(|| {
    single(m::histogram_vec(
        C,
        "kubelet_pod_start_duration_seconds",
        "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
        &[],
        vec![
            0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0, 180.0,
            240.0, 300.0, 360.0, 480.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0,
        ],
    ))
});

/// The one child of a family without labels.
fn single(family: HistogramVec) -> Histogram {
    family.with_label_values::<&str>(&[])
}

/// Pods with a ready sandbox and containers by state.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    pods: i64,
    containers: [i64; 4],
}

impl Counts {
    /// Moves the gauges from `self` to `next`.
    fn move_to(self, next: Counts) {
        RUNNING_PODS.add(next.pods - self.pods);
        for (state, (new, old)) in CONTAINER_STATES
            .iter()
            .zip(next.containers.iter().zip(self.containers))
        {
            RUNNING_CONTAINERS
                .with_label_values(&[state])
                .add(new - old);
        }
    }
}

/// What one agent's last relist saw, as added to the gauges; dropping it
/// (the agent stopped) takes that share back.
#[derive(Debug, Default)]
pub(crate) struct RelistCounts(Counts);

impl RelistCounts {
    /// Counts a relist's sandboxes and containers and moves the gauges by
    /// the change since this agent's previous relist.
    pub(crate) fn update(&mut self, sandboxes: &[api::PodSandbox], containers: &[api::Container]) {
        let pods = sandboxes
            .iter()
            .filter(|s| s.state == api::PodSandboxState::SandboxReady as i32)
            .count();
        let mut by_state = [0i64; 4];
        for c in containers {
            let state = usize::try_from(c.state).unwrap_or(3).min(3);
            by_state[state] += 1;
        }
        let next = Counts {
            pods: i64::try_from(pods).unwrap_or(i64::MAX),
            containers: by_state,
        };
        self.0.move_to(next);
        self.0 = next;
    }
}

impl Drop for RelistCounts {
    fn drop(&mut self) {
        self.0.move_to(Counts::default());
    }
}

/// Records one relist's duration.
pub(crate) fn relisted(took: Duration) {
    RELIST_DURATION.observe(took.as_secs_f64());
}

/// Records a pod that reached Running `took` after the agent first saw it.
pub(crate) fn pod_started(took: Duration) {
    POD_START_DURATION.observe(took.as_secs_f64());
}

/// The agent's metrics in the text format (the node server's `/metrics`).
pub(crate) fn gather() -> String {
    // Listed from the first scrape on, before the agent has recorded any.
    LazyLock::force(&RUNNING_PODS);
    LazyLock::force(&RELIST_DURATION);
    LazyLock::force(&POD_START_DURATION);
    m::gather(&[C])
}
