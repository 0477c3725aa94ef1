//! A fake HTTPS server for the tests of what the API server calls out to
//! (admission webhooks, OpenID Connect issuers): a certificate from a
//! [`TestCa`] for the names given, one thread of its own, and every request
//! answered by the test's handler until the test process ends.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;

use crate::pki::TestCa;

/// What a handler answers: a status code and a JSON body.
pub type Answer = Pin<Box<dyn Future<Output = (u16, String)> + Send>>;

/// Serves HTTPS on a free loopback port with a certificate of `ca` naming
/// `names`; each request's path and body go to `handler`. Returns the port.
pub fn serve<H>(ca: &TestCa, names: &[&str], handler: H) -> u16
where
    H: Fn(String, Vec<u8>) -> Answer + Send + Sync + 'static,
{
    let (cert, key) = ca.serving(names);
    let chain = rustls_pemfile::certs(&mut cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .expect("the serving certificate");
    let key = rustls_pemfile::private_key(&mut key.as_bytes())
        .expect("the serving key")
        .expect("a private key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .expect("the server's TLS configuration");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    listener
        .set_nonblocking(true)
        .expect("a non-blocking listener");
    let port = listener.local_addr().expect("the port").port();
    let handler = Arc::new(handler);
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("the server's runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("the listener");
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, handler) = (acceptor.clone(), handler.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service =
                        tower::service_fn(move |request: http::Request<hyper::body::Incoming>| {
                            let handler = handler.clone();
                            async move {
                                let path = request.uri().path().to_string();
                                let body = http_body_util::BodyExt::collect(request.into_body())
                                    .await
                                    .map(|b| b.to_bytes().to_vec())
                                    .unwrap_or_default();
                                let (code, text) = handler(path, body).await;
                                http::Response::builder()
                                    .status(code)
                                    .header("content-type", "application/json")
                                    .body(http_body_util::Full::new(bytes::Bytes::from(text)))
                            }
                        });
                    let _ = auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), TowerToHyperService::new(service))
                        .await;
                });
            }
        });
    });
    port
}
