//! The eviction manager, as the kubelet's. Each round it first evicts every
//! pod over a local storage limit (an emptyDir's `sizeLimit`, a container's
//! or the pod's `ephemeral-storage` limit: [`local_storage`]); otherwise,
//! while the node is under memory pressure, or else disk pressure, it
//! chooses one pod by upstream's ranking ([`pressure`]) and has its
//! worker stop it. An evicted pod fails as `Evicted`, saying why, with the
//! `DisruptionTarget` condition. Critical pods are never chosen.
//!
//! Under disk pressure it first removes every unused image that may go, as
//! the kubelet reclaims node-level resources, and evicts no pod if that
//! was enough (unlike the kubelet, it keeps dead containers for their
//! logs). PID pressure only refuses new pods (`pod::admission`).

mod local_storage;
mod pressure;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use skiff_common::wakeups::Ticks;
use tokio::sync::{mpsc, watch};

use super::node::eviction::EvictionHard;
use super::node::host;
use super::node::stats::{PodUsage, StatsProvider};
use super::pod::admission::critical;
use super::pod::context::AgentContext;
use super::pod::pod_workers::WorkerEvent;
use pressure::{Candidate, Shortage};

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
    /// The node's and its pods' usage, with their volumes
    /// ([`StatsProvider::with_storage`]): the local storage limits and
    /// the disk ranking read them.
    pub stats: Arc<StatsProvider>,
    /// The image collector, whose unused images go before any pod does
    /// under disk pressure.
    pub images: crate::agent::image_gc::SharedImageGc,
    /// The thresholds, for the message's threshold quantity.
    pub thresholds: EvictionHard,
    /// Wakes the chosen pod's worker.
    pub wake: mpsc::UnboundedSender<WorkerEvent>,
    /// How often pressure is looked at (upstream's housekeeping interval).
    pub interval: Duration,
}

impl Manager {
    /// Runs rounds until `stop` is raised.
    pub(crate) async fn run(self, ctx: Arc<AgentContext>, stop: watch::Receiver<bool>) {
        let mut ticks = Ticks::new(self.interval, stop);
        while ticks.next().await {
            self.round(&ctx).await;
        }
    }

    /// Evicts every pod over a local storage limit; failing that, under
    /// memory pressure, the first pod of the memory ranking.
    async fn round(&self, ctx: &AgentContext) {
        let pods = ctx.pods.list();
        let pressure = *ctx.pressure.borrow();
        if !pressure.memory && !pressure.disk && !pods.iter().any(|p| local_storage::limited(p)) {
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
        let over: Vec<(&Pod, String)> = candidates
            .iter()
            .filter_map(|(pod, used)| {
                Some((*pod, local_storage::over_limit(pod, used, &ctx.log_root)?))
            })
            .collect();
        if !over.is_empty() {
            for (pod, message) in over {
                self.evict(ctx, pod, message);
            }
            return;
        }
        // As upstream, memory is relieved before disk.
        let (shortage, threshold, available) = if pressure.memory {
            let (total, available) = host::memory_now().unwrap_or((0, 0));
            let threshold = self.thresholds.memory_available.bytes_of(total);
            (Shortage::Memory, threshold, available)
        } else if pressure.disk {
            // As the kubelet: unused images go first, and no pod goes if
            // that was enough.
            match self.images.lock().await.delete_unused().await {
                Ok(freed) => tracing::info!(freed, "reclaimed unused images under disk pressure"),
                Err(error) => tracing::warn!(%error, "reclaiming unused images failed"),
            }
            let (size, available) = host::disk_size(&ctx.agent_dir);
            let threshold = self.thresholds.nodefs_available.bytes_of(size);
            if !self.thresholds.nodefs_available.crossed(available, size) {
                return;
            }
            (Shortage::Disk, threshold, available)
        } else {
            return;
        };
        let measured = candidates
            .into_iter()
            .map(|(pod, used)| Candidate {
                pod,
                used,
                disk: local_storage::DiskUse::of(pod, used, &ctx.log_root),
            })
            .collect();
        if let Some(first) = shortage.rank(measured).into_iter().next() {
            let message = shortage.message(&first, threshold, available);
            self.evict(ctx, first.pod, message);
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

/// A container's request of `resource` in bytes, and as written (`"0"`
/// for none).
fn request(container: &k8s_openapi::api::core::v1::Container, resource: &str) -> (u64, String) {
    let asked = container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get(resource));
    let bytes = asked
        .and_then(|q| skiff_common::quantity::parse_scaled(&q.0, 1))
        .and_then(|b| u64::try_from(b).ok())
        .unwrap_or(0);
    (bytes, asked.map_or_else(|| "0".into(), |q| q.0.clone()))
}

/// Bytes as upstream prints a binary quantity (`4Mi`, `1025`).
fn bytes_quantity(bytes: u64) -> String {
    if bytes.is_multiple_of(1024)
        && let Some(amount) = skiff_common::amount::Amount::parse(&format!("{}Ki", bytes / 1024))
    {
        return amount.to_string();
    }
    bytes.to_string()
}

/// Pods and usage figures for the eviction tests.
#[cfg(test)]
pub(super) mod fixtures {
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    use crate::agent::node::stats::{ContainerUsage, MemoryFigures, PodUsage};

    /// A pod of one container `c` requesting `request` of `resource`.
    pub(crate) fn pod(name: &str, resource: &str, request: Option<&str>, priority: i32) -> Pod {
        let resources = request.map_or(json!({}), |r| json!({"requests": {resource: r}}));
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": {"priority": priority, "containers": [{"name": "c", "resources": resources}]}}))
        .expect("pod")
    }

    /// Container `c` of the pod `name` using `bytes` of memory and of its
    /// writable layer.
    pub(crate) fn usage(name: &str, bytes: u64) -> PodUsage {
        let memory = MemoryFigures {
            working_set_bytes: bytes,
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
                rootfs_bytes: Some(bytes),
                logs_bytes: None,
            }],
            cpu: None,
            memory: None,
            volumes: Vec::new(),
        }
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
