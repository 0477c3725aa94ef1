//! `metrics.k8s.io/v1beta1` served by the API server itself: it scrapes a
//! node server's `/metrics/resource` (here a fake node on loopback with
//! the node's certificate, answering growing counters) as its kubelet
//! client, and answers NodeMetrics and PodMetrics as metrics-server does —
//! CPU as a rate over two scrapes, selectors on the Pods' labels, one
//! namespace or all — to those RBAC lets read them, and to nobody else.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http::StatusCode;
use serde_json::json;
use skiff_apiserver::ApiServerConfig;
use skiff_apiserver::authn::UserInfo;
use skiff_apiserver::tls::ClusterCerts;

use crate::harness::{Client, Expect, TestServer, find_by};
use crate::node_tls::{ClientCerts, answer_ok, issuer, next_request, serving_cert, tls_listener};

/// What the fake node saw: how many scrapes, and who asked for what.
#[derive(Default)]
struct Scrapes {
    count: AtomicU64,
    seen: parking_lot::Mutex<Vec<(Option<String>, String)>>,
}

/// The body of the `n`th scrape: every 15 s the node used 3 CPU-seconds
/// (200m) and the pod's container 0.75 (50m).
fn body(n: u64) -> String {
    let t = 1_800_000_000_000 + n as i64 * 15_000;
    let node_cpu = 100.0 + n as f64 * 3.0;
    let cpu = 10.0 + n as f64 * 0.75;
    format!(
        "# TYPE node_cpu_usage_seconds_total counter\n\
         node_cpu_usage_seconds_total {node_cpu} {t}\n\
         node_memory_working_set_bytes 1048576 {t}\n\
         container_cpu_usage_seconds_total{{container=\"main\",namespace=\"default\",pod=\"web\"}} {cpu} {t}\n\
         container_memory_working_set_bytes{{container=\"main\",namespace=\"default\",pod=\"web\"}} 2048 {t}\n\
         container_start_time_seconds{{container=\"main\",namespace=\"default\",pod=\"web\"}} 1.7e+09 {t}\n"
    )
}

/// A node server on loopback that presents `system:node:n1`'s certificate
/// and answers every request with the next scrape.
async fn fake_node(certs: &ClusterCerts, scrapes: Arc<Scrapes>) -> u16 {
    let cert = serving_cert(Some(&issuer(certs)), "system:node:n1", "127.0.0.1");
    let (listener, port, acceptor) =
        tls_listener(&cert, ClientCerts::Required(&certs.ca_cert_pem)).await;
    tokio::spawn(async move {
        while let Some((mut stream, client, head)) = next_request(&listener, &acceptor).await {
            let line = String::from_utf8_lossy(&head)
                .lines()
                .next()
                .unwrap_or_default()
                .to_string();
            scrapes.seen.lock().push((client, line));
            let n = scrapes.count.fetch_add(1, Ordering::SeqCst);
            let text = body(n);
            answer_ok(&mut stream, "text/plain; version=0.0.4", &text).await;
        }
    });
    port
}

async fn cluster() -> (TestServer, Arc<Scrapes>) {
    let (s, certs) = TestServer::with_certs(|certs| ApiServerConfig {
        kubelet_client: Some(Arc::new(certs.kubelet_client().unwrap())),
        metrics_resolution: Duration::from_millis(100),
        ..ApiServerConfig::default()
    })
    .await;
    let scrapes = Arc::new(Scrapes::default());
    let port = fake_node(&certs, scrapes.clone()).await;
    let node = json!({"metadata": {"name": "n1", "labels": {"tier": "edge"}}});
    s.created("/api/v1/nodes", node).await;
    let (_, mut node) = s.get("/api/v1/nodes/n1").await;
    node["status"] = json!({
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
        "conditions": [{"type": "Ready", "status": "True"}],
        "nodeInfo": {"containerRuntimeVersion": "containerd://1.6.20"}});
    s.put_ok("/api/v1/nodes/n1/status", node).await;
    for (name, labels) in [
        ("web", json!({"app": "web"})),
        ("quiet", json!({"app": "quiet"})),
    ] {
        let pod = json!({"metadata": {"name": name, "labels": labels}, "spec": {
            "nodeName": "n1", "containers": [{"name": "main", "image": "i"}]}});
        s.created("/api/v1/namespaces/default/pods", pod).await;
    }
    (s, scrapes)
}

