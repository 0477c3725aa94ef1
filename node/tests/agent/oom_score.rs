//! What the kernel's OOM killer takes first: each container's
//! `oom_score_adj`, read inside the container, follows its pod's QoS class
//! as the kubelet sets it, and the runtime sits below the containers.

use std::time::Duration;

use crate::harness::{BURSTABLE_MEMORY_REQUEST, TestCluster, container_id, create_qos_pods, exec};

const LONG: Duration = Duration::from_secs(60);

/// The `oom_score_adj` of the container's first process, as it reads its own.
async fn score_in(cluster: &TestCluster, name: &str) -> i64 {
    let running = cluster.wait_phase(name, LONG, "Running").await;
    let id = container_id(&running, "c");
    let (code, out) = exec(&cluster.cri, &id, &["cat", "/proc/1/oom_score_adj"]).await;
    assert_eq!(code, 0, "{name}: {out}");
    out.trim().parse().expect("a number")
}

fn mem_total() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").expect("meminfo");
    let kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("MemTotal");
    kib * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn containers_rank_for_the_oom_killer_by_qos_class() {
    let cluster = TestCluster::start(14).await;
    let pid_file = cluster.config.runtime.containerd_paths().pid_file();
    let containerd_pid = std::fs::read_to_string(&pid_file).expect("containerd pid");
    let containerd: i64 =
        std::fs::read_to_string(format!("/proc/{}/oom_score_adj", containerd_pid.trim()))
            .expect("containerd's score")
            .trim()
            .parse()
            .expect("a number");

    create_qos_pods(&cluster).await;

    assert_eq!(score_in(&cluster, "best-effort").await, 1000);
    let burstable = score_in(&cluster, "burstable").await;
    let expected = 1000 - (1000 * BURSTABLE_MEMORY_REQUEST / mem_total()) as i64;
    assert_eq!(burstable, expected.max(3));
    let guaranteed = score_in(&cluster, "guaranteed").await;

    // Lowering a score needs CAP_SYS_RESOURCE. Where the node has it, the
    // runtime runs at -999 and Guaranteed containers at upstream's -997;
    // where it does not, containerd clamps them to its own score, which is
    // still below every Burstable and BestEffort container.
    let can_lower = std::fs::write("/proc/self/oom_score_adj", "-999").is_ok();
    if can_lower {
        assert_eq!(containerd, -999);
        assert_eq!(guaranteed, -997);
    } else {
        assert_eq!(guaranteed, containerd.max(-997));
    }
    assert!(
        guaranteed < burstable && burstable < 1000,
        "{guaranteed} {burstable}"
    );
    cluster.teardown().await;
}
