//! The `proxy` subresources, as upstream serves them: a request to
//! `/api/v1/namespaces/<ns>/pods/<[scheme:]name[:port]>/proxy/<path>` goes
//! on to the pod's IP, `services/<[scheme:]name[:port]>/proxy/<path>` to one
//! of the service's ready pods, and `/api/v1/nodes/<name[:port]>/proxy/<path>`
//! to the node's server (over TLS, the node's identity checked, as logs and
//! exec reach it) or another port of the node. The answer comes back as it
//! is; an upgrade request (a WebSocket) is joined through.
//!
//! The caller has been authorized for `<verb> <resource>/proxy` by then,
//! and its own credentials are not passed on. Only an address a pod could
//! have is dialed — not loopback, link-local, unspecified or multicast
//! (upstream's "address not allowed") — and a service's endpoint only when
//! it is the address of the pod it names, so neither a pod's status nor a
//! hand-written EndpointSlice can aim the API server at itself or at
//! whatever listens on the host's loopback.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rand::seq::IndexedRandom;

use super::storage;
use super::streaming::node::{NodeLocation, location_of};
use super::streaming::proxy::{connect, handshake, relay};
use crate::object::str_items;
use crate::routing::Target;
use crate::server::Inner;
use crate::status::ApiError;
use crate::tls::server_check::ServerCheck;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a proxied request goes.
#[derive(Debug, PartialEq, Eq)]
enum Backend {
    /// Plain HTTP, or HTTPS accepting any certificate (as upstream's proxy
    /// transport does), to `ip` at `port` (the scheme's own when empty).
    Direct {
        https: bool,
        ip: IpAddr,
        port: String,
    },
    /// The node's server, which must prove it is the node.
    Node(NodeLocation),
}

/// A proxy id, `[scheme:]name[:port]`, split as upstream splits it.
#[derive(Debug, PartialEq, Eq)]
struct ProxyId<'a> {
    scheme: &'a str,
    name: &'a str,
    port: &'a str,
}

fn split_id(id: &str) -> Option<ProxyId<'_>> {
    let parts: Vec<&str> = id.split(':').collect();
    let (scheme, name, port) = match parts.as_slice() {
        [name] => ("", *name, ""),
        [name, port] => ("", *name, *port),
        [scheme, name, port] => (*scheme, *name, *port),
        _ => return None,
    };
    (!name.is_empty() && matches!(scheme, "" | "http" | "https")).then_some(ProxyId {
        scheme,
        name,
        port,
    })
}

