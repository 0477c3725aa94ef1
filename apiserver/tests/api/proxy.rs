//! The proxy subresources: requests reach a pod, and a service's pod,
//! through them; addresses no pod could have, endpoints that are not their
//! pod's address, and callers without `<resource>/proxy` are refused.

use std::net::{IpAddr, SocketAddr};

use http::{Method, StatusCode};
use serde_json::{Value, json};
use skiff_apiserver::authn::UserInfo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::harness::{Client, Expect, TestServer, message_of};

const PODS: &str = "/api/v1/namespaces/default/pods";
const SERVICES: &str = "/api/v1/namespaces/default/services";

/// A local address other than loopback, where a test backend listens as a
/// pod would (the proxy refuses loopback, as upstream does).
fn pod_like_address() -> IpAddr {
    if_addrs::get_if_addrs()
        .expect("the machine's interfaces")
        .into_iter()
        .map(|i| i.ip())
        .find(|ip| match ip {
            IpAddr::V4(v4) => !v4.is_loopback() && !v4.is_link_local(),
            IpAddr::V6(_) => false,
        })
        .expect("this test needs a non-loopback IPv4 address to stand for a pod's")
}

/// An HTTP backend that answers every request with its request line, its
/// body, and whether it was sent credentials.
async fn backend(ip: IpAddr) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                let head_end = loop {
                    let Ok(n) = conn.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    if let Some(at) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        break at + 4;
                    }
                };
                let head = String::from_utf8_lossy(&seen[..head_end]).to_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                while seen.len() < head_end + length {
                    let Ok(n) = conn.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        break;
                    }
                    seen.extend_from_slice(&buf[..n]);
                }
                let request_line = String::from_utf8_lossy(&seen[..head_end])
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_string();
                let body = String::from_utf8_lossy(&seen[head_end..]).to_string();
                let credentials = ["authorization:", "cookie:", "impersonate-"]
                    .iter()
                    .any(|h| head.contains(h));
                let answer = format!("{request_line} body={body} credentials={credentials}");
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                    answer.len()
                );
                let _ = conn.write_all(response.as_bytes()).await;
            });
        }
    });
    address
}

/// A pod `name` with one container port `port`, its status saying it runs
/// at `ip`.
async fn pod_at(s: &TestServer, name: &str, ip: &str, port: u16) {
    s.created(
        PODS,
        json!({"metadata": {"name": name, "labels": {"app": name}},
               "spec": {"containers": [{"name": "c", "image": "i",
                                        "ports": [{"containerPort": port}]}]}}),
    )
    .await;
    s.merge_patch_ok(
        &format!("{PODS}/{name}/status"),
        json!({"status": {"podIP": ip, "podIPs": [{"ip": ip}]}}),
    )
    .await;
}

/// A service `name` whose port 80 (`http`) has one EndpointSlice endpoint
/// at `ip:port`, naming `pod` as its target (or nothing).
async fn service_at(s: &TestServer, name: &str, ip: &str, port: u16, pod: Option<&str>) {
    s.created(
        SERVICES,
        json!({"metadata": {"name": name},
               "spec": {"ports": [{"name": "http", "port": 80, "targetPort": port}]}}),
    )
    .await;
    let mut endpoint = json!({"addresses": [ip], "conditions": {"ready": true}});
    if let Some(pod) = pod {
        endpoint["targetRef"] = json!({"kind": "Pod", "namespace": "default", "name": pod});
    }
    s.created(
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
        json!({"metadata": {"name": format!("{name}-1"),
                            "labels": {"kubernetes.io/service-name": name}},
               "addressType": "IPv4", "endpoints": [endpoint],
               "ports": [{"name": "http", "port": port, "protocol": "TCP"}]}),
    )
    .await;
}

fn text(answer: (StatusCode, Value)) -> String {
    let body = answer.expect_code(StatusCode::OK);
    body.as_str()
        .map(str::to_string)
        .unwrap_or_else(|| body.to_string())
}

