//! What the node's two certificates have in common — the client certificate
//! a joined agent presents to the API server ([`super::client_cert`]) and
//! the node server's serving certificate ([`super::serving_cert`]): both
//! name the node as `system:node:<name>` in `system:nodes`, are kept as a
//! pair of private files in `AGENT_DIR/pki/`, are judged by the same leaf
//! checks (issued to this node, a fifth of their life left) and are
//! presented through a [`CertSlot`] that a renewal swaps without
//! rebuilding the TLS configuration that holds it.

use std::path::Path;
use std::sync::{Arc, PoisonError, RwLock};

use rcgen::{CertificateParams, DnType};
use rustls::client::ResolvesClientCert;
use rustls::pki_types::CertificateDer;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use skiff_common::files::{FileError, create_private_dir, read_optional, write_private};
use x509_parser::certificate::X509Certificate;

/// The group every node's certificates carry.
pub const NODES_GROUP: &str = "system:nodes";

/// The user a node's certificates name.
pub fn node_user(node_name: &str) -> String {
    format!("system:node:{node_name}")
}

/// Request parameters with the node's subject, which the API server's
/// signers insist on for both certificates.
pub(crate) fn node_subject(node_name: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, node_user(node_name));
    params
        .distinguished_name
        .push(DnType::OrganizationName, NODES_GROUP);
    params
}

/// A certificate (leaf first) and its private key, PEM-encoded.
#[derive(Clone)]
pub struct NodeCert {
    /// Certificate chain (leaf first).
    pub cert_pem: String,
    /// Private key.
    pub key_pem: String,
}

impl std::fmt::Debug for NodeCert {
    /// Never prints the key, which would otherwise end up in logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeCert").finish_non_exhaustive()
    }
}

impl NodeCert {
    /// The pair in `pki_dir`, if both files are there.
    pub(crate) fn load(
        pki_dir: &Path,
        cert_file: &str,
        key_file: &str,
    ) -> Result<Option<Self>, FileError> {
        let cert = read_optional(&pki_dir.join(cert_file))?;
        let key = read_optional(&pki_dir.join(key_file))?;
        Ok(match (cert, key) {
            (Some(cert_pem), Some(key_pem)) => Some(Self { cert_pem, key_pem }),
            _ => None,
        })
    }

    /// Stores the pair in `pki_dir` (0700), key first so a certificate is
    /// never found without its key, both 0600.
    pub(crate) fn store(
        &self,
        pki_dir: &Path,
        cert_file: &str,
        key_file: &str,
    ) -> Result<(), FileError> {
        create_private_dir(pki_dir)?;
        write_private(&pki_dir.join(key_file), self.key_pem.as_bytes())?;
        write_private(&pki_dir.join(cert_file), self.cert_pem.as_bytes())
    }

    fn certified_key(&self) -> Result<Arc<CertifiedKey>, String> {
        let chain = pem_certs(&self.cert_pem)?;
        let key = rustls_pemfile::private_key(&mut self.key_pem.as_bytes())
            .ok()
            .flatten()
            .ok_or_else(|| "no usable private key".to_string())?;
        let provider = rustls::crypto::ring::default_provider();
        CertifiedKey::from_der(chain, key, &provider)
            .map(Arc::new)
            .map_err(|e| e.to_string())
    }
}

/// The certificate a TLS client or server presents, swappable while it
/// runs: a renewed certificate applies from the next handshake on.
#[derive(Debug)]
pub struct CertSlot {
    current: RwLock<Arc<CertifiedKey>>,
}

impl CertSlot {
    /// A slot holding `cert`; the error says why it is unusable.
    pub fn new(cert: &NodeCert) -> Result<Arc<Self>, String> {
        Ok(Arc::new(Self {
            current: RwLock::new(cert.certified_key()?),
        }))
    }

    /// Presents `cert` from the next handshake on.
    pub fn replace(&self, cert: &NodeCert) -> Result<(), String> {
        let key = cert.certified_key()?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = key;
        Ok(())
    }

    fn current(&self) -> Arc<CertifiedKey> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl ResolvesClientCert for CertSlot {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

impl ResolvesServerCert for CertSlot {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// Refuses a leaf whose common name is not `node_name`'s user.
pub(crate) fn check_issued_to(leaf: &X509Certificate<'_>, node_name: &str) -> Result<(), String> {
    let cn = leaf
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or_default();
    if cn != node_user(node_name) {
        return Err(format!("issued to {cn:?}, not {:?}", node_user(node_name)));
    }
    Ok(())
}

/// Whether a fifth of the leaf's lifetime or less is left, when both
/// certificates are renewed (as the kubelet's certificate manager does,
/// give or take its jitter).
pub(crate) fn renewal_due(leaf: &X509Certificate<'_>) -> bool {
    let validity = leaf.validity();
    let (from, to) = (
        validity.not_before.timestamp(),
        validity.not_after.timestamp(),
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default();
    now >= to - (to - from) / 5
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
