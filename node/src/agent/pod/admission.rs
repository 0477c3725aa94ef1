//! Whether this node takes a pod, as upstream's kubelet admits one before
//! anything of it runs: the node must not be under pressure (a critical
//! pod always passes; under memory pressure alone, any pod but a
//! BestEffort one not tolerating it), its sysctls must be on the node's allowlist
//! ([`super::sysctls`]), and its requests must fit what the node has left
//! after the pods it already took, its node selector and required affinity
//! must match the node, its host ports be free, and the node's NoExecute
//! taints tolerated (the kubelet's predicates — a pod bound to the node by
//! name never passed the scheduler's), and any AppArmor profile it asks for
//! enforceable ([`super::apparmor`]). A pod refused here fails with
//! upstream's reason and message.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, PodSpec, Taint};
use skiff_common::amount::Amount;
use skiff_common::placement::{required_affinity_matches, tolerates};
use skiff_common::quota::pods::pod_requests;

use super::context::AgentContext;
use super::{apparmor, sysctls};
use crate::agent::node::host::Pressure;

/// Why a pod was not admitted: upstream's reason (`SysctlForbidden`,
/// `OutOfcpu`, …) and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The pod status's and the event's reason.
    pub reason: String,
    /// What was wrong, in upstream's words.
    pub message: String,
}

/// Admits `pod`, given this node's Node (when it could be read) and the
/// other pods bound to it, or says why not — the first reason only, in the
/// order upstream's kubelet checks them.
pub(crate) fn admit(
    ctx: &AgentContext,
    pod: &Pod,
    node: Option<&Node>,
    on_node: &[Arc<Pod>],
) -> Result<(), Refusal> {
    under_pressure(pod, *ctx.pressure.borrow())?;
    ctx.sysctls.admit(pod).map_err(|message| Refusal {
        reason: sysctls::FORBIDDEN_REASON.into(),
        message,
    })?;
    let capacity = capacity(ctx);
    let taken: Vec<&Pod> = on_node
        .iter()
        .map(Arc::as_ref)
        .filter(|other| taken_before(other, pod))
        .collect();
    fits(pod, &taken, &capacity)?;
    predicates(&pod.spec.clone().unwrap_or_default(), node, &taken)?;
    apparmor::admit(pod, ctx.apparmor).map_err(|message| Refusal {
        reason: apparmor::NOT_ADMITTED_REASON.into(),
        message,
    })
}

