//! The process's Prometheus metrics: one registry per component inside one
//! process-wide set, as k3s has one registry for its one process. The API
//! server's `/metrics` gathers every component's, the node server's only the
//! kubelet's, the DNS's listener only its own; the names and labels are
//! upstream's, so dashboards written for kube-apiserver, kube-scheduler,
//! kube-controller-manager, the kubelet and CoreDNS read skiff unchanged.
//!
//! Components define their metrics once (in a `LazyLock`) with the
//! constructors here, which register them in their component's registry.
//! Counters and histograms are atomics: recording costs a label lookup
//! (or nothing, when the caller keeps the labelled child) and an atomic add.
//! Values that are cheaper to read than to track (queue lengths, stored
//! object counts) are set by scrape hooks just before each gather.

use std::sync::LazyLock;

use parking_lot::Mutex;
pub use prometheus;
use prometheus::core::Collector;
use prometheus::{
    HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};

pub mod exposition;

/// The content type of the text exposition format upstream serves.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Which component a metric belongs to (whose endpoint serves it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Component {
    /// kube-apiserver's metrics (`apiserver_*`, `etcd_*`).
    ApiServer,
    /// kube-scheduler's (`scheduler_*`).
    Scheduler,
    /// kube-controller-manager's (`workqueue_*`).
    ControllerManager,
    /// The kubelet's (`kubelet_*`), served by the node server too.
    Kubelet,
    /// CoreDNS's (`coredns_*`), served on the DNS's metrics port too.
    Dns,
}

impl Component {
    /// Every component, in the order the API server's `/metrics` lists them.
    pub const ALL: [Component; 5] = [
        Component::ApiServer,
        Component::ControllerManager,
        Component::Dns,
        Component::Kubelet,
        Component::Scheduler,
    ];

    fn index(self) -> usize {
        match self {
            Component::ApiServer => 0,
            Component::ControllerManager => 1,
            Component::Dns => 2,
            Component::Kubelet => 3,
            Component::Scheduler => 4,
        }
    }
}

/// A hook that refreshes gauges before a gather; it returns false once what
/// it reads is gone, and is then dropped.
type ScrapeHook = Box<dyn Fn() -> bool + Send + Sync>;

struct Registries {
    registries: [Registry; 5],
    hooks: [Mutex<Vec<ScrapeHook>>; 5],
}

static REGISTRIES: LazyLock<Registries> = LazyLock::new(|| Registries {
    registries: Default::default(),
    hooks: Default::default(),
});

/// The registry of `component`.
pub fn registry(component: Component) -> &'static Registry {
    &REGISTRIES.registries[component.index()]
}

/// Registers `collector` with `component`'s registry and returns it. A name
/// registered twice is a programming error: it is logged and the second
/// metric records into nothing, rather than taking the process down.
pub fn register<C: Collector + Clone + 'static>(component: Component, collector: C) -> C {
    if let Err(error) = registry(component).register(Box::new(collector.clone())) {
        tracing::warn!(?component, %error, "metric not registered");
    }
    collector
}

/// A counter with labels (upstream's `CounterVec`).
///
/// # Panics
/// On a name or label that is not a valid Prometheus name: definitions are
/// constants, so this is caught by the first test that touches them.
pub fn counter_vec(component: Component, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let metric = IntCounterVec::new(Opts::new(name, help), labels)
        .unwrap_or_else(|e| panic!("metric {name}: {e}"));
    register(component, metric)
}

/// A gauge with labels.
///
/// # Panics
/// As [`counter_vec`].
pub fn gauge_vec(component: Component, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let metric = IntGaugeVec::new(Opts::new(name, help), labels)
        .unwrap_or_else(|e| panic!("metric {name}: {e}"));
    register(component, metric)
}

/// A gauge without labels.
///
/// # Panics
/// As [`counter_vec`].
pub fn gauge(component: Component, name: &str, help: &str) -> IntGauge {
    let metric = IntGauge::new(name, help).unwrap_or_else(|e| panic!("metric {name}: {e}"));
    register(component, metric)
}

/// A float gauge with labels (seconds, for instance).
///
/// # Panics
/// As [`counter_vec`].
pub fn float_gauge_vec(
    component: Component,
    name: &str,
    help: &str,
    labels: &[&str],
) -> prometheus::GaugeVec {
    let metric = prometheus::GaugeVec::new(Opts::new(name, help), labels)
        .unwrap_or_else(|e| panic!("metric {name}: {e}"));
    register(component, metric)
}

