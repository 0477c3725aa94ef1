//! Requests for a group/version that an APIService hands to a Service
//! (upstream's aggregator proxy). Only group/versions this server does not
//! serve itself are ever proxied, so no APIService can take over a
//! built-in or custom group. The request has passed authentication and
//! authorization here already; it goes to a ready endpoint of the Service
//! over TLS (the server's certificate checked against the APIService's
//! `caBundle` for `<service>.<namespace>.svc`, unless
//! `insecureSkipTLSVerify`), presenting the front-proxy client certificate,
//! with the caller's identity in `X-Remote-User`, `X-Remote-Group` and
//! `X-Remote-Extra-*` and none of its own credentials.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use base64::Engine;
use http::header::{self, HeaderName, HeaderValue};
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::Value;

use crate::admission_plugins::webhook::target::service_address;
use crate::authn::UserInfo;
use crate::handlers::streaming::proxy::handshake;
use crate::server::Inner;
use crate::status::ApiError;
use crate::tls::server_check::ServerCheck;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The front-proxy CA and client certificate and key, parsed once.
pub struct FrontProxyTls {
    /// The front-proxy CA (PEM), which extension API servers are told to
    /// trust for identity headers (`requestheader-client-ca-file`).
    pub ca_pem: String,
    provider: Arc<rustls::crypto::CryptoProvider>,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl std::fmt::Debug for FrontProxyTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrontProxyTls").finish_non_exhaustive()
    }
}

/// The front-proxy certificate could not be read.
#[derive(Debug, thiserror::Error)]
#[error("front-proxy client {0}")]
pub struct FrontProxyError(String);

impl FrontProxyTls {
    /// From the front-proxy CA and the client certificate and key (PEM).
    pub fn from_pem(ca_pem: &str, cert_pem: &str, key_pem: &str) -> Result<Self, FrontProxyError> {
        let chain: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| FrontProxyError(format!("certificate: {e}")))?;
        if chain.is_empty() {
            return Err(FrontProxyError("certificate: no PEM certificate".into()));
        }
        let key = rustls_pemfile::private_key(&mut key_pem.as_bytes())
            .ok()
            .flatten()
            .ok_or_else(|| FrontProxyError("key: no private key".into()))?;
        Ok(Self {
            ca_pem: ca_pem.to_string(),
            provider: Arc::new(rustls::crypto::ring::default_provider()),
            chain,
            key,
        })
    }

    /// A connector trusting `ca_bundle` (PEM), or anyone when `insecure`.
    fn connector(
        &self,
        ca_bundle: Option<&[u8]>,
        insecure: bool,
    ) -> Result<tokio_rustls::TlsConnector, String> {
        let builder = rustls::ClientConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let builder = if insecure {
            builder
                .dangerous()
                // `insecureSkipTLSVerify`: any certificate is accepted (its
                // signatures on the handshake still checked), as the
                // APIService asked.
                .with_custom_certificate_verifier(Arc::new(ServerCheck::any(self.provider.clone())))
        } else {
            let bundle = ca_bundle.ok_or("the APIService has no caBundle")?;
            let roots =
                crate::tls::bundle_roots(bundle).ok_or("no certificates found in caBundle")?;
            builder.with_root_certificates(roots)
        };
        let mut config = builder
            .with_client_auth_cert(self.chain.clone(), self.key.clone_key())
            .map_err(|e| e.to_string())?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
    }
}

/// The group and version of an `/apis/<group>/<version>[/...]` path.
pub(crate) fn group_version(path: &str) -> Option<(&str, &str)> {
    let mut parts = path.strip_prefix("/apis/")?.split('/');
    let group = parts.next().filter(|g| !g.is_empty())?;
    let version = parts.next().filter(|v| !v.is_empty())?;
    Some((group, version))
}

/// The Service-backed APIService that serves `path`, if any: only for a
/// group/version this server does not serve itself.
pub(crate) fn remote_for(inner: &Inner, path: &str) -> Option<Value> {
    let (group, version) = group_version(path)?;
    let registry = inner.registry.current();
    if registry.in_group_version(group, version).next().is_some() {
        return None;
    }
    let info = registry.get("apiregistration.k8s.io", "v1", "apiservices")?;
    let service = inner
        .cache(&info)
        .ok()?
        .get(&info.key(None, &format!("{version}.{group}")))?
        .to_value();
    service["spec"]["service"].is_object().then_some(service)
}

/// Why a proxied request could not be sent.
fn unavailable(detail: impl std::fmt::Display) -> ApiError {
    ApiError::ServiceUnavailable(format!(
        "the server is currently unable to handle the request ({detail})"
    ))
}

