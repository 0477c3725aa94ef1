//! One HTTPS exchange the API server starts itself (admission webhooks,
//! OpenID Connect issuers): a fresh TCP connection, rustls trusting exactly
//! the roots given and checking the server's name, HTTP/1.1, and the
//! answer's body read up to a limit. Errors read as Go's client words them
//! (`dial tcp 127.0.0.1:9: connect: connection refused`), which is what
//! users search for; what a status code means is the caller's to say.
//! Nothing of a client's request is forwarded: callers build the request.

use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;
use http::StatusCode;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;

use crate::handlers::streaming::proxy::handshake;

/// Sends `request` to `dial` (`host:port`) over TLS, the server proving the
/// name `server_name` with a certificate that chains to `roots`; `what`
/// names the peer in the connection's logs. The answer's status and body,
/// the body cut at `max_body` bytes (an error beyond).
pub(crate) async fn exchange(
    roots: Arc<rustls::RootCertStore>,
    dial: &str,
    server_name: &str,
    request: http::Request<Body>,
    what: &'static str,
    max_body: usize,
) -> Result<(StatusCode, Bytes), String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let name = ServerName::try_from(server_name.to_owned())
        .map_err(|e| format!("invalid server name {server_name:?}: {e}"))?;
    let tcp = tokio::net::TcpStream::connect(dial)
        .await
        .map_err(|e| dial_error(dial, &e))?;
    let _ = tcp.set_nodelay(true);
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("tls: {e}"))?;
    let mut sender = handshake(TokioIo::new(tls), false, what)
        .await
        .map_err(|e| e.to_string())?;
    let answer = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = answer.status();
    let body = axum::body::to_bytes(Body::new(answer.into_body()), max_body)
        .await
        .map_err(|e| e.to_string())?;
    Ok((status, body))
}

/// A failed connect in Go's words (`dial tcp <addr>: connect: connection
/// refused`).
fn dial_error(address: &str, error: &std::io::Error) -> String {
    let reason = match error.kind() {
        std::io::ErrorKind::ConnectionRefused => "connect: connection refused".to_string(),
        std::io::ErrorKind::TimedOut => "i/o timeout".to_string(),
        _ => error.to_string(),
    };
    format!("dial tcp {address}: {reason}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_connections_read_as_go_prints_them() {
        let error = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(
            dial_error("127.0.0.1:9", &error),
            "dial tcp 127.0.0.1:9: connect: connection refused"
        );
    }
}
