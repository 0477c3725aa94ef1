use http::{Method, StatusCode};
use serde_json::json;

use crate::harness::{TestServer, assert_status, item_names};

fn pod(name: &str, node: Option<&str>) -> serde_json::Value {
    let mut spec = json!({"containers": [{"name": "c", "image": "i"}]});
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    json!({"metadata": {"name": name}, "spec": spec})
}

#[tokio::test]
async fn finalizers_hold_an_object_until_removed() {
    let s = TestServer::new().await;
    let (code, _) = s
        .post(
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata": {"name": "f", "finalizers": ["example.com/hold"]}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED);
    let (code, body) = s.delete("/api/v1/namespaces/default/configmaps/f").await;
    assert_eq!(code, StatusCode::OK);
    assert!(body["metadata"]["deletionTimestamp"].is_string());
    let (code, held) = s.get("/api/v1/namespaces/default/configmaps/f").await;
    assert_eq!(code, StatusCode::OK);

    let mut adding = held.clone();
    adding["metadata"]["finalizers"] = json!(["example.com/hold", "another"]);
    let (code, body) = s
        .put("/api/v1/namespaces/default/configmaps/f", adding)
        .await;
    assert_status(code, &body, 422, "Invalid");

    let mut released = held.clone();
    released["metadata"]["finalizers"] = json!([]);
    let (code, _) = s
        .put("/api/v1/namespaces/default/configmaps/f", released)
        .await;
    assert_eq!(code, StatusCode::OK);
    let (code, _) = s.get("/api/v1/namespaces/default/configmaps/f").await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert!(
        !s.keys()
            .await
            .iter()
            .any(|k| k.ends_with("/configmaps/default/f"))
    );
}

#[tokio::test]
async fn propagation_policies_add_upstream_finalizers() {
    let s = TestServer::new().await;
    for (policy, finalizer) in [("Orphan", "orphan"), ("Foreground", "foregroundDeletion")] {
        let name = policy.to_lowercase();
        s.configmap("default", &name, json!({})).await;
        let body =
            json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": policy});
        let (code, deleted) = s
            .call(
                Method::DELETE,
                &format!("/api/v1/namespaces/default/configmaps/{name}"),
                Some(body),
            )
            .await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(deleted["metadata"]["finalizers"], json!([finalizer]));
        let (code, _) = s
            .get(&format!("/api/v1/namespaces/default/configmaps/{name}"))
            .await;
        assert_eq!(code, StatusCode::OK, "held by {finalizer}");
    }
    s.configmap("default", "bg", json!({})).await;
    let (code, _) = s
        .delete("/api/v1/namespaces/default/configmaps/bg?propagationPolicy=Background")
        .await;
    assert_eq!(code, StatusCode::OK);
    let (code, _) = s.get("/api/v1/namespaces/default/configmaps/bg").await;
    assert_eq!(code, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn scheduled_pods_terminate_gracefully() {
    let s = TestServer::new().await;
    s.post("/api/v1/namespaces/default/pods", pod("unscheduled", None))
        .await;
    let (code, _) = s
        .delete("/api/v1/namespaces/default/pods/unscheduled")
        .await;
    assert_eq!(code, StatusCode::OK);
    let (code, _) = s.get("/api/v1/namespaces/default/pods/unscheduled").await;
    assert_eq!(code, StatusCode::NOT_FOUND, "unscheduled pods go at once");

    s.post(
        "/api/v1/namespaces/default/pods",
        pod("running", Some("n1")),
    )
    .await;
    let (code, body) = s.delete("/api/v1/namespaces/default/pods/running").await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(body["metadata"]["deletionGracePeriodSeconds"], 30);
    let (code, terminating) = s.get("/api/v1/namespaces/default/pods/running").await;
    assert_eq!(code, StatusCode::OK);
    assert!(terminating["metadata"]["deletionTimestamp"].is_string());
    // The node agent's status update keeps it terminating.
    let mut status = terminating.clone();
    status["status"]["phase"] = json!("Running");
    let (code, _) = s
        .put("/api/v1/namespaces/default/pods/running/status", status)
        .await;
    assert_eq!(code, StatusCode::OK);
    let (code, _) = s.get("/api/v1/namespaces/default/pods/running").await;
    assert_eq!(code, StatusCode::OK);
    let (code, _) = s
        .delete("/api/v1/namespaces/default/pods/running?gracePeriodSeconds=0")
        .await;
    assert_eq!(code, StatusCode::OK);
    let (code, _) = s.get("/api/v1/namespaces/default/pods/running").await;
    assert_eq!(code, StatusCode::NOT_FOUND);

    s.post("/api/v1/namespaces/default/pods", pod("forced", Some("n1")))
        .await;
    let (code, _) = s
        .delete("/api/v1/namespaces/default/pods/forced?gracePeriodSeconds=0")
        .await;
    assert_eq!(code, StatusCode::OK);
    let (code, _) = s.get("/api/v1/namespaces/default/pods/forced").await;
    assert_eq!(code, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn namespaces_terminate_until_finalized() {
    let s = TestServer::new().await;
    s.post("/api/v1/namespaces", json!({"metadata": {"name": "tmp"}}))
        .await;
    let (code, ns) = s.delete("/api/v1/namespaces/tmp").await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(ns["status"]["phase"], "Terminating");
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    let (code, _) = s.get("/api/v1/namespaces/tmp").await;
    assert_eq!(code, StatusCode::OK);
    let mut finalize = ns.clone();
    finalize["spec"]["finalizers"] = json!([]);
    let (code, body) = s.put("/api/v1/namespaces/tmp/finalize", finalize).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let (code, _) = s.get("/api/v1/namespaces/tmp").await;
    assert_eq!(code, StatusCode::NOT_FOUND);

    let (code, body) = s.delete("/api/v1/namespaces/default").await;
    assert_status(code, &body, 403, "Forbidden");
}

#[tokio::test]
async fn delete_preconditions_and_missing_objects() {
    let s = TestServer::new().await;
    let (code, body) = s.delete("/api/v1/namespaces/default/configmaps/none").await;
    assert_status(code, &body, 404, "NotFound");
    s.configmap("default", "pre", json!({})).await;
    let opts = json!({"preconditions": {"uid": "not-the-uid"}});
    let (code, body) = s
        .call(
            Method::DELETE,
            "/api/v1/namespaces/default/configmaps/pre",
            Some(opts),
        )
        .await;
    assert_status(code, &body, 409, "Conflict");
    let (code, _) = s
        .delete("/api/v1/namespaces/default/configmaps/pre?dryRun=All")
        .await;
    assert_eq!(code, StatusCode::OK);
    let (code, _) = s.get("/api/v1/namespaces/default/configmaps/pre").await;
    assert_eq!(code, StatusCode::OK, "dry-run delete keeps the object");
}

#[tokio::test]
async fn delete_collection_honours_selectors() {
    let s = TestServer::new().await;
    s.configmap("default", "a", json!({"del": "yes"})).await;
    s.configmap("default", "b", json!({"del": "yes"})).await;
    s.configmap("default", "c", json!({})).await;
    let (code, body) = s
        .delete("/api/v1/namespaces/default/configmaps?labelSelector=del%3Dyes")
        .await;
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(body["items"].as_array().unwrap().len(), 2);
    let (_, list) = s.get("/api/v1/namespaces/default/configmaps").await;
    assert_eq!(item_names(&list), vec!["c"]);
}

#[tokio::test]
async fn events_expire_after_their_ttl() {
    let config = skiff_apiserver::ApiServerConfig {
        event_ttl: std::time::Duration::from_secs(1),
        ..Default::default()
    };
    let s = TestServer::with_config(config).await;
    let event = json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"},
        "reason": "Test", "message": "m", "type": "Normal"});
    let (code, _) = s.post("/api/v1/namespaces/default/events", event).await;
    assert_eq!(code, StatusCode::CREATED);
    s.configmap("default", "keep", json!({})).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (code, _) = s.get("/api/v1/namespaces/default/events/e").await;
        if code == StatusCode::NOT_FOUND {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "event never expired");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let (code, _) = s.get("/api/v1/namespaces/default/configmaps/keep").await;
    assert_eq!(code, StatusCode::OK, "only events expire");
}
