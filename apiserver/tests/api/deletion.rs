use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::json;

use crate::harness::{Client, Expect, TestServer, eventually, pod};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

/// Deletes `path` with `query`, and it is gone at once (no finalizer or
/// grace period holds it).
async fn gone_after_delete(s: &TestServer, path: &str, query: &str) {
    s.delete_ok(&format!("{path}?{query}")).await;
    s.get_not_found(path).await;
}

#[tokio::test]
async fn finalizers_hold_an_object_until_removed() {
    let s = TestServer::new().await;
    s.created(
        CMS,
        json!({"metadata": {"name": "f", "finalizers": ["example.com/hold"]}}),
    )
    .await;
    let body = s.delete_ok(&format!("{CMS}/f")).await;
    assert!(body["metadata"]["deletionTimestamp"].is_string());
    let held = s.get_ok(&format!("{CMS}/f")).await;

    let mut adding = held.clone();
    adding["metadata"]["finalizers"] = json!(["example.com/hold", "another"]);
    s.put(&format!("{CMS}/f"), adding)
        .await
        .expect_failure(422, "Invalid");

    let mut released = held.clone();
    released["metadata"]["finalizers"] = json!([]);
    s.put_ok(&format!("{CMS}/f"), released).await;
    s.get_not_found(&format!("{CMS}/f")).await;
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
        let deleted = s
            .call(Method::DELETE, &format!("{CMS}/{name}"), Some(body))
            .await
            .expect_code(StatusCode::OK);
        assert_eq!(deleted["metadata"]["finalizers"], json!([finalizer]));
        let (code, _) = s.get(&format!("{CMS}/{name}")).await;
        assert_eq!(code, StatusCode::OK, "held by {finalizer}");
    }
    s.configmap("default", "bg", json!({})).await;
    gone_after_delete(&s, &format!("{CMS}/bg"), "propagationPolicy=Background").await;
}

#[tokio::test]
async fn scheduled_pods_terminate_gracefully() {
    let s = TestServer::new().await;
    s.post("/api/v1/namespaces/default/pods", pod("unscheduled", None))
        .await;
    s.delete_ok("/api/v1/namespaces/default/pods/unscheduled")
        .await;
    let (code, _) = s.get("/api/v1/namespaces/default/pods/unscheduled").await;
    assert_eq!(code, StatusCode::NOT_FOUND, "unscheduled pods go at once");

    s.post(
        "/api/v1/namespaces/default/pods",
        pod("running", Some("n1")),
    )
    .await;
    let body = s.delete_ok("/api/v1/namespaces/default/pods/running").await;
    assert_eq!(body["metadata"]["deletionGracePeriodSeconds"], 30);
    let terminating = s.get_ok("/api/v1/namespaces/default/pods/running").await;
    assert!(terminating["metadata"]["deletionTimestamp"].is_string());
    // The node agent's status update keeps it terminating.
    let mut status = terminating.clone();
    status["status"]["phase"] = json!("Running");
    s.put_ok("/api/v1/namespaces/default/pods/running/status", status)
        .await;
    s.get_ok("/api/v1/namespaces/default/pods/running").await;
    gone_after_delete(
        &s,
        "/api/v1/namespaces/default/pods/running",
        "gracePeriodSeconds=0",
    )
    .await;

    s.post("/api/v1/namespaces/default/pods", pod("forced", Some("n1")))
        .await;
    gone_after_delete(
        &s,
        "/api/v1/namespaces/default/pods/forced",
        "gracePeriodSeconds=0",
    )
    .await;
}

#[tokio::test]
async fn namespaces_terminate_until_finalized() {
    let s = TestServer::new().await;
    s.namespace("tmp").await;
    let ns = s.delete_ok("/api/v1/namespaces/tmp").await;
    assert_eq!(ns["status"]["phase"], "Terminating");
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    s.get_ok("/api/v1/namespaces/tmp").await;
    let mut finalize = ns.clone();
    finalize["spec"]["finalizers"] = json!([]);
    s.put_ok("/api/v1/namespaces/tmp/finalize", finalize).await;
    s.get_not_found("/api/v1/namespaces/tmp").await;

    s.delete("/api/v1/namespaces/default")
        .await
        .expect_failure(403, "Forbidden");
}

#[tokio::test]
async fn delete_preconditions_and_missing_objects() {
    let s = TestServer::new().await;
    s.delete(&format!("{CMS}/none"))
        .await
        .expect_failure(404, "NotFound");
    s.configmap("default", "pre", json!({})).await;
    let opts = json!({"preconditions": {"uid": "not-the-uid"}});
    s.call(Method::DELETE, &format!("{CMS}/pre"), Some(opts))
        .await
        .expect_failure(409, "Conflict");
    s.delete_ok(&format!("{CMS}/pre?dryRun=All")).await;
    let (code, _) = s.get(&format!("{CMS}/pre")).await;
    assert_eq!(code, StatusCode::OK, "dry-run delete keeps the object");
}

#[tokio::test]
async fn delete_collection_honours_selectors() {
    let s = TestServer::new().await;
    s.configmap("default", "a", json!({"del": "yes"})).await;
    s.configmap("default", "b", json!({"del": "yes"})).await;
    s.configmap("default", "c", json!({})).await;
    let body = s.delete_ok(&format!("{CMS}?labelSelector=del%3Dyes")).await;
    assert_eq!(body["items"].as_array().unwrap().len(), 2);
    assert_eq!(s.list_names(CMS).await, vec!["c"]);
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
    s.created("/api/v1/namespaces/default/events", event).await;
    s.configmap("default", "keep", json!({})).await;
    let (ten_seconds, a_fifth) = (Duration::from_secs(10), Duration::from_millis(200));
    eventually(ten_seconds, a_fifth, || async {
        match s.get("/api/v1/namespaces/default/events/e").await {
            (StatusCode::NOT_FOUND, _) => Ok(()),
            _ => Err("event never expired".to_string()),
        }
    })
    .await;
    let (code, _) = s.get(&format!("{CMS}/keep")).await;
    assert_eq!(code, StatusCode::OK, "only events expire");
}
