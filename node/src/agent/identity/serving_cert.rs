//! The node server's serving certificate: subject `system:node:<name>` in
//! `system:nodes`, naming the node's addresses, signed by the cluster CA.
//! It is kept in `AGENT_DIR/pki/` (key and certificate mode 0600) and reused
//! while it still chains to the cluster CA, names exactly the addresses the
//! Node publishes and has more than a fifth of its lifetime left; otherwise a
//! new key and a certificate signing request are made here and handed to a
//! [`ServingCertSigner`] — the cluster CA itself inside `skiff server`, a
//! CertificateSigningRequest (signer `kubernetes.io/kubelet-serving`) for a
//! remote agent.
//!
//! The private key never leaves this module's files: signers only see the
//! request.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use rcgen::{KeyPair, SanType};
use rustls::pki_types::{ServerName, UnixTime};

use skiff_common::files::FileError;

use super::pki::{NodeCert, check_issued_to, node_subject, pem_certs, renewal_due, root_store};

/// The certificate's file in the agent's `pki/` directory.
pub const CERT_FILE: &str = "kubelet-serving.crt";
/// The key's file in the agent's `pki/` directory.
pub const KEY_FILE: &str = "kubelet-serving.key";
/// Why no serving certificate could be had.
#[derive(Debug, thiserror::Error)]
pub enum ServingCertError {
    /// A file could not be read or written.
    #[error(transparent)]
    File(#[from] FileError),
    /// The key or the request could not be made.
    #[error("generating the node's {what}: {source}")]
    Generate {
        /// Key or request.
        what: &'static str,
        /// Why.
        source: rcgen::Error,
    },
    /// The cluster CA is unusable.
    #[error("the cluster CA certificate is unusable: {0}")]
    Ca(String),
    /// The signer refused or failed.
    #[error("signing the node's serving certificate: {0}")]
    Sign(String),
    /// The signer answered with a certificate that does not fit.
    #[error("the signed serving certificate is unusable: {0}")]
    Signed(String),
}

/// A request for a node serving certificate.
#[derive(Debug, Clone)]
pub struct ServingCertRequest {
    /// The node.
    pub node_name: String,
    /// The PKCS#10 request (PEM), subject and names as this module makes them.
    pub csr_pem: String,
    /// The names it asks for (the Node's addresses).
    pub addresses: Vec<String>,
}

/// Who turns a request into a certificate signed by the cluster CA.
#[async_trait]
pub trait ServingCertSigner: Send + Sync + 'static {
    /// The signed certificate (PEM) for `request`.
    async fn sign(&self, request: &ServingCertRequest) -> Result<String, ServingCertError>;
}

/// A signer that signs on the spot, with a CA this process holds (the
/// in-process agent of `skiff server`): `F` returns the certificate (PEM)
/// or why it refused.
pub struct LocalSigner<F>(pub F);

#[async_trait]
impl<F> ServingCertSigner for LocalSigner<F>
where
    F: Fn(&ServingCertRequest) -> Result<String, String> + Send + Sync + 'static,
{
    async fn sign(&self, request: &ServingCertRequest) -> Result<String, ServingCertError> {
        (self.0)(request).map_err(ServingCertError::Sign)
    }
}

/// The certificate in `pki_dir` when it still fits `node_name`, the
/// `addresses` and the CA; else a new one from `signer`, stored there.
pub async fn ensure(
    pki_dir: &Path,
    node_name: &str,
    addresses: &[String],
    ca_pem: &str,
    signer: &Arc<dyn ServingCertSigner>,
) -> Result<NodeCert, ServingCertError> {
    if let Some(stored) = NodeCert::load(pki_dir, CERT_FILE, KEY_FILE)? {
        match check(&stored.cert_pem, node_name, addresses, ca_pem) {
            Ok(()) => return Ok(stored),
            Err(why) => {
                tracing::info!(node = node_name, %why, "renewing the node serving certificate")
            }
        }
    }
    let key = KeyPair::generate().map_err(|source| ServingCertError::Generate {
        what: "serving key",
        source,
    })?;
    let csr_pem = request_pem(node_name, addresses, &key)?;
    let cert_pem = signer
        .sign(&ServingCertRequest {
            node_name: node_name.to_string(),
            csr_pem,
            addresses: addresses.to_vec(),
        })
        .await?;
    check(&cert_pem, node_name, addresses, ca_pem).map_err(ServingCertError::Signed)?;
    let cert = NodeCert {
        cert_pem,
        key_pem: key.serialize_pem(),
    };
    cert.store(pki_dir, CERT_FILE, KEY_FILE)?;
    Ok(cert)
}

