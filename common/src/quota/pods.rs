//! Pods under quota: what a pod uses (its requests and limits summed as
//! upstream's resource helpers sum them, init and sidecar containers and
//! overhead included), when it stops counting (terminal, or deleted and past
//! its grace period), what it must specify under a cpu or memory quota, and
//! which quota scopes it falls in.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use super::{ResourceList, ScopeRequirement, add, read_list};
use crate::amount::Amount;

/// The compute names a pod is charged under besides its counts.
const POD_RESOURCES: &[&str] = &[
    "pods",
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
];

/// Pods' compute names (upstream's `podComputeQuotaResources`): the names a
/// quota on cpu or memory requires every container to specify, and with
/// `pods` the ones a scoped quota may limit.
pub const COMPUTE_RESOURCES: &[&str] = &[
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];

const REQUESTS: &str = "requests.";

/// Whether a quota resource name is one pods are charged under.
pub(super) fn is_pod_resource(name: &str) -> bool {
    POD_RESOURCES.contains(&name)
        || name.starts_with("hugepages-")
        || name.starts_with("requests.hugepages-")
        || name.strip_prefix(REQUESTS).is_some_and(is_extended)
}

/// Extended resources (`example.com/gpu`): a domain that is not
/// kubernetes.io's, and not a quota's own `requests.` form.
fn is_extended(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with(REQUESTS)
}

/// Whether a pod still counts for compute quota: not Succeeded or Failed,
/// and not deleted longer ago than its grace period (a pod stuck
/// terminating on a lost node must not hold the namespace's quota).
pub fn counts_for_compute(pod: &Value, now: Timestamp) -> bool {
    if matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    ) {
        return false;
    }
    let deleted = pod["metadata"]["deletionTimestamp"]
        .as_str()
        .and_then(|t| t.parse::<Timestamp>().ok());
    let grace = pod["metadata"]["deletionGracePeriodSeconds"].as_i64();
    match (deleted, grace) {
        (Some(at), Some(grace)) => {
            now <= at
                .saturating_add(SignedDuration::from_secs(grace))
                .unwrap_or(at)
        }
        _ => true,
    }
}

/// A container's `resources.<field>` (`requests` or `limits`) as its spec
/// says them.
fn spec_list(container: &Value, field: &str) -> ResourceList {
    read_list(&container["resources"][field])
}

/// What a pod's status says of its containers' resources while an
/// in-place resize may have the node run them otherwise than the spec says
/// (the default: nothing, the spec alone counts).
#[derive(Default)]
struct ResizeView<'a> {
    /// Each container's status (regular and init) by name.
    statuses: BTreeMap<&'a str, &'a Value>,
    /// The node said the pod's resize cannot be done (`PodResizePending`
    /// with reason `Infeasible`).
    infeasible: bool,
}

impl<'a> ResizeView<'a> {
    fn of(pod: &'a Value) -> Self {
        let status = &pod["status"];
        let statuses = ["containerStatuses", "initContainerStatuses"]
            .iter()
            .flat_map(|list| status[*list].as_array().into_iter().flatten())
            .filter_map(|s| Some((s["name"].as_str()?, s)))
            .collect();
        let infeasible = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "PodResizePending")
            .is_some_and(|c| c["reason"] == "Infeasible");
        Self {
            statuses,
            infeasible,
        }
    }

    /// A container's `requests` or `limits` (per `field`) as upstream counts
    /// them with the status's resources: once the node reports what the
    /// container runs with, the largest of the spec's, the running and (for
    /// requests) the allocated amounts; while the resize is infeasible, the
    /// spec's are left out.
    fn container_list(&self, container: &Value, field: &str) -> ResourceList {
        let spec = spec_list(container, field);
        let Some(status) = container["name"]
            .as_str()
            .and_then(|name| self.statuses.get(name))
            .filter(|s| s["resources"].is_object())
        else {
            return spec;
        };
        let mut counted = if self.infeasible {
            ResourceList::new()
        } else {
            spec
        };
        max_into(&mut counted, &read_list(&status["resources"][field]));
        if field == "requests" {
            max_into(&mut counted, &read_list(&status["allocatedResources"]));
        }
        counted
    }
}

