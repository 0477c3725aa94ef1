//! Node lifecycle: a Node whose Lease (`kube-node-lease/<node>`) has not been
//! renewed for the grace period (40 s by default) is unreachable: its
//! conditions turn Unknown ("Kubelet stopped posting node status."), it gets
//! the `node.kubernetes.io/unreachable` NoSchedule and NoExecute taints, its
//! pods are marked not ready, and pods on it are evicted (deleted) once their
//! toleration of the NoExecute taint runs out (300 s when they have none,
//! which is what upstream's admission would have added); every other
//! NoExecute taint evicts the same way (`taint_eviction`). When the Lease is
//! renewed again the taints go; the Ready condition is the node agent's to
//! restore. A Node reporting Ready=False gets the `not-ready` taints, a
//! cordoned one (`spec.unschedulable`) the `node.kubernetes.io/unschedulable`
//! NoSchedule taint, and one reporting memory, disk or PID pressure or an
//! unavailable network the matching NoSchedule taint
//! (`node.kubernetes.io/disk-pressure`, …), as upstream taints nodes by
//! condition, so the scheduler places only pods that tolerate it there.
//!
//! Staleness is judged by when this controller saw the Lease change, not by
//! the timestamps in it, so clock skew between machines does not matter.
//!
//! As upstream's, the controller reports each node it starts to follow
//! (`RegisteredNode`, so every node once per controller start) and each it
//! stops following when the Node goes (`RemovingNode`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition, ObjectReference, Pod, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use skiff_common::node_conditions::{conditions, ready_condition};
use skiff_informer::{Cache, NODE_NAME_INDEX, WatchConfig, pod_node_name_index, wait_synced};

use crate::controller_utils::{RequestFailed, patch_pod_status};
use crate::events::{EventRecorder, object_reference};
use crate::manager::{Context, Stop, stopped};
use crate::taint_eviction::{self, NO_EXECUTE, TaintClock};

/// Taint of a node whose agent stopped reporting.
pub const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";
/// Taint of a node reporting Ready=False.
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
/// Taint of a cordoned node.
pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";
/// The NoSchedule taint of each node condition that keeps new pods away
/// while it is True.
pub const CONDITION_TAINTS: [(&str, &str); 4] = [
    ("MemoryPressure", "node.kubernetes.io/memory-pressure"),
    ("DiskPressure", "node.kubernetes.io/disk-pressure"),
    ("PIDPressure", "node.kubernetes.io/pid-pressure"),
    (
        "NetworkUnavailable",
        "node.kubernetes.io/network-unavailable",
    ),
];
/// Namespace of the node Leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

const NO_SCHEDULE: &str = "NoSchedule";

/// Settings of the node lifecycle controller.
#[derive(Clone, Debug)]
pub struct NodeLifecycleConfig {
    /// A Lease not renewed for this long makes its node unreachable
    /// (upstream's `--node-monitor-grace-period`).
    pub grace: Duration,
    /// How long pods without a matching toleration stay on a NoExecute-tainted node.
    pub default_toleration: Duration,
    /// How often nodes are checked (upstream's `--node-monitor-period`).
    pub monitor_period: Duration,
}

impl Default for NodeLifecycleConfig {
    fn default() -> Self {
        Self {
            grace: Duration::from_secs(40),
            default_toleration: Duration::from_secs(300),
            monitor_period: Duration::from_secs(5),
        }
    }
}

/// Errors of one node's check: a request about the node or one of its
/// pods failed.
pub type NodeLifecycleError = RequestFailed;

/// The last Lease state seen for a node and when it was seen to change.
struct Probe {
    renewed: Option<Timestamp>,
    seen_at: Instant,
    /// The Node as events refer to it (its uid is gone with it).
    reference: ObjectReference,
}

/// Runs the node lifecycle controller with default settings.
pub async fn run(ctx: Context, stop: Stop) {
    run_with(ctx, stop, NodeLifecycleConfig::default()).await;
}

