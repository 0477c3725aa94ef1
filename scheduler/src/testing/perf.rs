//! The nodes and pods of upstream's scheduler_perf workloads, shared by this
//! crate's in-memory bench (`scheduler_perf`) and the `skiff` bench that
//! schedules through the API (`scheduler_api`), so both measure the same
//! cluster, and what both read of their own process.

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

/// User+system CPU seconds of this process, 0 when `/proc` cannot be read: on
/// a shared machine pods per CPU-second is steadier than wall-clock pods/s.
pub fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// A memory figure of this process from `/proc/self/status` (`VmRSS:`,
/// `VmHWM:`, ...), in MiB; 0 when it cannot be read.
pub fn memory_mib(field: &str) -> f64 {
    status_mib("/proc/self/status", field)
}

/// The same figure of process `pid` (a server a bench started), from
/// `/proc/<pid>/status`.
pub fn process_memory_mib(pid: u32, field: &str) -> f64 {
    status_mib(&format!("/proc/{pid}/status"), field)
}

fn status_mib(path: &str, field: &str) -> f64 {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kib| kib.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}
