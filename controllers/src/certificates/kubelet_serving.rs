//! The `kubernetes.io/kubelet-serving` signer's rules and signature: a
//! request qualifies when its subject is exactly `system:node:<name>` in the
//! single group `system:nodes`, it names at least one DNS name or IP address
//! and nothing else (no e-mail, no URI), and it asks for no CA powers. The
//! certificate issued keeps only the subject and names of the request and
//! gets this signer's own usages (digital signature, key encipherment,
//! server auth) and a one-year lifetime.
//!
//! This module holds the cluster CA's key only as long as its caller keeps
//! the [`ClusterSigner`]; it never writes it anywhere. Whether a *requester*
//! may have such a certificate (is it that node, are those its addresses)
//! is the approver's question, not this module's.

use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use rcgen::{
    CertificateParams, CertificateSigningRequestParams, DnType, DnValue, ExtendedKeyUsagePurpose,
    IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};

/// The signer name kubelets ask for serving certificates with.
pub const SIGNER_NAME: &str = "kubernetes.io/kubelet-serving";
/// The group of every node identity.
pub const NODES_GROUP: &str = "system:nodes";
/// The user prefix of node identities.
pub const NODE_USER_PREFIX: &str = "system:node:";
/// How long an issued certificate is valid.
pub const LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);
/// How far back the validity starts, for clocks a little behind ours.
pub(super) const BACKDATE: Duration = Duration::from_secs(5 * 60);

/// Why a request was not signed.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// The CA certificate or key is unusable.
    #[error("the cluster CA is unusable: {0}")]
    Ca(String),
    /// The request is not a valid PKCS#10 request (or its signature is bad).
    #[error("the certificate request cannot be parsed: {0}")]
    Parse(String),
    /// The request is well formed but breaks this signer's rules.
    #[error("{0}")]
    Refused(String),
    /// rcgen failed to produce the certificate.
    #[error("signing failed: {0}")]
    Sign(String),
}

/// What a qualifying request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServingRequest {
    /// The node (the subject's CN without `system:node:`).
    pub node_name: String,
    /// The DNS names and IP addresses asked for, IPs in canonical form.
    pub names: Vec<String>,
}

/// Reads a PEM request for a node's `what` ("client", "serving")
/// certificate: it must name the node as [`node_subject`] says and not ask
/// for a CA. Returns the request and the node's name.
pub(super) fn node_request(
    csr_pem: &str,
    what: &str,
) -> Result<(CertificateSigningRequestParams, String), SignError> {
    let csr = CertificateSigningRequestParams::from_pem(csr_pem)
        .map_err(|e| SignError::Parse(e.to_string()))?;
    let node = node_subject(&csr)?;
    if !matches!(csr.params.is_ca, IsCa::NoCa | IsCa::ExplicitNoCa) {
        return Err(SignError::Refused(format!(
            "a {what} certificate cannot be a CA"
        )));
    }
    Ok((csr, node))
}

/// The node a request for a node's certificate names: its subject must be
/// exactly `CN=system:node:<name>, O=system:nodes` (the rule both kubelet
/// signers share).
pub(super) fn node_subject(csr: &CertificateSigningRequestParams) -> Result<String, SignError> {
    let mut cn = Vec::new();
    let mut orgs = Vec::new();
    for (kind, value) in csr.params.distinguished_name.iter() {
        let text = dn_text(value).ok_or_else(|| {
            SignError::Refused("the subject holds a value that is not text".into())
        })?;
        match kind {
            DnType::CommonName => cn.push(text),
            DnType::OrganizationName => orgs.push(text),
            other => {
                return Err(SignError::Refused(format!(
                    "the subject may only hold a common name and organizations, not {other:?}"
                )));
            }
        }
    }
    let node = match cn.as_slice() {
        [one] => one
            .strip_prefix(NODE_USER_PREFIX)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| {
                SignError::Refused(format!(
                    "the common name must be {NODE_USER_PREFIX}<node name>, not {one:?}"
                ))
            })?
            .to_string(),
        _ => {
            return Err(SignError::Refused(
                "the subject must hold exactly one common name".into(),
            ));
        }
    };
    if orgs != [NODES_GROUP] {
        return Err(SignError::Refused(format!(
            "the organization must be exactly [{NODES_GROUP}], not {orgs:?}"
        )));
    }
    Ok(node)
}

/// Reads a PEM certificate request and checks it against the signer's rules.
pub fn parse_request(
    csr_pem: &str,
) -> Result<(CertificateSigningRequestParams, ServingRequest), SignError> {
    let (csr, node_name) = node_request(csr_pem, "serving")?;
    let mut names = Vec::new();
    for san in &csr.params.subject_alt_names {
        match san {
            SanType::DnsName(d) => names.push(d.as_str().to_string()),
            SanType::IpAddress(ip) => names.push(ip.to_string()),
            _ => {
                return Err(SignError::Refused(
                    "only DNS names and IP addresses may be asked for".into(),
                ));
            }
        }
    }
    if names.is_empty() {
        return Err(SignError::Refused(
            "at least one DNS name or IP address is required".into(),
        ));
    }
    Ok((csr, ServingRequest { node_name, names }))
}

