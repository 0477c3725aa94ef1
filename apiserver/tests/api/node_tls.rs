//! The API server's hop to node servers, from the attacker's side: a Node
//! object that points at a listener which cannot prove it is that node (a
//! certificate for another node, a self-signed one, one that does not name
//! the address dialed) gets no request and no credential — the handshake
//! fails before any HTTP byte — and the user gets an error Status. The
//! genuine node's listener gets the request, from the API server's own
//! client identity.

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use rcgen::{DnType, Issuer, KeyPair};
use rustls::server::WebPkiClientVerifier;
use serde_json::json;
use skiff_apiserver::ApiServerConfig;
use skiff_apiserver::tls::ClusterCerts;
use skiff_testkit::pki::{issue, serving_params};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::harness::{Client, Expect, TestServer};

/// What a fake node listener saw of the one connection it accepted.
#[derive(Debug)]
struct Seen {
    handshake: Result<(), String>,
    /// The client certificate's subject CN, when the handshake completed.
    client: Option<String>,
    /// Every byte of application data received.
    bytes: Vec<u8>,
}

pub(crate) fn pems(pem: &str) -> Vec<rustls::pki_types::CertificateDer<'static>> {
    rustls_pemfile::certs(&mut pem.as_bytes())
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The common name of the client certificate a TLS connection presented.
pub(crate) fn client_cn(
    stream: &tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
) -> Option<String> {
    let der = stream.get_ref().1.peer_certificates()?.first()?;
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert.subject().iter_common_name().next()?;
    cn.as_str().ok().map(String::from)
}

/// Which client certificates a [`tls_listener`] checks.
pub(crate) enum ClientCerts<'a> {
    /// None: every client completes the handshake.
    None,
    /// Required, chaining to this CA (PEM).
    Required(&'a str),
    /// Chaining to this CA (PEM) when the client presents one.
    Optional(&'a str),
}

/// A TLS listener on loopback presenting `cert` (PEM chain, PEM key) and
/// checking `clients`' certificates.
pub(crate) async fn tls_listener(
    cert: &(String, String),
    clients: ClientCerts<'_>,
) -> (TcpListener, u16, tokio_rustls::TlsAcceptor) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = match clients {
        ClientCerts::None => builder.with_no_client_auth(),
        ClientCerts::Required(ca) | ClientCerts::Optional(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for ca in pems(ca) {
                roots.add(ca).unwrap();
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if matches!(clients, ClientCerts::Optional(_)) {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(verifier.build().unwrap())
        }
    };
    let key = rustls_pemfile::private_key(&mut cert.1.as_bytes())
        .unwrap()
        .unwrap();
    let config = builder.with_single_cert(pems(&cert.0), key).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    (
        listener,
        port,
        tokio_rustls::TlsAcceptor::from(Arc::new(config)),
    )
}

/// The next connection's TLS stream, the client certificate's common name
/// and the request head, skipping failed handshakes; `None` once the
/// listener fails. The accept loop of every fake server.
pub(crate) async fn next_request(
    listener: &TcpListener,
    acceptor: &tokio_rustls::TlsAcceptor,
) -> Option<(
    tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    Option<String>,
    Vec<u8>,
)> {
    loop {
        let (tcp, _) = listener.accept().await.ok()?;
        let Ok(mut stream) = acceptor.accept(tcp).await else {
            continue;
        };
        let client = client_cn(&stream);
        let head = read_head(&mut stream).await;
        return Some((stream, client, head));
    }
}

/// Reads a request head: until its blank line, or until the peer stops
/// sending.
pub(crate) async fn read_head(
    stream: &mut tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
) -> Vec<u8> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(n) if n > 0 => head.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    head
}

/// Answers a request 200 with `body` as `content_type` and closes: how the
/// fake kubelets and extension servers reply.
pub(crate) async fn answer_ok<S: tokio::io::AsyncWrite + Unpin>(
    stream: &mut S,
    content_type: &str,
    body: &str,
) {
    use tokio::io::AsyncWriteExt;
    let answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(answer.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// A node's serving certificate for `cn` naming `ip`, signed by `issuer`
/// (or self-signed when `None`).
pub(crate) fn serving_cert(
    issuer: Option<&Issuer<'static, KeyPair>>,
    cn: &str,
    ip: &str,
) -> (String, String) {
    let mut params = serving_params(cn, &[ip]);
    params
        .distinguished_name
        .push(DnType::OrganizationName, "system:nodes");
    issue(params, issuer)
}

/// Listens on loopback with `cert`; accepts one connection, records what
/// arrives and, when a request does, answers `hello`.
async fn fake_node(
    cert: (String, String),
    client_ca: &str,
) -> (u16, tokio::task::JoinHandle<Seen>) {
    let (listener, port, acceptor) = tls_listener(&cert, ClientCerts::Optional(client_ca)).await;
    let task = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut stream = match acceptor.accept(tcp).await {
            Ok(stream) => stream,
            Err(e) => {
                return Seen {
                    handshake: Err(e.to_string()),
                    client: None,
                    bytes: Vec::new(),
                };
            }
        };
        let client = client_cn(&stream);
        let mut bytes = Vec::new();
        let mut buf = [0u8; 4096];
        // Read the request head, if any comes.
        while !bytes.windows(4).any(|w| w == b"\r\n\r\n") {
            match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => bytes.extend_from_slice(&buf[..n]),
                _ => break,
            }
        }
        if !bytes.is_empty() {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
                )
                .await;
            let _ = stream.shutdown().await;
        }
        Seen {
            handshake: Ok(()),
            client,
            bytes,
        }
    });
    (port, task)
}

