//! Which processes the kernel's OOM killer takes first when the node runs
//! out of memory, set as the kubelet sets it: the node's own daemons last,
//! then Guaranteed containers, then Burstable ones by how much memory they
//! request, and BestEffort containers first.
//!
//! The value is a container's `oom_score_adj` (-1000 to 1000, added to the
//! kernel's per-mille share of memory a process uses). containerd is told to
//! give a container no lower value than its own (`restrict_oom_score_adj`),
//! so the runtime runs at [`NODE_DAEMON`] too (`containerd::supervisor`).
//! Lowering a score needs `CAP_SYS_RESOURCE`; where the node lacks it
//! (this project's VMs), the daemons keep the score they were started with
//! and Guaranteed containers are clamped to it, still below every Burstable
//! and BestEffort container.

use std::path::Path;

use k8s_openapi::api::core::v1::{Container, Pod};
use skiff_common::{qos, quantity};

/// The agent's own process and its container runtime: below every
/// container, as upstream's kubelet (`--oom-score-adj`) runs.
pub const NODE_DAEMON: i64 = -999;
/// Guaranteed containers and node-critical pods.
const GUARANTEED: i64 = -997;
/// BestEffort containers: the first the kernel kills.
const BEST_EFFORT: i64 = 1000;
/// The memory a sidecar comparison counts for a container that requests
/// none (the scheduler's default non-zero request, 200 MiB).
const DEFAULT_MEMORY_REQUEST: i128 = 200 * 1024 * 1024;
/// Pods at or above this priority are critical (`system-cluster-critical`
/// and `system-node-critical`).
const CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// The `oom_score_adj` of `container` in `pod` on a node with
/// `memory_capacity` bytes.
///
/// A Burstable container gets `1000 - 1000 × request / capacity`, kept
/// between Guaranteed's and BestEffort's: a container that uses more than
/// it requested scores as high as a BestEffort one. A sidecar (a restartable
/// init container) counts the smallest request among itself and the pod's
/// regular containers, plus one when it requests memory itself, so that it
/// goes before the containers it serves.
pub fn for_container(pod: &Pod, container: &Container, memory_capacity: u64) -> i64 {
    if node_critical(pod) {
        return GUARANTEED;
    }
    match qos::recorded_qos_class(pod) {
        "Guaranteed" => return GUARANTEED,
        "BestEffort" => return BEST_EFFORT,
        _ => {}
    }
    let capacity = i128::from(memory_capacity.max(1));
    let own = memory_request(container);
    let mut adjust = 1000 - 1000 * own.unwrap_or(0) / capacity;
    if is_sidecar(pod, container) {
        let regular = pod
            .spec
            .iter()
            .flat_map(|s| &s.containers)
            .map(|c| memory_request(c).unwrap_or(DEFAULT_MEMORY_REQUEST))
            .min();
        let own_or_default = own.unwrap_or(DEFAULT_MEMORY_REQUEST);
        let least = regular.map_or(own_or_default, |r| r.min(own_or_default));
        adjust = 1000 - 1000 * least / capacity;
        if least <= own.unwrap_or(0) {
            adjust += 1;
        }
    }
    let floor = i128::from(1000 + GUARANTEED);
    let adjust = if adjust < floor {
        floor
    } else if adjust == i128::from(BEST_EFFORT) {
        // Below BestEffort, so a Burstable container outlives them.
        adjust - 1
    } else {
        adjust
    };
    i64::try_from(adjust).unwrap_or(BEST_EFFORT)
}

/// Puts the process whose `/proc` directory is `proc_dir` at
/// [`NODE_DAEMON`]: `/proc/self` (the agent, as the kubelet protects
/// itself) or `/proc/<pid>` of the runtime it started. Where the node may
/// not lower scores this is said once in the log, not an error: the node
/// works, with the weaker ranking the module's doc describes.
pub fn protect(proc_dir: &Path, what: &str) {
    let path = proc_dir.join("oom_score_adj");
    match std::fs::write(&path, NODE_DAEMON.to_string()) {
        Ok(()) => tracing::debug!(what, score = NODE_DAEMON, "OOM score lowered"),
        Err(error) => tracing::info!(
            what,
            path = %path.display(),
            %error,
            "could not lower the OOM score (needs CAP_SYS_RESOURCE); Guaranteed containers get the runtime's own"
        ),
    }
}

fn memory_request(container: &Container) -> Option<i128> {
    container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("memory"))
        .and_then(quantity::value)
        .map(i128::from)
}

