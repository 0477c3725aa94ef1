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
        let api: Api<CertificateSigningRequest> = Api::all(self.client.clone());
        let created = api
            .create(&PostParams::default(), &csr_object(request))
            .await
            .map_err(|e| {
                ServingCertError::Sign(format!("creating the CertificateSigningRequest: {e}"))
            })?;
        let name = created.metadata.name.unwrap_or_default();
        tracing::info!(csr = %name, "waiting for the node serving certificate to be approved and signed");
        let deadline = Instant::now() + self.wait;
        loop {
            match api.get(&name).await {
                Ok(csr) => {
                    let status = csr.status.unwrap_or_default();
                    if let Some(refused) = status.conditions.iter().flatten().find(|c| {
                        (c.type_ == "Denied" || c.type_ == "Failed") && c.status == "True"
                    }) {
                        return Err(ServingCertError::Sign(format!(
                            "CertificateSigningRequest {name} {}: {}",
                            refused.type_.to_lowercase(),
                            refused.message.clone().unwrap_or_default()
                        )));
                    }
                    if let Some(cert) = status.certificate.filter(|c| !c.0.is_empty()) {
                        return String::from_utf8(cert.0).map_err(|_| {
                            ServingCertError::Signed("the certificate is not PEM text".into())
                        });
                    }
                }
                Err(error) => {
                    tracing::debug!(csr = %name, %error, "reading the CertificateSigningRequest")
                }
            }
            if Instant::now() >= deadline {
                return Err(ServingCertError::Sign(format!(
                    "CertificateSigningRequest {name} was not signed within {:?}",
                    self.wait
                )));
            }
            tokio::time::sleep(self.poll).await;
        }
    }
}
