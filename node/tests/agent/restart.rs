//! A restarted agent adopts the pods it left running: same container, no
//! restart, status still Running.

use std::time::Duration;

use serde_json::json;
use skiff_node::images::BUSYBOX_IMAGE;

use crate::harness::{TestCluster, container_id, container_status, phase};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restarted_agent_adopts_running_pods() {
    let mut cluster = TestCluster::start(2).await;
    cluster
        .create_pod(json!({
            "metadata": {"name": "long"},
            "spec": {"containers": [{"name": "s", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"]}]}
        }))
        .await;
    let before = cluster
        .wait_pod("long", Duration::from_secs(60), "Running", |p| {
            phase(p) == "Running"
        })
        .await;
    let id = container_id(&before, "s");
    let ip = before.status.as_ref().and_then(|s| s.pod_ip.clone());

    cluster.stop_agent().await;
    cluster.start_agent().await;
    // Give the new agent a few relists to act on what it found.
    tokio::time::sleep(Duration::from_secs(4)).await;

    let after = cluster
        .wait_pod("long", Duration::from_secs(30), "Running", |p| {
            phase(p) == "Running"
        })
        .await;
    assert_eq!(container_id(&after, "s"), id, "the container was recreated");
    assert_eq!(
        container_status(&after, "s").map(|c| c.restart_count),
        Some(0)
    );
    assert_eq!(after.status.as_ref().and_then(|s| s.pod_ip.clone()), ip);
    let sandboxes = skiff_node::Runtime::list_pod_sandboxes(&cluster.cri, None)
        .await
        .expect("sandboxes");
    assert_eq!(sandboxes.len(), 1, "{sandboxes:?}");
    cluster.teardown().await;
}