/// Headers that belong to the caller's hop (its credentials among them,
/// and its connection's), or that only this server may set.
fn dropped(name: &HeaderName) -> bool {
    crate::handlers::streaming::proxy::is_hop_header(name)
        || name == header::CONNECTION
        || name.as_str().starts_with("x-remote-")
}

/// Sends `request` to the APIService's Service as `user` and streams the
/// answer back.
pub(crate) async fn forward(
    inner: &Inner,
    service: &Value,
    user: &UserInfo,
    request: Request,
) -> Result<Response, ApiError> {
    let tls = inner
        .config
        .front_proxy
        .as_ref()
        .ok_or_else(|| unavailable("no front-proxy client certificate is configured"))?;
    let target = &service["spec"]["service"];
    let namespace = target["namespace"].as_str().unwrap_or("");
    let name = target["name"].as_str().unwrap_or("");
    let port = target["port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(443);
    let address = service_address(inner, namespace, name, port).map_err(unavailable)?;
    let ca_bundle = service["spec"]["caBundle"]
        .as_str()
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
    let insecure = service["spec"]["insecureSkipTLSVerify"].as_bool() == Some(true);
    let connector = tls
        .connector(ca_bundle.as_deref(), insecure)
        .map_err(unavailable)?;
    let server_name = format!("{name}.{namespace}.svc");
    let sni = ServerName::try_from(server_name.clone()).map_err(unavailable)?;

    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(&address))
        .await
        .map_err(|_| unavailable(format!("dial {address}: timed out")))?
        .map_err(|e| unavailable(format!("dial {address}: {e}")))?;
    let _ = tcp.set_nodelay(true);
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(sni, tcp))
        .await
        .map_err(|_| unavailable("TLS handshake timed out"))?
        .map_err(|e| unavailable(format!("TLS handshake with {server_name}: {e}")))?;
    let mut sender = handshake(TokioIo::new(stream), false, "aggregated API")
        .await
        .map_err(unavailable)?;

    let (parts, body) = request.into_parts();
    let uri = parts
        .uri
        .path_and_query()
        .map(|pq| pq.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let mut builder = http::Request::builder()
        .method(parts.method)
        .uri(uri)
        .header(header::HOST, format!("{server_name}:{port}"));
    for (name, value) in parts.headers.iter().filter(|(n, _)| !dropped(n)) {
        builder = builder.header(name, value);
    }
    builder = builder.header("x-remote-user", header_value(&user.name)?);
    for group in &user.groups {
        builder = builder.header("x-remote-group", header_value(group)?);
    }
    for (key, values) in &user.extra {
        let name = format!("x-remote-extra-{}", escape_extra_key(key));
        for value in values {
            builder = builder.header(name.as_str(), header_value(value)?);
        }
    }
    let outgoing = builder
        .body(body)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let answer = sender.send_request(outgoing).await.map_err(unavailable)?;
    let (parts, body) = answer.into_parts();
    Ok(Response::from_parts(parts, Body::new(body)))
}

fn header_value(text: &str) -> Result<HeaderValue, ApiError> {
    HeaderValue::from_str(text)
        .map_err(|_| ApiError::BadRequest(format!("{text:?} cannot be sent in a header")))
}

/// An extra's key as upstream puts it in a header name: percent-encoded
/// where a header name could not hold it.
fn escape_extra_key(key: &str) -> String {
    let mut out = String::new();
    for byte in key.bytes() {
        if byte.is_ascii_alphanumeric() || b"-!#$&'*+.^_`|~".contains(&byte) {
            out.push(byte.to_ascii_lowercase() as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_apis_paths_name_a_group_version() {
        assert_eq!(
            group_version("/apis/example.com/v1/namespaces/a/things"),
            Some(("example.com", "v1"))
        );
        assert_eq!(
            group_version("/apis/example.com/v1"),
            Some(("example.com", "v1"))
        );
        assert_eq!(group_version("/apis/example.com"), None);
        assert_eq!(group_version("/api/v1/pods"), None);
    }

    #[test]
    fn credentials_and_identity_headers_are_not_passed_on() {
        for name in [
            "authorization",
            "impersonate-user",
            "impersonate-group",
            "x-remote-user",
            "x-remote-group",
            "x-remote-extra-scopes",
            "cookie",
        ] {
            assert!(dropped(&HeaderName::from_static(name)), "{name}");
        }
        assert!(!dropped(&header::ACCEPT));
        assert_eq!(escape_extra_key("Scopes"), "scopes");
        assert_eq!(escape_extra_key("example.com/key"), "example.com%2Fkey");
    }
}