/// A histogram with labels and the given bucket bounds.
///
/// # Panics
/// As [`counter_vec`].
pub fn histogram_vec(
    component: Component,
    name: &str,
    help: &str,
    labels: &[&str],
    buckets: Vec<f64>,
) -> HistogramVec {
    let metric = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)
        .unwrap_or_else(|e| panic!("metric {name}: {e}"));
    register(component, metric)
}

/// `count` bucket bounds from `start`, each `factor` times the last
/// (upstream's `ExponentialBuckets`).
pub fn exponential_buckets(start: f64, factor: f64, count: usize) -> Vec<f64> {
    std::iter::successors(Some(start), |b| Some(b * factor))
        .take(count)
        .collect()
}

/// Runs `hook` before every gather of `component` until it returns false.
pub fn on_scrape(component: Component, hook: impl Fn() -> bool + Send + Sync + 'static) {
    REGISTRIES.hooks[component.index()]
        .lock()
        .push(Box::new(hook));
}

/// The text exposition of `components`' metrics, families sorted by name.
pub fn gather(components: &[Component]) -> String {
    let mut families = Vec::new();
    for &component in components {
        REGISTRIES.hooks[component.index()]
            .lock()
            .retain(|hook| hook());
        families.extend(registry(component).gather());
    }
    families.sort_by(|a, b| a.name().cmp(b.name()));
    let mut text = String::new();
    // Encoding into a String only fails on a family without samples'
    // type, which the registry never produces; an empty page then says so.
    if let Err(error) = prometheus::TextEncoder::new().encode_utf8(&families, &mut text) {
        tracing::warn!(%error, "encoding metrics");
    }
    text
}

/// Holds a gauge one higher while it lives (requests in flight, watchers).
#[derive(Debug)]
pub struct GaugeGuard(IntGauge);

impl GaugeGuard {
    /// Raises `gauge` until the guard is dropped.
    pub fn new(gauge: IntGauge) -> Self {
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathered_text_is_upstreams_format_and_parses() {
        let requests = counter_vec(
            Component::ApiServer,
            "skiff_test_requests_total",
            "Requests in a test.",
            &["verb", "code"],
        );
        requests.with_label_values(&["GET", "200"]).inc_by(3);
        let latency = histogram_vec(
            Component::ApiServer,
            "skiff_test_duration_seconds",
            "Latency in a test.",
            &["verb"],
            vec![0.1, 1.0],
        );
        latency.with_label_values(&["GET"]).observe(0.5);
        let text = gather(&[Component::ApiServer]);
        assert!(
            text.contains("# TYPE skiff_test_requests_total counter\n"),
            "{text}"
        );
        assert!(text.contains("skiff_test_requests_total{code=\"200\",verb=\"GET\"} 3\n"));
        let samples = exposition::parse(&text).expect("parses");
        let bucket = |le: &str| {
            exposition::value(
                &samples,
                "skiff_test_duration_seconds_bucket",
                &[("verb", "GET"), ("le", le)],
            )
        };
        assert_eq!(bucket("0.1"), Some(0.0));
        assert_eq!(bucket("1"), Some(1.0));
        assert_eq!(bucket("+Inf"), Some(1.0));
    }

    #[test]
    fn hooks_run_before_each_gather_until_they_end() {
        let depth = gauge(Component::Dns, "skiff_test_depth", "A gauge set on scrape.");
        let runs = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(0));
        let seen = runs.clone();
        on_scrape(Component::Dns, move || {
            let n = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            depth.set(n * 10);
            n < 2
        });
        assert!(gather(&[Component::Dns]).contains("skiff_test_depth 10\n"));
        assert!(gather(&[Component::Dns]).contains("skiff_test_depth 20\n"));
        // The hook said it was done: the gauge keeps its last value.
        assert!(gather(&[Component::Dns]).contains("skiff_test_depth 20\n"));
    }

    #[test]
    fn exponential_buckets_are_upstreams() {
        assert_eq!(
            exponential_buckets(0.001, 2.0, 4),
            vec![0.001, 0.002, 0.004, 0.008]
        );
    }
}
