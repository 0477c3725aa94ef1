//! A restarted agent adopts the pods it left running: same container, no
//! restart, status still Running; its Node keeps the conditions' transition
//! times.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use serde_json::json;
use skiff_node::images::BUSYBOX_IMAGE;
use skiff_testkit::eventually;

use crate::harness::{
    TestCluster, container_id, container_status, init_container_status, node_condition, phase,
    sleeper,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restarted_agent_adopts_running_pods() {
    let mut cluster = TestCluster::start(2).await;
    let before = cluster
        .run_pod(sleeper("long", "s"), Duration::from_secs(60))
        .await;
    let id = container_id(&before, "s");
    let ip = before.status.as_ref().and_then(|s| s.pod_ip.clone());
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let node_name = cluster.config.node_name.clone();
    // The Ready condition's (heartbeat, transition) times.
    let ready_times = || async {
        let node = nodes.get(&node_name).await.expect("the node");
        let ready = node_condition(&node, "Ready").expect("a Ready condition");
        (
            ready.last_heartbeat_time.clone(),
            ready.last_transition_time.clone(),
        )
    };
    let (heartbeat_before, ready_since) = ready_times().await;
    // Times are to the second: the new agent's first write must fall in a
    // later one to show anything.
    tokio::time::sleep(Duration::from_millis(1100)).await;

    cluster.stop_agent().await;
    cluster.start_agent().await;
    let (_, ready_since_after) = eventually(
        Duration::from_secs(20),
        "the restarted agent's status",
        || async {
            let times = ready_times().await;
            (times.0 != heartbeat_before).then_some(times)
        },
    )
    .await;
    assert_eq!(
        ready_since_after, ready_since,
        "a node Ready before and after the restart did not transition"
    );
    // Give the new agent a few relists to act on what it found.
    tokio::time::sleep(Duration::from_secs(4)).await;

    let after = cluster
        .wait_phase("long", Duration::from_secs(30), "Running")
        .await;
    assert_eq!(container_id(&after, "s"), id, "the container was recreated");
    assert_eq!(
        container_status(&after, "s").map(|c| c.restart_count),
        Some(0)
    );
    assert_eq!(after.status.as_ref().and_then(|s| s.pod_ip.clone()), ip);
    let sandboxes = cluster.sandboxes().await;
    assert_eq!(sandboxes.len(), 1, "{sandboxes:?}");
    cluster.teardown().await;
}

/// Two ready sandboxes for one pod (as a crash between a sandbox's creation
/// and its use could leave) are reconciled to one: the newest is kept, the
/// container of the other is stopped and restarted in it (its init
/// container first, as in any new sandbox), and the other stays stopped
/// only as long as it holds the previous instances.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_duplicate_sandbox_is_reconciled_to_one() {
    let cluster = TestCluster::start(4).await;
    let before = cluster
        .run_pod(
            json!({
                "metadata": {"name": "twin"},
                "spec": {"terminationGracePeriodSeconds": 1,
                    "initContainers": [{"name": "setup", "image": BUSYBOX_IMAGE, "command": ["true"]}],
                    "containers": [{"name": "s", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"]}]}
            }),
            Duration::from_secs(60),
        )
        .await;
    let id = container_id(&before, "s");

    let config = skiff_node::agent::pod::cri_config::sandbox_config(
        &before,
        &cluster.log_root(),
        1,
        &skiff_node::agent::pod::dns_config::PodDnsInputs::load(&Default::default()),
        None,
    );
    let duplicate = skiff_node::Runtime::run_pod_sandbox(&cluster.cri, &config, "")
        .await
        .expect("a second sandbox");

    let after = cluster
        .wait_pod("twin", Duration::from_secs(60), "restarted once", |p| {
            phase(p) == "Running"
                && container_status(p, "s").is_some_and(|c| {
                    c.restart_count == 1
                        && c.ready
                        && c.container_id.as_deref() != Some(id.as_str())
                })
        })
        .await;
    let init = init_container_status(&after, "setup").map(|s| s.restart_count);
    assert_eq!(
        init,
        Some(1),
        "the init container ran again in the kept sandbox"
    );
    // A few relists later: one ready sandbox (the newest), the old one
    // stopped, nothing more.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let sandboxes = cluster.sandboxes().await;
    let ready: Vec<&str> = sandboxes
        .iter()
        .filter(|s| s.state == skiff_node::cri_api::PodSandboxState::SandboxReady as i32)
        .map(|s| s.id.as_str())
        .collect();
    assert_eq!(ready, [duplicate.as_str()], "{sandboxes:?}");
    assert_eq!(sandboxes.len(), 2, "{sandboxes:?}");
    let containers = skiff_node::Runtime::list_containers(&cluster.cri, None)
        .await
        .expect("containers");
    let running: Vec<&str> = containers
        .iter()
        .filter(|c| c.state == skiff_node::cri_api::ContainerState::ContainerRunning as i32)
        .map(|c| c.pod_sandbox_id.as_str())
        .collect();
    assert_eq!(running, [duplicate.as_str()], "{containers:?}");
    cluster.teardown().await;
}