/// What the Node publishes as allocatable (its memory in whole KiB), what
/// the scheduler fits pods in too, in upstream's units.
fn capacity(ctx: &AgentContext) -> [(&'static str, i64); 4] {
    [
        ("cpu", (ctx.allocatable.cpu * 1000.0) as i64),
        ("memory", (ctx.allocatable.memory as i64 / 1024) * 1024),
        (
            "ephemeral-storage",
            ctx.allocatable.ephemeral_storage as i64,
        ),
        ("pods", i64::from(ctx.allocatable.pods)),
    ]
}

/// Whether the node takes a running `pod` at what its spec now asks (an
/// in-place resize): `Infeasible` when the pod alone would not fit the
/// node, `Deferred` when the other pods on it leave too little for now —
/// the reasons of upstream's `PodResizePending` condition.
pub(crate) fn admit_resize(
    ctx: &AgentContext,
    pod: &Pod,
    on_node: &[Arc<Pod>],
) -> Result<(), Refusal> {
    let capacity = capacity(ctx);
    if let Some(short) = shortfall(pod, &[], &capacity) {
        return Err(Refusal {
            reason: "Infeasible".into(),
            message: format!(
                "Node didn't have enough capacity: {}, requested: {}, capacity: {}",
                short.name, short.requested, short.capacity
            ),
        });
    }
    let others: Vec<&Pod> = (on_node.iter().map(Arc::as_ref))
        .filter(|other| other.metadata.uid != pod.metadata.uid)
        .filter(|other| {
            let phase = other.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        })
        .collect();
    match shortfall(pod, &others, &capacity) {
        Some(short) => Err(Refusal {
            reason: "Deferred".into(),
            message: short.message(),
        }),
        None => Ok(()),
    }
}

/// The pods the kubelet admits whatever the pressure: mirror pods and pods
/// of the system's critical priorities.
pub(crate) fn critical(pod: &Pod) -> bool {
    const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;
    let mirror = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
    mirror || priority >= SYSTEM_CRITICAL_PRIORITY
}

/// Refuses a new pod while the node is under pressure, in the eviction
/// manager's words: under memory pressure alone only BestEffort pods that
/// do not tolerate it; under any other pressure every pod but a critical
/// one.
fn under_pressure(pod: &Pod, pressure: Pressure) -> Result<(), Refusal> {
    let conditions: Vec<&str> = [
        (pressure.memory, "MemoryPressure"),
        (pressure.disk, "DiskPressure"),
        (pressure.pids, "PIDPressure"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect();
    if conditions.is_empty() || critical(pod) {
        return Ok(());
    }
    if conditions == ["MemoryPressure"] {
        let memory_taint = Taint {
            key: "node.kubernetes.io/memory-pressure".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        };
        let tolerated = pod
            .spec
            .iter()
            .flat_map(|s| s.tolerations.iter().flatten())
            .any(|t| tolerates(t, &memory_taint));
        if skiff_common::qos::qos_class(pod) != "BestEffort" || tolerated {
            return Ok(());
        }
    }
    Err(Refusal {
        reason: "Evicted".into(),
        message: format!("The node had condition: [{}]. ", conditions.join(" ")),
    })
}

/// The kubelet's predicates beyond resources: node selector and required
/// affinity, free host ports, tolerated NoExecute taints.
fn predicates(spec: &PodSpec, node: Option<&Node>, taken: &[&Pod]) -> Result<(), Refusal> {
    if node.is_some_and(|node| !required_affinity_matches(spec, node)) {
        return Err(Refusal::predicate(
            "NodeAffinity",
            "node(s) didn't match Pod's node affinity/selector",
        ));
    }
    if host_ports_clash(spec, taken) {
        return Err(Refusal::predicate(
            "NodePorts",
            "node(s) didn't have free ports for the requested pod ports",
        ));
    }
    // Of the taints, a kubelet minds only NoExecute: the scheduler judged
    // the rest, and a pod placed by name chose to ignore them.
    let taints = node.and_then(|n| n.spec.as_ref()?.taints.as_deref());
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    let untolerated = taints.unwrap_or_default().iter().any(|taint| {
        taint.effect == "NoExecute" && !tolerations.iter().any(|t| tolerates(t, taint))
    });
    if untolerated {
        return Err(Refusal::predicate(
            "TaintToleration",
            "node(s) had taints that the pod didn't tolerate",
        ));
    }
    Ok(())
}

impl Refusal {
    /// A failed predicate, worded as upstream's `PredicateFailureError`.
    fn predicate(name: &str, description: &str) -> Self {
        Self {
            reason: name.into(),
            message: format!("Predicate {name} failed: {description}"),
        }
    }
}

/// Whether a host port `spec` asks for is held by a taken pod: the same
/// protocol and port, on the same address or where either is the wildcard.
fn host_ports_clash(spec: &PodSpec, taken: &[&Pod]) -> bool {
    let host_ports = |spec: &PodSpec| -> Vec<(String, String, i32)> {
        spec.containers
            .iter()
            .flat_map(|c| c.ports.iter().flatten())
            .filter_map(|p| {
                let port = p.host_port.filter(|h| *h > 0)?;
                let ip = p.host_ip.clone().filter(|ip| !ip.is_empty());
                let protocol = p.protocol.clone().unwrap_or_else(|| "TCP".into());
                Some((protocol, ip.unwrap_or_else(|| "0.0.0.0".into()), port))
            })
            .collect()
    };
    let held: Vec<_> = taken
        .iter()
        .filter_map(|p| p.spec.as_ref())
        .flat_map(host_ports)
        .collect();
    host_ports(spec).iter().any(|(protocol, ip, port)| {
        held.iter().any(|(p, i, n)| {
            p == protocol && n == port && (i == ip || i == "0.0.0.0" || ip == "0.0.0.0")
        })
    })
}

/// Whether `other` holds its share of the node when `pod` is admitted: it is
/// another pod that has not finished, and the node took it first (it has
/// started, or it was created earlier — the order the kubelet admits in).
fn taken_before(other: &Pod, pod: &Pod) -> bool {
    let status = other.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref());
    if other.metadata.uid == pod.metadata.uid || matches!(phase, Some("Succeeded" | "Failed")) {
        return false;
    }
    let created = |p: &Pod| {
        (
            p.metadata.creation_timestamp.as_ref().map(|t| t.0),
            p.metadata.namespace.clone(),
            p.metadata.name.clone(),
        )
    };
    status.is_some_and(|s| s.start_time.is_some()) || created(other) < created(pod)
}

/// `pod` fits when, for each resource of `capacity` (in upstream's units:
/// millicores, bytes, a count of pods), what it requests and what `taken`
/// requests stay within it.
fn fits(pod: &Pod, taken: &[&Pod], capacity: &[(&str, i64)]) -> Result<(), Refusal> {
    match shortfall(pod, taken, capacity) {
        Some(short) => Err(Refusal {
            reason: format!("OutOf{}", short.name),
            message: short.message(),
        }),
        None => Ok(()),
    }
}

/// The first resource `pod` and `taken` together ask more of than
/// `capacity` has.
struct Shortfall {
    name: String,
    requested: i64,
    used: i64,
    capacity: i64,
}

impl Shortfall {
    /// Upstream's words for it.
    fn message(&self) -> String {
        format!(
            "Node didn't have enough resource: {}, requested: {}, used: {}, capacity: {}",
            self.name, self.requested, self.used, self.capacity
        )
    }
}

fn shortfall(pod: &Pod, taken: &[&Pod], capacity: &[(&str, i64)]) -> Option<Shortfall> {
    let requests = |p: &Pod| {
        let mut list = serde_json::to_value(p)
            .map(|v| pod_requests(&v))
            .unwrap_or_default();
        list.insert("pods".into(), Amount::count(1));
        list
    };
    let asked = requests(pod);
    let used: Vec<_> = taken.iter().map(|p| requests(p)).collect();
    for (name, capacity) in capacity {
        let in_units = |amount: Option<&Amount>| {
            let milli = amount.map_or(0, Amount::milli);
            if *name == "cpu" {
                milli
            } else {
                milli.saturating_add(999) / 1000
            }
        };
        let requested = in_units(asked.get(*name));
        if requested == 0 {
            continue;
        }
        let used: i64 = used.iter().map(|list| in_units(list.get(*name))).sum();
        if requested + used > *capacity {
            return Some(Shortfall {
                name: name.to_string(),
                requested,
                used,
                capacity: *capacity,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(name: &str, cpu: &str, memory: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "uid": name},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
        }))
        .expect("pod")
    }

    const CAPACITY: &[(&str, i64)] = &[("cpu", 2000), ("memory", 1 << 30), ("pods", 3)];

    #[test]
    fn under_pressure_only_what_the_eviction_manager_admits_gets_in() {
        let memory = Pressure {
            memory: true,
            ..Default::default()
        };
        let both = Pressure {
            memory: true,
            disk: true,
            ..Default::default()
        };
        let best_effort: Pod = serde_json::from_value(json!({
            "metadata": {"name": "be"}, "spec": {"containers": [{"name": "c"}]}}))
        .unwrap();
        let burstable = pod("b", "100m", "1Mi");
        let tolerant: Pod = serde_json::from_value(json!({"metadata": {"name": "t"}, "spec": {
            "containers": [{"name": "c"}],
            "tolerations": [{"key": "node.kubernetes.io/memory-pressure", "operator": "Exists"}]}}))
        .unwrap();
        let critical: Pod = serde_json::from_value(json!({"metadata": {"name": "k"}, "spec": {
            "containers": [{"name": "c"}], "priority": 2_000_001_000}}))
        .unwrap();
        // The refusal naming `conditions`, in upstream's words.
        let refused = |conditions: &str| {
            Err(Refusal {
                reason: "Evicted".into(),
                message: format!("The node had condition: [{conditions}]. "),
            })
        };
        assert_eq!(under_pressure(&best_effort, Pressure::default()), Ok(()));
        assert_eq!(
            under_pressure(&best_effort, memory),
            refused("MemoryPressure")
        );
        assert_eq!(under_pressure(&burstable, memory), Ok(()));
        assert_eq!(under_pressure(&tolerant, memory), Ok(()));
        assert_eq!(
            under_pressure(&burstable, both),
            refused("MemoryPressure DiskPressure")
        );
        assert_eq!(under_pressure(&critical, both), Ok(()));
    }

    #[test]
    fn a_pod_fits_in_what_the_taken_pods_leave_and_is_refused_in_upstreams_words() {
        let first = pod("a", "1500m", "100Mi");
        assert_eq!(fits(&pod("b", "500m", "1Mi"), &[&first], CAPACITY), Ok(()));
        assert_eq!(
            fits(&pod("b", "600m", "1Mi"), &[&first], CAPACITY),
            Err(Refusal {
                reason: "OutOfcpu".into(),
                message: "Node didn't have enough resource: cpu, requested: 600, used: 1500, capacity: 2000".into()
            })
        );
        let refused = fits(&pod("b", "1m", "1000Mi"), &[&first], CAPACITY).unwrap_err();
        assert_eq!(refused.reason, "OutOfmemory");
        let full = [&first, &first, &first];
        assert_eq!(
            fits(&pod("b", "0", "0"), &full, CAPACITY)
                .unwrap_err()
                .reason,
            "OutOfpods"
        );
    }

    #[test]
    fn node_predicates_refuse_in_upstreams_words() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n", "labels": {"disk": "ssd"}},
            "spec": {"taints": [{"key": "k", "effect": "NoExecute"}, {"key": "soft", "effect": "NoSchedule"}]}
        }))
        .expect("node");
        let spec = |v: serde_json::Value| -> PodSpec { serde_json::from_value(v).expect("spec") };
        let tolerant = json!([{"key": "k", "operator": "Exists"}]);
        let web = |port: i32, ip: &str| {
            spec(json!({"tolerations": tolerant, "containers": [{"name": "c",
                "ports": [{"containerPort": 80, "hostPort": port, "hostIP": ip}]}]}))
        };
        let holder = Pod {
            spec: Some(web(8080, "")),
            ..Default::default()
        };
        let refused = |s: &PodSpec| {
            predicates(s, Some(&node), &[&holder])
                .err()
                .map(|r| r.message)
        };
        assert_eq!(refused(&web(8081, "")), None);
        assert_eq!(
            refused(&web(8080, "10.0.0.1")).as_deref(),
            Some(
                "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
            )
        );
        let mut selective = web(8081, "");
        selective.node_selector = Some([("disk".to_string(), "hdd".to_string())].into());
        assert_eq!(
            refused(&selective).as_deref(),
            Some(
                "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
            )
        );
        assert_eq!(
            refused(&spec(json!({"containers": []}))).as_deref(),
            Some(
                "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"
            )
        );
    }

    #[test]
    fn finished_pods_and_later_ones_hold_no_share() {
        let mut done = pod("done", "1", "1Mi");
        done.status = Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Succeeded".into()),
            ..Default::default()
        });
        let me = pod("me", "1", "1Mi");
        assert!(!taken_before(&done, &me));
        assert!(!taken_before(&me, &me));
        // Same creation time (none): the name decides, as a stable order.
        assert!(taken_before(&pod("a", "1", "1Mi"), &me));
        assert!(!taken_before(&pod("z", "1", "1Mi"), &me));
    }
}
