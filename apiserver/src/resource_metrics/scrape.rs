//! The scraper and what it keeps: every resolution (metrics-server's 15 s),
//! each Ready node's `/metrics/resource` is fetched over the kubelet client
//! (the API server's own client certificate, the node's serving
//! certificate checked), all nodes at once, each within 10 s. A node keeps
//! its last two scrapes: CPU is the counters' difference over the time
//! between them, memory the last working set, as metrics-server computes
//! them.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::handlers::streaming::node::{NodeLocation, location_of};
use crate::handlers::streaming::proxy;
use crate::kubelet_client::KubeletClientTls;
use crate::object::condition_true;
use crate::server::Inner;
use skiff_common::metrics::exposition;

/// How long one node's scrape may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest `/metrics/resource` body read (a node with hundreds of
/// pods writes well under a megabyte).
const MAX_BODY: usize = 16 << 20;

const NODE_CPU: &str = "node_cpu_usage_seconds_total";
const NODE_MEMORY: &str = "node_memory_working_set_bytes";
const CONTAINER_CPU: &str = "container_cpu_usage_seconds_total";
const CONTAINER_MEMORY: &str = "container_memory_working_set_bytes";
const CONTAINER_START: &str = "container_start_time_seconds";

/// Cumulative CPU and the working set at one time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Point {
    /// CPU time so far, in core-seconds.
    pub cpu_seconds: f64,
    /// When the CPU counter was read (milliseconds since the epoch).
    pub time_ms: i64,
    /// Working set in bytes.
    pub memory_bytes: f64,
}

/// A container: namespace, pod, container name.
pub(crate) type ContainerKey = (String, String, String);

/// What one scrape of one node gave.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct NodeScrape {
    /// The node's own figures.
    pub node: Option<Point>,
    /// Each container's figures and its start time (seconds), which tells
    /// a restarted container from the one before.
    pub containers: HashMap<ContainerKey, (Point, f64)>,
}

impl NodeScrape {
    /// The figures in a `/metrics/resource` body; samples missing a
    /// counter, a gauge or a timestamp are left out.
    pub(crate) fn from_text(text: &str) -> Self {
        let samples = exposition::samples(
            text,
            &[
                NODE_CPU,
                NODE_MEMORY,
                CONTAINER_CPU,
                CONTAINER_MEMORY,
                CONTAINER_START,
            ],
        );
        let mut node_cpu = None;
        let mut node_memory = None;
        let mut cpu: HashMap<ContainerKey, (f64, i64)> = HashMap::new();
        let mut memory: HashMap<ContainerKey, f64> = HashMap::new();
        let mut start: HashMap<ContainerKey, f64> = HashMap::new();
        for sample in samples {
            let key = || -> Option<ContainerKey> {
                Some((
                    sample.label("namespace")?.to_string(),
                    sample.label("pod")?.to_string(),
                    sample.label("container")?.to_string(),
                ))
            };
            match sample.name.as_str() {
                NODE_CPU => node_cpu = sample.timestamp_ms.map(|t| (sample.value, t)),
                NODE_MEMORY => node_memory = Some(sample.value),
                CONTAINER_CPU => {
                    if let (Some(key), Some(t)) = (key(), sample.timestamp_ms) {
                        cpu.insert(key, (sample.value, t));
                    }
                }
                CONTAINER_MEMORY => {
                    if let Some(key) = key() {
                        memory.insert(key, sample.value);
                    }
                }
                CONTAINER_START => {
                    if let Some(key) = key() {
                        start.insert(key, sample.value);
                    }
                }
                _ => {}
            }
        }
        let node = match (node_cpu, node_memory) {
            (Some((cpu_seconds, time_ms)), Some(memory_bytes)) => Some(Point {
                cpu_seconds,
                time_ms,
                memory_bytes,
            }),
            _ => None,
        };
        let containers = cpu
            .into_iter()
            .filter_map(|(key, (cpu_seconds, time_ms))| {
                let memory_bytes = *memory.get(&key)?;
                let started = start.get(&key).copied().unwrap_or(0.0);
                Some((
                    key,
                    (
                        Point {
                            cpu_seconds,
                            time_ms,
                            memory_bytes,
                        },
                        started,
                    ),
                ))
            })
            .collect();
        Self { node, containers }
    }
}

/// Usage over a window: CPU in nanocores, memory in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Usage {
    pub cpu_nano_cores: u64,
    pub memory_bytes: u64,
}

/// A node's or pod's usage, when it was measured and over how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Measured<T> {
    /// The end of the window (milliseconds since the epoch).
    pub time_ms: i64,
    /// The window's length in milliseconds.
    pub window_ms: i64,
    pub usage: T,
}

/// The rate between two points, or `None` when they do not make a window
/// (same or older sample, counter gone back).
fn usage_between(before: &Point, after: &Point) -> Option<Measured<Usage>> {
    let window_ms = after.time_ms - before.time_ms;
    if window_ms <= 0 || after.cpu_seconds < before.cpu_seconds {
        return None;
    }
    let cores = (after.cpu_seconds - before.cpu_seconds) / (window_ms as f64 / 1000.0);
    Some(Measured {
        time_ms: after.time_ms,
        window_ms,
        usage: Usage {
            cpu_nano_cores: (cores * 1e9).round() as u64,
            memory_bytes: after.memory_bytes.max(0.0) as u64,
        },
    })
}

