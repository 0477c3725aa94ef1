//! What the HTTP servers of skiff (the API server, the node server, the
//! ingress proxy) do alike around the requests they answer: accepting
//! connections until told to stop and then letting the open ones finish,
//! the TLS handshake an accepted connection is given a while for, the user
//! a verified client certificate names, and splicing the two sides of an upgraded (`101 Switching Protocols`)
//! exchange they proxy (exec, attach, port-forward, WebSockets).

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::upgrade::OnUpgrade;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// How long to wait after a failed accept (out of file descriptors and the
/// like) before accepting again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Accepts connections on `listener` until `stop` completes and hands each
/// (Nagle off: answers are written whole) to `connection`, with the watcher
/// the connection is to be served under so that the stop asks it to finish
/// its request and close. A failed accept does not end the server: it
/// waits a moment and accepts again. After the stop the listener is closed
/// and the open connections get `drain` to end; returns `false` when some
/// were still open then (they are closed), for the caller to say so as it
/// sees fit. `server` names the server in what is logged.
pub async fn accept_until<F>(
    listener: TcpListener,
    stop: impl Future<Output = ()>,
    drain: Duration,
    server: &'static str,
    mut connection: F,
) -> bool
where
    F: FnMut(TcpStream, SocketAddr, Watcher),
{
    let graceful = GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        let (tcp, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(error) => {
                    tracing::warn!(server, %error, "accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let _ = tcp.set_nodelay(true);
        connection(tcp, remote, graceful.watcher());
    }
    drop(listener);
    tokio::time::timeout(drain, graceful.shutdown())
        .await
        .is_ok()
}

/// The server side of the TLS handshake of the connection from `remote`,
/// which must finish within `timeout`; `None` when it fails or takes too
/// long (logged at debug only: port scanners and clients that give up are
/// routine).
pub async fn tls_handshake(
    acceptor: &TlsAcceptor,
    tcp: TcpStream,
    remote: SocketAddr,
    timeout: Duration,
    server: &'static str,
) -> Option<TlsStream<TcpStream>> {
    match tokio::time::timeout(timeout, acceptor.accept(tcp)).await {
        Ok(Ok(stream)) => Some(stream),
        Ok(Err(error)) => {
            tracing::debug!(server, %remote, %error, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!(server, %remote, "TLS handshake timed out");
            None
        }
    }
}

/// Serves HTTP on the accepted connection `io` with `builder`, upgrades
/// allowed (exec, attach, port-forward and WebSockets switch protocols),
/// under `watcher`, until the connection ends; an error it ends with is
/// logged at debug only (mostly a client that went away).
pub async fn serve_watched<I, S, B>(
    builder: &auto::Builder<TokioExecutor>,
    io: I,
    service: S,
    watcher: Watcher,
    remote: SocketAddr,
    server: &'static str,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let connection = builder.serve_connection_with_upgrades(io, service);
    if let Err(error) = watcher.watch(connection.into_owned()).await {
        tracing::debug!(server, %remote, %error, "connection ended with an error");
    }
}

/// The user a client certificate (DER) names, as Kubernetes' x509
/// authenticator reads it: the subject's (first) common name, and its
/// organizations as the groups. `None` when the certificate cannot be read
/// or names no common name. Nothing here checks a signature: only for
/// certificates the TLS layer already verified against the cluster CA.
pub fn certificate_user(der: &[u8]) -> Option<(String, Vec<String>)> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())?
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok())
        .map(String::from)
        .collect();
    Some((name, groups))
}

/// Once both the client and the backend of an upgraded exchange have
/// switched protocols, copies bytes between them both ways until either
/// side closes, in a task of its own (the response that confirms the
/// upgrade must be returned first for the client's side to switch). A side
/// that never switches or a stream cut short ends it, logged at debug: a
/// client going away is how such streams usually end.
pub fn splice_upgraded(client: OnUpgrade, backend: OnUpgrade) {
    tokio::spawn(async move {
        let (client, backend) = match tokio::try_join!(client, backend) {
            Ok(pair) => pair,
            Err(error) => {
                tracing::debug!(%error, "stream upgrade failed");
                return;
            }
        };
        let mut client = TokioIo::new(client);
        let mut backend = TokioIo::new(backend);
        if let Err(error) = tokio::io::copy_bidirectional(&mut client, &mut backend).await {
            tracing::debug!(%error, "stream ended");
        }
    });
}
