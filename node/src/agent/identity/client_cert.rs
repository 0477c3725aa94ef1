//! A joined agent's client certificate towards the API server: subject
//! `system:node:<name>` in `system:nodes`, asked for through a
//! CertificateSigningRequest for the signer
//! `kubernetes.io/kube-apiserver-client-kubelet` (the kubelet TLS
//! bootstrap), kept in `AGENT_DIR/pki/` (key and certificate 0600) and used
//! from then on, across restarts, while it still chains to the cluster CA.
//! When a fifth of its life is left, [`renew`] asks for a new one with the
//! node's own identity (`selfnodeclient`) and [`CertSlot`](super::pki::CertSlot) presents
//! it from the next TLS handshake on, without rebuilding the API client.
//!
//! The private key never leaves this module's files and the slot: the API
//! only sees the request.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rcgen::KeyPair;
use rustls::pki_types::UnixTime;

use skiff_common::files::FileError;

use super::csr_signer::{CsrError, request_certificate};
use super::pki::{
    CertSlot, NODES_GROUP, NodeCert, check_issued_to, node_subject, pem_certs, renewal_due,
    root_store,
};
use super::serving_cert::ServingCertError;

/// The certificate's file in the agent's `pki/` directory.
pub const CERT_FILE: &str = "kubelet-client.crt";
/// The key's file in the agent's `pki/` directory.
pub const KEY_FILE: &str = "kubelet-client.key";
/// The signer of node client certificates.
pub const SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// The annotation the node password travels in (taken out by the API
/// server before the request is stored).
pub const PASSWORD_ANNOTATION: &str = "skiff.io/node-password";

/// How a stored certificate fits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fitness {
    /// Use it.
    Good,
    /// Still valid, but a fifth of its life or less is left: use it and
    /// renew it.
    Renew,
    /// Not usable (another node, another CA, expired): the reason.
    Unusable(String),
}

/// Whether `cert_pem` is a client certificate of `node_name` that chains
/// to `ca_pem` and is valid now, and whether it is due for renewal.
pub fn assess(cert_pem: &str, node_name: &str, ca_pem: &str) -> Fitness {
    let chain = match pem_certs(cert_pem) {
        Ok(chain) => chain,
        Err(e) => return Fitness::Unusable(format!("certificate: {e}")),
    };
    let Ok((_, parsed)) = x509_parser::parse_x509_certificate(&chain[0]) else {
        return Fitness::Unusable("the certificate does not parse".into());
    };
    if let Err(why) = check_issued_to(&parsed, node_name) {
        return Fitness::Unusable(why);
    }
    if !parsed
        .subject()
        .iter_organization()
        .any(|o| o.as_str().ok() == Some(NODES_GROUP))
    {
        return Fitness::Unusable(format!("not in {NODES_GROUP}"));
    }
    // The chain, validity and client-auth usage, as the API server checks them.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = root_store(ca_pem)
        .map_err(|e| e.to_string())
        .and_then(|roots| {
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| e.to_string())
        });
    let verifier = match verifier {
        Ok(v) => v,
        Err(e) => return Fitness::Unusable(format!("CA: {e}")),
    };
    if let Err(e) = verifier.verify_client_cert(&chain[0], &chain[1..], UnixTime::now()) {
        return Fitness::Unusable(format!("not valid for the cluster CA now: {e}"));
    }
    if renewal_due(&parsed) {
        Fitness::Renew
    } else {
        Fitness::Good
    }
}

/// The certificate and key in `pki_dir`, if both are there.
pub fn load(pki_dir: &Path) -> Result<Option<NodeCert>, FileError> {
    NodeCert::load(pki_dir, CERT_FILE, KEY_FILE)
}

/// Stores `cert` in `pki_dir` (0700), key first, both 0600.
pub fn store(pki_dir: &Path, cert: &NodeCert) -> Result<(), FileError> {
    cert.store(pki_dir, CERT_FILE, KEY_FILE)
}

/// A new key and the CertificateSigningRequest asking for its client
/// certificate as `node_name`; `password` (the node password, for a
/// bootstrap identity's request) rides in [`PASSWORD_ANNOTATION`].
pub fn new_request(
    node_name: &str,
    password: Option<&str>,
) -> Result<(KeyPair, CertificateSigningRequest), ServingCertError> {
    let generate = |what, source| ServingCertError::Generate { what, source };
    let key = KeyPair::generate().map_err(|e| generate("client key", e))?;
    let pem = node_subject(node_name)
        .serialize_request(&key)
        .and_then(|r| r.pem())
        .map_err(|e| generate("client certificate request", e))?;
    let csr = CertificateSigningRequest {
        metadata: ObjectMeta {
            generate_name: Some("node-csr-".into()),
            annotations: password
                .map(|p| BTreeMap::from([(PASSWORD_ANNOTATION.to_string(), p.to_string())])),
            ..Default::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(pem.into_bytes()),
            signer_name: SIGNER.into(),
            usages: Some(vec![
                "digital signature".into(),
                "key encipherment".into(),
                "client auth".into(),
            ]),
            ..Default::default()
        },
        status: None,
    };
    Ok((key, csr))
}

