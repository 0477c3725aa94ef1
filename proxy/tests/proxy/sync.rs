//! The proxy loop against an in-process API server: rules follow Services
//! and EndpointSlices, a flushed or deleted table is rebuilt by the
//! periodic resync, and a clean stop removes the table.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use skiff_proxy::ProxyConfig;
use skiff_testkit::TestCluster;
use skiff_testkit::netns::fetch_until;

use super::netns::{netns, network};

fn slice() -> EndpointSlice {
    serde_json::from_value(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "web-1", "namespace": "default",
            "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.98.0.2"], "nodeName": "n1",
            "conditions": {"ready": true}}],
        "ports": [{"name": "", "port": 8080, "protocol": "TCP"}]
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_follow_the_api_and_a_flushed_table_is_rebuilt() {
    let ns = netns();
    network(&ns, &["10.98.0.1", "10.98.0.2"]);
    ns.serve("10.98.0.2", "backend");
    let ns = Arc::new(ns);

    let cluster = TestCluster::start().await;
    let client = cluster.client.clone();
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1"}, "spec": {"podCIDR": "10.98.0.0/24"}}))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let status = json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.98.0.1"}]}});
    nodes
        .patch_status("n1", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let service: Service = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"type": "NodePort", "clusterIP": "10.43.0.50",
            "ports": [{"port": 80, "targetPort": 8080, "nodePort": 30555}]}}))
    .unwrap();
    services
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    slices
        .create(&PostParams::default(), &slice())
        .await
        .unwrap();

    let factory = cluster.factory.clone();
    let mut config = ProxyConfig::new("n1");
    ns.keep_table(&mut config.sync, "skp-sync");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let proxy = {
        let factory = factory.clone();
        tokio::spawn(async move { skiff_proxy::run(&factory, config, stop_rx).await })
    };

    let ok = |r: &Result<String, String>| r.as_deref() == Ok("backend");
    let refused = |r: &Result<String, String>| r.as_ref().is_err_and(|e| e.contains("refused"));
    fetch_until(&ns, "10.43.0.50", "cluster IP answers", ok).await;
    fetch_until(&ns, "10.98.0.1:30555", "node port answers", ok).await;

    // The endpoint goes: refused, not timed out; it comes back: served.
    slices
        .delete("web-1", &DeleteParams::default())
        .await
        .unwrap();
    fetch_until(&ns, "10.43.0.50", "refused without endpoints", refused).await;
    slices
        .create(&PostParams::default(), &slice())
        .await
        .unwrap();
    fetch_until(&ns, "10.43.0.50", "served again", ok).await;

    // Someone flushes the table, or deletes it: the resync rebuilds it.
    ns.exec_ok(&["nft", "flush", "table", "ip", "skp-sync"]);
    fetch_until(&ns, "10.43.0.50", "rebuilt after a flush", ok).await;
    ns.exec_ok(&["nft", "delete", "table", "ip", "skp-sync"]);
    fetch_until(&ns, "10.43.0.50", "rebuilt after a delete", ok).await;

    // A clean stop removes the rules.
    stop_tx.send(true).unwrap();
    proxy.await.unwrap().unwrap();
    assert_eq!(
        ns.nft()
            .list_table(skiff_proxy::Family::Ip, "skp-sync")
            .unwrap(),
        None
    );
    cluster.shutdown();
}
