//! Aggregated API servers, from both sides: an APIService naming a Service
//! gets the requests under its group/version — after authorization, with
//! the caller's identity in the front-proxy headers, the front-proxy
//! client certificate, the server's certificate checked against the
//! `caBundle` — and its group in discovery once its discovery check
//! passes. A caller RBAC refuses is answered 403 here and the extension
//! server sees nothing; a server whose certificate the `caBundle` does not
//! vouch for gets no request; a built-in group an APIService points at the
//! Service stays served here.

use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::{Value, json};
use skiff_apiserver::ApiServerConfig;
use skiff_apiserver::authn::UserInfo;
use skiff_testkit::json::str_array;
use skiff_testkit::pki::TestCa;

use crate::harness::{Client, Expect, TestServer, eventually};
use crate::node_tls::{ClientCerts, answer_ok, next_request, tls_listener};

/// A CA of the extension server's own and a serving certificate from it
/// for `example-api.default.svc`.
fn extension_certs() -> (TestCa, (String, String)) {
    let ca = TestCa::new();
    let serving = ca.serving(&["example-api.default.svc"]);
    (ca, serving)
}

/// Every request the extension server got: (client CN, head).
type Seen = Arc<parking_lot::Mutex<Vec<(Option<String>, String)>>>;

/// The extension API server: requires a front-proxy client certificate,
/// answers discovery for example.com/v1alpha1 and echoes the identity
/// headers of any other request.
async fn extension_server(front_proxy_ca: &str, cert: (String, String), seen: Seen) -> u16 {
    let (listener, port, acceptor) =
        tls_listener(&cert, ClientCerts::Required(front_proxy_ca)).await;
    tokio::spawn(async move {
        while let Some((mut stream, client, head)) = next_request(&listener, &acceptor).await {
            let head = String::from_utf8_lossy(&head).into_owned();
            seen.lock().push((client, head.clone()));
            let path = head.split(' ').nth(1).unwrap_or("").to_string();
            let body = if path == "/apis/example.com/v1alpha1" {
                json!({"kind": "APIResourceList", "apiVersion": "v1",
                    "groupVersion": "example.com/v1alpha1",
                    "resources": [{"name": "widgets", "singularName": "widget",
                        "namespaced": true, "kind": "Widget", "verbs": ["get", "list"]}]})
            } else {
                let headers: Vec<String> = head
                    .lines()
                    .skip(1)
                    .map(|l| l.to_ascii_lowercase())
                    .collect();
                json!({"kind": "WidgetList", "apiVersion": "example.com/v1alpha1",
                    "path": path, "headers": headers, "items": []})
            }
            .to_string();
            answer_ok(&mut stream, "application/json", &body).await;
        }
    });
    port
}

/// Service `example-api` in default, whose one EndpointSlice holds
/// `endpoint` (127.0.0.1, ready or not) on the extension server's `port`.
async fn example_api_service(s: &TestServer, port: u16, endpoint: Value) {
    s.https_service("default", "example-api", port, json!([endpoint]))
        .await;
}

/// The APIService registering example.com/v1alpha1 as served by Service
/// `example-api`, whose certificate `ca` must vouch for.
fn example_api_registration(ca: &TestCa) -> Value {
    json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1alpha1.example.com"},
        "spec": {"group": "example.com", "version": "v1alpha1",
            "groupPriorityMinimum": 1000, "versionPriority": 15, "caBundle": ca.bundle(),
            "service": {"namespace": "default", "name": "example-api", "port": 443}}})
}

async fn available(s: &TestServer, name: &str, reason: &str) -> Value {
    eventually(
        Duration::from_secs(45),
        Duration::from_millis(100),
        || async {
            let (_, service) = s
                .get(&format!(
                    "/apis/apiregistration.k8s.io/v1/apiservices/{name}"
                ))
                .await;
            let condition = service["status"]["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Available"))
                .cloned();
            match condition {
                Some(c) if c["reason"] == reason => Ok(c),
                _ => Err(format!("{name}: not {reason}: {service}")),
            }
        },
    )
    .await
}

