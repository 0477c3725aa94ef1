//! Upgrades toward the runtime's streaming server (the URL CRI returned)
//! and toward the client.
//!
//! [`proxy`] replays the client's upgrade request (WebSocket or SPDY) and,
//! once both sides switched protocols, joins the connections byte for byte;
//! it serves protocols the runtime speaks itself (SPDY, WebSocket
//! `v4.channel.k8s.io` for exec and port-forward). Its one rewrite: a client
//! offering only `v5.channel.k8s.io` is offered upstream as v4 (containerd
//! 1.6 predates v5, which is v4 plus a close frame the runtime ignores).
//! [`spdy_upstream`] and [`accept_websocket`] are the two halves the
//! translating bridges use instead.

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use http::header::{self, HeaderName, HeaderValue};
use http::{StatusCode, Uri};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;

/// kubectl 1.32's remote-command WebSocket protocol.
pub(crate) const V5_CHANNEL: &str = "v5.channel.k8s.io";
/// The newest remote-command WebSocket protocol containerd 1.6 speaks.
pub(crate) const V4_CHANNEL: &str = "v4.channel.k8s.io";

const WEBSOCKET_PROTOCOL: HeaderName = header::SEC_WEBSOCKET_PROTOCOL;

/// A failed proxy set-up (before any upgrade).
#[derive(Debug, thiserror::Error)]
pub(crate) enum UpgradeError {
    /// The runtime's URL is unusable.
    #[error("streaming URL {url:?}: {reason}")]
    Url {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The runtime's streaming server could not be reached.
    #[error("connecting to the runtime's streaming server at {address}: {source}")]
    Connect {
        /// `host:port`.
        address: String,
        /// Why.
        source: std::io::Error,
    },
    /// The HTTP exchange with the streaming server failed.
    #[error("streaming server request: {0}")]
    Http(#[from] hyper::Error),
    /// The client's upgrade request is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// The request could not be built.
    #[error("building the streaming request: {0}")]
    Request(#[from] http::Error),
}

/// Offers `v4` upstream wherever the client asked for `v5`.
fn upstream_protocols(offered: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for p in offered.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let p = if p == V5_CHANNEL { V4_CHANNEL } else { p };
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out.join(", ")
}

/// The protocol to confirm to the client: the runtime's choice, or v5 when
/// the runtime chose the v4 that stood in for it.
fn client_protocol(offered: &[String], chosen: &str) -> String {
    if chosen == V4_CHANNEL
        && !offered.iter().any(|p| p == V4_CHANNEL)
        && offered.iter().any(|p| p == V5_CHANNEL)
    {
        V5_CHANNEL.to_string()
    } else {
        chosen.to_string()
    }
}

/// Headers that belong to the hop, not to the request being proxied.
fn is_hop_header(name: &HeaderName) -> bool {
    name == header::HOST
        || name == header::AUTHORIZATION
        || name == header::CONTENT_LENGTH
        || name == header::TRANSFER_ENCODING
}

/// The runtime's streaming URL split into where to connect and what to ask
/// for (`query` is appended when the URL has none of its own).
fn target(url: &str, query: Option<&str>) -> Result<(String, String), UpgradeError> {
    let upstream: Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| UpgradeError::Url {
            url: url.to_string(),
            reason: e.to_string(),
        })?;
    let authority = upstream
        .authority()
        .ok_or_else(|| UpgradeError::Url {
            url: url.to_string(),
            reason: "no host".into(),
        })?
        .to_string();
    let mut path = upstream.path().to_string();
    if let Some(q) = upstream.query().or(query) {
        path.push('?');
        path.push_str(q);
    }
    Ok((authority, path))
}

/// Sends an upgrade request with `headers` to the runtime's `url` and
/// returns its answer (101 when it switched protocols).
pub(crate) async fn send_upstream(
    url: &str,
    query: Option<&str>,
    method: http::Method,
    headers: &http::HeaderMap,
) -> Result<http::Response<hyper::body::Incoming>, UpgradeError> {
    let (authority, path) = target(url, query)?;
    let mut builder = http::Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, &authority);
    for (name, value) in headers {
        if !is_hop_header(name) {
            builder = builder.header(name, value);
        }
    }
    let outgoing = builder.body(Body::empty())?;
    let tcp = tokio::net::TcpStream::connect(&authority)
        .await
        .map_err(|source| UpgradeError::Connect {
            address: authority.clone(),
            source,
        })?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
    tokio::spawn(async move {
        if let Err(error) = connection.with_upgrades().await {
            tracing::debug!(%error, "streaming connection to the runtime ended");
        }
    });
    Ok(sender.send_request(outgoing).await?)
}

/// Opens an SPDY/3.1 connection to the runtime speaking `protocol`
/// (`v4.channel.k8s.io`, `portforward.k8s.io`). A refusal comes back as
/// the runtime's response, to pass on to the client.
pub(crate) async fn spdy_upstream(
    url: &str,
    query: Option<&str>,
    protocol: &str,
) -> Result<Result<hyper::upgrade::Upgraded, Response>, UpgradeError> {
    let mut headers = http::HeaderMap::new();
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("SPDY/3.1"));
    if let Ok(v) = HeaderValue::from_str(protocol) {
        headers.insert(STREAM_PROTOCOL, v);
    }
    let mut answer = send_upstream(url, query, http::Method::POST, &headers).await?;
    if answer.status() != StatusCode::SWITCHING_PROTOCOLS {
        let (parts, body) = answer.into_parts();
        return Ok(Err(Response::from_parts(parts, Body::new(body))));
    }
    Ok(Ok(hyper::upgrade::on(&mut answer).await?))
}

