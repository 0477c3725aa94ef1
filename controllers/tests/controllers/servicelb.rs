//! ServiceLB: LoadBalancer Services get the ready Nodes' addresses as
//! ingress, follow Node changes, and lose them when they change type.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use super::support::{TestCluster, eventually, merge_patch, merge_patch_status};

const WAIT: Duration = Duration::from_secs(20);

/// Registers a Node the way an agent does: the object, then its status.
async fn add_node(api: &Api<Node>, name: &str, ip: &str, ready: bool) {
    let node: Node = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    api.create(&PostParams::default(), &node).await.unwrap();
    set_status(api, name, ip, ready).await;
}

async fn set_status(api: &Api<Node>, name: &str, ip: &str, ready: bool) {
    let status = json!({"status": {
        "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
        "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" },
            "reason": "Test", "lastHeartbeatTime": "2026-01-01T00:00:00Z",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    }});
    merge_patch_status(api, name, &status).await;
}

async fn ingress(api: &Api<Service>, name: &str) -> Vec<String> {
    let svc = api.get(name).await.unwrap();
    let mut ips: Vec<String> = svc
        .status
        .and_then(|s| s.load_balancer)
        .and_then(|lb| lb.ingress)
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip)
        .collect();
    ips.sort();
    ips
}

async fn wait_for_ingress(api: &Api<Service>, name: &str, wanted: &[&str]) {
    eventually(WAIT, &format!("ingress {wanted:?}"), || async {
        (ingress(api, name).await == wanted).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_balancers_get_the_ready_node_addresses_until_they_change_type() {
    let cluster = TestCluster::start(Some(&["servicelb"])).await;
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let services: Api<Service> = Api::namespaced(cluster.client.clone(), "default");
    add_node(&nodes, "n1", "192.0.2.11", true).await;
    add_node(&nodes, "n2", "192.0.2.12", false).await;

    let lb: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"type": "LoadBalancer", "selector": {"app": "web"}, "ports": [{"port": 80}]}
    }))
    .unwrap();
    services.create(&PostParams::default(), &lb).await.unwrap();
    let plain: Service = serde_json::from_value(json!({
        "metadata": {"name": "plain"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}
    }))
    .unwrap();
    services
        .create(&PostParams::default(), &plain)
        .await
        .unwrap();
    wait_for_ingress(&services, "web", &["192.0.2.11"]).await;

    // A node that becomes ready serves too; one that fails stops serving.
    set_status(&nodes, "n2", "192.0.2.12", true).await;
    wait_for_ingress(&services, "web", &["192.0.2.11", "192.0.2.12"]).await;
    set_status(&nodes, "n1", "192.0.2.11", false).await;
    wait_for_ingress(&services, "web", &["192.0.2.12"]).await;

    // Another implementation's class is left alone.
    let classed: Service = serde_json::from_value(json!({
        "metadata": {"name": "classed"},
        "spec": {"type": "LoadBalancer", "loadBalancerClass": "example.com/lb",
            "selector": {"app": "web"}, "ports": [{"port": 80}]}
    }))
    .unwrap();
    services
        .create(&PostParams::default(), &classed)
        .await
        .unwrap();

    // Turning it into a ClusterIP Service clears the ingress.
    let to_cluster_ip =
        json!({"spec": {"type": "ClusterIP", "ports": [{"port": 80, "nodePort": null}]}});
    merge_patch(&services, "web", &to_cluster_ip).await;
    wait_for_ingress(&services, "web", &[]).await;
    assert!(ingress(&services, "plain").await.is_empty());
    assert!(ingress(&services, "classed").await.is_empty());
    cluster.shutdown().await;
}
