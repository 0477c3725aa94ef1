//! The `kubernetes.io/kube-apiserver-client` signer: client certificates
//! the API server accepts, for people and programs (upstream's way to give
//! a user a certificate: a request, a human's `kubectl certificate
//! approve`, the signature). Nothing here approves: a request waits for an
//! approver allowed to `approve` this signer, and the API server refuses
//! requests for `system:masters` before any approver sees them.
//!
//! An approved request is signed when its usages are a client
//! certificate's ("client auth" required; "digital signature" and "key
//! encipherment" allowed) and it asks for no CA powers; otherwise it
//! fails, in upstream's words. The certificate keeps the request's subject
//! (the user and groups) and lasts `expirationSeconds` (at least ten
//! minutes) or a year.

use std::time::Duration;

use rcgen::{CertificateSigningRequestParams, ExtendedKeyUsagePurpose, IsCa};

use super::kubelet_client::MIN_LIFETIME;
use super::kubelet_serving::{ClusterSigner, LIFETIME, SignError};

/// The signer's name.
pub const SIGNER_NAME: &str = "kubernetes.io/kube-apiserver-client";

/// Whether `usages` are a client certificate's; the error is upstream's.
pub fn check_usages<'a>(usages: impl IntoIterator<Item = &'a str>) -> Result<(), SignError> {
    let mut client_auth = false;
    for usage in usages {
        match usage {
            "digital signature" | "key encipherment" => {}
            "client auth" => client_auth = true,
            other => {
                return Err(SignError::Refused(format!(
                    "invalid usage for client certificate: {other}"
                )));
            }
        }
    }
    if client_auth {
        Ok(())
    } else {
        Err(SignError::Refused(
            "missing required usage for client certificate: client auth".into(),
        ))
    }
}

impl ClusterSigner {
    /// Signs an approved client request (PEM) whose usages passed
    /// [`check_usages`], valid for `expiration` (clamped to ten minutes ..
    /// a year) or a year; returns the certificate (PEM).
    pub fn sign_api_server_client(
        &self,
        csr_pem: &str,
        expiration: Option<Duration>,
    ) -> Result<String, SignError> {
        let csr = CertificateSigningRequestParams::from_pem(csr_pem)
            .map_err(|e| SignError::Parse(e.to_string()))?;
        if !matches!(csr.params.is_ca, IsCa::NoCa | IsCa::ExplicitNoCa) {
            return Err(SignError::Refused(
                "a client certificate cannot be a CA".into(),
            ));
        }
        let lifetime = expiration.map_or(LIFETIME, |d| d.clamp(MIN_LIFETIME, LIFETIME));
        self.issue(csr, ExtendedKeyUsagePurpose::ClientAuth, lifetime)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_client_usages_pass_and_client_auth_is_required() {
        assert!(check_usages(["client auth"]).is_ok());
        assert!(check_usages(["digital signature", "key encipherment", "client auth"]).is_ok());
        let refused = |usages: &[&str]| {
            check_usages(usages.iter().copied())
                .unwrap_err()
                .to_string()
        };
        assert!(
            refused(&["server auth", "client auth"])
                .ends_with("invalid usage for client certificate: server auth")
        );
        assert!(
            refused(&["digital signature"])
                .ends_with("missing required usage for client certificate: client auth")
        );
    }

    #[test]
    fn the_certificate_keeps_the_requested_subject_and_is_for_clients() {
        let (ca_pem, key_pem) = super::super::testing::ca();
        let signer = ClusterSigner::from_pem(&ca_pem, &key_pem).unwrap();
        let pem = super::super::testing::request("alice", &["dev"], vec![], false);
        let cert = signer
            .sign_api_server_client(&pem, Some(Duration::from_secs(3600)))
            .unwrap();
        let der = super::super::testing::der_of(&cert);
        let (_, parsed) = x509_parser::parse_x509_certificate(&der).unwrap();
        let subject = parsed.subject();
        assert_eq!(
            subject.iter_common_name().next().unwrap().as_str().unwrap(),
            "alice"
        );
        assert_eq!(
            subject
                .iter_organization()
                .next()
                .unwrap()
                .as_str()
                .unwrap(),
            "dev"
        );
        let eku = parsed.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.client_auth && !eku.server_auth);
        let ca = super::super::testing::request("x", &[], vec![], true);
        assert!(signer.sign_api_server_client(&ca, None).is_err());
    }
}
