//! In-memory workloads in the style of upstream's scheduler_perf, run back to back in one
//! process: pods/s from the first pod enqueued to the last bind acknowledged by the
//! (fake, in-memory) API, plus the process's peak memory.
//!
//! Run: `cargo bench -p skiff-scheduler --bench scheduler_perf` (add `-- quick` for
//! smaller sizes, `-- only=Spread` to run matching workloads only). The API is a no-op here, so this measures the scheduler alone.

// A test stops at the first surprise (unwrapping is how it says so), and
// nothing outside this binary sees its items.
#![allow(clippy::unwrap_used, unreachable_pub)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use skiff_scheduler::testing::perf::{self, basic_pod};
use skiff_scheduler::testing::{PodBuilder, TestCluster};

struct Outcome {
    scheduled: usize,
    elapsed: Duration,
    cpu: f64,
}

/// Schedules everything pending; confirms binds through the informer path; deletes
/// preemption victims as the API would and advances the fake clock past backoffs.
fn drive(c: &TestCluster, rt: &tokio::runtime::Runtime, expect: usize) -> Outcome {
    let start = Instant::now();
    let scheduled = c.drive_until(rt, expect);
    Outcome {
        scheduled,
        elapsed: start.elapsed(),
        cpu: 0.0,
    }
}

fn report(name: &str, nodes: usize, pods: usize, o: &Outcome) {
    let rate = o.scheduled as f64 / o.elapsed.as_secs_f64();
    let per_cpu = if o.cpu > 0.0 {
        o.scheduled as f64 / o.cpu
    } else {
        0.0
    };
    println!(
        "{name:<24} nodes={nodes:<5} pods={pods:<6} scheduled={:<6} {:>7.0} ms {:>7.0} pods/s (wall) {:>7.0} pods/cpu-s  peak RSS {:.0} MiB",
        o.scheduled,
        o.elapsed.as_secs_f64() * 1000.0,
        rate,
        per_cpu,
        perf::memory_mib("VmHWM:")
    );
}

fn workload(
    name: &str,
    nodes: usize,
    init: Vec<Pod>,
    measured: Vec<Pod>,
    rt: &tokio::runtime::Runtime,
) {
    let only: Vec<String> = std::env::args()
        .filter_map(|a| a.strip_prefix("only=").map(String::from))
        .collect();
    if !only.is_empty() && !only.iter().any(|o| name.contains(o.as_str())) {
        return;
    }
    let c = TestCluster::new();
    for i in 0..nodes {
        c.scheduler.on_node_add(Arc::new(perf::node(i, 10)));
    }
    for p in init {
        c.add_pod(p);
    }
    let n = measured.len();
    let start = Instant::now();
    let cpu_start = perf::cpu_seconds();
    for p in measured {
        c.add_pod(p);
    }
    let mut o = drive(&c, rt, n);
    o.elapsed = start.elapsed();
    o.cpu = perf::cpu_seconds() - cpu_start;
    report(name, nodes, n, &o);
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let scale = if quick { 10 } else { 1 };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");

    let (nodes, pods) = (5000 / scale, 10_000 / scale);
    let init = perf::bound_pods(1000 / scale, nodes);
    let measured = perf::pending_pods(pods);
    workload("SchedulingBasic", nodes, init, measured, &rt);

    let (nodes, pods) = (1000 / scale, 1000 / scale);
    let measured = perf::spread_pods(pods);
    workload("PodTopologySpread", nodes, Vec::new(), measured, &rt);

    let measured = (0..pods)
        .map(|i| {
            basic_pod(&format!("anti-{i}"))
                .label("app", "anti")
                .pod_anti_affinity(&[("app", "anti")], "kubernetes.io/hostname")
                .build()
        })
        .collect();
    workload("RequiredPodAntiAffinity", nodes, Vec::new(), measured, &rt);

    // Every node is nearly full of low-priority pods; each high-priority pod preempts.
    let init = (0..nodes * 4)
        .map(|i| {
            PodBuilder::new(&format!("low-{i}"))
                .priority(1)
                .container(&[("cpu", "900m")])
                .node(&format!("node-{}", i / 4))
                .build()
        })
        .collect();
    let measured = (0..nodes / 2)
        .map(|i| {
            PodBuilder::new(&format!("high-{i}"))
                .priority(100)
                .container(&[("cpu", "3")])
                .build()
        })
        .collect();
    workload("PreemptionBasic", nodes, init, measured, &rt);
}
