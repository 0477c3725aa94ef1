//! A remote node's serving certificate through the certificates API, as
//! the kubelet gets it: a CertificateSigningRequest for the signer
//! `kubernetes.io/kubelet-serving` (usages digital signature, key
//! encipherment, server auth), created with the node's own credentials so
//! the API server records the node as its requester; the controller
//! manager approves and signs it, and this waits for the certificate.
//!
//! Only the request travels; the private key stays with
//! [`super::serving_cert`].

use std::time::{Duration, Instant};

use async_trait::async_trait;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::PostParams;

use super::serving_cert::{ServingCertError, ServingCertRequest, ServingCertSigner};

/// The signer kubelets ask for serving certificates.
pub const KUBELET_SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";

/// Asks the cluster to sign through a CertificateSigningRequest.
pub struct CsrSigner {
    client: kube::Client,
    wait: Duration,
    poll: Duration,
}

impl CsrSigner {
    /// A signer that waits up to 15 minutes for each certificate.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            wait: Duration::from_secs(900),
            poll: Duration::from_secs(1),
        }
    }
}

/// The object that asks for `request`'s certificate.
pub fn csr_object(request: &ServingCertRequest) -> CertificateSigningRequest {
    CertificateSigningRequest {
        metadata: ObjectMeta {
            generate_name: Some(format!("kubelet-serving-{}-", request.node_name)),
            ..Default::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(request.csr_pem.clone().into_bytes()),
            signer_name: KUBELET_SERVING_SIGNER.to_string(),
            usages: Some(vec![
                "digital signature".to_string(),
                "key encipherment".to_string(),
                "server auth".to_string(),
            ]),
            ..Default::default()
        },
        status: None,
    }
}

#[async_trait]
impl ServingCertSigner for CsrSigner {
    async fn sign(&self, request: &ServingCertRequest) -> Result<String, ServingCertError> {
        request_certificate(&self.client, &csr_object(request), self.wait, self.poll)
            .await
            .map_err(|e| match e {
                CsrError::NotPem => {
                    ServingCertError::Signed("the certificate is not PEM text".into())
                }
                other => ServingCertError::Sign(other.to_string()),
            })
    }
}