/// Raises each of `into`'s amounts to `other`'s where that is larger.
fn max_into(into: &mut ResourceList, other: &ResourceList) {
    for (name, amount) in other {
        match into.get(name) {
            Some(have) if have >= amount => {}
            _ => {
                into.insert(name.clone(), *amount);
            }
        }
    }
}

/// The pod's effective `requests` or `limits` (per `field`): its
/// containers' sum (each as [`ResizeView::container_list`] counts it); an init container runs alone (besides the sidecars
/// started before it), so only the largest such moment raises the sum;
/// sidecars (init containers with `restartPolicy: Always`) run alongside
/// and add. Overhead adds to requests, and to limits the pod sets.
fn pod_total(pod: &Value, field: &str, resize: ResizeView<'_>) -> ResourceList {
    let spec = &pod["spec"];
    let mut total = ResourceList::new();
    for container in spec["containers"].as_array().into_iter().flatten() {
        total = add(&total, &resize.container_list(container, field));
    }
    let mut sidecars = ResourceList::new();
    let mut init_peak = ResourceList::new();
    for container in spec["initContainers"].as_array().into_iter().flatten() {
        let sidecar = container["restartPolicy"] == "Always";
        // Only sidecars are resized; an ordinary init container's spec holds.
        let own = if sidecar {
            resize.container_list(container, field)
        } else {
            spec_list(container, field)
        };
        let moment = if sidecar {
            total = add(&total, &own);
            sidecars = add(&sidecars, &own);
            sidecars.clone()
        } else {
            add(&own, &sidecars)
        };
        max_into(&mut init_peak, &moment);
    }
    max_into(&mut total, &init_peak);
    let overhead = read_list(&spec["overhead"]);
    for (name, amount) in overhead {
        if field == "requests" || total.contains_key(&name) {
            let sum = total.get(&name).map_or(amount, |have| *have + amount);
            total.insert(name, sum);
        }
    }
    total
}

/// What the pod's spec requests in all: what a node admitting the pod (or
/// its resize) must find room for, and what LimitRange bounds.
pub fn pod_requests(pod: &Value) -> ResourceList {
    pod_total(pod, "requests", ResizeView::default())
}

/// The pod's spec limits in all (names no container limits are absent).
pub fn pod_limits(pod: &Value) -> ResourceList {
    pod_total(pod, "limits", ResizeView::default())
}

/// What the pod holds of its node's requests as quota counts it (and the
/// scheduler): with what its status says the node runs it with, while an
/// in-place resize is pending (see [`ResizeView::container_list`]).
pub fn pod_requests_in_use(pod: &Value) -> ResourceList {
    pod_total(pod, "requests", ResizeView::of(pod))
}

/// The pod's limits as quota counts them, status included as for
/// [`pod_requests_in_use`].
pub fn pod_limits_in_use(pod: &Value) -> ResourceList {
    pod_total(pod, "limits", ResizeView::of(pod))
}

/// The compute names charged for `requests` and `limits`: `pods`, each of
/// cpu, memory and ephemeral-storage under its bare and `requests.` names
/// and its `limits.` name, hugepages under both, extended resources under
/// `requests.` only.
fn compute_usage(requests: &ResourceList, limits: &ResourceList) -> ResourceList {
    let mut usage = ResourceList::new();
    usage.insert("pods".into(), Amount::count(1));
    for name in ["cpu", "memory", "ephemeral-storage"] {
        if let Some(request) = requests.get(name) {
            usage.insert(name.into(), *request);
            usage.insert(format!("{REQUESTS}{name}"), *request);
        }
        if let Some(limit) = limits.get(name) {
            usage.insert(format!("limits.{name}"), *limit);
        }
    }
    for (name, request) in requests {
        if name.starts_with("hugepages-") {
            usage.insert(name.clone(), *request);
            usage.insert(format!("{REQUESTS}{name}"), *request);
        } else if is_extended(name) {
            usage.insert(format!("{REQUESTS}{name}"), *request);
        }
    }
    usage
}

