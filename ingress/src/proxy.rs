//! The reverse proxy: one request in, routed by the current [`Snapshot`],
//! sent to a ready endpoint over a pooled HTTP/1.1 keep-alive connection,
//! the answer streamed back. Upgrades (WebSocket) are passed through: the
//! `Upgrade` and `Connection` headers go to the backend and, on its 101,
//! the two connections are spliced.
//!
//! Answers of its own: 404 when no rule matches, 503 when the backend has
//! no ready endpoint, 502 when the endpoint cannot be reached.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode, Uri};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use parking_lot::RwLock;

use crate::backends::Pool;
use crate::routes::{BackendRef, RouteTable};

/// What the proxy answers with.
pub(crate) type Body = BoxBody<Bytes, hyper::Error>;

/// The routes and the backends' endpoints, rebuilt as a whole on every
/// change and swapped in, so a request sees one consistent state.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Host and path rules.
    pub routes: RouteTable,
    /// Ready endpoints per backend.
    pub pools: HashMap<BackendRef, Pool>,
}

/// How long connecting to an endpoint may take before the request fails
/// with 502.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long an idle backend connection is kept for reuse.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// The proxy shared by every connection of both listeners.
#[derive(Clone)]
pub struct Proxy {
    snapshot: Arc<RwLock<Arc<Snapshot>>>,
    client: Client<HttpConnector, Incoming>,
}

/// How the request reached the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// The plain HTTP listener.
    Http,
    /// The HTTPS listener.
    Https,
}

impl Scheme {
    fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

impl Default for Proxy {
    fn default() -> Self {
        Self::new()
    }
}

impl Proxy {
    /// A proxy with an empty table (every request 404) until [`Self::set`].
    pub fn new() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            // The client's Host stays; the builder must not replace it.
            .set_host(false)
            .build(connector);
        Self {
            snapshot: Arc::default(),
            client,
        }
    }

    /// Routes later requests by `snapshot`.
    pub fn set(&self, snapshot: Snapshot) {
        *self.snapshot.write() = Arc::new(snapshot);
    }

    /// The current routes and endpoints.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.read().clone()
    }

    /// Answers one request from `peer` that came in over `scheme`.
    pub async fn handle(
        &self,
        mut request: Request<Incoming>,
        peer: SocketAddr,
        scheme: Scheme,
    ) -> Response<Body> {
        // An HTTP/1.0 request may name no host: only rules without a host
        // and the default backend can match it.
        let host = request_host(&request).unwrap_or_default();
        let endpoint = {
            let snapshot = self.snapshot();
            let Some(backend) = snapshot.routes.route(&host, request.uri().path()) else {
                return plain(StatusCode::NOT_FOUND, "404 page not found\n");
            };
            snapshot.pools.get(backend).and_then(Pool::pick)
        };
        let Some(endpoint) = endpoint else {
            return plain(StatusCode::SERVICE_UNAVAILABLE, "no available server\n");
        };
        let upgrade = upgrade_protocol(request.headers());
        let client_side = upgrade.is_some().then(|| hyper::upgrade::on(&mut request));
        if let Err(error) = prepare(&mut request, endpoint, peer, scheme, &host, upgrade) {
            tracing::debug!(%error, "request not forwardable");
            return plain(StatusCode::BAD_REQUEST, "bad request\n");
        }
        let mut response = match self.client.request(request).await {
            Ok(response) => response,
            Err(error) => {
                tracing::debug!(%endpoint, %error, "backend request failed");
                return plain(StatusCode::BAD_GATEWAY, "bad gateway\n");
            }
        };
        if response.status() == StatusCode::SWITCHING_PROTOCOLS
            && let Some(client_side) = client_side
        {
            skiff_common::serving::splice_upgraded(client_side, hyper::upgrade::on(&mut response));
            return response.map(|b| b.boxed());
        }
        strip_hop_by_hop(response.headers_mut(), None);
        response.map(|b| b.boxed())
    }
}

/// The request's host without port: the URI's authority (HTTP/2), else the
/// Host header.
fn request_host<B>(request: &Request<B>) -> Option<String> {
    if let Some(host) = request.uri().host() {
        return Some(host.to_owned());
    }
    let value = request.headers().get(header::HOST)?.to_str().ok()?;
    let authority: http::uri::Authority = value.parse().ok()?;
    Some(authority.host().to_owned())
}

/// The protocol a request asks to upgrade to (`Connection: upgrade` and an
/// `Upgrade` header), if any.
fn upgrade_protocol(headers: &HeaderMap) -> Option<HeaderValue> {
    let asks = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("upgrade"));
    asks.then(|| headers.get(header::UPGRADE).cloned())
        .flatten()
}

/// Headers that belong to one connection, not the request (RFC 9110 7.6.1).
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
];

