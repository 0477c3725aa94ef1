//! Kubelet serving certificates for remote nodes, from the attacker's side:
//! a node gets a certificate for its own name and addresses; a node asking
//! for another node's name or an address that is not its own, and a
//! service account claiming to be a node, are left pending and unsigned.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::PostParams;
use rcgen::{CertificateParams, DnType, KeyPair};
use serde_json::json;
use skiff_apiserver::authn::UserInfo;
use skiff_apiserver::tls::ClusterCerts;
use skiff_controllers::Context;
use skiff_controllers::certificates::kubelet_serving::ClusterSigner;
use tokio::sync::watch;

use super::support::{TestCluster, eventually, merge_patch_status, present_after_a_moment};

const SERVING_USAGES: &[&str] = &["digital signature", "key encipherment", "server auth"];

fn request_pem(cn: &str, names: &[&str]) -> String {
    let key = KeyPair::generate().unwrap();
    // rcgen's constructor names IP addresses as IP names, the rest as DNS.
    let mut params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    params
        .distinguished_name
        .push(DnType::OrganizationName, "system:nodes");
    params.serialize_request(&key).unwrap().pem().unwrap()
}

/// Creates CSR `name` as `client`: a serving certificate for node `node`
/// with `names`, claiming to come from `spoofed_user` when given.
async fn ask(
    client: &kube::Client,
    name: &str,
    node: &str,
    names: &[&str],
    spoofed_user: Option<&str>,
) {
    let pem = request_pem(&format!("system:node:{node}"), names);
    let csr = CertificateSigningRequest {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(pem.into_bytes()),
            signer_name: "kubernetes.io/kubelet-serving".into(),
            usages: Some(SERVING_USAGES.iter().map(|u| u.to_string()).collect()),
            username: spoofed_user.map(String::from),
            groups: spoofed_user.map(|_| vec!["system:nodes".to_string()]),
            ..Default::default()
        },
        status: None,
    };
    Api::<CertificateSigningRequest>::all(client.clone())
        .create(&PostParams::default(), &csr)
        .await
        .unwrap();
}

/// The certificate controller on `cluster`, signing with a CA made for the
/// test, and the informers it reads; it runs until the sender says stop.
fn start_signing(cluster: &TestCluster) -> (watch::Sender<bool>, tokio::task::JoinHandle<()>) {
    // The signer keeps the CA in memory: its directory may go once loaded.
    let dir = tempfile::tempdir().unwrap();
    let certs = ClusterCerts::load_or_create(dir.path(), &["localhost".into()]).unwrap();
    let (stop_tx, stop) = watch::channel(false);
    let mut ctx = Context::new(cluster.client.clone(), cluster.factory.clone());
    ctx.cluster_signer = Some(Arc::new(
        ClusterSigner::from_pem(&certs.ca_cert_pem, &certs.ca_key_pem).unwrap(),
    ));
    let controller = tokio::spawn(skiff_controllers::certificates::controller::run(ctx, stop));
    cluster.factory.start().unwrap();
    (stop_tx, controller)
}