/// An address a pod could have: what upstream calls proxyable.
fn proxyable(ip: &IpAddr) -> bool {
    let link_local = match ip {
        IpAddr::V4(v4) => v4.is_link_local() || v4.is_broadcast(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    };
    !(ip.is_loopback() || ip.is_unspecified() || ip.is_multicast() || link_local)
}

/// `host:port`, with IPv6 in brackets; the host alone without a port.
fn authority(ip: &IpAddr, port: &str) -> String {
    let host = match ip {
        IpAddr::V6(v6) => format!("[{v6}]"),
        IpAddr::V4(v4) => v4.to_string(),
    };
    if port.is_empty() {
        host
    } else {
        format!("{host}:{port}")
    }
}

fn not_allowed() -> ApiError {
    ApiError::BadRequest("address not allowed".into())
}

/// Serves a `proxy` subresource request.
pub(crate) async fn serve(
    inner: Arc<Inner>,
    target: Target,
    request: Request,
) -> Result<Response, ApiError> {
    let Some(id) = target.name.as_deref() else {
        return Err(ApiError::MethodNotAllowed);
    };
    let backend = match target.info.resource {
        "pods" => pod_backend(&inner, &target, id).await?,
        "services" => service_backend(&inner, &target, id).await?,
        "nodes" => node_backend(&inner, &target, id).await?,
        _ => return Err(ApiError::MethodNotAllowed),
    };
    let uri = backend_uri(request.uri(), target.info.resource, id);
    tracing::debug!(?backend, %uri, "proxying");
    match &backend {
        Backend::Node(location) => {
            let Some(tls) = inner.config.kubelet_client.as_deref() else {
                return Err(ApiError::ServiceUnavailable(format!(
                    "error dialing backend: node {}: the API server has no client credentials for node servers",
                    location.node
                )));
            };
            let upgrades = request.headers().contains_key(http::header::UPGRADE);
            let sender = connect(tls, location, upgrades).await?;
            relay(sender, request, &uri, &location.authority, |e| {
                ApiError::ServiceUnavailable(format!("node {}: {e}", location.node))
            })
            .await
        }
        Backend::Direct { https, ip, port } => {
            let authority = authority(ip, port);
            let failed = |e: String| {
                ApiError::ServiceUnavailable(format!(
                    "error trying to reach service: dial tcp {authority}: {e}"
                ))
            };
            let port = match port.as_str() {
                "" if *https => 443,
                "" => 80,
                number => number
                    .parse()
                    .map_err(|_| failed(format!("unknown port {number:?}")))?,
            };
            let upgrades = request.headers().contains_key(http::header::UPGRADE);
            let sender = dial(*ip, port, *https, upgrades).await.map_err(&failed)?;
            relay(sender, request, &uri, &authority, failed).await
        }
    }
}

/// The path and query the backend is asked for: whatever follows
/// `/<resource>/<id>/proxy` in the request (`/` when nothing does).
fn backend_uri(uri: &http::Uri, resource: &str, id: &str) -> String {
    let marker = format!("/{resource}/{id}/proxy");
    let path = uri.path();
    let rest = path
        .find(&marker)
        .map(|at| &path[at + marker.len()..])
        .unwrap_or_default();
    let rest = if rest.is_empty() { "/" } else { rest };
    match uri.query() {
        Some(query) => format!("{rest}?{query}"),
        None => rest.to_string(),
    }
}

/// A pod: its IP, at the port named (else its first container's first
/// port).
async fn pod_backend(inner: &Inner, target: &Target, id: &str) -> Result<Backend, ApiError> {
    let parsed =
        split_id(id).ok_or_else(|| ApiError::BadRequest(format!("invalid pod request {id:?}")))?;
    let key = target.info.key(target.namespace.as_deref(), parsed.name);
    let (pod, _) = storage::read_existing(inner, &target.info, &key, parsed.name).await?;
    let first_port = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|c| c["ports"][0]["containerPort"].as_u64())
        .map(|p| p.to_string())
        .unwrap_or_default();
    let port = if parsed.port.is_empty() {
        first_port.as_str()
    } else {
        parsed.port
    };
    let ip: IpAddr = pod["status"]["podIP"]
        .as_str()
        .and_then(|ip| ip.parse().ok())
        .filter(proxyable)
        .ok_or_else(not_allowed)?;
    Ok(Backend::Direct {
        https: parsed.scheme == "https",
        ip,
        port: port.to_string(),
    })
}

