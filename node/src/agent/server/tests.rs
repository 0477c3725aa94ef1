//! The node server from an attacker's side, over real TLS on loopback:
//! no client certificate, a certificate from another CA, and a user the
//! authorizer denies are all refused before any handler runs; an allowed
//! caller reaches the handlers, and the authorizer is asked with the
//! kubelet's attributes.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::authz::{AuthzError, Caller, NodeAction, Reviewer};
use super::{NodeState, serve, tls};
use crate::agent::identity::pki::{self, CertSlot};
use crate::agent::identity::serving_cert;
use crate::agent::identity::test_pki::{CaSigner, TestCa};

/// Allows one user, denies everyone else, and remembers what it was asked.
struct OneUser {
    allowed: &'static str,
    asked: Mutex<Vec<(String, NodeAction)>>,
}

#[async_trait]
impl Reviewer for OneUser {
    async fn review(&self, caller: &Caller, action: &NodeAction) -> Result<bool, AuthzError> {
        self.asked
            .lock()
            .unwrap()
            .push((caller.name.clone(), action.clone()));
        Ok(caller.name == self.allowed)
    }
}

struct Running {
    port: u16,
    slot: Arc<CertSlot>,
    dir: std::path::PathBuf,
    ca: Arc<TestCa>,
    reviewer: Arc<OneUser>,
    stop: watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

impl Running {
    /// One request to this node over TLS trusting its CA, as `client` (a
    /// certificate and key, or none); the raw answer.
    async fn call(&self, client: Option<(String, String)>, method: &str, path: &str) -> String {
        request(self.port, &self.ca.cert_pem, client, method, path)
            .await
            .unwrap()
    }

    /// A GET as the user the node's API server client certificate names.
    async fn get_as_api_server(&self, path: &str) -> String {
        let admin = self.ca.client_cert("kube-apiserver-kubelet-client", &[]);
        self.call(Some(admin), "GET", path).await
    }

    /// Asserts the last review was the API server's user asking to `get`
    /// `subresource`: what the node asks before serving it.
    fn assert_api_server_asked(&self, subresource: &str) {
        let (user, action) = self.reviewer.asked.lock().unwrap().last().cloned().unwrap();
        assert_eq!(user, "kube-apiserver-kubelet-client");
        assert_eq!((action.verb, action.subresource), ("get", subresource));
    }
}

/// Asserts `answer` is the node's 403 naming the caller's attributes.
fn assert_forbidden(answer: &str, attributes: &str) {
    assert_eq!(status_code(answer), 403, "{answer}");
    assert!(
        answer.contains(&format!("Forbidden ({attributes})")),
        "{answer}"
    );
}

async fn start() -> Running {
    let reviewer = Arc::new(OneUser {
        allowed: "kube-apiserver-kubelet-client",
        asked: Mutex::new(Vec::new()),
    });
    start_with(reviewer.clone(), reviewer).await
}

async fn start_with(authorizer: Arc<dyn Reviewer>, reviewer: Arc<OneUser>) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("cluster-ca");
    let signer: Arc<dyn serving_cert::ServingCertSigner> = Arc::new(CaSigner(ca.clone()));
    let cert = serving_cert::ensure(
        &dir.path().join("pki"),
        "n1",
        &["127.0.0.1".to_string(), "n1".to_string()],
        &ca.cert_pem,
        &signer,
    )
    .await
    .unwrap();
    let slot = CertSlot::new(&cert).unwrap();
    let config = tls::server_config(slot.clone(), &ca.cert_pem).unwrap();
    // Never reached by these requests (no pod exists); connects lazily.
    let runtime: Arc<dyn crate::runtime::Runtime> = Arc::new(
        crate::CriRuntime::new(
            &format!("unix://{}/none.sock", dir.path().display()),
            crate::CriTimeouts::default(),
        )
        .unwrap(),
    );
    let state = NodeState {
        runtime: runtime.clone(),
        stats: Arc::new(crate::agent::node::stats::StatsProvider::new(runtime, "n1")),
        pods: Arc::new(skiff_informer::Cache::new()),
        log_root: dir.path().join("logs"),
        authorizer,
    };
    let listener = super::bind("127.0.0.1".parse().unwrap(), 0).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (stop, stop_rx) = watch::channel(false);
    tokio::spawn(serve(listener, config, state, stop_rx));
    Running {
        port,
        slot,
        dir: dir.path().to_path_buf(),
        ca,
        reviewer,
        stop,
        _dir: dir,
    }
}

