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

use super::authn::{AuthnError, TokenAuthenticator};
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

/// Knows two tokens: the API server's user's and alice's.
struct TwoTokens;

#[async_trait]
impl TokenAuthenticator for TwoTokens {
    async fn authenticate(&self, token: &str) -> Result<Option<Caller>, AuthnError> {
        let name = match token {
            "apiserver-token" => "kube-apiserver-kubelet-client",
            "alice-token" => "alice",
            _ => return Ok(None),
        };
        Ok(Some(Caller {
            name: name.into(),
            groups: vec!["system:authenticated".into()],
        }))
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
    start_full(authorizer, Arc::new(TwoTokens), reviewer).await
}

async fn start_full(
    authorizer: Arc<dyn Reviewer>,
    authenticator: Arc<dyn TokenAuthenticator>,
    reviewer: Arc<OneUser>,
) -> Running {
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
        authenticator,
        configz: Arc::new(crate::agent::server::configz::kubelet_config(
            &crate::agent::AgentConfig::new("n1", dir.path()),
            "127.0.0.1",
            10250,
        )),
        node_log_dir: dir.path().join("var-log"),
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
    request_with(port, server_ca, client, method, path, "").await
}

/// [`request`] with `headers` (each line ending in CRLF) added.
async fn request_with(
    port: u16,
    server_ca: &str,
    client: Option<(String, String)>,
    method: &str,
    path: &str,
    headers: &str,
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
    let head =
        format!("{method} {path} HTTP/1.1\r\nHost: n1\r\nConnection: close\r\n{headers}\r\n");
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
        ("/metrics/cadvisor", "metrics"),
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
    for path in ["/metrics/resource", "/metrics/cadvisor"] {
        let answer = node.get_as_api_server(path).await;
        assert_eq!(status_code(&answer), 500, "{answer}");
        assert!(answer.contains("failed to get resource usage"), "{answer}");
    }
    let _ = node.stop.send(true);
}

/// `/healthz`, `/pods` and `/configz` are `get nodes/proxy`, as the
/// kubelet's: refused to others, answered to the allowed caller (this node
/// holds no pods).
#[tokio::test]
async fn health_pods_and_configz_need_nodes_proxy() {
    let node = start().await;
    let other = node.ca.client_cert("someone", &["system:authenticated"]);
    for path in ["/healthz", "/pods", "/configz"] {
        let answer = node.call(None, "GET", path).await;
        assert_eq!(status_code(&answer), 401, "{answer}");
        let answer = node.call(Some(other.clone()), "GET", path).await;
        assert_forbidden(
            &answer,
            "user=someone, verb=get, resource=nodes, subresource(s)=[proxy]",
        );
    }
    let answer = node.get_as_api_server("/healthz").await;
    assert_eq!(status_code(&answer), 200, "{answer}");
    assert!(answer.ends_with("\r\n\r\nok"), "{answer:?}");
    let answer = node.get_as_api_server("/pods").await;
    assert_eq!(status_code(&answer), 200, "{answer}");
    let (_, body) = answer.split_once("\r\n\r\n").expect("a body");
    let list: serde_json::Value = serde_json::from_str(body).expect("json");
    assert_eq!(list["kind"], "PodList");
    assert_eq!(list["items"], serde_json::json!([]));
    let answer = node.get_as_api_server("/configz").await;
    assert_eq!(status_code(&answer), 200, "{answer}");
    let (_, body) = answer.split_once("\r\n\r\n").expect("a body");
    let config: serde_json::Value = serde_json::from_str(body).expect("json");
    assert_eq!(config["kubeletconfig"]["maxPods"], 110, "{config}");
    assert_eq!(config["kubeletconfig"]["syncFrequency"], "1m0s", "{config}");
    node.assert_api_server_asked("proxy");
    let _ = node.stop.send(true);
}

/// `/logs/` is `get nodes/log`: refused to others; the allowed caller gets
/// the host log directory's listing and its files, and nothing outside it.
#[tokio::test]
async fn host_logs_need_nodes_log_and_stay_inside_the_log_directory() {
    let node = start().await;
    let logs = node.dir.join("var-log");
    std::fs::create_dir_all(logs.join("apt")).unwrap();
    std::fs::write(logs.join("syslog"), "boot ok\n").unwrap();
    std::fs::write(node.dir.join("secret"), "not a log").unwrap();
    std::os::unix::fs::symlink(node.dir.join("secret"), logs.join("escape")).unwrap();
    let other = node.ca.client_cert("someone", &["system:authenticated"]);
    let answer = node.call(Some(other), "GET", "/logs/syslog").await;
    assert_forbidden(
        &answer,
        "user=someone, verb=get, resource=nodes, subresource(s)=[log]",
    );
    let answer = node.get_as_api_server("/logs/").await;
    assert_eq!(status_code(&answer), 200, "{answer}");
    assert!(answer.contains("<a href=\"syslog\">syslog</a>"), "{answer}");
    assert!(answer.contains("<a href=\"apt/\">apt/</a>"), "{answer}");
    let answer = node.get_as_api_server("/logs/syslog").await;
    assert_eq!(status_code(&answer), 200, "{answer}");
    assert!(answer.contains("\r\nboot ok\n"), "{answer:?}");
    let answer = node.get_as_api_server("/logs/apt").await;
    assert_eq!(status_code(&answer), 301, "{answer}");
    std::fs::write(logs.join("a b.log"), "spaced\n").unwrap();
    let answer = node.get_as_api_server("/logs/a%20b.log").await;
    assert!(answer.contains("\r\nspaced\n"), "{answer:?}");
    for outside in ["/logs/escape", "/logs/../secret", "/logs/%2e%2e/secret"] {
        let answer = node.get_as_api_server(outside).await;
        assert_eq!(status_code(&answer), 404, "{outside}: {answer}");
        assert!(!answer.contains("not a log"), "{outside}: {answer}");
    }
    node.assert_api_server_asked("log");
    let _ = node.stop.send(true);
}

/// A caller without a certificate may present a bearer token, as a
/// monitoring agent's service account does to a kubelet: a token the API
/// server does not accept is 401, one naming a user not allowed is 403, and
/// the allowed user's reaches the handler.
#[tokio::test]
async fn bearer_tokens_are_judged_by_token_reviews() {
    let node = start().await;
    let with_token = |token: &str| format!("Authorization: Bearer {token}\r\n");
    let call = |token: String| {
        let ca = node.ca.cert_pem.clone();
        let port = node.port;
        async move {
            request_with(port, &ca, None, "GET", "/metrics", &token)
                .await
                .unwrap()
        }
    };
    let answer = call(with_token("forged")).await;
    assert_eq!(status_code(&answer), 401, "{answer}");
    let answer = call("Authorization: Basic YWxpY2U6cHc=\r\n".into()).await;
    assert_eq!(status_code(&answer), 401, "{answer}");
    let answer = call(with_token("alice-token")).await;
    assert_forbidden(
        &answer,
        "user=alice, verb=get, resource=nodes, subresource(s)=[metrics]",
    );
    let answer = call(with_token("apiserver-token")).await;
    assert_eq!(status_code(&answer), 200, "{answer}");
    node.assert_api_server_asked("metrics");
    let _ = node.stop.send(true);
}

/// The production path: a service account's token is reviewed by the API
/// server, and what the account may do is its RBAC: nothing at first,
/// `get nodes/metrics` once bound to a role that grants it.
#[tokio::test]
async fn a_service_account_token_is_reviewed_and_authorized_by_the_api_server() {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    use kube::Api;
    use kube::api::PostParams;
    use skiff_testkit::{TestCluster, UserInfo};

    use super::authn::{CachedTokens, TokenReviewer};
    use super::authz::SubjectAccessReviewer;

    let cluster = TestCluster::start().await;
    let admin = cluster.client.clone();
    let node_client = cluster.client_as(UserInfo::new(
        "system:node:n1",
        ["system:nodes".to_string()],
    ));
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), "default");
    let account: ServiceAccount =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "scraper"}})).unwrap();
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    let request: TokenRequest =
        serde_json::from_value(serde_json::json!({"spec": {"audiences": []}})).unwrap();
    let token = accounts
        .create_subresource::<TokenRequest, TokenRequest>(
            "token",
            "scraper",
            &PostParams::default(),
            &request,
        )
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let unused = Arc::new(OneUser {
        allowed: "",
        asked: Mutex::new(Vec::new()),
    });
    let node = start_full(
        Arc::new(SubjectAccessReviewer::new(node_client.clone(), "n1")),
        Arc::new(CachedTokens::new(Arc::new(TokenReviewer::new(node_client)))),
        unused,
    )
    .await;
    let get = |token: String| {
        let ca = node.ca.cert_pem.clone();
        let port = node.port;
        async move {
            let header = format!("Authorization: Bearer {token}\r\n");
            request_with(port, &ca, None, "GET", "/metrics", &header)
                .await
                .unwrap()
        }
    };
    let answer = get(format!("{token}x")).await;
    assert_eq!(status_code(&answer), 401, "a tampered token: {answer}");
    let answer = get(token.clone()).await;
    assert_forbidden(
        &answer,
        "user=system:serviceaccount:default:scraper, verb=get, resource=nodes, subresource(s)=[metrics]",
    );
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(admin.clone());
    let role = serde_json::from_value(serde_json::json!({"metadata": {"name": "scrape"},
        "rules": [{"apiGroups": [""], "resources": ["nodes/metrics"], "verbs": ["get"]}]}))
    .unwrap();
    roles.create(&PostParams::default(), &role).await.unwrap();
    let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = Api::all(admin);
    let binding = serde_json::from_value(serde_json::json!({"metadata": {"name": "scrape"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "scrape"},
        "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": "default"}]}))
    .unwrap();
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let answer = get(token).await;
    assert_eq!(status_code(&answer), 200, "{answer}");
    let _ = node.stop.send(true);
}
