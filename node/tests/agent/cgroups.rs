//! Pod-level cgroups on real containerd: each pod's containers run below
//! `kubepods[/<qos>]/pod<uid>` (as `/proc/1/cgroup` inside says), the pod
//! cgroup carries the pod's CPU and memory caps, `kubepods` the node's,
//! and a deleted pod's cgroup is removed.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use serde_json::json;
use skiff_node::images::BUSYBOX_IMAGE;

use crate::harness::{TestCluster, container_id, exec};

const LONG: Duration = Duration::from_secs(60);

fn pod(name: &str, resources: serde_json::Value) -> serde_json::Value {
    json!({
        "metadata": {"name": name},
        "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "c",
            "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"], "resources": resources}]}
    })
}

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

/// The running pod and the memory cgroup its container says it is in.
async fn placed(cluster: &TestCluster, name: &str) -> (Pod, String) {
    let running = cluster.wait_phase(name, LONG, "Running").await;
    let id = container_id(&running, "c");
    let (code, out) = exec(&cluster.cri, &id, &["cat", "/proc/1/cgroup"]).await;
    assert_eq!(code, 0, "{out}");
    let memory = out
        .lines()
        .find_map(|l| l.split_once(":memory:").map(|(_, path)| path.to_owned()))
        .unwrap_or_else(|| panic!("no memory cgroup in {out}"));
    assert!(memory.ends_with(&format!("/{id}")), "{memory}");
    (running, memory)
}

fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().expect("uid")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pods_run_in_cgroups_of_their_qos_class_with_their_caps() {
    let cluster = TestCluster::start(15).await;
    let root = cluster.config.cgroup_root.clone().expect("a cgroup root");
    let kubepods = format!("{root}/kubepods");

    let exact = json!({"cpu": "100m", "memory": "64Mi"});
    cluster
        .create_pod(pod(
            "guaranteed",
            json!({"requests": exact, "limits": exact}),
        ))
        .await;
    cluster
        .create_pod(pod(
            "burstable",
            json!({"requests": {"cpu": "200m", "memory": "32Mi"}}),
        ))
        .await;
    cluster.create_pod(pod("best-effort", json!({}))).await;

    let (guaranteed, in_guaranteed) = placed(&cluster, "guaranteed").await;
    let pod_cgroup = format!("{kubepods}/pod{}", uid(&guaranteed));
    assert!(
        in_guaranteed.starts_with(&format!("{pod_cgroup}/")),
        "{in_guaranteed}"
    );
    // The pod's caps: 64 MiB, 10 ms of CPU per 100 ms, shares of 100m.
    assert_eq!(
        read("memory", &pod_cgroup, "memory.limit_in_bytes"),
        (64u64 << 20).to_string()
    );
    assert_eq!(read("cpu", &pod_cgroup, "cpu.cfs_quota_us"), "10000");
    assert_eq!(read("cpu", &pod_cgroup, "cpu.shares"), "102");

    let (burstable, in_burstable) = placed(&cluster, "burstable").await;
    let burstable_cgroup = format!("{kubepods}/burstable/pod{}", uid(&burstable));
    assert!(
        in_burstable.starts_with(&format!("{burstable_cgroup}/")),
        "{in_burstable}"
    );
    // No limits: the pod is weighed by its request and not capped.
    assert_eq!(read("cpu", &burstable_cgroup, "cpu.shares"), "204");
    assert_eq!(read("cpu", &burstable_cgroup, "cpu.cfs_quota_us"), "-1");
    // The Burstable class weighs what its pods request.
    assert_eq!(
        read("cpu", &format!("{kubepods}/burstable"), "cpu.shares"),
        "204"
    );

    let (best_effort, in_best_effort) = placed(&cluster, "best-effort").await;
    let best_effort_cgroup = format!("{kubepods}/besteffort/pod{}", uid(&best_effort));
    assert!(
        in_best_effort.starts_with(&format!("{best_effort_cgroup}/")),
        "{in_best_effort}"
    );
    assert_eq!(
        read("cpu", &format!("{kubepods}/besteffort"), "cpu.shares"),
        "2"
    );

    // All pods together are capped at the node's capacity (the kernel
    // keeps whole pages of it).
    let node = Api::<Node>::all(cluster.client.clone())
        .get("node-15")
        .await
        .expect("node");
    let capacity = node.status.and_then(|s| s.capacity).expect("capacity");
    let kib: u64 = capacity["memory"]
        .0
        .trim_end_matches("Ki")
        .parse()
        .expect("Ki");
    assert_eq!(
        read("memory", &kubepods, "memory.limit_in_bytes"),
        (kib * 1024 / 4096 * 4096).to_string()
    );
    let cpus: u64 = capacity["cpu"].0.parse().expect("whole CPUs");
    assert_eq!(
        read("cpu", &kubepods, "cpu.shares"),
        (cpus * 1024).to_string()
    );

    // Once a pod is gone, so is its cgroup, in every hierarchy.
    cluster.delete_pod("guaranteed").await;
    cluster.wait_gone("guaranteed", LONG).await;
    skiff_testkit::eventually(LONG, "the pod's cgroup removed", || async {
        ["memory", "cpu", "pids", "cpuset"]
            .iter()
            .all(|c| !host_dir(c, &pod_cgroup).exists())
            .then_some(())
    })
    .await;
    cluster.teardown().await;
}