/// Removes hop-by-hop headers and those `Connection` names; with
/// `upgrade`, sets `Connection: upgrade` and `Upgrade` again.
fn strip_hop_by_hop(headers: &mut HeaderMap, upgrade: Option<HeaderValue>) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
    headers.remove(header::UPGRADE);
    if let Some(protocol) = upgrade {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, protocol);
    }
}

/// Points `request` at `endpoint` (HTTP/1.1, origin path and query) with
/// the forwarding headers a backend behind a proxy expects.
fn prepare<B>(
    request: &mut Request<B>,
    endpoint: SocketAddr,
    peer: SocketAddr,
    scheme: Scheme,
    host: &str,
    upgrade: Option<HeaderValue>,
) -> Result<(), http::Error> {
    let path = request
        .uri()
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let uri = Uri::builder()
        .scheme("http")
        .authority(endpoint.to_string())
        .path_and_query(path)
        .build()?;
    let original_authority = request.headers().get(header::HOST).cloned().or_else(|| {
        let authority = request.uri().authority()?;
        HeaderValue::from_str(authority.as_str()).ok()
    });
    *request.uri_mut() = uri;
    *request.version_mut() = http::Version::HTTP_11;
    let headers = request.headers_mut();
    strip_hop_by_hop(headers, upgrade);
    if let Some(authority) = original_authority {
        headers.insert(header::HOST, authority);
    }
    let forwarded_for = match headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
        Some(earlier) => format!("{earlier}, {}", peer.ip()),
        None => peer.ip().to_string(),
    };
    headers.insert(
        "x-forwarded-for",
        HeaderValue::from_str(&forwarded_for).map_err(http::Error::from)?,
    );
    headers.insert(
        "x-forwarded-proto",
        HeaderValue::from_static(scheme.as_str()),
    );
    if !host.is_empty() {
        headers.insert(
            "x-forwarded-host",
            HeaderValue::from_str(host).map_err(http::Error::from)?,
        );
    }
    headers.insert("x-real-ip", HeaderValue::from_str(&peer.ip().to_string())?);
    Ok(())
}

/// A plain-text answer of the proxy's own.
fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::from_static(text.as_bytes()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwarding_headers_and_hop_by_hop_removal() {
        let mut request = Request::builder()
            .uri("/a?b=c")
            .header("host", "web.example:8080")
            .header("connection", "keep-alive, x-private")
            .header("x-private", "secret")
            .header("x-forwarded-for", "192.0.2.1")
            .body(())
            .expect("request");
        let peer: SocketAddr = "198.51.100.7:5000".parse().expect("addr");
        let endpoint: SocketAddr = "10.0.0.1:8080".parse().expect("addr");
        prepare(
            &mut request,
            endpoint,
            peer,
            Scheme::Https,
            "web.example",
            None,
        )
        .expect("prepared");
        assert_eq!(request.uri().to_string(), "http://10.0.0.1:8080/a?b=c");
        let h = request.headers();
        assert_eq!(h["host"], "web.example:8080");
        assert_eq!(h["x-forwarded-for"], "192.0.2.1, 198.51.100.7");
        assert_eq!(h["x-forwarded-proto"], "https");
        assert_eq!(h["x-forwarded-host"], "web.example");
        assert!(h.get("connection").is_none());
        assert!(h.get("x-private").is_none());
    }

    #[test]
    fn upgrades_keep_their_headers() {
        let mut request = Request::builder()
            .uri("/ws")
            .header("host", "web.example")
            .header("connection", "Upgrade")
            .header("upgrade", "websocket")
            .body(())
            .expect("request");
        let upgrade = upgrade_protocol(request.headers());
        assert_eq!(
            upgrade.as_ref().map(|v| v.as_bytes()),
            Some(&b"websocket"[..])
        );
        let addr: SocketAddr = "10.0.0.1:80".parse().expect("addr");
        prepare(
            &mut request,
            addr,
            addr,
            Scheme::Http,
            "web.example",
            upgrade,
        )
        .expect("prepared");
        assert_eq!(request.headers()["connection"], "upgrade");
        assert_eq!(request.headers()["upgrade"], "websocket");
    }

    #[test]
    fn the_host_comes_from_the_authority_or_the_host_header() {
        let request = Request::builder()
            .uri("https://web.example:8443/x")
            .body(())
            .expect("request");
        assert_eq!(request_host(&request).as_deref(), Some("web.example"));
        let request = Request::builder()
            .uri("/x")
            .header("host", "[::1]:80")
            .body(())
            .expect("request");
        assert_eq!(request_host(&request).as_deref(), Some("[::1]"));
        let request = Request::builder().uri("/x").body(()).expect("request");
        assert_eq!(request_host(&request), None);
    }
}
