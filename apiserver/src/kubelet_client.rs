//! The API server's credentials and checks for the hop to node servers
//! (upstream's kubelet client). The server presents its own client
//! certificate (`kube-apiserver-kubelet-client`), and accepts a node server
//! only when its certificate chains to the cluster CA, names the address
//! dialed, and is issued to `system:node:<the node the pod is bound to>`.
//! Anything else fails the TLS handshake, so a listener that is not that
//! node receives no request and no credential (under TLS 1.3 the client
//! certificate is only sent after the server's was accepted).
//!
//! This module only builds TLS connectors; what is sent over them is the
//! streaming handlers' business.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::tls::server_check::ServerCheck;

/// The user the API server's client certificate names, as kubeadm names it.
pub(crate) const KUBELET_CLIENT_USER: &str = "kube-apiserver-kubelet-client";

/// Why the kubelet client could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum KubeletClientError {
    /// A certificate or key is not usable PEM.
    #[error("kubelet client {what}: {detail}")]
    Pem {
        /// Which one, e.g. `CA` or `key`.
        what: &'static str,
        /// Why it is unusable.
        detail: String,
    },
    /// rustls refused the TLS configuration.
    #[error("kubelet client TLS configuration: {0}")]
    Config(String),
}

/// The CA node servers must chain to and the API server's own client
/// certificate, parsed once.
pub struct KubeletClientTls {
    provider: Arc<rustls::crypto::CryptoProvider>,
    chain_verifier: Arc<WebPkiServerVerifier>,
    client_chain: Vec<CertificateDer<'static>>,
    client_key: PrivateKeyDer<'static>,
}

impl std::fmt::Debug for KubeletClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeletClientTls").finish_non_exhaustive()
    }
}

impl KubeletClientTls {
    /// From the cluster CA bundle and the client certificate and key (PEM).
    pub fn from_pem(
        ca_pem: &str,
        cert_pem: &str,
        key_pem: &str,
    ) -> Result<Self, KubeletClientError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for ca in certs(ca_pem, "CA")? {
            roots.add(ca).map_err(|e| KubeletClientError::Pem {
                what: "CA",
                detail: e.to_string(),
            })?;
        }
        let chain_verifier =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| KubeletClientError::Config(e.to_string()))?;
        let client_chain = certs(cert_pem, "certificate")?;
        let client_key = rustls_pemfile::private_key(&mut key_pem.as_bytes())
            .ok()
            .flatten()
            .ok_or(KubeletClientError::Pem {
                what: "key",
                detail: "no private key".into(),
            })?;
        Ok(Self {
            provider,
            chain_verifier,
            client_chain,
            client_key,
        })
    }

    /// A connector that accepts only `node_name`'s serving certificate (for
    /// the address given at connect time) and then authenticates as the
    /// API server.
    pub fn connector_for(
        &self,
        node_name: &str,
    ) -> Result<tokio_rustls::TlsConnector, KubeletClientError> {
        // The usual chain and name checks, then the subject must be the node.
        let verifier = Arc::new(ServerCheck::issued_to(
            self.provider.clone(),
            self.chain_verifier.clone(),
            format!("system:node:{node_name}"),
        ));
        let mut config = rustls::ClientConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| KubeletClientError::Config(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_client_auth_cert(self.client_chain.clone(), self.client_key.clone_key())
            .map_err(|e| KubeletClientError::Config(e.to_string()))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
    }
}

fn certs(
    pem: &str,
    what: &'static str,
) -> Result<Vec<CertificateDer<'static>>, KubeletClientError> {
    let certs: Vec<_> = rustls_pemfile::certs(&mut pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| KubeletClientError::Pem {
            what,
            detail: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(KubeletClientError::Pem {
            what,
            detail: "no PEM certificate".into(),
        });
    }
    Ok(certs)
}
