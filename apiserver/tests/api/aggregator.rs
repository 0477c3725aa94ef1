//! `apiregistration.k8s.io/v1` APIServices: a local one for every served
//! group/version (available, `Local`), put back when someone deletes it or
//! points it at a Service; a Service-backed one reports why it is not
//! available; `kubectl get apiservices`' columns.

use http::StatusCode;
use serde_json::{Value, json};

use crate::harness::{Client, Expect, TestServer, columns, row};

const PATH: &str = "/apis/apiregistration.k8s.io/v1/apiservices";

/// Waits until `check` accepts the APIService `name`.
async fn eventually(s: &TestServer, name: &str, check: impl Fn(&Value) -> bool) -> Value {
    s.get_until(&format!("{PATH}/{name}"), check).await
}

fn available(service: &Value) -> Option<(String, String)> {
    let c = service["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Available")?;
    Some((
        c["status"].as_str()?.to_string(),
        c["reason"].as_str()?.to_string(),
    ))
}

#[tokio::test]
async fn local_apiservices_are_registered_available_and_kept() {
    let s = TestServer::new().await;
    let metrics = eventually(&s, "v1beta1.metrics.k8s.io", |a| {
        available(a) == Some(("True".into(), "Local".into()))
    })
    .await;
    assert_eq!(metrics["spec"]["group"], "metrics.k8s.io");
    assert_eq!(metrics["spec"]["version"], "v1beta1");
    assert!(metrics["spec"].get("service").is_none());
    assert_eq!(
        metrics["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"],
        "onstart"
    );
    eventually(&s, "v1.", |a| a["spec"]["group"] == "").await;
    eventually(&s, "v1.apps", |a| available(a).is_some()).await;

    // From an attacker's side (one allowed to write APIServices): pointing
    // a built-in group at a Service does not stick...
    let (_, mut apps) = s.get(&format!("{PATH}/v1.apps")).await;
    apps["spec"]["service"] = json!({"namespace": "default", "name": "evil", "port": 443});
    apps["spec"]["insecureSkipTLSVerify"] = json!(true);
    s.put_ok(&format!("{PATH}/v1.apps"), apps).await;
    eventually(&s, "v1.apps", |a| {
        a["spec"].get("service").is_none() && a["spec"].get("insecureSkipTLSVerify").is_none()
    })
    .await;
    // ...nor does deleting it; and apps is served locally all along.
    s.delete_ok(&format!("{PATH}/v1.apps")).await;
    eventually(&s, "v1.apps", |a| available(a).is_some()).await;
    s.get_ok("/apis/apps/v1/namespaces/default/deployments")
        .await;
}

#[tokio::test]
async fn a_service_backed_apiservice_says_why_it_is_not_available() {
    let s = TestServer::new().await;
    let service = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1alpha1.example.com"},
        "spec": {"group": "example.com", "version": "v1alpha1",
            "groupPriorityMinimum": 1000, "versionPriority": 15,
            "insecureSkipTLSVerify": true,
            "service": {"namespace": "default", "name": "example-api", "port": 443}}});
    s.created(PATH, service).await;
    let got = eventually(&s, "v1alpha1.example.com", |a| available(a).is_some()).await;
    assert_eq!(
        available(&got),
        Some(("False".into(), "ServiceNotFound".into())),
        "{got}"
    );
    let svc = json!({"metadata": {"name": "example-api"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 8443}]}});
    s.created("/api/v1/namespaces/default/services", svc).await;
    eventually(&s, "v1alpha1.example.com", |a| {
        available(a) == Some(("False".into(), "MissingEndpoints".into()))
    })
    .await;

    // The wrong name for its group/version is refused.
    let bad = json!({"metadata": {"name": "v2.example.com"},
        "spec": {"group": "example.com", "version": "v1",
            "groupPriorityMinimum": 1000, "versionPriority": 15}});
    s.post(PATH, bad)
        .await
        .expect_code(StatusCode::UNPROCESSABLE_ENTITY);

    // kubectl's columns.
    let table = s.get_table(PATH).await;
    assert_eq!(columns(&table), ["Name", "Service", "Available", "Age"]);
    assert_eq!(
        row(&table, "v1alpha1.example.com")[1],
        "default/example-api"
    );
    assert_eq!(
        row(&table, "v1alpha1.example.com")[2],
        "False (MissingEndpoints)"
    );
    assert_eq!(row(&table, "v1beta1.metrics.k8s.io")[1], "Local");
}