/// The PKCS#10 request for `node_name` naming `addresses` (IPs as IP
/// names, the rest as DNS names).
pub fn request_pem(
    node_name: &str,
    addresses: &[String],
    key: &KeyPair,
) -> Result<String, ServingCertError> {
    let generate = |source| ServingCertError::Generate {
        what: "certificate request",
        source,
    };
    let mut params = node_subject(node_name);
    params.subject_alt_names = addresses
        .iter()
        .map(|a| match a.parse::<IpAddr>() {
            Ok(ip) => Ok(SanType::IpAddress(ip)),
            Err(_) => a.clone().try_into().map(SanType::DnsName),
        })
        .collect::<Result<_, _>>()
        .map_err(generate)?;
    params
        .serialize_request(key)
        .and_then(|r| r.pem())
        .map_err(generate)
}

/// Whether `cert_pem` is a serving certificate for `node_name`, chains to
/// `ca_pem`, is valid now with a fifth of its life left, and names exactly
/// `addresses`; the error says what does not fit.
pub fn check(
    cert_pem: &str,
    node_name: &str,
    addresses: &[String],
    ca_pem: &str,
) -> Result<(), String> {
    let chain = pem_certs(cert_pem).map_err(|e| format!("certificate: {e}"))?;
    let Some(leaf) = chain.first() else {
        return Err("no certificate".into());
    };
    let (_, parsed) =
        x509_parser::parse_x509_certificate(leaf).map_err(|e| format!("certificate: {e}"))?;
    check_issued_to(&parsed, node_name)?;
    let mut named = BTreeSet::new();
    if let Ok(Some(sans)) = parsed.subject_alternative_name() {
        for name in &sans.value.general_names {
            match name {
                x509_parser::extensions::GeneralName::DNSName(d) => {
                    named.insert(d.to_string());
                }
                x509_parser::extensions::GeneralName::IPAddress(bytes) => {
                    if let Some(ip) = ip_from_bytes(bytes) {
                        named.insert(ip.to_string());
                    }
                }
                _ => {}
            }
        }
    }
    let wanted: BTreeSet<String> = addresses
        .iter()
        .map(|a| a.parse::<IpAddr>().map_or(a.clone(), |ip| ip.to_string()))
        .collect();
    if named != wanted {
        return Err(format!("names {named:?}, the node has {wanted:?}"));
    }
    if renewal_due(&parsed) {
        return Err("expires soon".into());
    }
    // The chain to the CA, checked as a client will check it.
    let roots = root_store(ca_pem).map_err(|e| format!("CA: {e}"))?;
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .map_err(|e| format!("CA: {e}"))?;
    let Some(first) = addresses.first() else {
        return Err("no addresses".into());
    };
    let server_name = ServerName::try_from(first.as_str())
        .map_err(|e| format!("address {first}: {e}"))?
        .to_owned();
    use rustls::client::danger::ServerCertVerifier;
    verifier
        .verify_server_cert(&chain[0], &chain[1..], &server_name, &[], UnixTime::now())
        .map(|_| ())
        .map_err(|e| format!("not trusted by the cluster CA: {e}"))
}