/// Runs the node lifecycle controller with `config` until `stop`.
pub async fn run_with(ctx: Context, stop: Stop, config: NodeLifecycleConfig) {
    let nodes = ctx.factory.informer::<Node>();
    let leases = ctx
        .factory
        .namespaced_informer::<Lease>(LEASE_NAMESPACE, WatchConfig::default());
    let pods = ctx.factory.informer::<Pod>();
    if let Err(error) = pods.ensure_index(NODE_NAME_INDEX, pod_node_name_index()) {
        tracing::error!(%error, "node-lifecycle: cannot index pods by node");
        return;
    }
    if !wait_synced(&[&nodes, &leases, &pods], stopped(stop.clone())).await {
        return;
    }
    let monitor = Monitor {
        client: ctx.client.clone(),
        events: EventRecorder::new(ctx.client.clone(), "node-controller"),
        config,
        pods: pods.cache().clone(),
        taint_clock: std::sync::Mutex::new(TaintClock::default()),
    };
    let mut probes: HashMap<String, Probe> = HashMap::new();
    loop {
        let now = Instant::now();
        let all = nodes.cache().list();
        probes.retain(|name, probe| {
            let present = all.iter().any(|n| &n.name_any() == name);
            if !present {
                let note = format!("Removing Node {name} from Controller");
                monitor.node_event(&probe.reference, "RemovingNode", name, &note);
                monitor.clock().forget(name);
            }
            present
        });
        for node in all {
            let name = node.name_any();
            let renewed = leases
                .cache()
                .get(LEASE_NAMESPACE, &name)
                .and_then(|l| l.spec.as_ref()?.renew_time.as_ref().map(|t| t.0))
                .or_else(|| {
                    ready_condition(&node)?
                        .last_heartbeat_time
                        .as_ref()
                        .map(|t| t.0)
                });
            let probe = probes.entry(name.clone()).or_insert_with(|| {
                let reference = object_reference(node.as_ref());
                let note = format!("Registered Node {name} in Controller");
                monitor.node_event(&reference, "RegisteredNode", &name, &note);
                Probe {
                    renewed,
                    seen_at: now,
                    reference,
                }
            });
            if probe.renewed != renewed {
                probe.renewed = renewed;
                probe.seen_at = now;
            }
            let stale = now.duration_since(probe.seen_at) > monitor.config.grace;
            if let Err(error) = monitor.check(&node, stale).await {
                tracing::warn!(node = %name, %error, "node-lifecycle: check failed");
            }
        }
        tokio::select! {
            _ = stopped(stop.clone()) => return,
            _ = tokio::time::sleep(monitor.config.monitor_period) => {}
        }
    }
}

/// Conditions of a node whose agent went silent: every condition Unknown
/// (a missing Ready added), heartbeat times kept.
pub fn unknown_conditions(current: &[NodeCondition], now: &Time) -> Vec<NodeCondition> {
    let mut out: Vec<NodeCondition> = current
        .iter()
        .map(|c| {
            if c.status == "Unknown" {
                return c.clone();
            }
            NodeCondition {
                status: "Unknown".into(),
                reason: Some("NodeStatusUnknown".into()),
                message: Some("Kubelet stopped posting node status.".into()),
                last_transition_time: Some(now.clone()),
                ..c.clone()
            }
        })
        .collect();
    if !out.iter().any(|c| c.type_ == "Ready") {
        out.push(NodeCondition {
            type_: "Ready".into(),
            status: "Unknown".into(),
            reason: Some("NodeStatusNeverUpdated".into()),
            message: Some("Kubelet never posted node status.".into()),
            last_transition_time: Some(now.clone()),
            last_heartbeat_time: None,
        });
    }
    out
}

/// The taints `node` should carry for its `key`: NoSchedule and NoExecute
/// when `wanted`, none otherwise; other taints untouched. None if no change.
pub fn reconcile_taints(
    current: &[Taint],
    key: &str,
    wanted: bool,
    now: &Time,
) -> Option<Vec<Taint>> {
    let has = |effect: &str| current.iter().any(|t| t.key == key && t.effect == effect);
    let complete = has(NO_EXECUTE) && has(NO_SCHEDULE);
    let any = current.iter().any(|t| t.key == key);
    if wanted == complete && (wanted || !any) {
        return None;
    }
    let mut out: Vec<Taint> = current.iter().filter(|t| t.key != key).cloned().collect();
    if wanted {
        for effect in [NO_SCHEDULE, NO_EXECUTE] {
            let kept = current.iter().find(|t| t.key == key && t.effect == effect);
            out.push(kept.cloned().unwrap_or_else(|| Taint {
                key: key.into(),
                effect: effect.into(),
                value: None,
                time_added: (effect == NO_EXECUTE).then(|| now.clone()),
            }));
        }
    }
    Some(out)
}

