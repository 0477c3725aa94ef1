//! `--max-pods` on a real agent: the Node's pods capacity, and a pod past
//! it refused at admission with the kubelet's reason and words, while the
//! pods within it run.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;

use crate::harness::{TestCluster, sleeper};

const LONG: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pod_past_max_pods_is_refused_as_out_of_pods() {
    let cluster = TestCluster::start_with(18, |config| config.max_pods = 2).await;
    let node = Api::<Node>::all(cluster.client.clone())
        .get(&cluster.config.node_name)
        .await
        .expect("node");
    let status = node.status.expect("status");
    assert_eq!(status.capacity.expect("capacity")["pods"].0, "2");
    assert_eq!(status.allocatable.expect("allocatable")["pods"].0, "2");

    for name in ["first", "second"] {
        cluster.create_pod(sleeper(name, "c")).await;
        cluster.wait_phase(name, LONG, "Running").await;
    }
    cluster.create_pod(sleeper("third", "c")).await;
    let refused = cluster.wait_phase("third", LONG, "Failed").await;
    let status = refused.status.expect("status");
    assert_eq!(status.reason.as_deref(), Some("OutOfpods"));
    assert_eq!(
        status.message.as_deref(),
        Some(
            "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"
        )
    );
    cluster.teardown().await;
}