#[tokio::test]
async fn requests_reach_the_extension_server_with_the_callers_identity_only() {
    let (s, certs) = TestServer::with_certs(|certs| ApiServerConfig {
        front_proxy: Some(Arc::new(certs.front_proxy().unwrap())),
        webhook_ca_pem: Some(certs.ca_cert_pem.clone()),
        ..ApiServerConfig::default()
    })
    .await;

    // What extension servers read to trust the headers.
    let (_, auth) = s
        .get("/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication")
        .await;
    assert_eq!(
        auth["data"]["requestheader-client-ca-file"],
        certs.front_proxy_ca_cert_pem.as_str()
    );
    assert_eq!(
        auth["data"]["requestheader-allowed-names"],
        "[\"front-proxy-client\"]"
    );
    assert_eq!(
        auth["data"]["requestheader-username-headers"],
        "[\"X-Remote-User\"]"
    );

    let (ca, serving) = extension_certs();
    let seen = Seen::default();
    let port = extension_server(&certs.front_proxy_ca_cert_pem, serving, seen.clone()).await;
    example_api_service(
        &s,
        port,
        json!({"addresses": ["127.0.0.1"], "conditions": {"ready": true}}),
    )
    .await;
    let service = example_api_registration(&ca);
    s.created("/apis/apiregistration.k8s.io/v1/apiservices", service)
        .await;
    let condition = available(&s, "v1alpha1.example.com", "Passed").await;
    assert_eq!(condition["status"], "True");

    // Discovery lists the group and, aggregated, its resources.
    let (_, groups) = s.get("/apis").await;
    assert!(
        groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "example.com"),
        "{groups}"
    );
    let group = s.get_ok("/apis/example.com").await;
    assert_eq!(group["preferredVersion"]["version"], "v1alpha1");

    // A caller RBAC allows: proxied, with the identity in headers and no
    // credentials of the caller's.
    let admin = UserInfo::new("alice", ["system:masters".to_string()]);
    let answer = s
        .call_with_headers(
            &admin,
            Method::GET,
            "/apis/example.com/v1alpha1/namespaces/default/widgets",
            None,
            &[
                ("authorization", "Bearer secret-token"),
                ("x-remote-user", "forged"),
            ],
        )
        .await
        .expect_code(StatusCode::OK);
    let headers = str_array(&answer["headers"]);
    assert!(headers.contains(&"x-remote-user: alice"), "{headers:?}");
    assert!(
        headers.contains(&"x-remote-group: system:masters"),
        "{headers:?}"
    );
    assert!(!headers.iter().any(|h| h.contains("forged")), "{headers:?}");
    assert!(
        !headers.iter().any(|h| h.starts_with("authorization")),
        "{headers:?}"
    );
    assert!(
        seen.lock()
            .iter()
            .all(|(cn, _)| cn.as_deref() == Some("front-proxy-client")),
        "{:?}",
        seen.lock()
    );

    // A caller RBAC refuses: 403 here, nothing reaches the server.
    let before = seen.lock().len();
    let mallory = UserInfo::new("mallory", Vec::<String>::new());
    s.get_as(
        &mallory,
        "/apis/example.com/v1alpha1/namespaces/default/widgets",
    )
    .await
    .expect_code(StatusCode::FORBIDDEN);
    assert_eq!(seen.lock().len(), before);

    // An APIService pointing a built-in group at the server does not take
    // it over: apps stays served here and the server sees no apps request.
    let (_, mut apps) = s
        .get("/apis/apiregistration.k8s.io/v1/apiservices/v1.apps")
        .await;
    apps["spec"]["service"] = json!({"namespace": "default", "name": "example-api", "port": 443});
    apps["spec"]["caBundle"] = json!(ca.bundle());
    s.put_ok("/apis/apiregistration.k8s.io/v1/apiservices/v1.apps", apps)
        .await;
    let list = s
        .get_ok("/apis/apps/v1/namespaces/default/deployments")
        .await;
    assert_eq!(list["kind"], "DeploymentList");
    assert!(
        !seen
            .lock()
            .iter()
            .any(|(_, head)| head.contains("/apis/apps")),
        "{:?}",
        seen.lock()
    );
}

#[tokio::test]
async fn a_server_the_ca_bundle_does_not_vouch_for_gets_no_request() {
    let (s, certs) = TestServer::with_certs(|certs| ApiServerConfig {
        front_proxy: Some(Arc::new(certs.front_proxy().unwrap())),
        ..ApiServerConfig::default()
    })
    .await;
    let (_, serving) = extension_certs();
    let other_ca = TestCa::new();
    let seen = Seen::default();
    let port = extension_server(&certs.front_proxy_ca_cert_pem, serving, seen.clone()).await;
    example_api_service(&s, port, json!({"addresses": ["127.0.0.1"]})).await;
    let service = example_api_registration(&other_ca);
    s.post("/apis/apiregistration.k8s.io/v1/apiservices", service)
        .await;
    let condition = available(&s, "v1alpha1.example.com", "FailedDiscoveryCheck").await;
    assert_eq!(condition["status"], "False");
    s.get("/apis/example.com/v1alpha1/namespaces/default/widgets")
        .await
        .expect_code(StatusCode::SERVICE_UNAVAILABLE);
    assert!(seen.lock().is_empty(), "{:?}", seen.lock());
    let (_, groups) = s.get("/apis").await;
    assert!(
        !groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "example.com"),
        "an unavailable group is not advertised"
    );
}
