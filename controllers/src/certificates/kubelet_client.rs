//! The `kubernetes.io/kube-apiserver-client-kubelet` signer's rules and
//! signature: a node's client certificate towards the API server. A request
//! qualifies when its subject is exactly `system:node:<name>` in the single
//! group `system:nodes`, it names no DNS name, address, e-mail or URI, and
//! asks for no CA powers; the certificate keeps only the subject and gets
//! client-auth usages, for `expirationSeconds` when the request asks for
//! less than [`LIFETIME`] (at least ten minutes, as upstream).
//!
//! Whether the *requester* may have it (a bootstrap identity allowed
//! `certificatesigningrequests/nodeclient`, or the node itself renewing) is
//! the approver's question ([`super::controller`]), not this module's.

use std::time::Duration;

use rcgen::{CertificateSigningRequestParams, ExtendedKeyUsagePurpose};

use super::kubelet_serving::{ClusterSigner, LIFETIME, SignError, node_request};

/// The signer name kubelets ask for client certificates with.
pub const SIGNER_NAME: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// The usages a node client certificate may ask for ("client auth" is
/// required).
pub const ALLOWED_USAGES: &[&str] = &["digital signature", "key encipherment", "client auth"];
/// The shortest lifetime a request may ask for (upstream's minimum
/// `expirationSeconds`).
pub const MIN_LIFETIME: Duration = Duration::from_secs(600);

/// Reads a PEM request and checks it against the signer's rules; returns
/// the node it names.
pub fn parse_request(
    csr_pem: &str,
) -> Result<(CertificateSigningRequestParams, String), SignError> {
    let (csr, node) = node_request(csr_pem, "client")?;
    if !csr.params.subject_alt_names.is_empty() {
        return Err(SignError::Refused(
            "a node client certificate names no DNS names, addresses, e-mails or URIs".into(),
        ));
    }
    Ok((csr, node))
}

impl ClusterSigner {
    /// Signs a node client request that follows the signer's rules, valid
    /// for `expiration` (clamped to [`MIN_LIFETIME`]..[`LIFETIME`]) or
    /// [`LIFETIME`]; returns the certificate (PEM) and the node.
    pub fn sign_kubelet_client(
        &self,
        csr_pem: &str,
        expiration: Option<Duration>,
    ) -> Result<(String, String), SignError> {
        let (mut csr, node) = parse_request(csr_pem)?;
        let lifetime = expiration.map_or(LIFETIME, |d| d.clamp(MIN_LIFETIME, LIFETIME));
        csr.params.subject_alt_names.clear();
        let cert = self.issue(csr, ExtendedKeyUsagePurpose::ClientAuth, lifetime)?;
        Ok((cert, node))
    }
}

#[cfg(test)]
mod tests {
    use super::super::kubelet_serving::{BACKDATE, NODES_GROUP};
    use super::*;
    use rcgen::SanType;

    fn request(cn: &str, orgs: &[&str], sans: Vec<SanType>) -> String {
        super::super::testing::request(cn, orgs, sans, false)
    }

    #[test]
    fn only_node_client_requests_qualify() {
        let (_, node) = parse_request(&request("system:node:n1", &[NODES_GROUP], vec![])).unwrap();
        assert_eq!(node, "n1");
        for (what, pem) in [
            ("not a node", request("admin", &[NODES_GROUP], vec![])),
            ("no group", request("system:node:n1", &[], vec![])),
            (
                "masters",
                request("system:node:n1", &[NODES_GROUP, "system:masters"], vec![]),
            ),
            (
                "an address",
                request(
                    "system:node:n1",
                    &[NODES_GROUP],
                    vec![SanType::IpAddress("10.0.0.1".parse().unwrap())],
                ),
            ),
        ] {
            assert!(
                matches!(parse_request(&pem), Err(SignError::Refused(_))),
                "{what} was accepted"
            );
        }
    }

    #[test]
    fn the_certificate_is_a_client_certificate_of_the_asked_lifetime() {
        let certs = super::super::testing::ca();
        let signer = ClusterSigner::from_pem(&certs.0, &certs.1).unwrap();
        let pem = request("system:node:n1", &[NODES_GROUP], vec![]);
        let (cert, node) = signer
            .sign_kubelet_client(&pem, Some(Duration::from_secs(3600)))
            .unwrap();
        assert_eq!(node, "n1");
        let der = super::super::testing::der_of(&cert);
        let (_, parsed) = x509_parser::parse_x509_certificate(&der).unwrap();
        let validity = parsed.validity();
        let secs = validity.not_after.timestamp() - validity.not_before.timestamp();
        assert_eq!(secs, 3600 + BACKDATE.as_secs() as i64);
        let eku = parsed.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.client_auth && !eku.server_auth);
        // Too short a request gets the minimum.
        let (cert, _) = signer
            .sign_kubelet_client(&pem, Some(Duration::from_secs(1)))
            .unwrap();
        let der = super::super::testing::der_of(&cert);
        let (_, parsed) = x509_parser::parse_x509_certificate(&der).unwrap();
        let v = parsed.validity();
        assert_eq!(
            v.not_after.timestamp() - v.not_before.timestamp(),
            (MIN_LIFETIME + BACKDATE).as_secs() as i64
        );
    }
}
