//! The HTTPS listener: TLS with rustls, authentication of every request, HTTP/1.1
//! and HTTP/2 with upgrades, the connection-level timeouts (TLS handshake,
//! request headers, HTTP/2 keep-alive pings), and a graceful stop that lets
//! in-flight requests finish. Per-request deadlines are not kept here but in
//! [`crate::request_timeout`], which knows which requests are long-running.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use skiff_common::serving;
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

/// Upstream's limit on reading a request's headers (Go's `ReadHeaderTimeout`
/// of kube-apiserver's server): a client trickling its headers is cut.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);

/// How often an HTTP/2 connection is pinged, so a peer that vanished without
/// closing its connection does not hold it (and its watches) forever.
pub const HTTP2_PING_INTERVAL: Duration = Duration::from_secs(30);

/// How long an HTTP/2 ping may go unanswered before the connection is closed.
pub const HTTP2_PING_TIMEOUT: Duration = Duration::from_secs(15);

/// The connection-level limits of [`serve_https`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionTimeouts {
    /// Time to finish the TLS handshake.
    pub handshake: Duration,
    /// Time to send a request's complete headers on HTTP/1.1. It also bounds
    /// how long an idle keep-alive connection stays open, since waiting for
    /// the next request's headers is what an idle HTTP/1.1 connection does.
    pub header_read: Duration,
    /// Interval of HTTP/2 keep-alive pings.
    pub http2_ping_interval: Duration,
    /// Time an HTTP/2 ping may go unanswered.
    pub http2_ping_timeout: Duration,
}

impl Default for ConnectionTimeouts {
    fn default() -> Self {
        Self {
            handshake: HANDSHAKE_TIMEOUT,
            header_read: HEADER_READ_TIMEOUT,
            http2_ping_interval: HTTP2_PING_INTERVAL,
            http2_ping_timeout: HTTP2_PING_TIMEOUT,
        }
    }
}

/// The connection builder with `timeouts` applied to both protocols.
fn connection_builder(timeouts: ConnectionTimeouts) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .keep_alive(true)
        .header_read_timeout(timeouts.header_read);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(timeouts.http2_ping_interval)
        .keep_alive_timeout(timeouts.http2_ping_timeout);
    builder
}

/// Serves `router` over HTTPS on `listener` until `shutdown` completes, then
/// stops accepting and waits up to `drain` for open connections to finish.
/// Each connection is held to `timeouts` (the server passes
/// [`ConnectionTimeouts::default`]).
pub async fn serve_https(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    authn: Arc<Authenticator>,
    router: Router,
    shutdown: impl Future<Output = ()>,
    drain: Duration,
    timeouts: ConnectionTimeouts,
) {
    let acceptor = TlsAcceptor::from(tls);
    let drained =
        serving::accept_until(listener, shutdown, drain, "api", |tcp, remote, watcher| {
            let acceptor = acceptor.clone();
            let authn = authn.clone();
            let router = router.clone();
            tokio::spawn(async move {
                let Some(tls_stream) =
                    serving::tls_handshake(&acceptor, tcp, remote, timeouts.handshake, "api").await
                else {
                    return;
                };
                let peer = tls_stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|chain| chain.first())
                    .and_then(|cert| authn::user_from_certificate(cert));
                let service = tower::service_fn(move |request: Request<Incoming>| {
                    let leftover = crate::unread_body::Leftover::default();
                    let mut request = request.map(|body| {
                        Body::new(crate::unread_body::Tracked::new(body, leftover.clone()))
                    });
                    request.extensions_mut().insert(RemoteAddr(remote));
                    let answer = handle(router.clone(), authn.clone(), peer.clone(), request);
                    async move {
                        let response = answer.await;
                        // A body the handler left unread is read to its end
                        // first, so HTTP/2 clients get the answer, not a reset.
                        crate::unread_body::drain(&leftover).await;
                        response
                    }
                });
                let builder = connection_builder(timeouts);
                let io = TokioIo::new(tls_stream);
                let service = TowerToHyperService::new(service);
                serving::serve_watched(&builder, io, service, watcher, remote, "api").await;
            });
        })
        .await;
    if !drained {
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
    match authn.authenticate(request.headers(), request.uri().path(), peer.as_ref()) {
        Authenticated::User(user) => {
            request.extensions_mut().insert(user);
        }
        // The caller is `system:anonymous` (anonymous requests are let in
        // for this path) and authorization decides: the default policy opens
        // health and version to it; anything else is a 401 (see
        // `authz::middleware`).
        Authenticated::Anonymous => {
            request.extensions_mut().insert(UserInfo::anonymous());
        }
        Authenticated::Rejected => {}
    }
    router.oneshot(request).await
}
