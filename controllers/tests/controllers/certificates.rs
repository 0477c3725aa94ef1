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
use rcgen::{CertificateParams, DnType, KeyPair, SanType};
use serde_json::json;
use skiff_apiserver::authn::UserInfo;
use skiff_apiserver::tls::ClusterCerts;
use skiff_controllers::Context;
use skiff_controllers::certificates::kubelet_serving::ClusterSigner;
use tokio::sync::watch;

use super::support::{TestCluster, eventually};

const SERVING_USAGES: &[&str] = &["digital signature", "key encipherment", "server auth"];

fn request_pem(cn: &str, names: &[&str]) -> String {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, cn);
    params
        .distinguished_name
        .push(DnType::OrganizationName, "system:nodes");
    params.subject_alt_names = names
        .iter()
        .map(|n| match n.parse() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName((*n).try_into().unwrap()),
        })
        .collect();
    params.serialize_request(&key).unwrap().pem().unwrap()
}

async fn ask(client: &kube::Client, name: &str, pem: String, spoofed_user: Option<&str>) {
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

fn node_client(cluster: &TestCluster, node: &str) -> kube::Client {
    cluster.client_as(UserInfo::new(
        format!("system:node:{node}"),
        ["system:nodes".to_string()],
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_get_certificates_for_their_own_addresses_only() {
    let cluster = TestCluster::start(Some(&[])).await;
    let dir = tempfile::tempdir().unwrap();
    let certs = ClusterCerts::load_or_create(dir.path(), &["localhost".into()]).unwrap();
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    for (name, ip) in [("n1", "10.0.0.5"), ("n2", "10.0.0.6")] {
        let node: Node = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
        let status = json!({"status": {"addresses": [
            {"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}]}});
        nodes
            .patch_status(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(status),
            )
            .await
            .unwrap();
    }

    let n1 = node_client(&cluster, "n1");
    // Impostors first, so the controller has passed over them by the time
    // the genuine request is signed.
    ask(
        &n1,
        "n1-as-n2",
        request_pem("system:node:n2", &["10.0.0.6"]),
        None,
    )
    .await;
    ask(
        &n1,
        "n1-foreign-ip",
        request_pem("system:node:n1", &["10.0.0.5", "10.0.0.99"]),
        None,
    )
    .await;
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
    ask(
        &sa,
        "sa-as-n1",
        request_pem("system:node:n1", &["10.0.0.5"]),
        Some("system:node:n1"),
    )
    .await;
    ask(
        &n1,
        "n1-genuine",
        request_pem("system:node:n1", &["10.0.0.5", "n1"]),
        None,
    )
    .await;

    let csrs: Api<CertificateSigningRequest> = Api::all(cluster.client.clone());
    // The API server recorded the real requester, not the claimed one.
    let spoofed = csrs.get("sa-as-n1").await.unwrap();
    assert_eq!(
        spoofed.spec.username.as_deref(),
        Some("system:serviceaccount:default:sneaky")
    );

    let (stop_tx, stop) = watch::channel(false);
    let mut ctx = Context::new(cluster.client.clone(), cluster.factory.clone());
    ctx.cluster_signer = Some(Arc::new(
        ClusterSigner::from_pem(&certs.ca_cert_pem, &certs.ca_key_pem).unwrap(),
    ));
    let controller = tokio::spawn(skiff_controllers::certificates::controller::run(ctx, stop));
    cluster.factory.start().unwrap();

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