/// What a pod uses besides its object count: nothing once it no longer
/// counts ([`counts_for_compute`]).
pub(super) fn usage(pod: &Value, now: Timestamp) -> ResourceList {
    if !counts_for_compute(pod, now) {
        return ResourceList::new();
    }
    compute_usage(&pod_requests_in_use(pod), &pod_limits_in_use(pod))
}

/// A pod's containers, then its init containers, in their wire form.
pub fn all_containers(pod: &Value) -> impl Iterator<Item = &Value> {
    let spec = &pod["spec"];
    spec["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(spec["initContainers"].as_array().into_iter().flatten())
}

/// Under a quota on cpu or memory every container must say how much it
/// requests (or limits) of it; the refusal names each missing resource with
/// the containers that lack it: `must specify limits.cpu for: a,b; ...`.
pub(super) fn constraints(required: &[String], pod: &Value) -> Result<(), String> {
    let required: BTreeSet<&str> = required
        .iter()
        .map(String::as_str)
        .filter(|name| COMPUTE_RESOURCES.contains(name))
        .collect();
    if required.is_empty() {
        return Ok(());
    }
    let mut missing: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for container in all_containers(pod) {
        let usage = compute_usage(
            &spec_list(container, "requests"),
            &spec_list(container, "limits"),
        );
        for name in &required {
            if !usage.contains_key(*name) {
                missing
                    .entry(name)
                    .or_default()
                    .insert(container["name"].as_str().unwrap_or(""));
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let parts: Vec<String> = missing
        .iter()
        .map(|(name, containers)| {
            let containers: Vec<&str> = containers.iter().copied().collect();
            format!("{name} for: {}", containers.join(","))
        })
        .collect();
    Err(format!("must specify {}", parts.join("; ")))
}

/// A pod is BestEffort when no container requests or limits any cpu or
/// memory (the QoS class, as the quota scopes read it).
pub fn is_best_effort(pod: &Value) -> bool {
    all_containers(pod).all(|container| {
        ["requests", "limits"].iter().all(|field| {
            let list = spec_list(container, field);
            ["cpu", "memory"]
                .iter()
                .all(|name| list.get(*name).is_none_or(|a| a.milli() <= 0))
        })
    })
}

/// Whether the pod has an active deadline (the `Terminating` scope).
fn is_terminating(pod: &Value) -> bool {
    pod["spec"]["activeDeadlineSeconds"]
        .as_i64()
        .is_some_and(|s| s >= 0)
}

/// Whether any pod (anti-)affinity term reaches other namespaces.
fn uses_cross_namespace_affinity(pod: &Value) -> bool {
    let affinity = &pod["spec"]["affinity"];
    ["podAffinity", "podAntiAffinity"].iter().any(|kind| {
        let rules = &affinity[*kind];
        let required = rules["requiredDuringSchedulingIgnoredDuringExecution"]
            .as_array()
            .into_iter()
            .flatten();
        let preferred = rules["preferredDuringSchedulingIgnoredDuringExecution"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|weighted| &weighted["podAffinityTerm"]);
        required.chain(preferred).any(|term| {
            term["namespaces"].as_array().is_some_and(|n| !n.is_empty())
                || term["namespaceSelector"].is_object()
        })
    })
}

/// Whether a pod meets one scope requirement. Only `PriorityClass` reads
/// the operator; the other scopes are facts the pod has or lacks.
pub(super) fn in_scope(requirement: &ScopeRequirement, pod: &Value) -> bool {
    match requirement.scope.as_str() {
        "Terminating" => is_terminating(pod),
        "NotTerminating" => !is_terminating(pod),
        "BestEffort" => is_best_effort(pod),
        "NotBestEffort" => !is_best_effort(pod),
        "CrossNamespacePodAffinity" => uses_cross_namespace_affinity(pod),
        "PriorityClass" => {
            let class = pod["spec"]["priorityClassName"]
                .as_str()
                .filter(|c| !c.is_empty());
            let listed = |c: &str| requirement.values.iter().any(|v| v == c);
            match requirement.operator.as_str() {
                "Exists" => class.is_some(),
                "DoesNotExist" => class.is_none(),
                "In" => class.is_some_and(listed),
                "NotIn" => class.is_none_or(|c| !listed(c)),
                _ => false,
            }
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::quota::pretty;

    fn now() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    fn pod(containers: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": containers}})
    }

    #[test]
    fn a_resizing_pod_is_charged_the_most_its_node_may_run_it_with() {
        let container = |cpu: &str| {
            json!({"name": "a", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"},
                "limits": {"cpu": cpu, "memory": "64Mi"}}})
        };
        let running = |cpu: &str, allocated: &str| {
            json!({"name": "a", "allocatedResources": {"cpu": allocated, "memory": "64Mi"},
                "resources": {"requests": {"cpu": cpu, "memory": "64Mi"},
                    "limits": {"cpu": cpu, "memory": "64Mi"}}})
        };
        let with_status = |spec_cpu: &str, status: Value, conditions: Value| {
            json!({"metadata": {"name": "p"},
                "spec": {"containers": [container(spec_cpu)]},
                "status": {"containerStatuses": [status], "conditions": conditions}})
        };
        let cpu =
            |p: &Value, field: &str| pod_total(p, field, ResizeView::of(p))["cpu"].to_string();
        // Shrinking: the node still runs it with 2 until it applies the change.
        let shrinking = with_status("1", running("2", "2"), json!([]));
        assert_eq!(cpu(&shrinking, "requests"), "2");
        assert_eq!(cpu(&shrinking, "limits"), "2");
        // Growing: the spec's larger amount counts before the node applies it.
        let growing = with_status("4", running("2", "2"), json!([]));
        assert_eq!(cpu(&growing, "requests"), "4");
        // Allocated but not yet running with it: the allocation counts.
        let allocated = with_status("1", running("1", "3"), json!([]));
        assert_eq!(cpu(&allocated, "requests"), "3");
        assert_eq!(cpu(&allocated, "limits"), "1", "limits know no allocation");
        // Infeasible: the node will never run the spec's amount.
        let infeasible = with_status(
            "8",
            running("2", "2"),
            json!([{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]),
        );
        assert_eq!(cpu(&infeasible, "requests"), "2");
        assert_eq!(cpu(&infeasible, "limits"), "2");
        // What the spec asks, for a node admitting the resize.
        assert_eq!(pod_requests(&infeasible)["cpu"].to_string(), "8");
        assert_eq!(pod_requests_in_use(&infeasible)["cpu"].to_string(), "2");
        // Deferred is not infeasible: the spec counts.
        let deferred = with_status(
            "8",
            running("2", "2"),
            json!([{"type": "PodResizePending", "status": "True", "reason": "Deferred"}]),
        );
        assert_eq!(cpu(&deferred, "requests"), "8");
        // No resources reported yet: the spec alone.
        let starting = with_status("1", json!({"name": "a"}), json!([]));
        assert_eq!(cpu(&starting, "requests"), "1");
    }

    #[test]
    fn a_pod_is_charged_its_requests_and_limits_under_every_name() {
        let p = pod(json!([
            {"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"},
                                        "limits": {"cpu": "500m", "memory": "128Mi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "250m", "memory": "64Mi",
                                                     "example.com/gpu": "1"}}}
        ]));
        assert_eq!(
            pretty(&usage(&p, now())),
            "cpu=500m,limits.cpu=500m,limits.memory=128Mi,memory=128Mi,pods=1,\
             requests.cpu=500m,requests.example.com/gpu=1,requests.memory=128Mi"
        );
    }

    #[test]
    fn init_containers_raise_the_peak_and_sidecars_add() {
        let p = json!({"spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
            "initContainers": [
                {"name": "side", "restartPolicy": "Always",
                 "resources": {"requests": {"cpu": "50m"}}},
                {"name": "init", "resources": {"requests": {"cpu": "300m"}}}
            ],
            "overhead": {"cpu": "10m"}
        }});
        // main 100m + sidecar 50m = 150m; the init step needs 300m + 50m.
        assert_eq!(pod_requests(&p)["cpu"].to_string(), "360m");
        assert!(
            !pod_limits(&p).contains_key("cpu"),
            "overhead adds to set limits only"
        );
    }

    #[test]
    fn finished_and_long_deleted_pods_use_no_compute() {
        let mut p = pod(json!([{"name": "c", "resources": {"requests": {"cpu": "1"}}}]));
        assert!(counts_for_compute(&p, now()));
        p["status"] = json!({"phase": "Succeeded"});
        assert!(usage(&p, now()).is_empty());
        p["status"] = json!({"phase": "Running"});
        p["metadata"]["deletionTimestamp"] = json!("2025-12-31T23:59:00Z");
        p["metadata"]["deletionGracePeriodSeconds"] = json!(30);
        assert!(!counts_for_compute(&p, now()), "grace ended 30 s ago");
        p["metadata"]["deletionGracePeriodSeconds"] = json!(120);
        assert!(counts_for_compute(&p, now()), "still in its grace period");
    }

    #[test]
    fn a_cpu_quota_names_each_container_that_does_not_specify_it() {
        let p = pod(json!([
            {"name": "b", "resources": {"requests": {"cpu": "1"}}},
            {"name": "a", "resources": {}},
            {"name": "c", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}
        ]));
        let required = vec!["limits.cpu".to_string(), "requests.cpu".to_string()];
        assert_eq!(
            constraints(&required, &p).unwrap_err(),
            "must specify limits.cpu for: a,b; requests.cpu for: a"
        );
        assert!(constraints(&["pods".to_string()], &p).is_ok());
    }

    #[test]
    fn scopes_read_deadline_qos_priority_class_and_affinity() {
        let req = |scope: &str, operator: &str, values: &[&str]| ScopeRequirement {
            scope: scope.into(),
            operator: operator.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        };
        let mut p = pod(json!([{"name": "c"}]));
        assert!(in_scope(&req("BestEffort", "Exists", &[]), &p));
        assert!(in_scope(&req("NotTerminating", "Exists", &[]), &p));
        assert!(in_scope(&req("PriorityClass", "NotIn", &["high"]), &p));
        assert!(!in_scope(&req("PriorityClass", "Exists", &[]), &p));
        p["spec"]["activeDeadlineSeconds"] = json!(60);
        p["spec"]["priorityClassName"] = json!("high");
        p["spec"]["containers"][0]["resources"] = json!({"limits": {"memory": "1Mi"}});
        assert!(in_scope(&req("Terminating", "Exists", &[]), &p));
        assert!(in_scope(&req("NotBestEffort", "Exists", &[]), &p));
        assert!(in_scope(&req("PriorityClass", "In", &["high", "low"]), &p));
        assert!(!in_scope(&req("PriorityClass", "NotIn", &["high"]), &p));
        assert!(!in_scope(
            &req("CrossNamespacePodAffinity", "Exists", &[]),
            &p
        ));
        p["spec"]["affinity"] = json!({"podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "k", "namespaces": ["other"]}]
        }});
        assert!(in_scope(
            &req("CrossNamespacePodAffinity", "Exists", &[]),
            &p
        ));
    }
}
