use http::{Method, StatusCode};
use serde_json::json;

use crate::harness::{TestServer, assert_status, message_of};

const DEPLOY: &str = "/apis/apps/v1/namespaces/default/deployments/web";

async fn deployment(s: &TestServer) -> serde_json::Value {
    let d = json!({"metadata": {"name": "web"}, "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}},
        "status": {"replicas": 99}});
    let (code, body) = s
        .post("/apis/apps/v1/namespaces/default/deployments", d)
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    body
}

#[tokio::test]
async fn status_and_spec_are_written_separately() {
    let s = TestServer::new().await;
    let d = deployment(&s).await;
    assert!(
        d.get("status").is_none(),
        "client-set status is dropped on create"
    );
    let mut with_status = d.clone();
    with_status["status"] = json!({"replicas": 2, "observedGeneration": 1});
    with_status["spec"]["replicas"] = json!(7);
    let (code, body) = s.put(&format!("{DEPLOY}/status"), with_status).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(body["status"]["replicas"], 2);
    assert_eq!(body["spec"]["replicas"], 2, "spec ignored through status");

    let mut main = body.clone();
    main["status"]["replicas"] = json!(0);
    main["spec"]["replicas"] = json!(3);
    let (_, body) = s.put(DEPLOY, main).await;
    assert_eq!(
        body["status"]["replicas"], 2,
        "status ignored through the main resource"
    );
    assert_eq!(body["spec"]["replicas"], 3);

    let (code, body) = s
        .patch(
            &format!("{DEPLOY}/status"),
            "application/merge-patch+json",
            json!({"status": {"readyReplicas": 1}}),
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(body["status"]["readyReplicas"], 1);
    let (code, got) = s.get(&format!("{DEPLOY}/status")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(got["status"]["readyReplicas"], 1);
}

#[tokio::test]
async fn scale_reads_and_writes_replicas() {
    let s = TestServer::new().await;
    deployment(&s).await;
    let (code, scale) = s.get(&format!("{DEPLOY}/scale")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["spec"]["replicas"], 2);
    assert_eq!(scale["status"]["selector"], "app=web");
    let mut up = scale.clone();
    up["spec"]["replicas"] = json!(5);
    let (code, body) = s.put(&format!("{DEPLOY}/scale"), up.clone()).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(body["spec"]["replicas"], 5);
    let (code, body) = s.put(&format!("{DEPLOY}/scale"), up).await;
    assert_status(code, &body, 409, "Conflict");
    let (code, body) = s
        .patch(
            &format!("{DEPLOY}/scale"),
            "application/merge-patch+json",
            json!({"spec": {"replicas": 1}}),
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let (_, d) = s.get(DEPLOY).await;
    assert_eq!(d["spec"]["replicas"], 1);
    assert_eq!(d["metadata"]["generation"], 3);
}

#[tokio::test]
async fn binding_assigns_a_node_once() {
    let s = TestServer::new().await;
    let pod =
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let (_, created) = s.post("/api/v1/namespaces/default/pods", pod).await;
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}});
    let (code, body) = s
        .post("/api/v1/namespaces/default/pods/p/binding", binding.clone())
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert_eq!(body["status"], "Success");
    let (_, p) = s.get("/api/v1/namespaces/default/pods/p").await;
    assert_eq!(p["spec"]["nodeName"], "n1");
    assert_eq!(p["status"]["conditions"][0]["type"], "PodScheduled");
    assert_eq!(p["status"]["conditions"][0]["status"], "True");
    // As upstream, a binding is a storage-level write: it adds no managed-fields entry.
    assert_eq!(
        p["metadata"]["managedFields"],
        created["metadata"]["managedFields"]
    );
    assert_ne!(
        p["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    let (code, body) = s
        .post("/api/v1/namespaces/default/pods/p/binding", binding)
        .await;
    assert_status(code, &body, 409, "Conflict");
    assert!(message_of(&body).contains("is already assigned to node \"n1\""));
    let missing = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "gone"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}});
    let (code, body) = s
        .post("/api/v1/namespaces/default/pods/gone/binding", missing)
        .await;
    assert_status(code, &body, 404, "NotFound");
}

#[tokio::test]
async fn binding_a_recreated_pod_binds_the_new_one() {
    let s = TestServer::new().await;
    let pod =
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let binding = |node: &str| {
        json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
    };
    s.post("/api/v1/namespaces/default/pods", pod.clone()).await;
    let (code, _) = s
        .post("/api/v1/namespaces/default/pods/p/binding", binding("n1"))
        .await;
    assert_eq!(code, StatusCode::CREATED);
    let (code, _) = s
        .delete("/api/v1/namespaces/default/pods/p?gracePeriodSeconds=0")
        .await;
    assert!(code.is_success());
    s.post("/api/v1/namespaces/default/pods", pod).await;
    let (code, body) = s
        .post("/api/v1/namespaces/default/pods/p/binding", binding("n2"))
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let (_, p) = s.get("/api/v1/namespaces/default/pods/p").await;
    assert_eq!(p["spec"]["nodeName"], "n2");
}

#[tokio::test]
async fn eviction_respects_disruption_budgets() {
    let s = TestServer::new().await;
    let pod = json!({"metadata": {"name": "p", "labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
    s.post("/api/v1/namespaces/default/pods", pod).await;
    s.patch(
        "/api/v1/namespaces/default/pods/p/status",
        "application/merge-patch+json",
        json!({"status": {"phase": "Running"}}),
    )
    .await;
    let pdb = json!({"metadata": {"name": "budget"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}}});
    let (code, _) = s
        .post(
            "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
            pdb,
        )
        .await;
    assert_eq!(code, StatusCode::CREATED);
    let eviction =
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}});
    let (code, body) = s
        .post(
            "/api/v1/namespaces/default/pods/p/eviction",
            eviction.clone(),
        )
        .await;
    assert_status(code, &body, 429, "TooManyRequests");
    s.patch(
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets/budget/status",
        "application/merge-patch+json",
        json!({"status": {"disruptionsAllowed": 1, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}}),
    )
    .await;
    let (code, body) = s
        .post("/api/v1/namespaces/default/pods/p/eviction", eviction)
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let (code, _) = s.get("/api/v1/namespaces/default/pods/p").await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    let (code, _) = s
        .call(
            Method::GET,
            "/api/v1/namespaces/default/pods/p/eviction",
            None,
        )
        .await;
    assert_eq!(code, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn log_options_are_checked_before_the_node_is_asked() {
    let s = TestServer::new().await;
    let pod =
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
    s.post("/api/v1/namespaces/default/pods", pod).await;
    let (code, body) = s
        .get("/api/v1/namespaces/default/pods/p/log?tailLines=-1&limitBytes=0")
        .await;
    assert_status(code, &body, 422, "Invalid");
    assert_eq!(body["details"]["kind"], "PodLogOptions");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("tailLines: Invalid value: -1: must be greater than or equal to 0"),
        "{message}"
    );
    assert!(
        message.contains("limitBytes: Invalid value: 0"),
        "{message}"
    );
    let (code, body) = s
        .get("/api/v1/namespaces/default/pods/p/log?tailLines=two")
        .await;
    assert_status(code, &body, 400, "BadRequest");
    // Valid options reach the pod, which has no node yet.
    let (code, body) = s
        .get("/api/v1/namespaces/default/pods/p/log?tailLines=2")
        .await;
    assert_status(code, &body, 400, "BadRequest");
    assert!(message_of(&body).contains("does not have a host assigned"));
}