#[tokio::test]
async fn node_and_pod_metrics_are_rates_over_two_scrapes() {
    let (s, scrapes) = cluster().await;

    let node = s
        .get_until("/apis/metrics.k8s.io/v1beta1/nodes/n1", |_| true)
        .await;
    assert_eq!(node["kind"], "NodeMetrics");
    assert_eq!(node["apiVersion"], "metrics.k8s.io/v1beta1");
    assert_eq!(node["metadata"]["labels"]["tier"], "edge");
    assert_eq!(node["usage"]["cpu"], "200m", "{node}");
    assert_eq!(node["usage"]["memory"], "1Mi", "{node}");
    assert_eq!(node["window"], "15s");
    assert!(node["timestamp"].as_str().unwrap().ends_with('Z'), "{node}");

    // The scrapes came from the API server's kubelet client identity.
    let seen = scrapes.seen.lock().clone();
    assert!(
        seen.iter().all(|(client, line)| {
            client.as_deref() == Some("kube-apiserver-kubelet-client")
                && line.starts_with("GET /metrics/resource ")
        }),
        "{seen:?}"
    );

    let pods = s
        .get_until(
            "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods?labelSelector=app%3Dweb",
            |_| true,
        )
        .await;
    assert_eq!(pods["kind"], "PodMetricsList");
    let items = pods["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{pods}");
    assert_eq!(items[0]["metadata"]["name"], "web");
    assert_eq!(items[0]["metadata"]["namespace"], "default");
    assert_eq!(items[0]["metadata"]["labels"]["app"], "web");
    assert_eq!(items[0]["window"], "15s");
    assert_eq!(
        items[0]["containers"],
        json!([{"name": "main", "usage": {"cpu": "50m", "memory": "2Ki"}}])
    );

    // A selector no pod with figures matches: an empty list.
    let none = s
        .get_ok("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods?labelSelector=app%3Dquiet")
        .await;
    assert_eq!(none["items"], json!([]));
    // All namespaces, and one by name.
    let (_, all) = s.get("/apis/metrics.k8s.io/v1beta1/pods").await;
    assert_eq!(all["items"].as_array().unwrap().len(), 1, "{all}");
    let web = s
        .get_ok("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web")
        .await;
    assert_eq!(web["kind"], "PodMetrics");
    // A pod without figures is NotFound with metrics-server's wording.
    let missing = s
        .get_not_found("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/quiet")
        .await;
    assert_eq!(
        missing["message"],
        "podmetrics.metrics.k8s.io \"default/quiet\" not found"
    );
    let nodes = s
        .get_ok("/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=tier%3Dcore")
        .await;
    assert_eq!(nodes["items"], json!([]));

    // Read-only: no writes, no watches.
    s.post("/apis/metrics.k8s.io/v1beta1/nodes", json!({}))
        .await
        .expect_code(StatusCode::METHOD_NOT_ALLOWED);
    s.get("/apis/metrics.k8s.io/v1beta1/nodes?watch=true")
        .await
        .expect_code(StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn discovery_lists_the_metrics_group_read_only() {
    let s = TestServer::new().await;
    let (_, groups) = s.get("/apis").await;
    let group = find_by(&groups["groups"], "name", "metrics.k8s.io");
    assert_eq!(group["preferredVersion"]["version"], "v1beta1");
    let resources = s.get_ok("/apis/metrics.k8s.io/v1beta1").await;
    let find = |name: &str| find_by(&resources["resources"], "name", name);
    assert_eq!(find("nodes")["kind"], "NodeMetrics");
    assert_eq!(find("nodes")["namespaced"], false);
    assert_eq!(find("pods")["kind"], "PodMetrics");
    assert_eq!(find("pods")["namespaced"], true);
    assert_eq!(find("pods")["verbs"], json!(["get", "list"]));
}

/// From a user's side: without a binding, every metrics read is a 403;
/// `view` (into which `system:aggregated-metrics-reader` aggregates) is
/// enough.
#[tokio::test]
async fn reading_metrics_takes_rbac_rights() {
    let s = TestServer::new().await;
    let nobody = UserInfo::new("mallory", ["system:authenticated".to_string()]);
    for path in [
        "/apis/metrics.k8s.io/v1beta1/nodes",
        "/apis/metrics.k8s.io/v1beta1/nodes/n1",
        "/apis/metrics.k8s.io/v1beta1/pods",
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods",
    ] {
        let (code, body) = s.get_as(&nobody, path).await;
        assert_eq!(code, StatusCode::FORBIDDEN, "{path}: {body}");
    }
    let (_, reader) = s
        .get("/apis/rbac.authorization.k8s.io/v1/clusterroles/system:aggregated-metrics-reader")
        .await;
    assert_eq!(
        reader["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"], "true",
        "{reader}"
    );
    let binding = json!({"metadata": {"name": "viewer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "viewer"}]});
    s.created(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        binding,
    )
    .await;
    let viewer = UserInfo::new("viewer", ["system:authenticated".to_string()]);
    s.get_as(
        &viewer,
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods",
    )
    .await
    .expect_code(StatusCode::OK);
    // A RoleBinding is one namespace's: other namespaces and the nodes
    // stay refused.
    s.get_as(
        &viewer,
        "/apis/metrics.k8s.io/v1beta1/namespaces/kube-system/pods",
    )
    .await
    .expect_code(StatusCode::FORBIDDEN);
    s.get_as(&viewer, "/apis/metrics.k8s.io/v1beta1/nodes")
        .await
        .expect_code(StatusCode::FORBIDDEN);
}
