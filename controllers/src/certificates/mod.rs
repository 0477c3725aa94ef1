//! Certificates of the cluster: the `kubernetes.io/kubelet-serving` signer's
//! rules and signature ([`kubelet_serving`]), the
//! `kubernetes.io/kube-apiserver-client-kubelet` signer's ([`kubelet_client`],
//! node client certificates from the kubelet TLS bootstrap), the
//! `kubernetes.io/kube-apiserver-client` signer's ([`api_server_client`],
//! users' client certificates, approved by a human), and the controller
//! that approves the nodes' requests and signs all three ([`controller`]).

pub mod api_server_client;
pub mod controller;
pub mod kubelet_client;
pub mod kubelet_serving;

/// Certificate requests for the signers' tests.
#[cfg(test)]
mod testing {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SanType};

    /// A PEM request with subject `CN=<cn>` and `O=<orgs>`, asking for
    /// `sans`, and for a CA when `ca`.
    pub(super) fn request(cn: &str, orgs: &[&str], sans: Vec<SanType>, ca: bool) -> String {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, cn);
        for o in orgs {
            params.distinguished_name.push(DnType::OrganizationName, *o);
        }
        params.subject_alt_names = sans;
        if ca {
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        }
        params.serialize_request(&key).unwrap().pem().unwrap()
    }

    /// A throwaway CA (certificate PEM, key PEM).
    pub(super) fn ca() -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "test-ca");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// The DER of a PEM certificate.
    pub(super) fn der_of(pem: &str) -> Vec<u8> {
        x509_parser::pem::parse_x509_pem(pem.as_bytes())
            .unwrap()
            .1
            .contents
    }
}
