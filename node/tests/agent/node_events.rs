//! The events a node reports about itself, as `kubectl describe node` lists
//! them: started, its conditions, cordoned and uncordoned, and after a
//! restart only what changed.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use skiff_testkit::eventually;

use crate::harness::{TestCluster, events, node_condition, sleeper};

/// How many times each reason was reported about `node` (an aggregated
/// event counts its repeats), found as `kubectl describe node` finds a
/// kubelet's events: the node's name as its uid.
async fn node_events(cluster: &TestCluster, node: &str) -> Vec<(String, i32, String)> {
    let selector = format!(
        "involvedObject.kind=Node,involvedObject.name={node},involvedObject.uid={node},involvedObject.namespace="
    );
    events(cluster, &selector)
        .await
        .into_iter()
        .map(|e| {
            assert_eq!(e.metadata.namespace.as_deref(), Some("default"));
            let source = e.source.unwrap_or_default();
            assert_eq!(source.component.as_deref(), Some("kubelet"));
            assert_eq!(source.host.as_deref(), Some(node));
            (
                e.reason.unwrap_or_default(),
                e.count.unwrap_or(1),
                e.message.unwrap_or_default(),
            )
        })
        .collect()
}

fn times(events: &[(String, i32, String)], reason: &str) -> i32 {
    events
        .iter()
        .filter(|(r, _, _)| r == reason)
        .map(|(_, count, _)| count)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_reports_its_start_conditions_and_cordons_as_events() {
    let mut cluster = TestCluster::start(5).await;
    let node = "node-5";
    let started = [
        "Starting",
        "NodeHasSufficientMemory",
        "NodeHasNoDiskPressure",
        "NodeHasSufficientPID",
        "NodeReady",
    ];
    let events = eventually(Duration::from_secs(20), "the start's events", || async {
        let events = node_events(&cluster, node).await;
        started
            .iter()
            .all(|reason| times(&events, reason) == 1)
            .then_some(events)
    })
    .await;
    assert!(
        events
            .iter()
            .any(|(reason, _, message)| reason == "NodeReady"
                && message == "Node node-5 status is now: NodeReady"),
        "{events:?}"
    );
    assert_eq!(times(&events, "NodeNotSchedulable"), 0, "{events:?}");

    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let cordon = |on: bool| {
        let nodes = nodes.clone();
        async move {
            nodes
                .patch(
                    node,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"unschedulable": on}})),
                )
                .await
                .expect("node patched");
        }
    };
    cordon(true).await;
    eventually(Duration::from_secs(20), "the cordon's event", || async {
        (times(&node_events(&cluster, node).await, "NodeNotSchedulable") == 1).then_some(())
    })
    .await;
    cordon(false).await;
    eventually(Duration::from_secs(20), "the uncordon's event", || async {
        (times(&node_events(&cluster, node).await, "NodeSchedulable") == 1).then_some(())
    })
    .await;

    // A restart is reported; conditions that held through it are not again.
    cluster.stop_agent().await;
    cluster.start_agent().await;
    let events = eventually(Duration::from_secs(20), "the restart's event", || async {
        let events = node_events(&cluster, node).await;
        (times(&events, "Starting") == 2).then_some(events)
    })
    .await;
    for reason in &started[1..] {
        assert_eq!(times(&events, reason), 1, "{reason}: {events:?}");
    }
    assert_eq!(times(&events, "NodeSchedulable"), 1, "{events:?}");
    cluster.teardown().await;
}

/// A node whose disk is below its `nodefs.available` threshold says so
/// (DiskPressure, `NodeHasDiskPressure`) and refuses new pods in the
/// eviction manager's words, before anything of them runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_under_disk_pressure_says_so_and_refuses_new_pods() {
    // No disk is ever wholly free: at 100% the threshold is always crossed.
    let cluster = TestCluster::start_with(8, |config| {
        config.eviction_hard = "nodefs.available<100%,memory.available<0%"
            .parse()
            .expect("threshold");
    })
    .await;
    let node = "node-8";
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let pressed = nodes.get(node).await.expect("node");
    let disk = node_condition(&pressed, "DiskPressure").expect("DiskPressure condition");
    assert_eq!(
        (disk.status.as_str(), disk.reason.as_deref()),
        ("True", Some("KubeletHasDiskPressure"))
    );
    eventually(Duration::from_secs(20), "the pressure's event", || async {
        (times(&node_events(&cluster, node).await, "NodeHasDiskPressure") == 1).then_some(())
    })
    .await;
    cluster.create_pod(sleeper("latecomer", "c")).await;
    let refused = cluster
        .wait_phase("latecomer", Duration::from_secs(30), "Failed")
        .await;
    let status = refused.status.unwrap_or_default();
    assert_eq!(status.reason.as_deref(), Some("Evicted"));
    assert_eq!(
        status.message.as_deref(),
        Some("Pod was rejected: The node had condition: [DiskPressure]. ")
    );
    assert!(cluster.sandboxes().await.is_empty(), "nothing of it ran");
    cluster.teardown().await;
}