/// Why a CertificateSigningRequest brought no certificate.
#[derive(Debug, thiserror::Error)]
pub enum CsrError {
    /// The request could not be created (the API's refusal).
    #[error("creating the CertificateSigningRequest: {0}")]
    Create(#[source] kube::Error),
    /// An approver denied it, or the signer failed it.
    #[error("CertificateSigningRequest {name} {verdict}: {message}")]
    Refused {
        /// The request.
        name: String,
        /// `denied` or `failed`.
        verdict: String,
        /// Why.
        message: String,
    },
    /// Nobody signed it in time.
    #[error("CertificateSigningRequest {name} was not signed within {wait:?}")]
    Timeout {
        /// The request.
        name: String,
        /// How long was waited.
        wait: Duration,
    },
    /// The certificate is not text.
    #[error("the issued certificate is not PEM text")]
    NotPem,
}

/// Creates `csr` with `client` (whose identity the API server records as
/// the requester) and waits up to `wait` for its certificate (PEM).
pub async fn request_certificate(
    client: &kube::Client,
    csr: &CertificateSigningRequest,
    wait: Duration,
    poll: Duration,
) -> Result<String, CsrError> {
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let created = api
        .create(&PostParams::default(), csr)
        .await
        .map_err(CsrError::Create)?;
    let name = created.metadata.name.unwrap_or_default();
    tracing::info!(csr = %name, signer = %csr.spec.signer_name, "waiting for the certificate request to be approved and signed");
    let deadline = Instant::now() + wait;
    loop {
        match api.get(&name).await {
            Ok(csr) => {
                let status = csr.status.unwrap_or_default();
                if let Some(refused) =
                    status.conditions.iter().flatten().find(|c| {
                        (c.type_ == "Denied" || c.type_ == "Failed") && c.status == "True"
                    })
                {
                    return Err(CsrError::Refused {
                        name,
                        verdict: refused.type_.to_lowercase(),
                        message: refused.message.clone().unwrap_or_default(),
                    });
                }
                if let Some(cert) = status.certificate.filter(|c| !c.0.is_empty()) {
                    return String::from_utf8(cert.0).map_err(|_| CsrError::NotPem);
                }
            }
            Err(error) => {
                tracing::debug!(csr = %name, %error, "reading the CertificateSigningRequest")
            }
        }
        if Instant::now() >= deadline {
            return Err(CsrError::Timeout { name, wait });
        }
        tokio::time::sleep(poll).await;
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::certificates::v1::CertificateSigningRequestCondition;
    use skiff_testkit::{TestCluster, UserInfo};

    use super::*;
    use crate::agent::identity::test_pki::the_request;

    /// A real request (the API server refuses one that does not parse),
    /// made once so every call sends the same bytes.
    fn request() -> ServingCertRequest {
        static PEM: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let csr_pem = PEM.get_or_init(|| {
            let key = rcgen::KeyPair::generate().unwrap();
            crate::agent::identity::pki::node_subject("n1")
                .serialize_request(&key)
                .and_then(|r| r.pem())
                .unwrap()
        });
        ServingCertRequest {
            node_name: "n1".into(),
            csr_pem: csr_pem.clone(),
            addresses: vec!["10.0.0.5".into()],
        }
    }

    /// Node n1 asks for a serving certificate (in a task); the requests
    /// seen by the administrator, who plays the controller manager.
    fn node_asks(
        cluster: &TestCluster,
    ) -> (
        tokio::task::JoinHandle<Result<String, ServingCertError>>,
        Api<CertificateSigningRequest>,
    ) {
        let signer = CsrSigner {
            client: cluster.client_as(UserInfo::new(
                "system:node:n1",
                ["system:nodes".to_string()],
            )),
            wait: Duration::from_secs(10),
            poll: Duration::from_millis(20),
        };
        let waiting = tokio::spawn(async move { signer.sign(&request()).await });
        (waiting, Api::all(cluster.admin()))
    }

    #[tokio::test]
    async fn the_node_asks_as_itself_and_takes_the_signed_certificate() {
        let cluster = TestCluster::start().await;
        let (waiting, api) = node_asks(&cluster);
        let mut csr = the_request(&api).await;
        assert_eq!(csr.spec.username.as_deref(), Some("system:node:n1"));
        assert_eq!(csr.spec.signer_name, KUBELET_SERVING_SIGNER);
        assert_eq!(
            csr.spec.usages.clone().unwrap(),
            ["digital signature", "key encipherment", "server auth"]
        );
        assert_eq!(csr.spec.request.0, request().csr_pem.into_bytes());
        // Played by the controller manager: the certificate appears.
        csr.status.get_or_insert_with(Default::default).certificate =
            Some(ByteString(b"SIGNED PEM".to_vec()));
        let name = csr.metadata.name.clone().unwrap();
        api.replace_status(&name, &PostParams::default(), &csr)
            .await
            .unwrap();
        assert_eq!(waiting.await.unwrap().unwrap(), "SIGNED PEM");
    }

    #[tokio::test]
    async fn a_denied_request_is_an_error() {
        let cluster = TestCluster::start().await;
        let (waiting, api) = node_asks(&cluster);
        let mut csr = the_request(&api).await;
        csr.status
            .get_or_insert_with(Default::default)
            .conditions
            .get_or_insert_with(Vec::new)
            .push(CertificateSigningRequestCondition {
                type_: "Denied".into(),
                status: "True".into(),
                reason: Some("NotYours".into()),
                message: Some("not your address".into()),
                ..Default::default()
            });
        let name = csr.metadata.name.clone().unwrap();
        api.replace_subresource("approval", &name, &PostParams::default(), &csr)
            .await
            .unwrap();
        let err = waiting.await.unwrap().unwrap_err().to_string();
        assert!(err.contains("denied: not your address"), "{err}");
    }
}
