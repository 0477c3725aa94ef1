//! The HTTPS listener: TLS with rustls, authentication of every request, HTTP/1.1
//! and HTTP/2 with upgrades, and a graceful stop that lets in-flight requests
//! finish.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::authn::{self, Authenticated, Authenticator, UserInfo};

/// The peer address of the connection a request came on, as a request
/// extension (the audit log's source IP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteAddr(pub std::net::SocketAddr);

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `router` over HTTPS on `listener` until `shutdown` completes, then
/// stops accepting and waits up to `drain` for open connections to finish.
pub async fn serve_https(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    authn: Arc<Authenticator>,
    router: Router,
    shutdown: impl Future<Output = ()>,
    drain: Duration,
) {
    let acceptor = TlsAcceptor::from(tls);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (tcp, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(error) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let authn = authn.clone();
        let router = router.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let tls_stream =
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(stream)) => stream,
                    Ok(Err(error)) => {
                        tracing::debug!(%remote, %error, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%remote, "TLS handshake timed out");
                        return;
                    }
                };
            let peer = tls_stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|chain| chain.first())
                .and_then(|cert| authn::user_from_certificate(cert));
            let service = tower::service_fn(move |request: Request<Incoming>| {
                let mut request = request.map(Body::new);
                request.extensions_mut().insert(RemoteAddr(remote));
                handle(router.clone(), authn.clone(), peer.clone(), request)
            });
            let builder = auto::Builder::new(TokioExecutor::new());
            let connection = builder.serve_connection_with_upgrades(
                TokioIo::new(tls_stream),
                TowerToHyperService::new(service),
            );
            if let Err(error) = watcher.watch(connection.into_owned()).await {
                tracing::debug!(%remote, %error, "connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after {drain:?}; closing them");
    }
}

/// Authenticates one request and hands it to the API with its identity.
/// A request whose credentials are wrong goes on without one, so that the
/// router's authorizer answers it 401 and the audit log records it.
async fn handle(
    router: Router,
    authn: Arc<Authenticator>,
    peer: Option<UserInfo>,
    mut request: Request<Body>,
) -> Result<Response<Body>, Infallible> {
    match authn.authenticate(request.headers(), peer.as_ref()) {
        Authenticated::User(user) => {
            request.extensions_mut().insert(user);
        }
        // The caller is `system:anonymous` and authorization decides: the
        // default policy opens health and version to it; anything else is a
        // 401 (see `authz::middleware`).
        Authenticated::Anonymous => {
            request.extensions_mut().insert(UserInfo::anonymous());
        }
        Authenticated::Rejected => {}
    }
    router.oneshot(request).await
}