/// The taints with `key` (NoSchedule only) present exactly when `wanted`
/// (a cordon, a pressure condition); other taints untouched. None if no
/// change.
pub fn reconcile_no_schedule(current: &[Taint], key: &str, wanted: bool) -> Option<Vec<Taint>> {
    let has = current
        .iter()
        .any(|t| t.key == key && t.effect == NO_SCHEDULE);
    let any = current.iter().any(|t| t.key == key);
    if wanted == has && (wanted || !any) {
        return None;
    }
    let mut out: Vec<Taint> = current.iter().filter(|t| t.key != key).cloned().collect();
    if wanted {
        out.push(Taint {
            key: key.into(),
            effect: NO_SCHEDULE.into(),
            value: None,
            time_added: None,
        });
    }
    Some(out)
}

/// Whether `node` reports the condition `kind` True.
fn condition_true(node: &Node, kind: &str) -> bool {
    conditions(node)
        .iter()
        .any(|c| c.type_ == kind && c.status == "True")
}

struct Monitor {
    client: kube::Client,
    events: EventRecorder,
    config: NodeLifecycleConfig,
    pods: Arc<Cache<Pod>>,
    /// When each NoExecute taint was added, for those that do not say.
    taint_clock: std::sync::Mutex<TaintClock>,
}

