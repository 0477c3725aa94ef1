//! Node IPAM: distinct pod CIDRs, existing ones respected, released CIDRs
//! reused, nothing handed out twice when the range runs out.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;
use tokio::sync::watch;

use super::support::{TestCluster, eventually};
use skiff_controllers::Context;
use skiff_controllers::node_ipam::{IpamConfig, run_with};

const WAIT: Duration = Duration::from_secs(20);

async fn create_node(api: &Api<Node>, name: &str, cidr: Option<&str>) {
    let spec = match cidr {
        Some(c) => json!({"podCIDR": c, "podCIDRs": [c]}),
        None => json!({}),
    };
    let node: Node =
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
    api.create(&PostParams::default(), &node).await.unwrap();
}

async fn cidr_of(api: &Api<Node>, name: &str) -> Option<String> {
    let node = api.get(name).await.unwrap();
    let spec = node.spec?;
    let cidr = spec.pod_cidr?;
    assert_eq!(spec.pod_cidrs, Some(vec![cidr.clone()]));
    Some(cidr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_get_distinct_cidrs_and_released_ones_are_reused() {
    let (cluster, client) = TestCluster::start_with_client(&[]).await;
    let nodes: Api<Node> = Api::all(client.clone());
    // Present before the controller starts: its CIDR must be respected.
    create_node(&nodes, "pre", Some("10.99.0.0/24")).await;

    let (stop_tx, stop) = watch::channel(false);
    let ctx = Context::new(client.clone(), cluster.factory.clone());
    let config = IpamConfig {
        cluster_cidr: "10.99.0.0/22".into(),
        node_mask: 24,
    };
    let ipam = tokio::spawn(run_with(ctx, stop, config));

    for name in ["n1", "n2", "n3"] {
        create_node(&nodes, name, None).await;
    }
    let mut cidrs = Vec::new();
    for name in ["n1", "n2", "n3"] {
        let cidr = eventually(WAIT, "a pod CIDR", || async { cidr_of(&nodes, name).await }).await;
        cidrs.push(cidr);
    }
    cidrs.push("10.99.0.0/24".into());
    cidrs.sort();
    cidrs.dedup();
    assert_eq!(
        cidrs,
        [
            "10.99.0.0/24",
            "10.99.1.0/24",
            "10.99.2.0/24",
            "10.99.3.0/24"
        ],
        "four distinct /24s of the /22"
    );

    // The range is full: a fourth new node waits without a CIDR.
    create_node(&nodes, "n4", None).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(cidr_of(&nodes, "n4").await, None);

    let freed = cidr_of(&nodes, "n2").await.unwrap();
    nodes.delete("n2", &DeleteParams::default()).await.unwrap();
    let reused = eventually(WAIT, "n4 to get the freed CIDR", || async {
        cidr_of(&nodes, "n4").await
    })
    .await;
    assert_eq!(reused, freed);

    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), ipam).await;
    cluster.shutdown().await;
}
