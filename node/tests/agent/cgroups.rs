//! Pod-level cgroups on real containerd: each pod's containers run below
//! `kubepods[/<qos>]/pod<uid>` (as `/proc/1/cgroup` inside says), the pod
//! cgroup carries the pod's CPU and memory caps, `kubepods` the node's
//! less its reservations (which allocatable also leaves out), each pod
//! is held to the per-pod process limit, and a deleted pod's cgroup is
//! removed.

use std::path::PathBuf;
use std::time::Duration;

use crate::harness::{TestCluster, container_id, create_qos_pods, exec};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;

const LONG: Duration = Duration::from_secs(60);
/// The test's per-pod process limit.
const MAX_PIDS: i64 = 64;

/// A file of `cgroup` in the host's `controller` hierarchy, trimmed.
fn read(controller: &str, cgroup: &str, file: &str) -> String {
    let path = host_dir(controller, cgroup).join(file);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_owned()
}

fn host_dir(controller: &str, cgroup: &str) -> PathBuf {
    PathBuf::from("/sys/fs/cgroup")
        .join(controller)
        .join(cgroup.trim_start_matches('/'))
}

/// The cgroup of pod `name`, below `qos_cgroup`, once it runs: its
/// container says (`/proc/1/cgroup`) it is in a cgroup of its own there.
async fn pod_cgroup(cluster: &TestCluster, name: &str, qos_cgroup: &str) -> String {
    let running = cluster.wait_phase(name, LONG, "Running").await;
    let id = container_id(&running, "c");
    let (code, out) = exec(&cluster.cri, &id, &["cat", "/proc/1/cgroup"]).await;
    assert_eq!(code, 0, "{out}");
    let memory = out
        .lines()
        .find_map(|l| l.split_once(":memory:").map(|(_, path)| path.to_owned()))
        .unwrap_or_else(|| panic!("no memory cgroup in {out}"));
    let uid = running.metadata.uid.as_deref().expect("uid");
    let pod_cgroup = format!("{qos_cgroup}/pod{uid}");
    assert_eq!(memory, format!("{pod_cgroup}/{id}"), "{name}");
    pod_cgroup
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pods_run_in_cgroups_of_their_qos_class_with_their_caps() {
    // Half a core, 64 MiB and 1,000 processes kept back for the system;
    // each pod may run 64 processes.
    let cluster = TestCluster::start_with(15, |config| {
        config.reserved = "cpu=500m,memory=64Mi,pid=1000"
            .parse()
            .expect("reservation");
        config.pod_max_pids = Some(MAX_PIDS);
    })
    .await;
    let root = cluster.config.cgroup_root.clone().expect("a cgroup root");
    let kubepods = format!("{root}/kubepods");

    create_qos_pods(&cluster).await;

    let guaranteed = pod_cgroup(&cluster, "guaranteed", &kubepods).await;
    // The pod's caps: 64 MiB, 10 ms of CPU per 100 ms, shares of 100m.
    assert_eq!(
        read("memory", &guaranteed, "memory.limit_in_bytes"),
        (64u64 << 20).to_string()
    );
    assert_eq!(read("cpu", &guaranteed, "cpu.cfs_quota_us"), "10000");
    assert_eq!(read("cpu", &guaranteed, "cpu.shares"), "102");
    assert_eq!(read("pids", &guaranteed, "pids.max"), MAX_PIDS.to_string());

    let burstable_class = format!("{kubepods}/burstable");
    let burstable = pod_cgroup(&cluster, "burstable", &burstable_class).await;
    // No limits: the pod is weighed by its request and not capped, and its
    // class weighs what its pods request.
    assert_eq!(read("cpu", &burstable, "cpu.shares"), "204");
    assert_eq!(read("cpu", &burstable, "cpu.cfs_quota_us"), "-1");
    assert_eq!(read("cpu", &burstable_class, "cpu.shares"), "204");

    // A fork bomb in a pod stops at the pod's process limit: the shell
    // cannot fork past it, and the pod never holds more.
    let running = cluster.wait_phase("burstable", LONG, "Running").await;
    let bomb =
        "exec 2>&1; i=0; while [ $i -lt 200 ]; do sleep 60 >/dev/null 2>&1 & i=$((i+1)); done";
    let (code, out) = exec(
        &cluster.cri,
        &container_id(&running, "c"),
        &["sh", "-c", bomb],
    )
    .await;
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("can't fork"), "{out}");
    let held: i64 = read("pids", &burstable, "pids.current")
        .parse()
        .expect("count");
    assert!((1..=MAX_PIDS).contains(&held), "{held} processes");

    let best_effort_class = format!("{kubepods}/besteffort");
    pod_cgroup(&cluster, "best-effort", &best_effort_class).await;
    assert_eq!(read("cpu", &best_effort_class, "cpu.shares"), "2");

    // All pods together are capped at the node's capacity less what is
    // reserved (the kernel keeps whole pages of it); allocatable also
    // leaves out the eviction threshold (the default 100 MiB).
    let node = Api::<Node>::all(cluster.client.clone())
        .get("node-15")
        .await
        .expect("node");
    let status = node.status.expect("status");
    let kib = |q: &Quantity| -> u64 { q.0.trim_end_matches("Ki").parse().expect("Ki") };
    let capacity = status.capacity.expect("capacity");
    let memory = kib(&capacity["memory"]) * 1024;
    assert_eq!(
        read("memory", &kubepods, "memory.limit_in_bytes"),
        ((memory - (64 << 20)) / 4096 * 4096).to_string()
    );
    let kernel_limit = ["pid_max", "threads-max"]
        .iter()
        .map(|f| {
            std::fs::read_to_string(format!("/proc/sys/kernel/{f}"))
                .expect("kernel limit")
                .trim()
                .parse::<u64>()
                .expect("a number")
        })
        .min()
        .expect("two limits");
    assert_eq!(
        read("pids", &kubepods, "pids.max"),
        (kernel_limit - 1000).to_string()
    );
    let cpus: u64 = capacity["cpu"].0.parse().expect("whole CPUs");
    assert_eq!(
        read("cpu", &kubepods, "cpu.shares"),
        ((cpus * 1000 - 500) * 1024 / 1000).to_string()
    );
    let allocatable = status.allocatable.expect("allocatable");
    assert_eq!(allocatable["cpu"].0, format!("{}m", cpus * 1000 - 500));
    assert_eq!(
        kib(&allocatable["memory"]) * 1024,
        memory - (64 << 20) - (100 << 20)
    );

    // Once a pod is gone, so is its cgroup, in every hierarchy.
    cluster.delete_pod("guaranteed").await;
    cluster.wait_gone("guaranteed", LONG).await;
    skiff_testkit::eventually(LONG, "the pod's cgroup removed", || async {
        ["memory", "cpu", "pids", "cpuset"]
            .iter()
            .all(|c| !host_dir(c, &guaranteed).exists())
            .then_some(())
    })
    .await;
    cluster.teardown().await;
}