/// One request over TLS; the raw answer, or the error that ended the
/// exchange (handshake or read).
async fn request(
    port: u16,
    server_ca: &str,
    client: Option<(String, String)>,
    method: &str,
    path: &str,
) -> Result<String, String> {
    let roots = pki::root_store(server_ca).unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let config = match client {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                pki::pem_certs(&cert).unwrap(),
                rustls_pemfile::private_key(&mut key.as_bytes())
                    .unwrap()
                    .unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let mut stream = connector
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let head = format!("{method} {path} HTTP/1.1\r\nHost: n1\r\nConnection: close\r\n\r\n");
    stream
        .write_all(head.as_bytes())
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .await
        .map_err(|e| format!("read: {e}"))?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

fn status_code(answer: &str) -> u16 {
    answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"))
}

#[tokio::test]
async fn callers_without_a_valid_allowed_certificate_are_refused() {
    let node = start().await;
    let logs = "/containerLogs/default/missing/main";

    // No client certificate: the handshake completes, the request is 401.
    let answer = node.call(None, "GET", logs).await;
    assert_eq!(status_code(&answer), 401, "{answer}");
    assert!(answer.contains("\"reason\":\"Unauthorized\""), "{answer}");

    // A certificate from another CA, even naming the allowed user: the
    // connection fails and no HTTP answer comes back.
    let rogue = TestCa::new("rogue-ca");
    let forged = rogue.client_cert("kube-apiserver-kubelet-client", &[]);
    let refused = request(node.port, &node.ca.cert_pem, Some(forged), "GET", logs).await;
    match refused {
        Err(_) => {}
        Ok(answer) => assert!(answer.is_empty(), "a forged certificate got {answer:?}"),
    }

    // A valid certificate whose user is not allowed: 403 with the
    // kubelet's attributes.
    let other = node.ca.client_cert(
        "system:serviceaccount:default:sneaky",
        &["system:serviceaccounts"],
    );
    let answer = node.call(Some(other), "POST", "/exec/default/p/c").await;
    assert_forbidden(
        &answer,
        "user=system:serviceaccount:default:sneaky, verb=create, resource=nodes, subresource(s)=[proxy]",
    );

    // None of the refused callers reached a handler; the unknown-CA one
    // was not even put to the authorizer.
    let asked: Vec<String> = node
        .reviewer
        .asked
        .lock()
        .unwrap()
        .iter()
        .map(|(u, a)| format!("{u} {} {}", a.verb, a.subresource))
        .collect();
    assert_eq!(asked, ["system:serviceaccount:default:sneaky create proxy"]);

    // The allowed user gets through to the handler (no such pod: 404).
    let answer = node.get_as_api_server(logs).await;
    assert_eq!(status_code(&answer), 404, "{answer}");
    node.assert_api_server_asked("proxy");
    let _ = node.stop.send(true);
}

#[tokio::test]
async fn metrics_are_served_to_callers_allowed_nodes_metrics() {
    let node = start().await;
    let answer = node.call(None, "GET", "/metrics").await;
    assert_eq!(status_code(&answer), 401, "{answer}");
    let other = node.ca.client_cert("alice", &["system:authenticated"]);
    let answer = node.call(Some(other), "GET", "/metrics").await;
    assert_forbidden(
        &answer,
        "user=alice, verb=get, resource=nodes, subresource(s)=[metrics]",
    );

    let answer = node.get_as_api_server("/metrics").await;
    assert_eq!(status_code(&answer), 200, "{answer}");
    assert!(answer.contains("text/plain; version=0.0.4"), "{answer}");
    let (_, body) = answer.split_once("\r\n\r\n").expect("a body");
    let samples = skiff_common::metrics::exposition::parse(body).expect("exposition text");
    for name in [
        "kubelet_running_pods",
        "kubelet_pleg_relist_duration_seconds_count",
        "kubelet_pod_start_duration_seconds_count",
    ] {
        assert!(
            samples.iter().any(|s| s.name == name),
            "{name} missing: {body}"
        );
    }
    // Only the kubelet's own metrics: the rest of the process is the API
    // server's to show.
    assert!(
        samples.iter().all(|s| s.name.starts_with("kubelet_")),
        "{body}"
    );
    node.assert_api_server_asked("metrics");
    let _ = node.stop.send(true);
}

#[tokio::test]
async fn the_server_proves_the_nodes_identity() {
    let node = start().await;
    // A client that trusts only another CA refuses the node's certificate.
    let rogue = TestCa::new("rogue-ca");
    let err = request(node.port, &rogue.cert_pem, None, "GET", "/stats")
        .await
        .unwrap_err();
    assert!(err.starts_with("handshake"), "{err}");
    let _ = node.stop.send(true);
}

/// The leaf certificate (DER) a fresh connection is served.
async fn presented(port: u16, ca_pem: &str) -> Vec<u8> {
    let roots = pki::root_store(ca_pem).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let stream = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .unwrap();
    stream.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

#[tokio::test]
async fn a_renewed_certificate_is_presented_without_a_restart() {
    let node = start().await;
    let before = presented(node.port, &node.ca.cert_pem).await;
    let signer: Arc<dyn serving_cert::ServingCertSigner> = Arc::new(CaSigner(node.ca.clone()));
    // The node gained an address: a new certificate, swapped in.
    let renewed = serving_cert::ensure(
        &node.dir.join("pki"),
        "n1",
        &[
            "127.0.0.1".to_string(),
            "127.0.0.2".to_string(),
            "n1".to_string(),
        ],
        &node.ca.cert_pem,
        &signer,
    )
    .await
    .unwrap();
    node.slot.replace(&renewed).unwrap();
    let after = presented(node.port, &node.ca.cert_pem).await;
    assert_ne!(before, after);
    assert_eq!(
        after,
        pki::pem_certs(&renewed.cert_pem).unwrap()[0].to_vec()
    );
    let _ = node.stop.send(true);
}

/// The production reviewer: a SubjectAccessReview through the node's own
/// client. An unreachable API server fails closed (500, no handler).
#[tokio::test]
async fn decisions_come_from_subject_access_reviews_and_fail_closed() {
    use skiff_testkit::{TestCluster, UserInfo};

    use super::authz::{CachedReviewer, SubjectAccessReviewer};

    let cluster = TestCluster::start().await;
    let node_client = cluster.client_as(UserInfo::new(
        "system:node:n1",
        ["system:nodes".to_string()],
    ));
    let unused = Arc::new(OneUser {
        allowed: "",
        asked: Mutex::new(Vec::new()),
    });
    let node = start_with(
        Arc::new(CachedReviewer::new(Arc::new(SubjectAccessReviewer::new(
            node_client,
            "n1",
        )))),
        unused.clone(),
    )
    .await;
    let answer = node
        .get_as_api_server("/containerLogs/default/missing/main")
        .await;
    // Allowed by the API server: the handler answers (no such pod).
    assert_eq!(status_code(&answer), 404, "{answer}");
    let _ = node.stop.send(true);

    // A node whose API server cannot be reached lets nothing through.
    let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
    let dead = kube::Client::try_from(config).unwrap();
    let node = start_with(Arc::new(SubjectAccessReviewer::new(dead, "n1")), unused).await;
    let answer = node
        .get_as_api_server("/containerLogs/default/missing/main")
        .await;
    assert_eq!(status_code(&answer), 500, "{answer}");
    assert!(
        answer.contains("Authorization error (user=kube-apiserver-kubelet-client, verb=get, resource=nodes, subresource(s)=[proxy])"),
        "{answer}"
    );
    let _ = node.stop.send(true);
}

/// `/stats/summary` and `/metrics/resource` are asked as `get nodes/stats`
/// and `get nodes/metrics`: a caller allowed neither gets a 403 naming
/// them and no figures.
#[tokio::test]
async fn resource_usage_needs_nodes_stats_or_metrics() {
    let node = start().await;
    let other = node.ca.client_cert("someone", &["system:authenticated"]);
    for (path, subresource) in [
        ("/stats/summary", "stats"),
        ("/metrics/resource", "metrics"),
    ] {
        let answer = node.call(Some(other.clone()), "GET", path).await;
        assert_forbidden(
            &answer,
            &format!("user=someone, verb=get, resource=nodes, subresource(s)=[{subresource}]"),
        );
        assert!(!answer.contains("node_cpu"), "{answer}");
    }
    // The allowed caller reaches the collector (whose runtime is absent
    // here: a 500 saying so, not a 403).
    let answer = node.get_as_api_server("/metrics/resource").await;
    assert_eq!(status_code(&answer), 500, "{answer}");
    assert!(answer.contains("failed to get resource usage"), "{answer}");
    let _ = node.stop.send(true);
}
