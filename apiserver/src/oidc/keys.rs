//! An issuer's signing keys: its discovery document names its JWKS, fetched
//! over HTTPS (trusting the configured CA, or the system roots) when the
//! server starts, every hour after, and again when a token names a key not
//! yet known (at most once per [`MIN_REFETCH`], so tokens with made-up key
//! ids cannot make the server hammer the issuer). Until the first fetch
//! succeeds no token of the issuer authenticates.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use http::header;
use jsonwebtoken::jwk::JwkSet;
use parking_lot::RwLock;
use tokio::sync::Notify;

use super::config::IssuerConfig;

/// How often keys are fetched again when nothing asks sooner.
const REFRESH: Duration = Duration::from_secs(3600);
/// Least time between two fetches.
const MIN_REFETCH: Duration = Duration::from_secs(10);
/// How long one fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest discovery document or key set read.
const MAX_BODY: usize = 1024 * 1024;

/// The keys of one issuer, as last fetched.
pub(crate) struct IssuerKeys {
    keys: RwLock<Option<Arc<JwkSet>>>,
    /// Asks the fetcher for the keys again (a token named an unknown key).
    wanted: Notify,
}

impl IssuerKeys {
    pub(crate) fn new() -> Self {
        Self {
            keys: RwLock::new(None),
            wanted: Notify::new(),
        }
    }

    /// The keys as last fetched; `None` before the first fetch.
    pub(crate) fn current(&self) -> Option<Arc<JwkSet>> {
        self.keys.read().clone()
    }

    /// Asks for the keys to be fetched again soon.
    pub(crate) fn ask_again(&self) {
        self.wanted.notify_one();
    }

    #[cfg(test)]
    pub(crate) fn set(&self, keys: JwkSet) {
        *self.keys.write() = Some(Arc::new(keys));
    }

    /// Keeps the keys of `issuer` fetched, for as long as the task runs.
    pub(crate) async fn keep_fetched(self: Arc<Self>, issuer: IssuerConfig) {
        let roots = match roots(&issuer) {
            Ok(roots) => roots,
            Err(error) => {
                tracing::error!(issuer = %issuer.url, %error, "cannot trust the issuer's server");
                return;
            }
        };
        loop {
            let started = Instant::now();
            let wait = match fetch(&issuer, &roots).await {
                Ok(keys) => {
                    tracing::info!(issuer = %issuer.url, keys = keys.keys.len(), "fetched the issuer's signing keys");
                    *self.keys.write() = Some(Arc::new(keys));
                    REFRESH
                }
                Err(error) => {
                    tracing::warn!(issuer = %issuer.url, %error, "fetching the issuer's signing keys failed");
                    MIN_REFETCH
                }
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.wanted.notified() => {
                    let since = started.elapsed();
                    if since < MIN_REFETCH {
                        tokio::time::sleep(MIN_REFETCH - since).await;
                    }
                }
            }
        }
    }
}

fn roots(issuer: &IssuerConfig) -> Result<Arc<rustls::RootCertStore>, String> {
    if let Some(pem) = &issuer.certificate_authority {
        return crate::tls::bundle_roots(pem.as_bytes())
            .map(Arc::new)
            .ok_or_else(|| "certificateAuthority holds no certificate".to_owned());
    }
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    Ok(Arc::new(roots))
}

/// The issuer's discovery document, then the key set it names.
async fn fetch(
    issuer: &IssuerConfig,
    roots: &Arc<rustls::RootCertStore>,
) -> Result<JwkSet, String> {
    #[derive(serde::Deserialize)]
    struct Discovery {
        issuer: String,
        jwks_uri: String,
    }
    let body = get(&issuer.discovery_url, roots).await?;
    let discovery: Discovery = serde_json::from_slice(&body)
        .map_err(|e| format!("decoding the discovery document: {e}"))?;
    if discovery.issuer != issuer.url {
        return Err(format!(
            "oidc: issuer did not match the issuer returned by provider, expected {:?} got {:?}",
            issuer.url, discovery.issuer
        ));
    }
    let body = get(&discovery.jwks_uri, roots).await?;
    serde_json::from_slice(&body).map_err(|e| format!("decoding the key set: {e}"))
}

/// One HTTPS GET of `url`, bounded by [`FETCH_TIMEOUT`].
async fn get(url: &str, roots: &Arc<rustls::RootCertStore>) -> Result<Vec<u8>, String> {
    tokio::time::timeout(FETCH_TIMEOUT, get_unbounded(url, roots))
        .await
        .map_err(|_| format!("Get {url:?}: context deadline exceeded"))?
        .map_err(|e| format!("Get {url:?}: {e}"))
}

async fn get_unbounded(url: &str, roots: &Arc<rustls::RootCertStore>) -> Result<Vec<u8>, String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("{e}"))?;
    if uri.scheme_str() != Some("https") {
        return Err("only https URLs are fetched".into());
    }
    let host = uri
        .host()
        .ok_or("no host")?
        .trim_matches(['[', ']'])
        .to_owned();
    let port = uri.port_u16().unwrap_or(443);
    let dial = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let request = http::Request::builder()
        .method(http::Method::GET)
        .uri(path)
        .header(
            header::HOST,
            uri.authority().map_or(host.as_str(), |a| a.as_str()),
        )
        .header(header::ACCEPT, "application/json")
        .header(header::USER_AGENT, "skiff-apiserver")
        .body(Body::empty())
        .map_err(|e| e.to_string())?;
    let (status, bytes) = crate::outbound::exchange(
        roots.clone(),
        &dial,
        &host,
        request,
        "oidc issuer",
        MAX_BODY,
    )
    .await?;
    if !status.is_success() {
        return Err(format!(
            "{}: {}",
            status,
            String::from_utf8_lossy(&bytes).trim()
        ));
    }
    Ok(bytes.to_vec())
}