fn node_client(cluster: &TestCluster, node: &str) -> kube::Client {
    cluster.client_as(UserInfo::new(
        format!("system:node:{node}"),
        ["system:nodes".to_string()],
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_get_certificates_for_their_own_addresses_only() {
    let cluster = TestCluster::start(Some(&[])).await;
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    for (name, ip) in [("n1", "10.0.0.5"), ("n2", "10.0.0.6")] {
        let node: Node = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
        let status = json!({"status": {"addresses": [
            {"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}]}});
        merge_patch_status(&nodes, name, status).await;
    }

    let n1 = node_client(&cluster, "n1");
    // Impostors first, so the controller has passed over them by the time
    // the genuine request is signed.
    ask(&n1, "n1-as-n2", "n2", &["10.0.0.6"], None).await;
    ask(&n1, "n1-foreign-ip", "n1", &["10.0.0.5", "10.0.0.99"], None).await;
    // An account allowed to ask for certificates (as upstream's
    // node-bootstrapper role allows) still cannot ask as a node.
    let grant: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "sneaky-csr"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node-bootstrapper"},
        "subjects": [{"kind": "ServiceAccount", "name": "sneaky", "namespace": "default"}]
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(cluster.client.clone())
        .create(&PostParams::default(), &grant)
        .await
        .unwrap();
    let sa = cluster.client_as(UserInfo::service_account("default", "sneaky"));
    ask(&sa, "sa-as-n1", "n1", &["10.0.0.5"], Some("system:node:n1")).await;
    ask(&n1, "n1-genuine", "n1", &["10.0.0.5", "n1"], None).await;

    let csrs: Api<CertificateSigningRequest> = Api::all(cluster.client.clone());
    // The API server recorded the real requester, not the claimed one.
    let spoofed = csrs.get("sa-as-n1").await.unwrap();
    assert_eq!(
        spoofed.spec.username.as_deref(),
        Some("system:serviceaccount:default:sneaky")
    );

    let (stop_tx, controller) = start_signing(&cluster);

    let signed = eventually(Duration::from_secs(20), "n1's certificate", || {
        let csrs = csrs.clone();
        async move {
            let csr = csrs.get("n1-genuine").await.ok()?;
            csr.status?.certificate.filter(|c| !c.0.is_empty())
        }
    })
    .await;
    let pem = String::from_utf8(signed.0).unwrap();
    let der = rustls_pemfile_der(&pem);
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    let cn = cert.subject().iter_common_name().next().unwrap();
    assert_eq!(cn.as_str().unwrap(), "system:node:n1");
    assert!(
        cert.issuer().to_string().contains("skiff-ca"),
        "{}",
        cert.issuer()
    );

    for impostor in ["n1-as-n2", "n1-foreign-ip", "sa-as-n1"] {
        let csr = csrs.get(impostor).await.unwrap();
        let status = csr.status.unwrap_or_default();
        assert!(status.certificate.is_none(), "{impostor} was signed");
        assert!(
            !status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Approved"),
            "{impostor} was approved"
        );
    }
    let _ = stop_tx.send(true);
    let _ = controller.await;
    cluster.shutdown().await;
}

/// The DER of the first certificate in `pem`.
fn rustls_pemfile_der(pem: &str) -> Vec<u8> {
    use base64::Engine as _;
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .unwrap()
}

/// A node client request (`CN=system:node:<node>`, `O=system:nodes`, no
/// names) from `key`.
fn client_request_pem(cn: &str, orgs: &[&str], key: &KeyPair) -> String {
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, cn);
    for o in orgs {
        params.distinguished_name.push(DnType::OrganizationName, *o);
    }
    params.serialize_request(key).unwrap().pem().unwrap()
}

const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
const CLIENT_USAGES: &[&str] = &["digital signature", "key encipherment", "client auth"];

fn client_csr(
    name: &str,
    pem: String,
    signer: &str,
    usages: &[&str],
    password: Option<&str>,
) -> CertificateSigningRequest {
    CertificateSigningRequest {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            annotations: password.map(|p| {
                [("skiff.io/node-password".to_string(), p.to_string())]
                    .into_iter()
                    .collect()
            }),
            ..Default::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(pem.into_bytes()),
            signer_name: signer.into(),
            usages: Some(usages.iter().map(|u| u.to_string()).collect()),
            expiration_seconds: Some(3600),
            ..Default::default()
        },
        status: None,
    }
}

/// A kubelet client CSR `name` for node `node` (`CN=system:node:<node>`,
/// `O=system:nodes`, the kubelet client signer and usages) from `key`, with
/// the node password annotation when `password` is given.
fn node_csr(
    name: &str,
    node: &str,
    key: &KeyPair,
    password: Option<&str>,
) -> CertificateSigningRequest {
    client_csr(
        name,
        client_request_pem(&format!("system:node:{node}"), &["system:nodes"], key),
        CLIENT_SIGNER,
        CLIENT_USAGES,
        password,
    )
}

fn bootstrapper(cluster: &TestCluster, id: &str) -> kube::Client {
    cluster.client_as(UserInfo::new(
        format!("system:bootstrap:{id}"),
        ["system:bootstrappers".to_string()],
    ))
}

fn state(csr: &CertificateSigningRequest) -> (bool, bool) {
    let status = csr.status.clone().unwrap_or_default();
    let approved = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Approved" && c.status == "True");
    (
        approved,
        status.certificate.is_some_and(|c| !c.0.is_empty()),
    )
}

/// The kubelet TLS bootstrap from the attacker's side: a bootstrap identity
/// gets a node client certificate (and the node renews its own), while
/// other signers, wrong subjects or usages, identities without the
/// `nodeclient` permission and a node asking for another node are never
/// approved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrappers_get_node_client_certificates_and_nobody_else() {
    let cluster = TestCluster::start(Some(&[])).await;
    let csrs: Api<CertificateSigningRequest> = Api::all(cluster.client.clone());
    let boot = Api::<CertificateSigningRequest>::all(bootstrapper(&cluster, "abcdef"));
    let key = KeyPair::generate().unwrap();
    let pp = PostParams::default();

    // Refused ones first, so the controller has passed over them when the
    // genuine ones are signed.
    let wrong = [
        (
            "other-signer",
            client_csr(
                "other-signer",
                client_request_pem("system:node:b1", &["system:nodes"], &key),
                "kubernetes.io/kube-apiserver-client",
                CLIENT_USAGES,
                Some("pw-b1"),
            ),
        ),
        (
            "not-a-node",
            client_csr(
                "not-a-node",
                client_request_pem("admin", &["system:nodes"], &key),
                CLIENT_SIGNER,
                CLIENT_USAGES,
                Some("pw"),
            ),
        ),
        (
            "masters-group",
            client_csr(
                "masters-group",
                client_request_pem("system:node:b2", &["system:nodes", "system:masters"], &key),
                CLIENT_SIGNER,
                CLIENT_USAGES,
                Some("pw-b2"),
            ),
        ),
        (
            "server-usage",
            client_csr(
                "server-usage",
                client_request_pem("system:node:b3", &["system:nodes"], &key),
                CLIENT_SIGNER,
                &[
                    "digital signature",
                    "key encipherment",
                    "client auth",
                    "server auth",
                ],
                Some("pw-b3"),
            ),
        ),
    ];
    for (_, csr) in &wrong {
        boot.create(&pp, csr).await.unwrap();
    }
    // An ordinary user who may create requests (node-bootstrapper) but not
    // nodeclient.
    let grant: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "alice-csr"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node-bootstrapper"},
        "subjects": [{"kind": "User", "name": "alice"}]
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(cluster.client.clone())
        .create(&pp, &grant)
        .await
        .unwrap();
    let alice = cluster.client_as(UserInfo::new("alice", Vec::<String>::new()));
    Api::<CertificateSigningRequest>::all(alice)
        .create(&pp, &node_csr("alice-as-node", "b4", &key, Some("pw-b4")))
        .await
        .unwrap();
    // A node asking for another node's client certificate: it is not
    // selfnodeclient, and nodes are not allowed nodeclient.
    Api::<CertificateSigningRequest>::all(node_client(&cluster, "n9"))
        .create(&pp, &node_csr("n9-as-b5", "b5", &key, Some("pw-b5")))
        .await
        .unwrap();
    // The genuine bootstrap request, and b1 renewing its own certificate.
    boot.create(&pp, &node_csr("b1-bootstrap", "b1", &key, Some("pw-b1")))
        .await
        .unwrap();
    Api::<CertificateSigningRequest>::all(node_client(&cluster, "b1"))
        .create(&pp, &node_csr("b1-renewal", "b1", &key, None))
        .await
        .unwrap();

    let (stop_tx, controller) = start_signing(&cluster);

    for name in ["b1-bootstrap", "b1-renewal"] {
        let signed = eventually(Duration::from_secs(20), name, || {
            let csrs = csrs.clone();
            async move {
                let csr = csrs.get(name).await.ok()?;
                csr.status?.certificate.filter(|c| !c.0.is_empty())
            }
        })
        .await;
        let der = rustls_pemfile_der(&String::from_utf8(signed.0).unwrap());
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        let subject = cert.subject();
        assert_eq!(
            subject.iter_common_name().next().unwrap().as_str().unwrap(),
            "system:node:b1"
        );
        assert_eq!(
            subject
                .iter_organization()
                .map(|o| o.as_str().unwrap())
                .collect::<Vec<_>>(),
            ["system:nodes"]
        );
        let eku = cert.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.client_auth && !eku.server_auth, "{name}");
        // The asked-for lifetime (an hour, plus the backdating).
        let v = cert.validity();
        assert!(v.not_after.timestamp() - v.not_before.timestamp() <= 3600 + 600);
    }
    // The password never reached the stored request.
    let stored = csrs.get("b1-bootstrap").await.unwrap();
    assert!(
        !stored
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key("skiff.io/node-password")
    );
    for name in wrong
        .iter()
        .map(|(n, _)| *n)
        .chain(["alice-as-node", "n9-as-b5"])
    {
        let csr = csrs.get(name).await.unwrap();
        assert_eq!(state(&csr), (false, false), "{name} was approved or signed");
    }
    let _ = stop_tx.send(true);
    let _ = controller.await;
    cluster.shutdown().await;
}

/// The node password: the first bootstrap request for a name records it;
/// another host (same shared token, another password, or none) is refused
/// at once with a clear message; the node itself renews without one.
#[tokio::test]
async fn a_second_host_cannot_take_over_a_node_name() {
    let cluster = TestCluster::start(Some(&[])).await;
    let key = KeyPair::generate().unwrap();
    let pp = PostParams::default();
    let boot = Api::<CertificateSigningRequest>::all(bootstrapper(&cluster, "abcdef"));
    boot.create(&pp, &node_csr("first", "edge-1", &key, Some("host-a")))
        .await
        .unwrap();
    // The same host again (a restart before its certificate arrived).
    boot.create(&pp, &node_csr("again", "edge-1", &key, Some("host-a")))
        .await
        .unwrap();
    for (name, password) in [("other-host", Some("host-b")), ("no-password", None)] {
        let err = boot
            .create(&pp, &node_csr(name, "edge-1", &key, password))
            .await
            .expect_err(name);
        let kube::Error::Api(status) = err else {
            panic!("{name}: {err}");
        };
        assert_eq!(status.code, 403, "{name}");
        assert!(status.message.contains("edge-1"), "{}", status.message);
        assert!(
            status.message.contains("node password"),
            "{}",
            status.message
        );
    }
    // A different bootstrap token changes nothing: the password decides.
    let err = Api::<CertificateSigningRequest>::all(bootstrapper(&cluster, "zzzzzz"))
        .create(
            &pp,
            &node_csr("other-token", "edge-1", &key, Some("host-b")),
        )
        .await
        .expect_err("another token, another password");
    assert!(err.to_string().contains("another node password"), "{err}");
    // The node itself renews with its certificate, no password.
    Api::<CertificateSigningRequest>::all(node_client(&cluster, "edge-1"))
        .create(&pp, &node_csr("renewal", "edge-1", &key, None))
        .await
        .unwrap();
    // Only a hash is kept, in kube-system.
    let secret = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(
        cluster.client.clone(),
        "kube-system",
    )
    .get("edge-1.node-password.skiff")
    .await
    .unwrap();
    let hash = String::from_utf8(secret.data.unwrap()["hash"].0.clone()).unwrap();
    assert!(
        hash.starts_with("sha256:") && !hash.contains("host-a"),
        "{hash}"
    );
    cluster.shutdown().await;
}

/// k3s's node-password cleanup, from a re-provisioned host's side: while
/// Node edge-2 exists another host stays refused; once an administrator
/// deletes the Node, its password Secret goes with it (deleted by the
/// controller acting as its own service account) and a host with another
/// password can register under the name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_node_frees_its_name_for_a_new_host() {
    use k8s_openapi::api::core::v1::Secret;
    use skiff_controllers::{ControllerManager, node_password};
    let cluster = TestCluster::start(Some(&[])).await;
    let account = cluster.client_as(UserInfo::new(
        format!(
            "system:serviceaccount:kube-system:{}",
            node_password::ACCOUNT
        ),
        [
            "system:serviceaccounts".to_string(),
            "system:serviceaccounts:kube-system".to_string(),
        ],
    ));
    let ctx = Context::new(cluster.client.clone(), cluster.factory.clone())
        .with_accounts(Arc::new(move |_: &str| account.clone()));
    let mut manager = ControllerManager::new(ctx);
    manager.register("node-password", node_password::ACCOUNT, node_password::run);
    let (stop_tx, stop) = watch::channel(false);
    let controller = tokio::spawn(manager.run(stop));

    let key = KeyPair::generate().unwrap();
    let pp = PostParams::default();
    let boot = Api::<CertificateSigningRequest>::all(bootstrapper(&cluster, "abcdef"));
    let join = |name: &'static str, password: &'static str| {
        let boot = boot.clone();
        let csr = node_csr(name, "edge-2", &key, Some(password));
        async move { boot.create(&PostParams::default(), &csr).await }
    };
    join("host-a-join", "host-a").await.unwrap();
    let nodes = Api::<Node>::all(cluster.client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "edge-2"}})).unwrap();
    nodes.create(&pp, &node).await.unwrap();
    // Another Node's deletion leaves edge-2's password alone.
    let other: Node = serde_json::from_value(json!({"metadata": {"name": "edge-3"}})).unwrap();
    nodes.create(&pp, &other).await.unwrap();
    nodes.delete("edge-3", &Default::default()).await.unwrap();
    let secrets = Api::<Secret>::namespaced(cluster.client.clone(), "kube-system");
    assert!(present_after_a_moment(&secrets, "edge-2.node-password.skiff").await);
    let err = join("host-b-early", "host-b")
        .await
        .expect_err("the node exists");
    assert!(err.to_string().contains("another node password"), "{err}");

    nodes.delete("edge-2", &Default::default()).await.unwrap();
    super::support::eventually_gone(
        Duration::from_secs(20),
        &secrets,
        "edge-2.node-password.skiff",
    )
    .await;
    join("host-b-join", "host-b").await.unwrap();
    // The new host's password now guards the name: the old one is refused.
    let err = join("host-a-back", "host-a")
        .await
        .expect_err("the name moved");
    assert!(err.to_string().contains("another node password"), "{err}");
    let _ = stop_tx.send(true);
    let _ = controller.await;
    cluster.shutdown().await;
}