#[tokio::test]
async fn requests_reach_a_pod_and_a_services_pod_through_proxy() {
    let s = TestServer::new().await;
    let ip = pod_like_address();
    let address = backend(ip).await;
    let port = address.port();
    pod_at(&s, "web", &ip.to_string(), port).await;

    // The pod's first container port, or the one named; path and query go on.
    assert_eq!(
        text(s.get(&format!("{PODS}/web/proxy/hello?x=1")).await),
        "GET /hello?x=1 HTTP/1.1 body= credentials=false"
    );
    assert_eq!(
        text(s.get(&format!("{PODS}/web:{port}/proxy")).await),
        "GET / HTTP/1.1 body= credentials=false"
    );
    // The caller's credentials stay here: a pod must not receive them.
    let admin = UserInfo::new("test-admin", vec!["system:masters".into()]);
    let with_token = s
        .call_with_headers(
            &admin,
            Method::GET,
            &format!("{PODS}/web/proxy/t"),
            None,
            &[("authorization", "Bearer s3cret"), ("cookie", "session=1")],
        )
        .await;
    assert_eq!(text(with_token), "GET /t HTTP/1.1 body= credentials=false");
    let posted = s
        .call(
            Method::POST,
            &format!("{PODS}/http:web:{port}/proxy/submit"),
            Some(json!({"a": 1})),
        )
        .await;
    assert_eq!(
        text(posted),
        "POST /submit HTTP/1.1 body={\"a\":1} credentials=false"
    );

    // A service's port by number or by name reaches its pod's endpoint.
    service_at(&s, "web", &ip.to_string(), port, Some("web")).await;
    for id in ["web:80", "web:http", "http:web:http"] {
        assert_eq!(
            text(s.get(&format!("{SERVICES}/{id}/proxy/svc")).await),
            "GET /svc HTTP/1.1 body= credentials=false",
            "{id}"
        );
    }
    // No port named means the unnamed port, which this service has not (as
    // upstream resolves it); a port number it has not is refused too.
    for id in ["web", "web:81"] {
        s.get(&format!("{SERVICES}/{id}/proxy/"))
            .await
            .expect_failure(503, "ServiceUnavailable");
    }

    // Nothing listening: upstream's wording, 503.
    pod_at(&s, "gone", &ip.to_string(), 1).await;
    let refused = s
        .get(&format!("{PODS}/gone/proxy/"))
        .await
        .expect_failure(503, "ServiceUnavailable");
    assert!(
        message_of(&refused)
            .starts_with(&format!("error trying to reach service: dial tcp {ip}:1: ")),
        "{refused}"
    );
}

#[tokio::test]
async fn proxy_refuses_addresses_no_pod_could_have() {
    let s = TestServer::new().await;
    // The API server's own loopback, and the cloud metadata address.
    pod_at(&s, "lo", "127.0.0.1", 6443).await;
    pod_at(&s, "metadata", "169.254.169.254", 80).await;
    for name in ["lo", "metadata", "lo:10250"] {
        let refused = s
            .get(&format!("{PODS}/{name}/proxy/"))
            .await
            .expect_failure(400, "BadRequest");
        assert_eq!(refused["message"], "address not allowed", "{name}");
    }
    let refused = s
        .get(&format!("{PODS}/a:b:c:d/proxy/"))
        .await
        .expect_failure(400, "BadRequest");
    assert_eq!(refused["message"], "invalid pod request \"a:b:c:d\"");

    // An EndpointSlice written by hand cannot aim the server elsewhere: an
    // endpoint counts only as the address of the pod it names.
    let ip = pod_like_address();
    let address = backend(ip).await;
    pod_at(&s, "real", "10.42.0.7", 80).await;
    service_at(&s, "nopod", &ip.to_string(), address.port(), None).await;
    service_at(&s, "notits", &ip.to_string(), address.port(), Some("real")).await;
    service_at(&s, "local", "127.0.0.1", 6443, Some("lo")).await;
    for name in ["nopod", "notits", "local"] {
        let refused = s
            .get(&format!("{SERVICES}/{name}/proxy/"))
            .await
            .expect_failure(503, "ServiceUnavailable");
        assert_eq!(
            refused["message"],
            format!("no endpoints available for service \"{name}\""),
        );
    }
}

#[tokio::test]
async fn proxy_needs_its_own_permission() {
    let s = TestServer::new().await;
    pod_at(&s, "lo", "127.0.0.1", 80).await;
    // `view` reads pods but may not proxy to them.
    s.grant("viewer", "view").await;
    let viewer = UserInfo::new("viewer", Vec::new());
    assert_eq!(
        s.get_as(&viewer, &format!("{PODS}/lo")).await.0,
        StatusCode::OK
    );
    s.get_as(&viewer, &format!("{PODS}/lo/proxy/"))
        .await
        .expect_mentions(403, "Forbidden", &["cannot get resource \"pods/proxy\""]);
    s.get_as(&viewer, "/api/v1/nodes/n1/proxy/metrics")
        .await
        .expect_mentions(403, "Forbidden", &["nodes/proxy"]);
    // `edit` may: the request gets as far as the address check.
    s.grant("editor", "edit").await;
    let editor = UserInfo::new("editor", Vec::new());
    s.get_as(&editor, &format!("{PODS}/lo/proxy/"))
        .await
        .expect_failure(400, "BadRequest");
}
