//! The eviction manager, as the kubelet's: while the node is under memory
//! pressure it chooses one pod a round and has its worker stop it; the pod
//! fails as `Evicted`, saying what the node was short of and which of its
//! containers used more memory than they requested. The choice follows
//! upstream's ranking: pods using more than they request first, then lower
//! priorities, then the largest use beyond the request. Critical pods are
//! never chosen.
//!
//! Disk and PID pressure only refuse new pods (`pod::admission`): skiff
//! does not measure the disk its pods use, so it never evicts for disk.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use skiff_common::amount::Amount;
use tokio::sync::{mpsc, watch};

use super::node::eviction::EvictionHard;
use super::node::host;
use super::node::stats::{PodUsage, StatsProvider};
use super::pod::admission::critical;
use super::pod::context::AgentContext;
use super::pod::pod_workers::WorkerEvent;

/// Pods chosen for eviction, by UID, with the message they fail with; the
/// pod's worker takes its order on its next step.
#[derive(Debug, Default)]
pub(crate) struct Evictions(Mutex<HashMap<String, String>>);

impl Evictions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Orders the pod `uid` evicted with `message`.
    fn order(&self, uid: &str, message: String) {
        self.lock().insert(uid.to_owned(), message);
    }

    /// Whether an order for `uid` waits for its worker.
    fn ordered(&self, uid: &str) -> bool {
        self.lock().contains_key(uid)
    }

    /// The eviction ordered for `uid`, taken (so it is carried out once).
    pub(crate) fn take(&self, uid: &str) -> Option<String> {
        self.lock().remove(uid)
    }
}

/// What one round needs besides the agent's context.
pub(crate) struct Manager {
    /// The node's and its pods' usage.
    pub stats: Arc<StatsProvider>,
    /// The thresholds, for the message's threshold quantity.
    pub thresholds: EvictionHard,
    /// Wakes the chosen pod's worker.
    pub wake: mpsc::UnboundedSender<WorkerEvent>,
    /// How often pressure is looked at (upstream's housekeeping interval).
    pub interval: Duration,
}

impl Manager {
    /// Runs rounds until `stop` is raised.
    pub(crate) async fn run(self, ctx: Arc<AgentContext>, mut stop: watch::Receiver<bool>) {
        let mut ticker = tokio::time::interval(self.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            if ctx.pressure.borrow().memory {
                self.round(&ctx).await;
            }
        }
    }

    /// Chooses one pod and orders it evicted.
    async fn round(&self, ctx: &AgentContext) {
        let summary = match self.stats.summary().await {
            Ok(summary) => summary,
            Err(error) => {
                tracing::warn!(%error, "eviction: reading the pods' usage failed");
                return;
            }
        };
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let total = host::meminfo_field(&meminfo, "MemTotal").unwrap_or(0);
        let available = host::meminfo_field(&meminfo, "MemAvailable").unwrap_or(0);
        let usage: HashMap<&str, &PodUsage> =
            summary.pods.iter().map(|p| (p.uid.as_str(), p)).collect();
        let pods = ctx.pods.list();
        let candidates: Vec<(&Pod, Option<&PodUsage>)> = pods
            .iter()
            .map(Arc::as_ref)
            .filter(|pod| {
                let uid = pod.metadata.uid.as_deref().unwrap_or_default();
                let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
                usage.contains_key(uid)
                    && pod.metadata.deletion_timestamp.is_none()
                    && !matches!(phase, Some("Succeeded" | "Failed"))
                    && !critical(pod)
                    && !ctx.evictions.ordered(uid)
            })
            .map(|pod| {
                let uid = pod.metadata.uid.as_deref().unwrap_or_default();
                (pod, usage.get(uid).copied())
            })
            .collect();
        let Some((pod, used)) = rank_for_memory(candidates).into_iter().next() else {
            return;
        };
        let threshold = self.thresholds.memory_available.bytes_of(total);
        let message = memory_message(pod, used, threshold, available);
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        tracing::info!(pod = ?pod.metadata.name, %message, "evicting pod");
        ctx.evictions.order(&uid, message);
        let _ = self.wake.send(WorkerEvent::RuntimeChanged(uid));
    }
}

/// A container's memory request in bytes, and as written (`"0"` for none).
fn memory_request(container: &k8s_openapi::api::core::v1::Container) -> (u64, String) {
    let asked = container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("memory"));
    let bytes = asked
        .and_then(|q| skiff_common::quantity::parse_scaled(&q.0, 1))
        .and_then(|b| u64::try_from(b).ok())
        .unwrap_or(0);
    (bytes, asked.map_or_else(|| "0".into(), |q| q.0.clone()))
}

/// The pod's memory in use (its containers' working sets) and requested.
fn memory_of(pod: &Pod, used: Option<&PodUsage>) -> (Option<u64>, u64) {
    let requested = pod
        .spec
        .iter()
        .flat_map(|s| &s.containers)
        .map(|c| memory_request(c).0)
        .sum();
    let in_use = used.map(|u| {
        u.memory.map(|m| m.working_set_bytes).unwrap_or_else(|| {
            u.containers
                .iter()
                .filter_map(|c| c.memory.map(|m| m.working_set_bytes))
                .sum()
        })
    });
    (in_use, requested)
}