/// A node-critical pod: `system-node-critical`, and critical by priority
/// (upstream counts static and mirror pods critical too; skiff's pods all
/// come from the API, where that class sets the priority).
fn node_critical(pod: &Pod) -> bool {
    pod.spec.as_ref().is_some_and(|s| {
        s.priority_class_name.as_deref() == Some("system-node-critical")
            && s.priority.is_some_and(|p| p >= CRITICAL_PRIORITY)
    })
}

fn is_sidecar(pod: &Pod, container: &Container) -> bool {
    pod.spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .any(|c| c.name == container.name && c.restart_policy.as_deref() == Some("Always"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({"spec": spec})).expect("pod")
    }

    fn adjust_of(pod: &Pod, name: &str, capacity: u64) -> i64 {
        let spec = pod.spec.as_ref().expect("spec");
        let container = spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .find(|c| c.name == name)
            .expect("container");
        for_container(pod, container, capacity)
    }

    #[test]
    fn classes_get_upstreams_values() {
        let exact = serde_json::json!({"cpu": "1", "memory": "1Gi"});
        // (the one container's resources, score on a 4 GiB node)
        let cases = [
            (serde_json::json!({}), 1000),
            (
                serde_json::json!({"requests": exact, "limits": exact}),
                -997,
            ),
            // A quarter of the node's memory requested: 1000 - 250.
            (serde_json::json!({"requests": {"memory": "1Gi"}}), 750),
            // Burstable stays between the other classes: CPU only would
            // tie BestEffort at 1000, so one less; more than the node has
            // is never as low as Guaranteed.
            (serde_json::json!({"requests": {"cpu": "100m"}}), 999),
            (serde_json::json!({"requests": {"memory": "8Gi"}}), 3),
        ];
        for (resources, score) in cases {
            let p = pod(serde_json::json!({"containers": [{"name": "c", "resources": resources}]}));
            assert_eq!(adjust_of(&p, "c", 4 * GIB), score, "{resources}");
        }
    }

    #[test]
    fn node_critical_pods_rank_with_guaranteed() {
        let critical = pod(serde_json::json!({
            "priorityClassName": "system-node-critical", "priority": 2_000_001_000,
            "containers": [{"name": "c"}]}));
        assert_eq!(adjust_of(&critical, "c", 4 * GIB), -997);
        // The class name alone, without the priority, is not enough.
        let named_only = pod(serde_json::json!({
            "priorityClassName": "system-node-critical", "containers": [{"name": "c"}]}));
        assert_eq!(adjust_of(&named_only, "c", 4 * GIB), 1000);
    }

    #[test]
    fn status_class_wins_over_the_spec() {
        let mut p = pod(serde_json::json!({"containers": [{"name": "c"}]}));
        p.status = Some(k8s_openapi::api::core::v1::PodStatus {
            qos_class: Some("Guaranteed".into()),
            ..Default::default()
        });
        assert_eq!(adjust_of(&p, "c", 4 * GIB), -997);
    }

    /// A pod of one init container `init` (a sidecar when `sidecar`) and
    /// one container `main`, each requesting the memory given, if any.
    fn init_and_main(sidecar: bool, init: Option<&str>, main: &str) -> Pod {
        let requests = |memory: Option<&str>| match memory {
            Some(m) => serde_json::json!({"requests": {"memory": m}}),
            None => serde_json::json!({}),
        };
        let mut init = serde_json::json!({"name": "init", "resources": requests(init)});
        if sidecar {
            init["restartPolicy"] = "Always".into();
        }
        pod(serde_json::json!({
            "initContainers": [init],
            "containers": [{"name": "main", "resources": requests(Some(main))}]}))
    }

    #[test]
    fn a_sidecar_goes_before_the_containers_it_serves() {
        // (sidecar?, init's request, main's request, container, score)
        let cases = [
            // main: 1000 - 500; the sidecar's own 1Gi is the least: 750 + 1.
            (true, Some("1Gi"), "2Gi", "main", 500),
            (true, Some("1Gi"), "2Gi", "init", 751),
            // A sidecar requesting more than main counts main's request:
            // 750 + 1, still before main (750).
            (true, Some("2Gi"), "1Gi", "init", 751),
            (true, Some("2Gi"), "1Gi", "main", 750),
            // A sidecar requesting no memory counts 200 MiB for itself and
            // is not raised: 1000 - 1000 × 200Mi / 4Gi (integer division).
            (true, None, "1Gi", "init", 952),
            // A plain init container is scored by its own request.
            (false, Some("2Gi"), "1Gi", "init", 500),
        ];
        for (sidecar, init, main, container, score) in cases {
            let p = init_and_main(sidecar, init, main);
            assert_eq!(
                adjust_of(&p, container, 4 * GIB),
                score,
                "{container} of sidecar={sidecar} init={init:?} main={main}"
            );
        }
    }
}