/// Each pod's (namespace, name) usage: its containers' in name order.
pub(crate) type PodUsages = HashMap<(String, String), Measured<Vec<(String, Usage)>>>;

/// The last two scrapes of a node.
#[derive(Debug, Clone)]
struct Scrapes {
    previous: Option<NodeScrape>,
    latest: NodeScrape,
}

/// The scraped figures of every node, shared by the scraper (writing) and
/// the metrics handlers (reading).
#[derive(Debug, Default)]
pub(crate) struct MetricsStore {
    nodes: parking_lot::RwLock<HashMap<String, Scrapes>>,
    /// Nodes whose last scrape failed.
    failing: parking_lot::Mutex<HashSet<String>>,
}

impl MetricsStore {
    /// Notes that `node`'s scrape failed; true when its previous one had
    /// not.
    pub(crate) fn mark_failing(&self, node: &str) -> bool {
        self.failing.lock().insert(node.to_string())
    }

    /// Keeps a node's new scrape; one that brings no newer node sample
    /// (the node answered from the same collection) changes nothing.
    pub(crate) fn record(&self, node: &str, scrape: NodeScrape) {
        self.failing.lock().remove(node);
        let mut nodes = self.nodes.write();
        match nodes.get_mut(node) {
            Some(s) if s.latest.node.map(|p| p.time_ms) == scrape.node.map(|p| p.time_ms) => {}
            Some(s) => {
                let previous = std::mem::replace(&mut s.latest, scrape);
                s.previous = Some(previous);
            }
            None => {
                nodes.insert(
                    node.to_string(),
                    Scrapes {
                        previous: None,
                        latest: scrape,
                    },
                );
            }
        }
    }

    /// Forgets nodes that are gone or no longer scraped.
    pub(crate) fn retain(&self, nodes: &HashSet<String>) {
        self.nodes.write().retain(|name, _| nodes.contains(name));
    }

    /// The node's usage over its last window.
    pub(crate) fn node(&self, name: &str) -> Option<Measured<Usage>> {
        let nodes = self.nodes.read();
        let scrapes = nodes.get(name)?;
        usage_between(&scrapes.previous.as_ref()?.node?, &scrapes.latest.node?)
    }

    /// Every pod whose containers all have a window, by namespace and
    /// name: the containers' usage in name order.
    pub(crate) fn pods(&self) -> PodUsages {
        let nodes = self.nodes.read();
        // Per pod, each container's window (`None`: not measured yet).
        type Windows = Vec<Option<(String, Measured<Usage>)>>;
        let mut pods: HashMap<(String, String), Windows> = HashMap::new();
        for scrapes in nodes.values() {
            let Some(previous) = &scrapes.previous else {
                continue;
            };
            for ((namespace, pod, container), (after, started)) in &scrapes.latest.containers {
                let key = (namespace.clone(), pod.clone(), container.clone());
                let measured = previous
                    .containers
                    .get(&key)
                    .filter(|(_, before_started)| before_started == started)
                    .and_then(|(before, _)| usage_between(before, after));
                pods.entry((namespace.clone(), pod.clone()))
                    .or_default()
                    .push(measured.map(|m| (container.clone(), m)));
            }
        }
        pods.into_iter()
            .filter_map(|(key, containers)| {
                // A pod with a container not measured yet (just started or
                // restarted) is left out rather than under-reported.
                let mut containers: Vec<(String, Measured<Usage>)> =
                    containers.into_iter().collect::<Option<_>>()?;
                containers.sort_by(|a, b| a.0.cmp(&b.0));
                let newest = containers.iter().max_by_key(|(_, m)| m.time_ms)?.1.clone();
                Some((
                    key,
                    Measured {
                        time_ms: newest.time_ms,
                        window_ms: newest.window_ms,
                        usage: containers.into_iter().map(|(n, m)| (n, m.usage)).collect(),
                    },
                ))
            })
            .collect()
    }
}

/// Whether the scraper should ask this Node: Ready, and run by a real
/// node server (simulated nodes have none).
fn scrapable(node: &Value) -> bool {
    let ready = condition_true(node, "Ready");
    let simulated = node["status"]["nodeInfo"]["containerRuntimeVersion"]
        .as_str()
        .is_some_and(|v| v.starts_with("simulated://"));
    ready && !simulated
}

/// Scrapes every Ready node every `every` until the server shuts down.
pub(crate) async fn run(inner: Arc<Inner>, tls: Arc<KubeletClientTls>, every: Duration) {
    let mut shutdown = inner.shutdown.subscribe();
    loop {
        scrape_all(&inner, &tls).await;
        if !crate::server::paused(&mut shutdown, every).await {
            return;
        }
    }
}

