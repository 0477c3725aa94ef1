//! The hop to the node server: a plain GET whose body streams back (logs),
//! or an upgrade request replayed to the node, after which the client's and
//! the node's connections are joined byte for byte (exec, attach,
//! port-forward in any protocol the node accepts).

use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use http::StatusCode;
use http::header::{self, HeaderValue};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;

use super::node::NodeLocation;
use crate::status::ApiError;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens an HTTP/1.1 connection to the node server.
async fn connect(location: &NodeLocation, upgrades: bool) -> Result<SendRequest<Body>, ApiError> {
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
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(|e| dial_error(e.to_string()))?;
    tokio::spawn(async move {
        let result = if upgrades {
            connection.with_upgrades().await
        } else {
            connection.await
        };
        if let Err(error) = result {
            tracing::debug!(%error, "node connection ended");
        }
    });
    Ok(sender)
}

fn bearer(token: Option<&str>) -> Option<HeaderValue> {
    token.and_then(|t| HeaderValue::from_str(&format!("Bearer {t}")).ok())
}

fn backend_error(location: &NodeLocation, e: impl std::fmt::Display) -> ApiError {
    ApiError::ServiceUnavailable(format!("node {}: {e}", location.node))
}

/// GETs `uri` from the node and streams its answer back as it is.
pub(super) async fn get(
    location: &NodeLocation,
    uri: &str,
    token: Option<&str>,
) -> Result<Response, ApiError> {
    let mut sender = connect(location, false).await?;
    let mut request = http::Request::builder()
        .method(http::Method::GET)
        .uri(uri)
        .header(header::HOST, &location.authority);
    if let Some(auth) = bearer(token) {
        request = request.header(header::AUTHORIZATION, auth);
    }
    let request = request
        .body(Body::empty())
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let answer = sender
        .send_request(request)
        .await
        .map_err(|e| backend_error(location, e))?;
    let (parts, body) = answer.into_parts();
    Ok(Response::from_parts(parts, Body::new(body)))
}

/// Headers that belong to the client's hop.
fn is_hop_header(name: &header::HeaderName) -> bool {
    name == header::HOST
        || name == header::AUTHORIZATION
        || name == header::CONTENT_LENGTH
        || name == header::TRANSFER_ENCODING
}

/// Replays an upgrade request to the node and joins the connections once
/// the node switched protocols; any other answer is returned as it is.
pub(super) async fn upgrade(
    mut request: Request,
    location: &NodeLocation,
    uri: &str,
    token: Option<&str>,
) -> Result<Response, ApiError> {
    if !request.headers().contains_key(header::UPGRADE) {
        return Err(ApiError::BadRequest("Upgrade request required".to_string()));
    }
    let mut sender = connect(location, true).await?;
    let mut outgoing = http::Request::builder()
        .method(request.method().clone())
        .uri(uri)
        .header(header::HOST, &location.authority);
    for (name, value) in request.headers() {
        if !is_hop_header(name) {
            outgoing = outgoing.header(name, value);
        }
    }
    if let Some(auth) = bearer(token) {
        outgoing = outgoing.header(header::AUTHORIZATION, auth);
    }
    let outgoing = outgoing
        .body(Body::empty())
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut answer = sender
        .send_request(outgoing)
        .await
        .map_err(|e| backend_error(location, e))?;
    if answer.status() != StatusCode::SWITCHING_PROTOCOLS {
        let (parts, body) = answer.into_parts();
        return Ok(Response::from_parts(parts, Body::new(body)));
    }
    let mut response = Response::builder().status(StatusCode::SWITCHING_PROTOCOLS);
    for (name, value) in answer.headers() {
        response = response.header(name, value);
    }
    let node_io = hyper::upgrade::on(&mut answer);
    let client_io = hyper::upgrade::on(&mut request);
    tokio::spawn(async move {
        let (client, node) = match tokio::try_join!(client_io, node_io) {
            Ok(pair) => pair,
            Err(error) => {
                tracing::debug!(%error, "stream upgrade failed");
                return;
            }
        };
        let mut client = TokioIo::new(client);
        let mut node = TokioIo::new(node);
        if let Err(error) = tokio::io::copy_bidirectional(&mut client, &mut node).await {
            tracing::debug!(%error, "stream ended");
        }
    });
    response
        .body(Body::empty())
        .map_err(|e| ApiError::Internal(e.to_string()))
}
