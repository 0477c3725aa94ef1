//! The hop to the node server over TLS (the node's identity checked by
//! [`crate::kubelet_client`] during the handshake): a GET whose body streams
//! back (logs), or an upgrade request replayed to the node, after which the
//! client's and the node's connections are joined byte for byte (exec,
//! attach, port-forward in any protocol the node accepts). The client's own
//! credentials never travel to the node.

use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use http::StatusCode;
use http::header;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;

use super::node::NodeLocation;
use crate::kubelet_client::KubeletClientTls;
use crate::status::ApiError;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens an HTTP/1.1 connection over TLS to the node server, which must
/// prove it is `location.node` at `location.host`.
pub(crate) async fn connect(
    tls: &KubeletClientTls,
    location: &NodeLocation,
    upgrades: bool,
) -> Result<SendRequest<Body>, ApiError> {
    let dial_error = |e: String| {
        ApiError::ServiceUnavailable(format!(
            "error dialing backend: node {} at {}: {e}",
            location.node, location.authority
        ))
    };
    let tcp = tokio::time::timeout(
        CONNECT_TIMEOUT,
        tokio::net::TcpStream::connect(&location.authority),
    )
    .await
    .map_err(|_| dial_error("timed out".into()))?
    .map_err(|e| dial_error(e.to_string()))?;
    let _ = tcp.set_nodelay(true);
    let server_name = rustls::pki_types::ServerName::try_from(location.host.clone())
        .map_err(|e| dial_error(format!("{}: {e}", location.host)))?;
    let connector = tls
        .connector_for(&location.node)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(server_name, tcp))
        .await
        .map_err(|_| dial_error("TLS handshake timed out".into()))?
        .map_err(|e| handshake_error(location, e))?;
    handshake(TokioIo::new(stream), upgrades, "proxied")
        .await
        .map_err(|e| dial_error(e.to_string()))
}

/// Starts HTTP/1.1 on `io` and drives the connection in its own task (able
/// to switch protocols when `upgrades`), its end logged as `what`'s
/// connection; gives the sender.
pub(crate) async fn handshake<T>(
    io: T,
    upgrades: bool,
    what: &'static str,
) -> Result<SendRequest<Body>, hyper::Error>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::handshake(io).await?;
    tokio::spawn(async move {
        let result = if upgrades {
            connection.with_upgrades().await
        } else {
            connection.await
        };
        if let Err(error) = result {
            tracing::debug!(%error, "{what} connection ended");
        }
    });
    Ok(sender)
}

/// A failed handshake: when the node's certificate was the reason, say so
/// (no request was sent); otherwise it is a dial error like any other.
fn handshake_error(location: &NodeLocation, error: std::io::Error) -> ApiError {
    let rejected = error
        .get_ref()
        .and_then(|e| e.downcast_ref::<rustls::Error>())
        .is_some_and(|e| matches!(e, rustls::Error::InvalidCertificate(_)));
    if rejected {
        tracing::warn!(node = %location.node, address = %location.authority, %error, "node server certificate refused");
        ApiError::Internal(format!(
            "error dialing backend: node {} at {}: the node's serving certificate could not be verified: {error}",
            location.node, location.authority
        ))
    } else {
        ApiError::ServiceUnavailable(format!(
            "error dialing backend: node {} at {}: TLS handshake: {error}",
            location.node, location.authority
        ))
    }
}

fn backend_error(location: &NodeLocation, e: impl std::fmt::Display) -> ApiError {
    ApiError::ServiceUnavailable(format!("node {}: {e}", location.node))
}

/// GETs `uri` from the node and streams its answer back as it is.
pub(crate) async fn get(
    tls: &KubeletClientTls,
    location: &NodeLocation,
    uri: &str,
) -> Result<Response, ApiError> {
    let mut sender = connect(tls, location, false).await?;
    let request = http::Request::builder()
        .method(http::Method::GET)
        .uri(uri)
        .header(header::HOST, &location.authority)
        .body(Body::empty())
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let answer = sender
        .send_request(request)
        .await
        .map_err(|e| backend_error(location, e))?;
    let (parts, body) = answer.into_parts();
    Ok(Response::from_parts(parts, Body::new(body)))
}

/// Headers that belong to the caller's hop, its credentials among them:
/// no backend this server proxies to (a node server, an aggregated API)
/// is sent them.
pub(crate) fn is_hop_header(name: &header::HeaderName) -> bool {
    name == header::HOST
        || name == header::AUTHORIZATION
        || name == header::PROXY_AUTHORIZATION
        || name == header::COOKIE
        || name == header::TRANSFER_ENCODING
        || name.as_str().starts_with("impersonate-")
}

/// Replays an upgrade request to the node and joins the connections once
/// the node switched protocols; any other answer is returned as it is.
pub(super) async fn upgrade(
    tls: &KubeletClientTls,
    request: Request,
    location: &NodeLocation,
    uri: &str,
) -> Result<Response, ApiError> {
    if !request.headers().contains_key(header::UPGRADE) {
        return Err(ApiError::BadRequest("Upgrade request required".to_string()));
    }
    let sender = connect(tls, location, true).await?;
    relay(sender, request, uri, &location.authority, |e| {
        backend_error(location, e)
    })
    .await
}

/// Headers about the caller's connection, not its request: a relayed
/// request that is not an upgrade goes without them.
fn is_connection_header(name: &header::HeaderName) -> bool {
    name == header::CONNECTION
        || name == header::UPGRADE
        || name == header::TE
        || name == header::TRAILER
        || name.as_str() == "keep-alive"
        || name.as_str() == "proxy-connection"
}

/// Sends `request` on `sender` as `uri` for `host`, without the caller's
/// hop headers (its credentials among them), and returns the answer as it
/// is. An upgrade request goes without its body, and once the backend
/// switched protocols the two connections are joined byte for byte; any
/// other request goes with its body streamed. `failed` words an error of
/// the backend's.
pub(crate) async fn relay(
    mut sender: SendRequest<Body>,
    mut request: Request,
    uri: &str,
    host: &str,
    failed: impl Fn(String) -> ApiError,
) -> Result<Response, ApiError> {
    let upgrading = request.headers().contains_key(header::UPGRADE);
    let mut outgoing = http::Request::builder()
        .method(request.method().clone())
        .uri(uri)
        .header(header::HOST, host);
    for (name, value) in request.headers() {
        let dropped = is_hop_header(name)
            || (upgrading && name == header::CONTENT_LENGTH)
            || (!upgrading && is_connection_header(name));
        if !dropped {
            outgoing = outgoing.header(name, value);
        }
    }
    let body = if upgrading {
        Body::empty()
    } else {
        std::mem::take(request.body_mut())
    };
    let outgoing = outgoing
        .body(body)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut answer = sender
        .send_request(outgoing)
        .await
        .map_err(|e| failed(e.to_string()))?;
    if !upgrading || answer.status() != StatusCode::SWITCHING_PROTOCOLS {
        let (parts, body) = answer.into_parts();
        return Ok(Response::from_parts(parts, Body::new(body)));
    }
    let mut response = Response::builder().status(StatusCode::SWITCHING_PROTOCOLS);
    for (name, value) in answer.headers() {
        response = response.header(name, value);
    }
    skiff_common::serving::splice_upgraded(
        hyper::upgrade::on(&mut request),
        hyper::upgrade::on(&mut answer),
    );
    response
        .body(Body::empty())
        .map_err(|e| ApiError::Internal(e.to_string()))
}