/// Why no client certificate was had.
#[derive(Debug, thiserror::Error)]
pub enum ClientCertError {
    /// The key or the request.
    #[error(transparent)]
    Local(#[from] ServingCertError),
    /// A file.
    #[error(transparent)]
    File(#[from] FileError),
    /// The certificates API did not deliver.
    #[error(transparent)]
    Request(#[from] CsrError),
    /// The signed certificate does not fit.
    #[error("the signed client certificate is unusable: {0}")]
    Signed(String),
}

/// Asks for a client certificate with `client`, waits up to `wait`, checks
/// it and stores it in `pki_dir`.
pub async fn obtain(
    client: &kube::Client,
    pki_dir: &Path,
    node_name: &str,
    ca_pem: &str,
    password: Option<&str>,
    wait: Duration,
) -> Result<NodeCert, ClientCertError> {
    let (key, csr) = new_request(node_name, password)?;
    let cert_pem = request_certificate(client, &csr, wait, Duration::from_secs(1)).await?;
    if let Fitness::Unusable(why) = assess(&cert_pem, node_name, ca_pem) {
        return Err(ClientCertError::Signed(why));
    }
    let cert = NodeCert {
        cert_pem,
        key_pem: key.serialize_pem(),
    };
    store(pki_dir, &cert)?;
    Ok(cert)
}

/// Renews the certificate in `pki_dir` when it is due, asking as the node
/// itself with `client` (whose TLS presents `slot`), and presents the new
/// one; returns whether it renewed.
pub async fn renew(
    client: &kube::Client,
    slot: &CertSlot,
    pki_dir: &Path,
    node_name: &str,
    ca_pem: &str,
    wait: Duration,
) -> Result<bool, ClientCertError> {
    let current = load(pki_dir)?;
    let due = match &current {
        Some(cert) => assess(&cert.cert_pem, node_name, ca_pem),
        None => Fitness::Unusable("missing".into()),
    };
    if due == Fitness::Good {
        return Ok(false);
    }
    tracing::info!(
        node = node_name,
        ?due,
        "renewing the node client certificate"
    );
    let cert = obtain(client, pki_dir, node_name, ca_pem, None, wait).await?;
    slot.replace(&cert).map_err(ClientCertError::Signed)?;
    tracing::info!(node = node_name, "node client certificate renewed");
    Ok(true)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::agent::identity::test_pki::{TestCa, parse_csr};

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn stored_certificates_are_judged() {
        let ca = TestCa::new("ca");
        let (good, _) = ca.client_cert("system:node:n1", &[NODES_GROUP]);
        assert_eq!(assess(&good, "n1", &ca.cert_pem), Fitness::Good);
        // Another node's, another group's, another CA's: unusable.
        assert!(matches!(
            assess(&good, "n2", &ca.cert_pem),
            Fitness::Unusable(_)
        ));
        let (admin, _) = ca.client_cert("system:node:n1", &["system:masters"]);
        assert!(matches!(
            assess(&admin, "n1", &ca.cert_pem),
            Fitness::Unusable(_)
        ));
        let other = TestCa::new("other");
        assert!(matches!(
            assess(&good, "n1", &other.cert_pem),
            Fitness::Unusable(_)
        ));
        // A fifth of its life left: renew; expired: unusable.
        let now = std::time::SystemTime::now();
        let (late, _) = ca.client_cert_between(
            "system:node:n1",
            &[NODES_GROUP],
            Some((now - 9 * HOUR, now + HOUR / 2)),
        );
        assert_eq!(assess(&late, "n1", &ca.cert_pem), Fitness::Renew);
        let (gone, _) = ca.client_cert_between(
            "system:node:n1",
            &[NODES_GROUP],
            Some((now - 9 * HOUR, now - HOUR)),
        );
        assert!(matches!(
            assess(&gone, "n1", &ca.cert_pem),
            Fitness::Unusable(_)
        ));
    }

    #[test]
    fn certificates_are_stored_privately_and_read_back() {
        let ca = TestCa::new("ca");
        let (cert_pem, key_pem) = ca.client_cert("system:node:n1", &[NODES_GROUP]);
        let dir = tempfile::tempdir().unwrap();
        let pki = dir.path().join("pki");
        assert!(load(&pki).unwrap().is_none());
        store(
            &pki,
            &NodeCert {
                cert_pem: cert_pem.clone(),
                key_pem,
            },
        )
        .unwrap();
        assert_eq!(load(&pki).unwrap().unwrap().cert_pem, cert_pem);
        use std::os::unix::fs::PermissionsExt;
        for file in [CERT_FILE, KEY_FILE] {
            let mode = std::fs::metadata(pki.join(file))
                .unwrap()
                .permissions()
                .mode()
                & 0o777;
            assert_eq!(mode, 0o600, "{file}");
        }
    }

    #[test]
    fn requests_ask_for_a_node_client_certificate() {
        let (_, csr) = new_request("n1", Some("pw")).unwrap();
        assert_eq!(csr.spec.signer_name, SIGNER);
        assert_eq!(csr.metadata.annotations.unwrap()[PASSWORD_ANNOTATION], "pw");
        let pem = String::from_utf8(csr.spec.request.0).unwrap();
        let (parsed, names) = parse_csr(&pem);
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(parsed.params.subject_alt_names.is_empty());
        let (_, renewal) = new_request("n1", None).unwrap();
        assert!(renewal.metadata.annotations.is_none());
    }
}

#[cfg(test)]
mod renewal_tests {
    use std::time::Duration;

    use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
    use kube::Api;
    use kube::api::PostParams;
    use skiff_testkit::{TestCluster, UserInfo};

    use super::*;
    use crate::agent::identity::test_pki::{TestCa, the_request};

    /// A certificate with a fifth of its life or less left is renewed by
    /// the node itself (no password), stored, and presented; a fresh one
    /// is left alone.
    #[tokio::test]
    async fn a_certificate_near_its_end_is_renewed_by_the_node_itself() {
        let cluster = TestCluster::start().await;
        let node_user = UserInfo::new("system:node:n1", [NODES_GROUP.to_string()]);
        let node = cluster.client_as(node_user.clone());
        let ca = TestCa::new("ca");
        let now = std::time::SystemTime::now();
        let hour = Duration::from_secs(3600);
        let (cert_pem, key_pem) = ca.client_cert_between(
            "system:node:n1",
            &[NODES_GROUP],
            Some((now - 9 * hour, now + hour / 2)),
        );
        let pki = cluster.dir().join("pki");
        let old = NodeCert { cert_pem, key_pem };
        store(&pki, &old).unwrap();
        let slot = CertSlot::new(&old).unwrap();

        let renewing = {
            let (slot, pki, ca_pem) = (slot.clone(), pki.clone(), ca.cert_pem.clone());
            tokio::spawn(async move {
                renew(&node, &slot, &pki, "n1", &ca_pem, Duration::from_secs(20)).await
            })
        };
        // Played by the controller manager: sign the node's request.
        let csrs: Api<CertificateSigningRequest> = Api::all(cluster.admin());
        let mut csr = the_request(&csrs).await;
        assert_eq!(csr.spec.username.as_deref(), Some("system:node:n1"));
        assert_eq!(csr.spec.signer_name, SIGNER);
        assert!(
            csr.metadata.annotations.is_none(),
            "a renewal carries no password"
        );
        let pem = String::from_utf8(csr.spec.request.0.clone()).unwrap();
        csr.status.get_or_insert_with(Default::default).certificate =
            Some(ByteString(ca.sign_client_csr(&pem).into_bytes()));
        let name = csr.metadata.name.clone().unwrap();
        csrs.replace_status(&name, &PostParams::default(), &csr)
            .await
            .unwrap();
        assert!(renewing.await.unwrap().unwrap(), "nothing was renewed");
        let renewed = load(&pki).unwrap().unwrap();
        assert_ne!(renewed.cert_pem, old.cert_pem);
        assert_eq!(assess(&renewed.cert_pem, "n1", &ca.cert_pem), Fitness::Good);
        let presented =
            rustls::client::ResolvesClientCert::resolve(slot.as_ref(), &[], &[]).unwrap();
        assert_eq!(
            presented.cert[0].as_ref(),
            pem_certs(&renewed.cert_pem).unwrap()[0].as_ref()
        );
        // Fresh now: nothing to do, no new request.
        let node = cluster.client_as(node_user);
        assert!(
            !renew(
                &node,
                &slot,
                &pki,
                "n1",
                &ca.cert_pem,
                Duration::from_secs(1)
            )
            .await
            .unwrap()
        );
        assert_eq!(csrs.list(&Default::default()).await.unwrap().items.len(), 1);
    }
}
