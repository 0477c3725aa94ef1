//! The node server's transport: HTTPS with the node's serving certificate.
//! A client certificate, when presented, must chain to the cluster CA or the
//! handshake fails; a connection without one still completes, so that its
//! requests can be answered `401 Unauthorized` as the kubelet answers them.
//! Each request carries the [`Peer`] its connection proved.
//!
//! This module authenticates only; what a caller may do is
//! [`super::authz`]'s decision.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls::server::WebPkiClientVerifier;
use skiff_common::serving;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use super::authz::Caller;
use crate::agent::identity::pki::{self, CertSlot};

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long open connections (follows, exec sessions) may take to end at stop.
const DRAIN: Duration = Duration::from_secs(5);
/// The node server, in what the shared serving helpers log.
const SERVER: &str = "node";

/// The identity a request's connection proved: the caller its verified
/// client certificate names, or `None` when it presented none.
#[derive(Debug, Clone)]
pub struct Peer(pub Option<Caller>);

/// Why the TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The cluster CA bundle holds no usable certificate.
    #[error("the cluster CA for client certificates: {0}")]
    ClientCa(String),
    /// The serving certificate or key is unusable.
    #[error("the node serving certificate: {0}")]
    Serving(String),
}

/// The server configuration: the certificate in `slot` presented, client
/// certificates checked against `client_ca_pem`, HTTP/1.1 only (every
/// streaming protocol the node speaks is an HTTP/1.1 upgrade).
pub fn server_config(
    slot: Arc<CertSlot>,
    client_ca_pem: &str,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = pki::root_store(client_ca_pem).map_err(TlsError::ClientCa)?;
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| TlsError::ClientCa(e.to_string()))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Serving(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(slot);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves `router` over TLS on `listener` until `stop` is raised, then lets
/// open connections finish for a few seconds.
pub async fn serve(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
    router: Router,
    mut stop: watch::Receiver<bool>,
) {
    let acceptor = TlsAcceptor::from(config);
    let stopped = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    let drained =
        serving::accept_until(listener, stopped, DRAIN, SERVER, |tcp, remote, watcher| {
            let acceptor = acceptor.clone();
            let router = router.clone();
            tokio::spawn(async move {
                let Some(stream) =
                    serving::tls_handshake(&acceptor, tcp, remote, HANDSHAKE_TIMEOUT, SERVER).await
                else {
                    return;
                };
                let peer = Peer(
                    stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|chain| chain.first())
                        .and_then(|cert| Caller::from_certificate(cert)),
                );
                let service = tower::service_fn(move |request: http::Request<Incoming>| {
                    let mut request = request.map(Body::new);
                    request.extensions_mut().insert(peer.clone());
                    router.clone().oneshot(request)
                });
                let builder = auto::Builder::new(TokioExecutor::new()).http1_only();
                let io = TokioIo::new(stream);
                let service = TowerToHyperService::new(service);
                serving::serve_watched(&builder, io, service, watcher, remote, SERVER).await;
            });
        })
        .await;
    if !drained {
        tracing::debug!("node server connections still open at stop; closing them");
    }
}
