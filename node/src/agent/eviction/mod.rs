//! The eviction manager, as the kubelet's. Each round it first evicts every
//! pod over a local storage limit (an emptyDir's `sizeLimit`, a container's
//! or the pod's `ephemeral-storage` limit: [`local_storage`]); otherwise,
//! while the node is under memory pressure, it chooses one pod ([`memory`])
//! and has its worker stop it. An evicted pod fails as `Evicted`, saying
//! why, with the `DisruptionTarget` condition. Critical pods are never
//! chosen.
//!
//! Disk and PID pressure only refuse new pods (`pod::admission`): skiff
//! does not rank pods by the disk they use, so it evicts none for them.

mod local_storage;
mod memory;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
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
            self.round(&ctx).await;
        }
    }

    /// Evicts every pod over a local storage limit; failing that, under
    /// memory pressure, the first pod of the memory ranking.
    async fn round(&self, ctx: &AgentContext) {
        let pods = ctx.pods.list();
        let memory_pressure = ctx.pressure.borrow().memory;
        if !memory_pressure && !pods.iter().any(|p| local_storage::limited(p)) {
            return;
        }
        let summary = match self.stats.summary().await {
            Ok(summary) => summary,
            Err(error) => {
                tracing::warn!(%error, "eviction: reading the pods' usage failed");
                return;
            }
        };
        let usage: HashMap<&str, &PodUsage> =
            summary.pods.iter().map(|p| (p.uid.as_str(), p)).collect();
        let candidates: Vec<(&Pod, &PodUsage)> = pods
            .iter()
            .map(Arc::as_ref)
            .filter(|pod| {
                let uid = pod.metadata.uid.as_deref().unwrap_or_default();
                let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
                pod.metadata.deletion_timestamp.is_none()
                    && !matches!(phase, Some("Succeeded" | "Failed"))
                    && !critical(pod)
                    && !ctx.evictions.ordered(uid)
            })
            .filter_map(|pod| {
                let uid = pod.metadata.uid.as_deref().unwrap_or_default();
                Some((pod, *usage.get(uid)?))
            })
            .collect();
        let places = local_storage::Places {
            agent_dir: &ctx.agent_dir,
            log_root: &ctx.log_root,
        };
        let over: Vec<(&Pod, String)> = candidates
            .iter()
            .filter_map(|(pod, used)| Some((*pod, local_storage::over_limit(pod, used, &places)?)))
            .collect();
        if !over.is_empty() {
            for (pod, message) in over {
                self.evict(ctx, pod, message);
            }
            return;
        }
        if !memory_pressure {
            return;
        }
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let total = host::meminfo_field(&meminfo, "MemTotal").unwrap_or(0);
        let available = host::meminfo_field(&meminfo, "MemAvailable").unwrap_or(0);
        let ranked = memory::rank(candidates.into_iter().map(|(p, u)| (p, Some(u))).collect());
        if let Some((pod, used)) = ranked.into_iter().next() {
            let threshold = self.thresholds.memory_available.bytes_of(total);
            self.evict(ctx, pod, memory::message(pod, used, threshold, available));
        }
    }

    /// Orders `pod` evicted with `message` and wakes its worker.
    fn evict(&self, ctx: &AgentContext, pod: &Pod, message: String) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        tracing::info!(pod = ?pod.metadata.name, %message, "evicting pod");
        ctx.evictions.order(&uid, message);
        let _ = self.wake.send(WorkerEvent::RuntimeChanged(uid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_order_is_carried_out_once() {
        let evictions = Evictions::default();
        evictions.order("u", "why".into());
        assert!(evictions.ordered("u"));
        assert_eq!(evictions.take("u").as_deref(), Some("why"));
        assert_eq!(evictions.take("u"), None);
    }
}
