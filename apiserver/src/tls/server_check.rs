//! The verifier of the servers this server dials when rustls's own does
//! not fit: an aggregated API with `insecureSkipTLSVerify` (any
//! certificate), and a node server (the cluster CA, and a certificate
//! issued to that node). Handshake signatures are checked with the crypto
//! provider's algorithms either way, as every rustls verifier must.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, OtherError, SignatureScheme};

/// A server certificate verifier: the chain and name by `chain` if set,
/// then the subject's common name if `subject` is set.
#[derive(Debug)]
pub(crate) struct ServerCheck {
    provider: Arc<CryptoProvider>,
    chain: Option<Arc<WebPkiServerVerifier>>,
    subject: Option<String>,
}

impl ServerCheck {
    /// Accepts any certificate (only its handshake signatures checked).
    pub(crate) fn any(provider: Arc<CryptoProvider>) -> Self {
        Self {
            provider,
            chain: None,
            subject: None,
        }
    }

    /// The usual chain and name checks by `chain` (built with
    /// `provider`), then the certificate must be issued to `subject`.
    pub(crate) fn issued_to(
        provider: Arc<CryptoProvider>,
        chain: Arc<WebPkiServerVerifier>,
        subject: String,
    ) -> Self {
        Self {
            provider,
            chain: Some(chain),
            subject: Some(subject),
        }
    }
}

/// A certificate was valid but issued to someone else.
#[derive(Debug)]
struct WrongSubject {
    wanted: String,
    found: String,
}

impl std::fmt::Display for WrongSubject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "certificate is issued to {:?}, not {:?}",
            self.found, self.wanted
        )
    }
}

impl std::error::Error for WrongSubject {}

/// The certificate's first subject common name, empty if it has none.
fn common_name(cert: &CertificateDer<'_>) -> String {
    x509_parser::parse_x509_certificate(cert)
        .ok()
        .and_then(|(_, cert)| {
            cert.subject()
                .iter_common_name()
                .next()
                .and_then(|cn| cn.as_str().ok())
                .map(String::from)
        })
        .unwrap_or_default()
}

impl ServerCertVerifier for ServerCheck {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(chain) = &self.chain {
            chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)?;
        }
        if let Some(wanted) = &self.subject {
            let found = common_name(end_entity);
            if &found != wanted {
                return Err(rustls::Error::InvalidCertificate(CertificateError::Other(
                    OtherError(Arc::new(WrongSubject {
                        wanted: wanted.clone(),
                        found,
                    })),
                )));
            }
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
