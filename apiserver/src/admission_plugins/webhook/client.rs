//! The HTTPS call to a webhook: one POST of the review over a fresh TLS
//! connection ([`crate::outbound`]), the whole exchange bounded by the
//! hook's timeout. The server is trusted when its certificate chains to the hook's
//! `caBundle`, or — without one — to the system roots or the cluster CA,
//! and names the host dialed (or `<service>.<namespace>.svc`). The API
//! server presents no client certificate and forwards nothing of the
//! caller's request: the review body is all a webhook receives.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::body::Body;
use http::header;
use rustls::pki_types::CertificateDer;

use super::target::Target;

/// Largest answer read from a webhook.
const MAX_RESPONSE_BYTES: usize = 10 * 1024 * 1024;

/// What webhooks without a `caBundle` are trusted by: the system roots
/// and the cluster CA the server was given.
#[derive(Default)]
pub(crate) struct WebhookTrust {
    cluster_ca: Vec<CertificateDer<'static>>,
    /// The roots of calls without a caBundle, built on first use (reading
    /// the system's certificates is not free).
    default_roots: OnceLock<Arc<rustls::RootCertStore>>,
}

impl WebhookTrust {
    /// Trusts the system roots and the CA certificates in `cluster_ca_pem`.
    pub(crate) fn new(cluster_ca_pem: Option<&str>) -> Self {
        let cluster_ca = cluster_ca_pem
            .map(|pem| {
                rustls_pemfile::certs(&mut pem.as_bytes())
                    .filter_map(Result::ok)
                    .collect()
            })
            .unwrap_or_default();
        Self {
            cluster_ca,
            default_roots: OnceLock::new(),
        }
    }

    fn default_roots(&self) -> Arc<rustls::RootCertStore> {
        self.default_roots
            .get_or_init(|| {
                let mut roots = rustls::RootCertStore::empty();
                let native = rustls_native_certs::load_native_certs();
                for error in &native.errors {
                    tracing::debug!(%error, "a system root certificate could not be read");
                }
                roots.add_parsable_certificates(native.certs);
                roots.add_parsable_certificates(self.cluster_ca.clone());
                Arc::new(roots)
            })
            .clone()
    }

    /// The roots a call trusts: the hook's bundle alone when it has one.
    fn roots(&self, ca_bundle: Option<&[u8]>) -> Result<Arc<rustls::RootCertStore>, String> {
        let Some(bundle) = ca_bundle else {
            return Ok(self.default_roots());
        };
        let roots = crate::tls::bundle_roots(bundle)
            .ok_or("unable to load root certificates: no certificates found in caBundle")?;
        Ok(Arc::new(roots))
    }
}

/// Posts `body` to the target and returns the answer's bytes; the error is
/// the text upstream shows after `Post "<url>": `.
pub(super) async fn post(
    trust: &WebhookTrust,
    ca_bundle: Option<&[u8]>,
    target: &Target,
    body: Vec<u8>,
    timeout: Duration,
) -> Result<Vec<u8>, String> {
    match tokio::time::timeout(timeout, exchange(trust, ca_bundle, target, body)).await {
        Ok(result) => result,
        Err(_) => Err("context deadline exceeded".into()),
    }
}

async fn exchange(
    trust: &WebhookTrust,
    ca_bundle: Option<&[u8]>,
    target: &Target,
    body: Vec<u8>,
) -> Result<Vec<u8>, String> {
    let roots = trust.roots(ca_bundle)?;
    let request = http::Request::builder()
        .method(http::Method::POST)
        .uri(&target.path)
        .header(header::HOST, &target.host)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, */*")
        .header(header::USER_AGENT, "skiff-apiserver")
        .body(Body::from(body))
        .map_err(|e| e.to_string())?;
    let (status, bytes) = crate::outbound::exchange(
        roots,
        &target.dial,
        &target.server_name,
        request,
        "webhook",
        MAX_RESPONSE_BYTES,
    )
    .await?;
    if !status.is_success() {
        let text = String::from_utf8_lossy(&bytes);
        return Err(format!(
            "the server responded with status code {} ({})",
            status.as_u16(),
            text.trim()
        ));
    }
    Ok(bytes.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_without_certificates_is_an_error() {
        let trust = WebhookTrust::new(None);
        assert_eq!(
            trust.roots(Some(b"junk")).unwrap_err(),
            "unable to load root certificates: no certificates found in caBundle"
        );
    }
}