async fn scrape_all(inner: &Inner, tls: &KubeletClientTls) {
    let Some(info) = inner.registry.get("", "v1", "nodes") else {
        return;
    };
    let Ok(cache) = inner.cache(&info) else {
        return;
    };
    let snapshot = cache.snapshot();
    let mut targets = Vec::new();
    for stored in snapshot.objects.values() {
        let node = stored.value();
        let Some(name) = node["metadata"]["name"].as_str() else {
            continue;
        };
        if !scrapable(&node) {
            continue;
        }
        match location_of(name, &node) {
            Ok(location) => targets.push(location),
            Err(error) => tracing::debug!(node = name, %error, "not scraping node"),
        }
    }
    let scraped: HashSet<String> = targets.iter().map(|t| t.node.clone()).collect();
    let results = futures::future::join_all(targets.iter().map(|t| scrape(tls, t))).await;
    for (target, result) in targets.iter().zip(results) {
        match result {
            Ok(scrape) => inner.resource_metrics.record(&target.node, scrape),
            // Said once when a node starts failing, not every resolution.
            Err(error) if inner.resource_metrics.mark_failing(&target.node) => {
                tracing::warn!(node = %target.node, %error, "scraping resource metrics failed")
            }
            Err(error) => {
                tracing::debug!(node = %target.node, %error, "scraping resource metrics failed")
            }
        }
    }
    inner.resource_metrics.retain(&scraped);
}

/// Why a node could not be scraped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ScrapeError {
    #[error("{0}")]
    Request(#[from] crate::status::ApiError),
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("the node answered {0}")]
    Status(http::StatusCode),
    #[error("reading the answer: {0}")]
    Body(String),
}

async fn scrape(
    tls: &KubeletClientTls,
    location: &NodeLocation,
) -> Result<NodeScrape, ScrapeError> {
    let fetch = async {
        let response = proxy::get(tls, location, "/metrics/resource").await?;
        if !response.status().is_success() {
            return Err(ScrapeError::Status(response.status()));
        }
        let body = axum::body::to_bytes(response.into_body(), MAX_BODY)
            .await
            .map_err(|e| ScrapeError::Body(e.to_string()))?;
        Ok(NodeScrape::from_text(&String::from_utf8_lossy(&body)))
    };
    tokio::time::timeout(SCRAPE_TIMEOUT, fetch)
        .await
        .map_err(|_| ScrapeError::Timeout(SCRAPE_TIMEOUT))?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(node_cpu: f64, t: i64, c_cpu: f64, start: f64) -> String {
        format!(
            "node_cpu_usage_seconds_total {node_cpu} {t}\n\
             node_memory_working_set_bytes 1048576 {t}\n\
             container_cpu_usage_seconds_total{{container=\"main\",namespace=\"default\",pod=\"web\"}} {c_cpu} {t}\n\
             container_memory_working_set_bytes{{container=\"main\",namespace=\"default\",pod=\"web\"}} 2048 {t}\n\
             container_start_time_seconds{{container=\"main\",namespace=\"default\",pod=\"web\"}} {start} {t}\n"
        )
    }

    #[test]
    fn cpu_is_a_rate_over_two_scrapes_and_memory_the_last_working_set() {
        let store = MetricsStore::default();
        store.record(
            "n1",
            NodeScrape::from_text(&text(10.0, 1_000_000, 1.0, 5.0)),
        );
        assert!(store.node("n1").is_none(), "one scrape makes no window");
        assert!(store.pods().is_empty());
        // The same collection again changes nothing.
        store.record(
            "n1",
            NodeScrape::from_text(&text(10.0, 1_000_000, 1.0, 5.0)),
        );
        assert!(store.node("n1").is_none());
        store.record(
            "n1",
            NodeScrape::from_text(&text(13.0, 1_015_000, 1.75, 5.0)),
        );
        let node = store.node("n1").unwrap();
        assert_eq!(node.window_ms, 15_000);
        assert_eq!(node.time_ms, 1_015_000);
        assert_eq!(node.usage.cpu_nano_cores, 200_000_000);
        assert_eq!(node.usage.memory_bytes, 1_048_576);
        let pods = store.pods();
        let web = &pods[&("default".to_string(), "web".to_string())];
        assert_eq!(web.usage[0].0, "main");
        assert_eq!(web.usage[0].1.cpu_nano_cores, 50_000_000);
        assert_eq!(web.usage[0].1.memory_bytes, 2048);

        // A restarted container (another start time) has no window yet.
        store.record(
            "n1",
            NodeScrape::from_text(&text(14.0, 1_030_000, 0.1, 99.0)),
        );
        assert!(store.pods().is_empty());
        assert!(store.node("n1").is_some());

        // A node no longer scraped is forgotten.
        store.retain(&HashSet::new());
        assert!(store.node("n1").is_none());
    }

    #[test]
    fn only_ready_real_nodes_are_scraped() {
        let node = |ready: &str, runtime: &str| {
            serde_json::json!({"status": {
                "conditions": [{"type": "Ready", "status": ready}],
                "nodeInfo": {"containerRuntimeVersion": runtime}}})
        };
        assert!(scrapable(&node("True", "containerd://1.6.20")));
        assert!(!scrapable(&node("False", "containerd://1.6.20")));
        assert!(!scrapable(&node("True", "simulated://0.1")));
    }
}