/// The token cleaner deletes expired bootstrap tokens and leaves live ones
/// (and other Secrets) alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_cleaner_deletes_expired_tokens_only() {
    use k8s_openapi::api::core::v1::Secret;
    let cluster = TestCluster::start(Some(&[])).await;
    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), "kube-system");
    let token = |name: &str, expiration: &str, kind: &str| -> Secret {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "kube-system"},
            "type": kind,
            "stringData": {"token-id": "x", "token-secret": "y", "expiration": expiration}
        }))
        .unwrap()
    };
    let pp = PostParams::default();
    for secret in [
        token(
            "bootstrap-token-old001",
            "2001-01-01T00:00:00Z",
            "bootstrap.kubernetes.io/token",
        ),
        token(
            "bootstrap-token-new001",
            "2099-01-01T00:00:00Z",
            "bootstrap.kubernetes.io/token",
        ),
        token("not-a-token", "2001-01-01T00:00:00Z", "Opaque"),
    ] {
        secrets.create(&pp, &secret).await.unwrap();
    }
    let (stop_tx, stop) = watch::channel(false);
    let ctx = Context::new(cluster.client.clone(), cluster.factory.clone());
    let cleaner = tokio::spawn(skiff_controllers::token_cleaner::run_with(
        ctx,
        stop,
        skiff_controllers::token_cleaner::CleanerConfig {
            period: Duration::from_millis(200),
        },
    ));
    eventually(Duration::from_secs(20), "the expired token deleted", || {
        let secrets = secrets.clone();
        async move {
            secrets
                .get_opt("bootstrap-token-old001")
                .await
                .ok()?
                .is_none()
                .then_some(())
        }
    })
    .await;
    assert!(
        secrets
            .get_opt("bootstrap-token-new001")
            .await
            .unwrap()
            .is_some()
    );
    assert!(secrets.get_opt("not-a-token").await.unwrap().is_some());
    let _ = stop_tx.send(true);
    let _ = cleaner.await;
    cluster.shutdown().await;
}
