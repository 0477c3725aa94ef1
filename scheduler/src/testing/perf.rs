//! The nodes and pods of upstream's scheduler_perf workloads, shared by this
//! crate's in-memory bench (`scheduler_perf`) and the `skiff` bench that
//! schedules through the API (`scheduler_api`), so both measure the same
//! cluster.

use k8s_openapi::api::core::v1::{Node, Pod};

use super::{NodeBuilder, PodBuilder};

/// Node `node-<i>`: 4 CPUs, 32 GiB, 110 pods, in zone `zone-<i % zones>`.
pub fn node(i: usize, zones: usize) -> Node {
    NodeBuilder::new(&format!("node-{i}"))
        .allocatable(&[("cpu", "4"), ("memory", "32Gi"), ("pods", "110")])
        .label(
            "topology.kubernetes.io/zone",
            &format!("zone-{}", i % zones),
        )
        .build()
}

/// Upstream's basic pod: one container asking for 100m CPU and 500Mi.
pub fn basic_pod(name: &str) -> PodBuilder {
    PodBuilder::new(name).container(&[("cpu", "100m"), ("memory", "500Mi")])
}

/// `count` basic pods `init-<i>` already bound, round-robin over
/// `node-0` … `node-<nodes - 1>`: the cluster's existing load.
pub fn bound_pods(count: usize, nodes: usize) -> Vec<Pod> {
    (0..count)
        .map(|i| {
            basic_pod(&format!("init-{i}"))
                .node(&format!("node-{}", i % nodes))
                .build()
        })
        .collect()
}

/// `count` pending basic pods `pod-<i>`.
pub fn pending_pods(count: usize) -> Vec<Pod> {
    (0..count)
        .map(|i| basic_pod(&format!("pod-{i}")).build())
        .collect()
}

/// `count` pending pods `spread-<i>` labelled `app=spread`, each with a
/// hard constraint (maxSkew 1) to spread them over the zones.
pub fn spread_pods(count: usize) -> Vec<Pod> {
    (0..count)
        .map(|i| {
            basic_pod(&format!("spread-{i}"))
                .label("app", "spread")
                .spread(
                    1,
                    "topology.kubernetes.io/zone",
                    "DoNotSchedule",
                    &[("app", "spread")],
                )
                .build()
        })
        .collect()
}
