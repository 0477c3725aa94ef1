//! The two listeners: plain HTTP, and HTTPS whose certificate rustls asks
//! the [`CertStore`] for by SNI. Both speak HTTP/1.1 (with upgrades) and
//! HTTP/2 (HTTPS through ALPN) and hand every request to the [`Proxy`];
//! on stop they quit accepting and let open connections finish for a while.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use skiff_common::serving;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::certs::CertStore;
use crate::proxy::{Proxy, Scheme};

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a client may take to send a request's headers; also how long
/// an idle keep-alive connection is kept.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(60);

/// The ingress, in what the shared serving helpers log.
const SERVER: &str = "ingress";

/// How long open connections may finish after the stop (within the 3 s
/// `skiff server` gives its components).
const DRAIN: Duration = Duration::from_secs(2);

/// Why a listener could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Binding the port failed (taken, or a privileged port without the
    /// right to bind it).
    #[error("listening on {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// The TLS configuration could not be built.
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
}

/// Binds `address`.
pub(crate) async fn bind(address: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(address)
        .await
        .map_err(|source| ServeError::Bind { address, source })
}

/// The rustls server configuration of the HTTPS listener.
pub(crate) fn tls_config(certs: Arc<CertStore>) -> Result<Arc<rustls::ServerConfig>, ServeError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(certs);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves `proxy` on `listener` (TLS when `tls` is given) until `stop`.
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    proxy: Proxy,
    stop: impl Future<Output = ()>,
) {
    let scheme = if tls.is_some() {
        Scheme::Https
    } else {
        Scheme::Http
    };
    let acceptor = tls.map(TlsAcceptor::from);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let builder = Arc::new(builder);
    // Each connection, once past its handshake, is watched: the stop asks
    // it to finish its request and close.
    serving::accept_until(listener, stop, DRAIN, SERVER, |stream, peer, watcher| {
        let proxy = proxy.clone();
        let service = service_fn(move |request| {
            let proxy = proxy.clone();
            async move { Ok::<_, std::convert::Infallible>(proxy.handle(request, peer, scheme).await) }
        });
        let builder = builder.clone();
        match acceptor.clone() {
            None => {
                tokio::spawn(async move {
                    let io = TokioIo::new(stream);
                    serving::serve_watched(&builder, io, service, watcher, peer, SERVER).await;
                });
            }
            Some(acceptor) => {
                tokio::spawn(async move {
                    let Some(tls) =
                        serving::tls_handshake(&acceptor, stream, peer, HANDSHAKE_TIMEOUT, SERVER)
                            .await
                    else {
                        return;
                    };
                    let io = TokioIo::new(tls);
                    serving::serve_watched(&builder, io, service, watcher, peer, SERVER).await;
                });
            }
        }
    })
    .await;
}