/// A service: a ready endpoint of the port named (by number or name), which
/// must be the address of the pod it names.
async fn service_backend(inner: &Inner, target: &Target, id: &str) -> Result<Backend, ApiError> {
    let parsed = split_id(id)
        .ok_or_else(|| ApiError::BadRequest(format!("invalid service request {id:?}")))?;
    let namespace = target.namespace.as_deref().unwrap_or_default();
    let key = target.info.key(Some(namespace), parsed.name);
    let (service, _) = storage::read_existing(inner, &target.info, &key, parsed.name).await?;
    let port_name = match parsed.port.parse::<u64>() {
        Ok(number) => service["spec"]["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["port"].as_u64() == Some(number))
            .map(|p| p["name"].as_str().unwrap_or_default().to_string())
            .ok_or_else(|| {
                ApiError::ServiceUnavailable(format!(
                    "no service port {number} found for service {:?}",
                    parsed.name
                ))
            })?,
        Err(_) => parsed.port.to_string(),
    };
    let candidates = pod_endpoints(inner, namespace, parsed.name, &port_name);
    let (ip, port) = candidates.choose(&mut rand::rng()).ok_or_else(|| {
        ApiError::ServiceUnavailable(format!("no endpoints available for service {id:?}"))
    })?;
    Ok(Backend::Direct {
        https: parsed.scheme == "https",
        ip: *ip,
        port: port.to_string(),
    })
}

/// The ready endpoints of `service`'s port `port_name` that are the
/// addresses of the pods they name.
fn pod_endpoints(
    inner: &Inner,
    namespace: &str,
    service: &str,
    port_name: &str,
) -> Vec<(IpAddr, u64)> {
    let pods = crate::admission_plugins::namespace_objects(inner, "", "pods", namespace);
    let pod_ips = |name: &str| -> Vec<String> {
        pods.iter()
            .find(|p| p["metadata"]["name"].as_str() == Some(name))
            .map(|p| {
                p["status"]["podIPs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|ip| ip["ip"].as_str())
                    .chain(p["status"]["podIP"].as_str())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    for (endpoint, port) in crate::service_endpoints::ready(inner, namespace, service, port_name) {
        if endpoint["targetRef"]["kind"] != "Pod" {
            continue;
        }
        let ips = pod_ips(endpoint["targetRef"]["name"].as_str().unwrap_or_default());
        out.extend(
            str_items(&endpoint["addresses"])
                .filter(|a| ips.iter().any(|ip| ip == a))
                .filter_map(|a| a.parse::<IpAddr>().ok())
                .filter(proxyable)
                .map(|ip| (ip, port)),
        );
    }
    out
}

/// A node: its server at the published port (unless another port or plain
/// HTTP is asked for, which goes to the node's address directly).
async fn node_backend(inner: &Inner, target: &Target, id: &str) -> Result<Backend, ApiError> {
    let parsed =
        split_id(id).ok_or_else(|| ApiError::BadRequest(format!("invalid node request {id:?}")))?;
    let key = target.info.key(None, parsed.name);
    let (node, _) = storage::read_existing(inner, &target.info, &key, parsed.name).await?;
    let location = location_of(parsed.name, &node)?;
    let server_port = location
        .authority
        .rsplit_once(':')
        .map(|(_, p)| p)
        .unwrap_or_default();
    if parsed.scheme != "http" && (parsed.port.is_empty() || parsed.port == server_port) {
        return Ok(Backend::Node(location));
    }
    let ip: IpAddr = location
        .host
        .parse()
        .ok()
        .filter(proxyable)
        .ok_or_else(not_allowed)?;
    Ok(Backend::Direct {
        https: parsed.scheme == "https",
        ip,
        port: parsed.port.to_string(),
    })
}

/// Opens an HTTP/1.1 connection to `ip:port`, over TLS when `https`.
async fn dial(
    ip: IpAddr,
    port: u16,
    https: bool,
    upgrades: bool,
) -> Result<SendRequest<Body>, String> {
    let address = std::net::SocketAddr::new(ip, port);
    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(&address))
        .await
        .map_err(|_| "i/o timeout".to_string())?
        .map_err(|e| e.to_string())?;
    let _ = tcp.set_nodelay(true);
    if https {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .dangerous()
            // Upstream's proxy transport checks no certificate either: a
            // pod's serving certificate is rarely one this server could
            // verify.
            .with_custom_certificate_verifier(Arc::new(ServerCheck::any(provider)))
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let name = rustls::pki_types::ServerName::IpAddress(ip.into());
        let stream = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(|e| e.to_string())?;
        handshake(TokioIo::new(stream), upgrades, "proxied").await
    } else {
        handshake(TokioIo::new(tcp), upgrades, "proxied").await
    }
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_split_into_scheme_name_and_port() {
        let id = |scheme, name, port| Some(ProxyId { scheme, name, port });
        assert_eq!(split_id("web"), id("", "web", ""));
        assert_eq!(split_id("web:8080"), id("", "web", "8080"));
        assert_eq!(split_id("https:web:"), id("https", "web", ""));
        assert_eq!(split_id("http:web:http"), id("http", "web", "http"));
        assert_eq!(split_id("ftp:web:21"), None);
        assert_eq!(split_id(":80"), None);
        assert_eq!(split_id("a:b:c:d"), None);
    }

    #[test]
    fn only_addresses_a_pod_could_have_are_proxyable() {
        let ok = |ip: &str| proxyable(&ip.parse().unwrap());
        for good in [
            "10.42.0.5",
            "192.0.2.2",
            "100.64.1.0",
            "fd00::5",
            "2001:db8::1",
        ] {
            assert!(ok(good), "{good}");
        }
        for bad in [
            "127.0.0.1",
            "127.9.9.9",
            "0.0.0.0",
            "169.254.169.254",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "ff02::1",
        ] {
            assert!(!ok(bad), "{bad}");
        }
    }

    #[test]
    fn the_backend_path_is_what_follows_the_subresource() {
        let uri = |u: &str| u.parse::<http::Uri>().unwrap();
        assert_eq!(
            backend_uri(
                &uri("/api/v1/namespaces/d/pods/p:80/proxy/a/b/?x=1"),
                "pods",
                "p:80"
            ),
            "/a/b/?x=1"
        );
        assert_eq!(
            backend_uri(
                &uri("/api/v1/namespaces/d/services/s/proxy"),
                "services",
                "s"
            ),
            "/"
        );
        assert_eq!(
            backend_uri(&uri("/api/v1/nodes/n/proxy/metrics"), "nodes", "n"),
            "/metrics"
        );
    }

    #[test]
    fn authorities_bracket_ipv6_and_may_go_without_a_port() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(authority(&ip("10.0.0.1"), "80"), "10.0.0.1:80");
        assert_eq!(authority(&ip("fd00::1"), "80"), "[fd00::1]:80");
        assert_eq!(authority(&ip("10.0.0.1"), ""), "10.0.0.1");
    }
}