async fn cluster() -> (TestServer, ClusterCerts) {
    let (s, certs) = TestServer::with_certs(|certs| ApiServerConfig {
        kubelet_client: Some(Arc::new(certs.kubelet_client().unwrap())),
        ..ApiServerConfig::default()
    })
    .await;
    let pod = json!({"metadata": {"name": "p"}, "spec": {
        "nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}});
    s.created("/api/v1/namespaces/default/pods", pod).await;
    (s, certs)
}

/// Points Node n1 at `port` on loopback.
async fn node_at(s: &TestServer, port: u16) {
    let node = json!({"metadata": {"name": "n1"}, "status": {
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}});
    let (code, _) = s.get("/api/v1/nodes/n1").await;
    if code == StatusCode::NOT_FOUND {
        s.created("/api/v1/nodes", node.clone()).await;
    }
    let (_, current) = s.get("/api/v1/nodes/n1").await;
    let mut updated = current.clone();
    updated["status"] = node["status"].clone();
    s.put_ok("/api/v1/nodes/n1/status", updated).await;
}

pub(crate) fn issuer(certs: &ClusterCerts) -> Issuer<'static, KeyPair> {
    Issuer::from_ca_cert_pem(
        &certs.ca_cert_pem,
        KeyPair::from_pem(&certs.ca_key_pem).unwrap(),
    )
    .unwrap()
}

#[tokio::test]
async fn a_listener_that_is_not_the_pods_node_gets_no_request() {
    let (s, certs) = cluster().await;
    let ca = issuer(&certs);
    let impostors = [
        (
            "another node's certificate",
            serving_cert(Some(&ca), "system:node:n2", "127.0.0.1"),
        ),
        (
            "a self-signed certificate",
            serving_cert(None, "system:node:n1", "127.0.0.1"),
        ),
        (
            "a certificate for another address",
            serving_cert(Some(&ca), "system:node:n1", "10.9.9.9"),
        ),
    ];
    for (what, cert) in impostors {
        let (port, seen) = fake_node(cert, &certs.ca_cert_pem).await;
        node_at(&s, port).await;
        let (code, body) = s.get("/api/v1/namespaces/default/pods/p/log").await;
        let seen = seen.await.unwrap();
        assert!(
            seen.handshake.is_err(),
            "{what}: the handshake completed: {seen:?}"
        );
        assert!(
            seen.bytes.is_empty(),
            "{what}: the listener got {:?}",
            seen.bytes
        );
        assert!(code.is_server_error(), "{what}: {code} {body}");
        assert_eq!(body["kind"], "Status", "{what}: {body}");
        let message = body["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("certificate could not be verified"),
            "{what}: {message}"
        );
    }
}

#[tokio::test]
async fn the_pods_node_gets_the_request_from_the_api_servers_identity() {
    let (s, certs) = cluster().await;
    let ca = issuer(&certs);
    let (port, seen) = fake_node(
        serving_cert(Some(&ca), "system:node:n1", "127.0.0.1"),
        &certs.ca_cert_pem,
    )
    .await;
    node_at(&s, port).await;
    let body = s
        .raw(
            http::Method::GET,
            "/api/v1/namespaces/default/pods/p/log?tailLines=3",
            "application/json",
            Vec::new(),
        )
        .await
        .expect_code(StatusCode::OK);
    assert_eq!(body, serde_json::Value::String("hello".into()));
    let seen = seen.await.unwrap();
    assert_eq!(
        seen.client.as_deref(),
        Some("kube-apiserver-kubelet-client")
    );
    let head = String::from_utf8_lossy(&seen.bytes);
    assert!(
        head.starts_with("GET /containerLogs/default/p/c?tailLines=3 HTTP/1.1\r\n"),
        "{head}"
    );
    // The user's own credentials are not passed on.
    assert!(
        !head.to_ascii_lowercase().contains("authorization"),
        "{head}"
    );
}