/// `X-Stream-Protocol-Version`, the SPDY subprotocol negotiation header.
pub(crate) const STREAM_PROTOCOL: HeaderName = HeaderName::from_static("x-stream-protocol-version");

/// Whether the request asks to switch to WebSocket.
pub(crate) fn is_websocket(request: &Request) -> bool {
    request
        .headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// The WebSocket subprotocols the client offers.
pub(crate) fn offered_protocols(headers: &http::HeaderMap) -> Vec<String> {
    headers
        .get_all(&WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// Accepts the client's WebSocket with `protocol`: the 101 answer to send
/// and the connection it yields once sent.
pub(crate) fn accept_websocket(
    request: &mut Request,
    protocol: &str,
) -> Result<(Response, hyper::upgrade::OnUpgrade), UpgradeError> {
    let key = request
        .headers()
        .get(header::SEC_WEBSOCKET_KEY)
        .map(|k| derive_accept_key(k.as_bytes()))
        .ok_or_else(|| UpgradeError::BadRequest("missing Sec-WebSocket-Key".into()))?;
    let response = Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::CONNECTION, "Upgrade")
        .header(header::UPGRADE, "websocket")
        .header(header::SEC_WEBSOCKET_ACCEPT, key)
        .header(WEBSOCKET_PROTOCOL, protocol)
        .body(Body::empty())?;
    Ok((response, hyper::upgrade::on(request)))
}

/// A WebSocket close with status 1000: clients treat any other ending (even
/// a close without a code) as an error on every open stream.
pub(crate) fn normal_close() -> tokio_tungstenite::tungstenite::Message {
    use tokio_tungstenite::tungstenite::protocol::frame::{CloseFrame, coding::CloseCode};
    tokio_tungstenite::tungstenite::Message::Close(Some(CloseFrame {
        code: CloseCode::Normal,
        reason: "".into(),
    }))
}

/// Replays `request` to `url` (adding the request's own query when the URL
/// has none) and, when the runtime switches protocols, joins the two
/// connections. Any other answer of the runtime is returned as it is.
pub(crate) async fn proxy(mut request: Request, url: &str) -> Result<Response, UpgradeError> {
    let offered = offered_protocols(request.headers());
    let mut headers = request.headers().clone();
    headers.remove(&WEBSOCKET_PROTOCOL);
    if !offered.is_empty()
        && let Ok(v) = HeaderValue::from_str(&upstream_protocols(&offered.join(",")))
    {
        headers.insert(WEBSOCKET_PROTOCOL, v);
    }
    let mut answer = send_upstream(
        url,
        request.uri().query(),
        request.method().clone(),
        &headers,
    )
    .await?;
    if answer.status() != StatusCode::SWITCHING_PROTOCOLS {
        let (parts, body) = answer.into_parts();
        return Ok(Response::from_parts(parts, Body::new(body)));
    }

    let mut response = Response::builder().status(StatusCode::SWITCHING_PROTOCOLS);
    for (name, value) in answer.headers() {
        if name == WEBSOCKET_PROTOCOL {
            let chosen = client_protocol(&offered, value.to_str().unwrap_or_default());
            if let Ok(v) = HeaderValue::from_str(&chosen) {
                response = response.header(name, v);
            }
        } else {
            response = response.header(name, value);
        }
    }
    skiff_common::serving::splice_upgraded(
        hyper::upgrade::on(&mut request),
        hyper::upgrade::on(&mut answer),
    );
    Ok(response.body(Body::empty())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v5_is_offered_upstream_as_v4_and_confirmed_as_v5() {
        assert_eq!(upstream_protocols("v5.channel.k8s.io"), "v4.channel.k8s.io");
        assert_eq!(
            upstream_protocols("v5.channel.k8s.io, v4.channel.k8s.io,channel.k8s.io"),
            "v4.channel.k8s.io, channel.k8s.io"
        );
        let v5 = vec![V5_CHANNEL.to_string()];
        assert_eq!(client_protocol(&v5, V4_CHANNEL), V5_CHANNEL);
        let both = vec![V5_CHANNEL.to_string(), V4_CHANNEL.to_string()];
        assert_eq!(client_protocol(&both, V4_CHANNEL), V4_CHANNEL);
        let spdy = vec!["SPDY/3.1+portforward.k8s.io".to_string()];
        assert_eq!(
            client_protocol(&spdy, "SPDY/3.1+portforward.k8s.io"),
            "SPDY/3.1+portforward.k8s.io"
        );
    }
}
