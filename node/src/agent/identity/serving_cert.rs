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
use std::fs;
use std::io::{self, Write};
use std::net::IpAddr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use rcgen::{CertificateParams, DnType, KeyPair, SanType};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

/// The certificate's file in the agent's `pki/` directory.
pub const CERT_FILE: &str = "kubelet-serving.crt";
/// The key's file in the agent's `pki/` directory.
pub const KEY_FILE: &str = "kubelet-serving.key";
/// The group every node's certificates carry.
pub const NODES_GROUP: &str = "system:nodes";

/// The user a node's certificates name.
pub fn node_user(node_name: &str) -> String {
    format!("system:node:{node_name}")
}

/// Why no serving certificate could be had.
#[derive(Debug, thiserror::Error)]
pub enum ServingCertError {
    /// A file could not be read or written.
    #[error("cannot {action} {path}: {source}")]
    File {
        /// What was tried.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
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

/// A serving certificate and its key, PEM-encoded.
#[derive(Clone)]
pub struct ServingCert {
    /// Certificate chain (leaf first).
    pub cert_pem: String,
    /// Private key.
    pub key_pem: String,
}

impl std::fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCert").finish_non_exhaustive()
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
) -> Result<ServingCert, ServingCertError> {
    let cert_path = pki_dir.join(CERT_FILE);
    let key_path = pki_dir.join(KEY_FILE);
    if let (Some(cert_pem), Some(key_pem)) = (read_optional(&cert_path)?, read_optional(&key_path)?)
    {
        match check(&cert_pem, node_name, addresses, ca_pem) {
            Ok(()) => return Ok(ServingCert { cert_pem, key_pem }),
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
    let key_pem = key.serialize_pem();
    create_private_dir(pki_dir)?;
    write_private(&key_path, &key_pem)?;
    write_private(&cert_path, &cert_pem)?;
    Ok(ServingCert { cert_pem, key_pem })
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
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, node_user(node_name));
    params
        .distinguished_name
        .push(DnType::OrganizationName, NODES_GROUP);
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
    let cn = parsed
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or_default();
    if cn != node_user(node_name) {
        return Err(format!("issued to {cn:?}, not {:?}", node_user(node_name)));
    }
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
    let validity = parsed.validity();
    let (from, to) = (
        validity.not_before.timestamp(),
        validity.not_after.timestamp(),
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default();
    if now >= to - (to - from) / 5 {
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

/// The certificates in a PEM bundle.
pub fn pem_certs(pem: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = rustls_pemfile::certs(&mut pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("no PEM certificate".into());
    }
    Ok(certs)
}

/// A root store holding the CA certificates of `ca_pem`.
pub fn root_store(ca_pem: &str) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in pem_certs(ca_pem)? {
        roots.add(ca).map_err(|e| e.to_string())?;
    }
    Ok(roots)
}

fn ip_from_bytes(bytes: &[u8]) -> Option<IpAddr> {
    match bytes.len() {
        4 => <[u8; 4]>::try_from(bytes).ok().map(IpAddr::from),
        16 => <[u8; 16]>::try_from(bytes).ok().map(IpAddr::from),
        _ => None,
    }
}

pub(crate) fn read_optional(path: &Path) -> Result<Option<String>, ServingCertError> {
    match fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ServingCertError::File {
            action: "read",
            path: path.to_path_buf(),
            source,
        }),
    }
}

pub(crate) fn create_private_dir(dir: &Path) -> Result<(), ServingCertError> {
    let err = |action, source| ServingCertError::File {
        action,
        path: dir.to_path_buf(),
        source,
    };
    fs::create_dir_all(dir).map_err(|e| err("create", e))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(|e| err("chmod", e))
}

/// Writes through a temporary file (mode 0600) and a rename, so a crash
/// never leaves a half-written key behind.
pub(crate) fn write_private(path: &Path, contents: &str) -> Result<(), ServingCertError> {
    let err = |action, source| ServingCertError::File {
        action,
        path: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension("tmp");
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| err("create", e))?;
    file.write_all(contents.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| err("write", e))?;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o600)).map_err(|e| err("chmod", e))?;
    fs::rename(&tmp, path).map_err(|e| err("rename", e))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::agent::identity::test_pki::{CaSigner, TestCa};

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
        let csr = rcgen::CertificateSigningRequestParams::from_pem(&pem).unwrap();
        let dn: Vec<String> = csr
            .params
            .distinguished_name
            .iter()
            .map(|(t, v)| format!("{t:?}={v:?}"))
            .collect();
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
