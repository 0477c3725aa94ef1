//! Where one call goes: a hook's `clientConfig.url` as written, or its
//! `clientConfig.service` resolved as kube-apiserver's endpoint routing
//! does — the Service's port, then a ready address of its EndpointSlices
//! for that port — with the certificate checked for
//! `<service>.<namespace>.svc`. The caches answer; nothing is written and
//! no request goes through the API.

use rand::seq::IndexedRandom;
use serde_json::Value;

use super::source::Endpoint;
use crate::server::Inner;

/// The address dialed and what the server must prove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    /// `host:port` to connect to (IPv6 in brackets).
    pub dial: String,
    /// The name the serving certificate must carry (DNS name or IP).
    pub server_name: String,
    /// The request target (path and the `timeout` query).
    pub path: String,
    /// The `Host` header.
    pub host: String,
    /// The URL as upstream's errors show it.
    pub url: String,
}

/// Why a hook's address could not be found (upstream's wording, as it
/// appears after `Post "<url>": `).
#[derive(Debug, thiserror::Error)]
pub(crate) enum TargetError {
    #[error("webhook has no clientConfig")]
    Unset,
    #[error("invalid webhook URL {0:?}")]
    BadUrl(String),
    #[error("service \"{0}\" not found")]
    NoService(String),
    #[error("no service port {port} found for service \"{service}\"")]
    NoPort { service: String, port: u16 },
    #[error("no endpoints available for service \"{0}\"")]
    NoEndpoints(String),
}

/// Resolves where a call with `timeout_seconds` goes.
pub(super) fn resolve(
    inner: &Inner,
    endpoint: Option<&Endpoint>,
    timeout_seconds: u64,
) -> Result<Target, (String, TargetError)> {
    match endpoint {
        None => Err((String::new(), TargetError::Unset)),
        Some(Endpoint::Url(url)) => from_url(url, timeout_seconds),
        Some(Endpoint::Service {
            namespace,
            name,
            path,
            port,
        }) => {
            let server_name = format!("{name}.{namespace}.svc");
            let path = if path.is_empty() { "/" } else { path.as_str() };
            let target_path = format!("{path}?timeout={timeout_seconds}s");
            let url = format!("https://{server_name}:{port}{target_path}");
            let address =
                service_address(inner, namespace, name, *port).map_err(|e| (url.clone(), e))?;
            Ok(Target {
                dial: address,
                server_name: server_name.clone(),
                path: target_path,
                host: format!("{server_name}:{port}"),
                url,
            })
        }
    }
}

fn from_url(url: &str, timeout_seconds: u64) -> Result<Target, (String, TargetError)> {
    let bad = || (url.to_string(), TargetError::BadUrl(url.to_string()));
    let uri: http::Uri = url.parse().map_err(|_| bad())?;
    let host = uri.host().filter(|h| !h.is_empty()).ok_or_else(bad)?;
    let port = uri.port_u16().unwrap_or(443);
    let bare_host = host.trim_start_matches('[').trim_end_matches(']');
    let path = match uri.path() {
        "" => "/",
        p => p,
    };
    let target_path = format!("{path}?timeout={timeout_seconds}s");
    let authority = uri.authority().map(|a| a.as_str()).unwrap_or(host);
    Ok(Target {
        dial: format!("{host}:{port}"),
        server_name: bare_host.to_string(),
        path: target_path.clone(),
        host: authority.to_string(),
        url: format!("https://{authority}{target_path}"),
    })
}

/// A ready address of the Service's EndpointSlices for its `port`
/// (`ip:port`, one picked at random among the ready ones).
pub(crate) fn service_address(
    inner: &Inner,
    namespace: &str,
    name: &str,
    port: u16,
) -> Result<String, TargetError> {
    let qualified = format!("{namespace}/{name}");
    let service = inner
        .registry
        .get("", "v1", "services")
        .and_then(|info| {
            let cache = inner.cache(&info).ok()?;
            cache
                .get(&info.key(Some(namespace), name))
                .map(|s| s.value())
        })
        .ok_or_else(|| TargetError::NoService(qualified.clone()))?;
    let service_port = service["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["port"].as_u64() == Some(u64::from(port)))
        .ok_or_else(|| TargetError::NoPort {
            service: name.to_string(),
            port,
        })?;
    let port_name = service_port["name"].as_str().unwrap_or("");
    let mut ready = Vec::new();
    for (endpoint, port) in crate::service_endpoints::ready(inner, namespace, name, port_name) {
        if let Some(address) = endpoint["addresses"]
            .as_array()
            .and_then(|a| a.first())
            .and_then(Value::as_str)
        {
            ready.push(if address.contains(':') {
                format!("[{address}]:{port}")
            } else {
                format!("{address}:{port}")
            });
        }
    }
    ready
        .choose(&mut rand::rng())
        .cloned()
        .ok_or_else(|| TargetError::NoEndpoints(name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_dialed_as_written_with_the_timeout_query() {
        let target = from_url("https://127.0.0.1:8443/mutate", 7).unwrap();
        assert_eq!(target.dial, "127.0.0.1:8443");
        assert_eq!(target.server_name, "127.0.0.1");
        assert_eq!(target.path, "/mutate?timeout=7s");
        assert_eq!(target.url, "https://127.0.0.1:8443/mutate?timeout=7s");
        let bare = from_url("https://hooks.example.com", 10).unwrap();
        assert_eq!(bare.dial, "hooks.example.com:443");
        assert_eq!(bare.path, "/?timeout=10s");
        let v6 = from_url("https://[::1]:9443/x", 1).unwrap();
        assert_eq!(
            (v6.dial.as_str(), v6.server_name.as_str()),
            ("[::1]:9443", "::1")
        );
    }
}