pub(super) fn dn_text(value: &DnValue) -> Option<String> {
    match value {
        DnValue::PrintableString(s) => Some(s.as_str().to_string()),
        DnValue::Utf8String(s) => Some(s.clone()),
        DnValue::Ia5String(s) => Some(s.as_str().to_string()),
        DnValue::TeletexString(s) => Some(s.as_str().to_string()),
        _ => None,
    }
}

/// The cluster CA, ready to sign.
pub struct ClusterSigner {
    pub(super) issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for ClusterSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterSigner").finish_non_exhaustive()
    }
}

impl ClusterSigner {
    /// The signer of the CA whose certificate and key are given (PEM).
    pub fn from_pem(ca_cert_pem: &str, ca_key_pem: &str) -> Result<Self, SignError> {
        let key = KeyPair::from_pem(ca_key_pem).map_err(|e| SignError::Ca(e.to_string()))?;
        let issuer =
            Issuer::from_ca_cert_pem(ca_cert_pem, key).map_err(|e| SignError::Ca(e.to_string()))?;
        Ok(Self { issuer })
    }

    /// Signs a kubelet serving request that follows the signer's rules;
    /// returns the certificate (PEM) and what it was issued for.
    pub fn sign_kubelet_serving(
        &self,
        csr_pem: &str,
    ) -> Result<(String, ServingRequest), SignError> {
        let (csr, request) = parse_request(csr_pem)?;
        let cert = self.issue(csr, ExtendedKeyUsagePurpose::ServerAuth, LIFETIME)?;
        Ok((cert, request))
    }

    /// Signs `csr` as a leaf certificate for `purpose` lasting `lifetime`
    /// (see [`leaf_params`]); returns it as PEM.
    pub(super) fn issue(
        &self,
        mut csr: CertificateSigningRequestParams,
        purpose: ExtendedKeyUsagePurpose,
        lifetime: Duration,
    ) -> Result<String, SignError> {
        leaf_params(&mut csr.params, purpose, lifetime);
        let cert = csr
            .signed_by(&self.issuer)
            .map_err(|e| SignError::Sign(e.to_string()))?;
        Ok(cert.pem())
    }
}

/// What a kubelet certificate is, whatever its request asked: a leaf for
/// `purpose`, valid for `lifetime` from a little before now, with only the
/// extensions the signer adds.
pub(super) fn leaf_params(
    params: &mut CertificateParams,
    purpose: ExtendedKeyUsagePurpose,
    lifetime: Duration,
) {
    let now = SystemTime::now();
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![purpose];
    params.not_before = (now - BACKDATE).into();
    params.not_after = (now + lifetime).into();
    // rcgen derives the serial from the (fresh) public key.
    params.serial_number = None;
    params.use_authority_key_identifier_extension = true;
    params.custom_extensions.clear();
    params.crl_distribution_points.clear();
    params.name_constraints = None;
}

/// Whether `name` (as a request names it) is one of `addresses` (as a
/// Node publishes them); IPs compare by value.
pub fn names_address(name: &str, addresses: &[String]) -> bool {
    match name.parse::<IpAddr>() {
        Ok(ip) => addresses
            .iter()
            .any(|a| a.parse::<IpAddr>().is_ok_and(|b| b == ip)),
        Err(_) => addresses.iter().any(|a| a.eq_ignore_ascii_case(name)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::request;
    use super::*;

    fn ip(s: &str) -> SanType {
        SanType::IpAddress(s.parse().unwrap())
    }

    #[test]
    fn only_node_serving_requests_qualify() {
        let good = request(
            "system:node:n1",
            &[NODES_GROUP],
            vec![ip("10.0.0.1")],
            false,
        );
        let (_, parsed) = parse_request(&good).unwrap();
        assert_eq!(parsed.node_name, "n1");
        assert_eq!(parsed.names, ["10.0.0.1"]);

        for (what, pem) in [
            (
                "not a node",
                request("admin", &[NODES_GROUP], vec![ip("10.0.0.1")], false),
            ),
            (
                "empty node name",
                request("system:node:", &[NODES_GROUP], vec![ip("10.0.0.1")], false),
            ),
            (
                "no group",
                request("system:node:n1", &[], vec![ip("10.0.0.1")], false),
            ),
            (
                "an extra group",
                request(
                    "system:node:n1",
                    &[NODES_GROUP, "system:masters"],
                    vec![ip("10.0.0.1")],
                    false,
                ),
            ),
            (
                "no names",
                request("system:node:n1", &[NODES_GROUP], vec![], false),
            ),
            (
                "an e-mail name",
                request(
                    "system:node:n1",
                    &[NODES_GROUP],
                    vec![SanType::Rfc822Name("a@b.c".try_into().unwrap())],
                    false,
                ),
            ),
            (
                "a CA",
                request("system:node:n1", &[NODES_GROUP], vec![ip("10.0.0.1")], true),
            ),
        ] {
            assert!(
                matches!(parse_request(&pem), Err(SignError::Refused(_))),
                "{what} was accepted"
            );
        }
        assert!(matches!(parse_request("garbage"), Err(SignError::Parse(_))));
    }

    #[test]
    fn addresses_compare_by_value() {
        let addresses = ["10.0.0.1".to_string(), "Node-1".to_string()];
        assert!(names_address("10.0.0.1", &addresses));
        assert!(names_address("node-1", &addresses));
        assert!(!names_address("10.0.0.2", &addresses));
        assert!(!names_address("node-2", &addresses));
    }
}