impl Monitor {
    /// The taint clock (a panic elsewhere while it was held leaves it usable).
    fn clock(&self) -> std::sync::MutexGuard<'_, TaintClock> {
        self.taint_clock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn check(&self, node: &Node, stale: bool) -> Result<(), NodeLifecycleError> {
        let name = node.name_any();
        let now = Time(Timestamp::now());
        if stale {
            self.mark_unknown(node, &now).await?;
        }
        let ready_false = ready_condition(node).is_some_and(|c| c.status == "False") && !stale;
        let mut taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        let mut changed = false;
        for (key, wanted) in [(UNREACHABLE_TAINT, stale), (NOT_READY_TAINT, ready_false)] {
            if let Some(next) = reconcile_taints(&taints, key, wanted, &now) {
                taints = next;
                changed = true;
            }
        }
        let cordoned = node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false);
        let by_condition = CONDITION_TAINTS
            .iter()
            .map(|(kind, key)| (*key, !stale && condition_true(node, kind)));
        for (key, wanted) in [(UNSCHEDULABLE_TAINT, cordoned)]
            .into_iter()
            .chain(by_condition)
        {
            if let Some(next) = reconcile_no_schedule(&taints, key, wanted) {
                taints = next;
                changed = true;
            }
        }
        if changed {
            let api: Api<Node> = Api::all(self.client.clone());
            let patch = serde_json::json!({
                "metadata": { "resourceVersion": node.resource_version() },
                "spec": { "taints": taints },
            });
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(RequestFailed::of("tainting node", name.clone()))?;
        }
        let no_execute = self.clock().no_execute(&name, &taints);
        self.evict(&name, &no_execute).await
    }

    /// An event about the Node `name` in the node controller's words
    /// (`Node <name> event: <note>`).
    fn node_event(&self, node: &ObjectReference, reason: &str, name: &str, note: &str) {
        let note = format!("Node {name} event: {note}");
        self.events.normal(node, reason, reason, note);
    }

    /// Turns the node's conditions Unknown and its pods not ready, once.
    async fn mark_unknown(&self, node: &Node, now: &Time) -> Result<(), NodeLifecycleError> {
        let name = node.name_any();
        let current = conditions(node);
        let next = unknown_conditions(current, now);
        if next == current {
            return Ok(());
        }
        tracing::info!(node = %name, "node-lifecycle: node stopped reporting; marking it NotReady");
        let api: Api<Node> = Api::all(self.client.clone());
        let patch = serde_json::json!({ "status": { "conditions": next } });
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(RequestFailed::of("marking node unknown", name.clone()))?;
        self.events.normal(
            &object_reference(node),
            "NodeNotReady",
            "NodeNotReady",
            format!("Node {name} status is now: NodeNotReady"),
        );
        for pod in self
            .pods
            .by_index(NODE_NAME_INDEX, &name)
            .unwrap_or_default()
        {
            self.mark_pod_not_ready(&pod, now).await?;
        }
        Ok(())
    }

    async fn mark_pod_not_ready(&self, pod: &Pod, now: &Time) -> Result<(), NodeLifecycleError> {
        let Some(conditions) = pod.status.as_ref().and_then(|s| s.conditions.clone()) else {
            return Ok(());
        };
        if !conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
        {
            return Ok(());
        }
        let next: Vec<_> = conditions
            .into_iter()
            .map(|mut c| {
                if c.type_ == "Ready" {
                    c.status = "False".into();
                    c.last_transition_time = Some(now.clone());
                }
                c
            })
            .collect();
        let patch = serde_json::json!({ "status": { "conditions": next } });
        patch_pod_status(&self.client, pod, &patch, "marking pod not ready").await?;
        self.events.warning(
            &object_reference(pod),
            "NodeNotReady",
            "NodeNotReady",
            "Node is not ready",
        );
        Ok(())
    }

    /// Deletes the node's pods whose toleration of its NoExecute `taints`
    /// (each with when it was added) ran out.
    async fn evict(
        &self,
        node: &str,
        taints: &[(Taint, Timestamp)],
    ) -> Result<(), NodeLifecycleError> {
        if taints.is_empty() {
            return Ok(());
        }
        let now = Timestamp::now();
        for pod in self
            .pods
            .by_index(NODE_NAME_INDEX, node)
            .unwrap_or_default()
        {
            if pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let due = taint_eviction::eviction_due(&pod, taints, self.config.default_toleration);
            if due.is_some_and(|due| due <= now) {
                taint_eviction::evict(&self.client, &self.events, &pod, node).await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            effect: effect.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_cordoned_node_carries_the_unschedulable_taint_alone() {
        let others = vec![taint("dedicated", "NoSchedule")];
        let cordoned = reconcile_no_schedule(&others, UNSCHEDULABLE_TAINT, true).expect("added");
        assert_eq!(cordoned.len(), 2);
        assert_eq!(cordoned[1].key, UNSCHEDULABLE_TAINT);
        assert_eq!(cordoned[1].effect, "NoSchedule");
        assert_eq!(cordoned[1].time_added, None);
        assert_eq!(
            reconcile_no_schedule(&cordoned, UNSCHEDULABLE_TAINT, true),
            None,
            "added once"
        );
        assert_eq!(
            reconcile_no_schedule(&cordoned, UNSCHEDULABLE_TAINT, false),
            Some(others.clone())
        );
        assert_eq!(
            reconcile_no_schedule(&others, UNSCHEDULABLE_TAINT, false),
            None
        );
    }

    #[test]
    fn taints_are_added_once_and_removed_cleanly() {
        let now = Time(Timestamp::now());
        let others = vec![taint("dedicated", "NoSchedule")];
        let added = reconcile_taints(&others, UNREACHABLE_TAINT, true, &now).unwrap();
        assert_eq!(added.len(), 3);
        assert!(added.iter().any(|t| t.key == UNREACHABLE_TAINT
            && t.effect == NO_EXECUTE
            && t.time_added.is_some()));
        assert!(reconcile_taints(&added, UNREACHABLE_TAINT, true, &now).is_none());
        let removed = reconcile_taints(&added, UNREACHABLE_TAINT, false, &now).unwrap();
        assert_eq!(removed, others);
        assert!(reconcile_taints(&others, UNREACHABLE_TAINT, false, &now).is_none());
    }

    #[test]
    fn silent_nodes_get_unknown_conditions() {
        let now = Time(Timestamp::now());
        let ready = NodeCondition {
            type_: "Ready".into(),
            status: "True".into(),
            ..Default::default()
        };
        let out = unknown_conditions(&[ready], &now);
        assert_eq!(out[0].status, "Unknown");
        assert_eq!(out[0].reason.as_deref(), Some("NodeStatusUnknown"));
        assert_eq!(
            out[0].message.as_deref(),
            Some("Kubelet stopped posting node status.")
        );
        assert_eq!(unknown_conditions(&out, &now), out);
        let never = unknown_conditions(&[], &now);
        assert_eq!(never[0].reason.as_deref(), Some("NodeStatusNeverUpdated"));
    }
}
