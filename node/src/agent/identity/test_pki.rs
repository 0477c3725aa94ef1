//! A throwaway cluster CA for the node crate's unit tests: it signs node
//! serving requests as `skiff server` would and issues client certificates.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::Api;
use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DnType,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

use super::serving_cert::{ServingCertError, ServingCertRequest, ServingCertSigner};

pub(crate) struct TestCa {
    pub cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
    pub signed: AtomicUsize,
}

impl TestCa {
    pub(crate) fn new(name: &str) -> Arc<Self> {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).unwrap();
        let cert_pem = cert.pem();
        let issuer = Issuer::from_ca_cert_pem(&cert_pem, key).unwrap();
        Arc::new(Self {
            cert_pem,
            issuer,
            signed: AtomicUsize::new(0),
        })
    }

    /// Signs a request as it stands, as a server certificate.
    pub(crate) fn sign_csr(&self, csr_pem: &str) -> String {
        self.sign_for(csr_pem, ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// Signs a request as it stands, as a client certificate.
    pub(crate) fn sign_client_csr(&self, csr_pem: &str) -> String {
        self.sign_for(csr_pem, ExtendedKeyUsagePurpose::ClientAuth)
    }

    fn sign_for(&self, csr_pem: &str, usage: ExtendedKeyUsagePurpose) -> String {
        let mut csr = CertificateSigningRequestParams::from_pem(csr_pem).unwrap();
        csr.params.extended_key_usages = vec![usage];
        csr.params.use_authority_key_identifier_extension = true;
        self.signed.fetch_add(1, Ordering::SeqCst);
        csr.signed_by(&self.issuer).unwrap().pem()
    }

    /// A client certificate and key for `user` in `groups`.
    pub(crate) fn client_cert(&self, user: &str, groups: &[&str]) -> (String, String) {
        self.client_cert_between(user, groups, None)
    }

    /// As [`Self::client_cert`], valid from `not_before` to `not_after`
    /// when given.
    pub(crate) fn client_cert_between(
        &self,
        user: &str,
        groups: &[&str],
        validity: Option<(std::time::SystemTime, std::time::SystemTime)>,
    ) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        if let Some((not_before, not_after)) = validity {
            params.not_before = not_before.into();
            params.not_after = not_after.into();
        }
        params.distinguished_name.push(DnType::CommonName, user);
        for g in groups {
            params.distinguished_name.push(DnType::OrganizationName, *g);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.use_authority_key_identifier_extension = true;
        (
            params.signed_by(&key, &self.issuer).unwrap().pem(),
            key.serialize_pem(),
        )
    }
}

/// A CSR's parameters and its subject as `type=value` entries: what the
/// request cases check of what the node asks for.
pub(crate) fn parse_csr(pem: &str) -> (CertificateSigningRequestParams, Vec<String>) {
    let csr = CertificateSigningRequestParams::from_pem(pem).unwrap();
    let subject = csr
        .params
        .distinguished_name
        .iter()
        .map(|(t, v)| format!("{t:?}={v:?}"))
        .collect();
    (csr, subject)
}

/// The one CertificateSigningRequest in the cluster, once a node under test
/// has created it (panics after about 4 s).
pub(crate) async fn the_request(api: &Api<CertificateSigningRequest>) -> CertificateSigningRequest {
    for _ in 0..200 {
        if let Some(csr) = api.list(&Default::default()).await.unwrap().items.pop() {
            return csr;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("no CertificateSigningRequest was created");
}

/// Signs every request with the CA.
pub(crate) struct CaSigner(pub Arc<TestCa>);

#[async_trait::async_trait]
impl ServingCertSigner for CaSigner {
    async fn sign(&self, request: &ServingCertRequest) -> Result<String, ServingCertError> {
        Ok(self.0.sign_csr(&request.csr_pem))
    }
}