/// The pods in the order upstream evicts them under memory pressure:
/// those without usage figures or using more than they request first,
/// then the lower priorities, then the most used beyond the request.
fn rank_for_memory<'a>(
    mut candidates: Vec<(&'a Pod, Option<&'a PodUsage>)>,
) -> Vec<(&'a Pod, Option<&'a PodUsage>)> {
    let key = |(pod, used): &(&Pod, Option<&PodUsage>)| {
        let (in_use, requested) = memory_of(pod, *used);
        let exceeds = in_use.is_none_or(|u| u > requested);
        let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
        let beyond = in_use.map_or(i128::MAX, |u| i128::from(u) - i128::from(requested));
        (exceeds, priority, beyond)
    };
    candidates.sort_by(|a, b| {
        let (a_exceeds, a_priority, a_beyond) = key(a);
        let (b_exceeds, b_priority, b_beyond) = key(b);
        b_exceeds
            .cmp(&a_exceeds)
            .then(a_priority.cmp(&b_priority))
            .then(b_beyond.cmp(&a_beyond))
            .then(Ordering::Equal)
    });
    candidates
}

/// Bytes as upstream prints a binary quantity (`4Mi`, `1025`).
fn bytes_quantity(bytes: u64) -> String {
    if bytes.is_multiple_of(1024)
        && let Some(amount) = Amount::parse(&format!("{}Ki", bytes / 1024))
    {
        return amount.to_string();
    }
    bytes.to_string()
}

/// Why `pod` is evicted, in the kubelet's words: what the node was short
/// of, and each container that used more memory than it requested.
fn memory_message(pod: &Pod, used: Option<&PodUsage>, threshold: u64, available: u64) -> String {
    let mut message = format!(
        "The node was low on resource: memory. Threshold quantity: {}, available: {}. ",
        bytes_quantity(threshold),
        bytes_quantity(available)
    );
    let Some(used) = used else {
        return message;
    };
    for container in pod.spec.iter().flat_map(|s| &s.containers) {
        let working_set = used
            .containers
            .iter()
            .find(|c| c.name == container.name)
            .and_then(|c| c.memory.map(|m| m.working_set_bytes));
        let (requested, written) = memory_request(container);
        if let Some(in_use) = working_set.filter(|u| *u > requested) {
            message.push_str(&format!(
                "Container {} was using {}, request is {written}, has larger consumption of memory. ",
                container.name,
                bytes_quantity(in_use)
            ));
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::agent::node::stats::{ContainerUsage, MemoryFigures};

    fn pod(name: &str, request: Option<&str>, priority: i32) -> Pod {
        let resources = request.map_or(json!({}), |r| json!({"requests": {"memory": r}}));
        serde_json::from_value(json!({
            "metadata": {"name": name, "uid": name},
            "spec": {"priority": priority,
                     "containers": [{"name": "c", "resources": resources}]}}))
        .unwrap()
    }

    fn usage(name: &str, working_set: u64) -> PodUsage {
        let memory = MemoryFigures {
            working_set_bytes: working_set,
            ..Default::default()
        };
        PodUsage {
            namespace: "default".into(),
            name: name.into(),
            uid: name.into(),
            start_ns: 0,
            containers: vec![ContainerUsage {
                name: "c".into(),
                id: "id".into(),
                start_ns: 0,
                cpu: None,
                memory: Some(memory),
            }],
            cpu: None,
            memory: None,
        }
    }

    #[test]
    fn pods_over_their_request_go_first_then_low_priority_then_the_biggest_excess() {
        let within = pod("within", Some("64Mi"), 0);
        let low = pod("low", Some("1Mi"), -10);
        let small = pod("small", Some("1Mi"), 0);
        let big = pod("big", Some("1Mi"), 0);
        let used = [
            usage("within", 8 << 20),
            usage("low", 2 << 20),
            usage("small", 2 << 20),
            usage("big", 32 << 20),
        ];
        let ranked = rank_for_memory(vec![
            (&within, Some(&used[0])),
            (&small, Some(&used[2])),
            (&big, Some(&used[3])),
            (&low, Some(&used[1])),
        ]);
        let order: Vec<&str> = ranked
            .iter()
            .map(|(p, _)| p.metadata.name.as_deref().unwrap())
            .collect();
        assert_eq!(order, ["low", "big", "small", "within"]);
    }

    #[test]
    fn the_message_names_the_shortage_and_the_greedy_containers() {
        let p = pod("hog", Some("1Mi"), 0);
        let message = memory_message(&p, Some(&usage("hog", 8 << 20)), 100 << 20, 51_200 << 10);
        assert_eq!(
            message,
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. \
             Container c was using 8Mi, request is 1Mi, has larger consumption of memory. "
        );
        let modest = memory_message(&p, Some(&usage("hog", 512 << 10)), 100 << 20, 1025);
        assert_eq!(
            modest,
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 1025. "
        );
    }

    #[test]
    fn an_order_is_carried_out_once() {
        let evictions = Evictions::default();
        evictions.order("u", "why".into());
        assert!(evictions.ordered("u"));
        assert_eq!(evictions.take("u").as_deref(), Some("why"));
        assert_eq!(evictions.take("u"), None);
    }
}
