//! The controller loop against an in-process API server, running as its
//! own identity: rules follow NetworkPolicies, Pods and Namespaces; a
//! flushed table is rebuilt by the periodic resync; a clean stop keeps the
//! table unless asked to remove it. And that identity can read and nothing
//! more.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use skiff_informer::SharedInformerFactory;
use skiff_netpol::NetpolConfig;
use skiff_testkit::netns::fetch_until;
use skiff_testkit::{TestCluster, UserInfo};

use super::netns::Node;

const USER: &str = "system:skiff:network-policy";

/// A running pod on n1 with `ip`, created through the API and given its
/// address in its status, as the node agent would.
async fn pod(pods: &Api<Pod>, name: &str, ip: &str, labels: serde_json::Value) {
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox",
            "ports": [{"name": "http", "containerPort": 8080}]}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let status = json!({"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

fn policy(name: &str, spec: serde_json::Value) -> NetworkPolicy {
    serde_json::from_value(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_follow_the_api_as_the_controllers_own_identity() {
    let mut node = Node::new();
    let web = node.pod("10.77.0.10");
    let client = node.pod("10.77.0.11");
    let stranger = node.pod("10.77.0.12");
    node.serve(web, "10.77.0.10", "web");
    let node = Arc::new(node);

    let cluster = TestCluster::start().await;
    let admin = cluster.client.clone();
    let ns: Namespace = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "app"}}))
    .unwrap();
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "app");
    pod(&pods, "web", "10.77.0.10", json!({"app": "web"})).await;
    pod(&pods, "client", "10.77.0.11", json!({})).await;
    pod(&pods, "stranger", "10.77.0.12", json!({})).await;

    // The controller's own informers, as its own user.
    let own = cluster.client_as(UserInfo::new(USER, Vec::<String>::new()));
    let factory = SharedInformerFactory::new(own.clone());
    let mut config = NetpolConfig::new("n1");
    node.node.keep_table(&mut config.sync, "np-sync");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let controller = {
        let factory = factory.clone();
        tokio::spawn(async move { skiff_netpol::run(&factory, config, stop_rx).await })
    };

    let to_web = "10.77.0.10:8080";
    let ok = |r: &Result<String, String>| r.as_deref() == Ok("web");
    let dropped = |r: &Result<String, String>| r.is_err();
    fetch_until(node.pod_ns(client), to_web, "open without policies", ok).await;

    let policies: Api<NetworkPolicy> = Api::namespaced(admin.clone(), "app");
    policies
        .create(
            &PostParams::default(),
            &policy(
                "deny",
                json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
            ),
        )
        .await
        .unwrap();
    fetch_until(node.pod_ns(client), to_web, "default deny", dropped).await;

    // Allow role=client from namespaces labelled team=a, on the named port.
    policies
        .create(
            &PostParams::default(),
            &policy(
                "allow",
                json!({
                    "podSelector": {"matchLabels": {"app": "web"}},
                    "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": "a"}},
                                           "podSelector": {"matchLabels": {"role": "client"}}}],
                                 "ports": [{"port": "http"}]}]
                }),
            ),
        )
        .await
        .unwrap();
    // The client gets its label, and the namespace its own: both needed.
    let label = json!({"metadata": {"labels": {"role": "client"}}});
    pods.patch("client", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    fetch_until(
        node.pod_ns(client),
        to_web,
        "namespace not labelled yet",
        dropped,
    )
    .await;
    let team = json!({"metadata": {"labels": {"team": "a"}}});
    Api::<Namespace>::all(admin.clone())
        .patch("app", &PatchParams::default(), &Patch::Merge(&team))
        .await
        .unwrap();
    fetch_until(node.pod_ns(client), to_web, "labelled client admitted", ok).await;
    fetch_until(
        node.pod_ns(stranger),
        to_web,
        "stranger still dropped",
        dropped,
    )
    .await;

    // Someone flushes the table: the resync rebuilds it (still enforcing).
    node.node
        .exec_ok(&["nft", "flush", "table", "inet", "np-sync"]);
    fetch_until(node.pod_ns(client), to_web, "rebuilt after a flush", ok).await;
    let listed = node
        .nft()
        .list_table(skiff_common::nft::Family::Inet, "np-sync")
        .unwrap()
        .unwrap();
    assert!(listed.contains("jump in-app/web"), "{listed}");

    // Deleting the policies opens the pod again.
    policies
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap();
    fetch_until(
        node.pod_ns(stranger),
        to_web,
        "open after the policies went",
        ok,
    )
    .await;

    // The identity reads, and may do nothing else.
    let as_controller: Api<NetworkPolicy> = Api::namespaced(own.clone(), "app");
    as_controller.list(&ListParams::default()).await.unwrap();
    let refused = as_controller
        .create(
            &PostParams::default(),
            &policy("mine", json!({"podSelector": {}})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403),
        "{refused:?}"
    );
    let own_pods: Api<Pod> = Api::namespaced(own.clone(), "app");
    let refused = own_pods
        .delete("web", &DeleteParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403),
        "{refused:?}"
    );
    let refused = own_pods.get("web").await.unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403),
        "{refused:?}"
    );
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(own.clone(), "app");
    let refused = secrets.list(&ListParams::default()).await.unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403),
        "{refused:?}"
    );

    // A clean stop keeps the rules by default.
    stop_tx.send(true).unwrap();
    controller.await.unwrap().unwrap();
    assert!(
        node.nft()
            .list_table(skiff_common::nft::Family::Inet, "np-sync")
            .unwrap()
            .is_some()
    );
    skiff_netpol::remove_table(node.nft(), "np-sync".into()).await;
    assert_eq!(
        node.nft()
            .list_table(skiff_common::nft::Family::Inet, "np-sync")
            .unwrap(),
        None
    );
    factory.shutdown();
    cluster.shutdown();
}
