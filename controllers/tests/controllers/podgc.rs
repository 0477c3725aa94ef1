//! Pod GC: pods of nodes that no longer exist, and finished pods over the
//! threshold (oldest first).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use tokio::sync::watch;

use super::support::{TestCluster, eventually, merge_patch_status};
use skiff_controllers::Context;
use skiff_controllers::podgc::{PodGcConfig, run_with};

const WAIT: Duration = Duration::from_secs(20);

async fn bound_pod(api: &Api<Pod>, name: &str, node: &str, phase: &str) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}
    }))
    .unwrap();
    api.create(&PostParams::default(), &pod).await.unwrap();
    merge_patch_status(api, name, json!({"status": {"phase": phase}})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_of_deleted_nodes_and_old_finished_pods_are_removed() {
    let (cluster, client) = TestCluster::start_with_client(&[]).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "alive"}})).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    bound_pod(&pods, "on-alive", "alive", "Running").await;
    bound_pod(&pods, "on-ghost", "ghost", "Running").await;
    // creationTimestamp has one-second resolution: space the finished pods.
    for name in ["done-1", "done-2", "done-3"] {
        bound_pod(&pods, name, "alive", "Succeeded").await;
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }

    let (stop_tx, stop) = watch::channel(false);
    let ctx = Context::new(client.clone(), cluster.factory.clone());
    let config = PodGcConfig {
        terminated_pod_threshold: 1,
        period: Duration::from_millis(200),
        quarantine: Duration::from_millis(500),
    };
    let gc = tokio::spawn(run_with(ctx, stop, config));

    eventually(WAIT, "the ghost node's pod to go", || async {
        pods.get_opt("on-ghost")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    eventually(WAIT, "the two oldest finished pods to go", || async {
        let gone = pods.get_opt("done-1").await.unwrap().is_none()
            && pods.get_opt("done-2").await.unwrap().is_none();
        gone.then_some(())
    })
    .await;
    assert!(pods.get_opt("done-3").await.unwrap().is_some());
    assert!(pods.get_opt("on-alive").await.unwrap().is_some());

    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), gc).await;
    cluster.shutdown().await;
}