fn ip_from_bytes(bytes: &[u8]) -> Option<IpAddr> {
    match bytes.len() {
        4 => <[u8; 4]>::try_from(bytes).ok().map(IpAddr::from),
        16 => <[u8; 16]>::try_from(bytes).ok().map(IpAddr::from),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::agent::identity::test_pki::{CaSigner, TestCa, parse_csr};

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[tokio::test]
    async fn issued_once_kept_private_and_renewed_when_the_addresses_change() {
        let dir = tempfile::tempdir().unwrap();
        let pki = dir.path().join("pki");
        let ca = TestCa::new("cluster-ca");
        let signer: Arc<dyn ServingCertSigner> = Arc::new(CaSigner(ca.clone()));
        let addresses = vec!["10.1.2.3".to_string(), "n1".to_string()];

        let first = ensure(&pki, "n1", &addresses, &ca.cert_pem, &signer)
            .await
            .unwrap();
        assert_eq!(ca.signed.load(Ordering::SeqCst), 1);
        assert_eq!(mode(&pki.join(KEY_FILE)), 0o600);
        assert_eq!(mode(&pki.join(CERT_FILE)), 0o600);
        assert_eq!(mode(&pki), 0o700);
        check(&first.cert_pem, "n1", &addresses, &ca.cert_pem).unwrap();

        // Same node, same addresses: the stored certificate is reused.
        let again = ensure(&pki, "n1", &addresses, &ca.cert_pem, &signer)
            .await
            .unwrap();
        assert_eq!(again.cert_pem, first.cert_pem);
        assert_eq!(ca.signed.load(Ordering::SeqCst), 1);

        // A new address: a new certificate (and key) naming it.
        let moved = vec!["10.1.2.4".to_string(), "n1".to_string()];
        let renewed = ensure(&pki, "n1", &moved, &ca.cert_pem, &signer)
            .await
            .unwrap();
        assert_eq!(ca.signed.load(Ordering::SeqCst), 2);
        assert_ne!(renewed.key_pem, first.key_pem);
        check(&renewed.cert_pem, "n1", &moved, &ca.cert_pem).unwrap();
        assert!(check(&renewed.cert_pem, "n1", &addresses, &ca.cert_pem).is_err());

        // Another cluster CA: the old certificate no longer counts.
        let other = TestCa::new("other-ca");
        let err = check(&renewed.cert_pem, "n1", &moved, &other.cert_pem).unwrap_err();
        assert!(err.contains("not trusted"), "{err}");
    }

    #[tokio::test]
    async fn a_certificate_for_another_node_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa::new("cluster-ca");
        // A signer that answers with a certificate for someone else.
        let ca2 = ca.clone();
        let wrong: Arc<dyn ServingCertSigner> =
            Arc::new(LocalSigner(move |request: &ServingCertRequest| {
                let key = KeyPair::generate().unwrap();
                let csr = request_pem("n2", &request.addresses, &key).unwrap();
                Ok(ca2.sign_csr(&csr))
            }));
        let err = ensure(
            &dir.path().join("pki"),
            "n1",
            &["10.1.2.3".to_string()],
            &ca.cert_pem,
            &wrong,
        )
        .await
        .unwrap_err();
        assert!(matches!(err, ServingCertError::Signed(_)), "{err}");
        assert!(!dir.path().join("pki").join(KEY_FILE).exists());
    }

    #[test]
    fn the_request_names_the_node_and_its_addresses() {
        let key = KeyPair::generate().unwrap();
        let pem = request_pem("n1", &["10.0.0.1".into(), "n1".into()], &key).unwrap();
        let (csr, dn) = parse_csr(&pem);
        assert!(dn.iter().any(|d| d.contains("system:node:n1")), "{dn:?}");
        assert!(dn.iter().any(|d| d.contains("system:nodes")), "{dn:?}");
        assert_eq!(
            csr.params.subject_alt_names,
            vec![
                SanType::IpAddress("10.0.0.1".parse().unwrap()),
                SanType::DnsName("n1".try_into().unwrap()),
            ]
        );
    }
}
