//! The ingress on real informers over the in-process API server, as its own
//! identity (`system:skiff:ingress`), in front of HTTP backends the test
//! serves on loopback (a selector-less Service with a hand-written
//! EndpointSlice): routing, balancing, 404/503, forwarding headers,
//! WebSocket pass-through, certificates by SNI, status, the IngressClass,
//! and what the identity may not do.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use skiff_ingress::{IngressConfig, RunningIngress};
use skiff_testkit::{TestCluster, UserInfo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const INGRESS_USER: &str = "system:skiff:ingress";

/// Waits up to 10 s for `check`.
async fn eventually<T, Fut>(what: &str, check: impl FnMut() -> Fut) -> T
where
    Fut: std::future::Future<Output = Option<T>>,
{
    skiff_testkit::eventually(Duration::from_secs(10), what, check).await
}

/// An HTTP backend answering with its name and the forwarding headers it
/// saw (as JSON); a request asking to upgrade gets a 101 and then an echo
/// of every byte.
async fn backend(name: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let service = service_fn(
                move |mut request: Request<hyper::body::Incoming>| async move {
                    if request.headers().contains_key("upgrade") {
                        let upgraded = hyper::upgrade::on(&mut request);
                        tokio::spawn(async move {
                            if let Ok(upgraded) = upgraded.await {
                                let mut io = TokioIo::new(upgraded);
                                let mut buf = [0u8; 64];
                                while let Ok(n) = io.read(&mut buf).await {
                                    if n == 0 || io.write_all(&buf[..n]).await.is_err() {
                                        break;
                                    }
                                }
                            }
                        });
                        return Ok::<_, std::convert::Infallible>(
                            Response::builder()
                                .status(101)
                                .header("connection", "upgrade")
                                .header("upgrade", "websocket")
                                .body(Full::new(Bytes::new()))
                                .expect("101"),
                        );
                    }
                    let header = |n: &str| {
                        request
                            .headers()
                            .get(n)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("")
                            .to_owned()
                    };
                    let body = json!({
                        "name": name,
                        "path": request.uri().to_string(),
                        "host": header("host"),
                        "forwarded_for": header("x-forwarded-for"),
                        "forwarded_proto": header("x-forwarded-proto"),
                        "forwarded_host": header("x-forwarded-host"),
                    });
                    Ok(Response::new(Full::new(Bytes::from(body.to_string()))))
                },
            );
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .with_upgrades()
                    .await;
            });
        }
    });
    address
}

/// `GET path` with `Host: host`; the status code and body.
async fn get(address: SocketAddr, host: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(address).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.expect("read");
    parse(&String::from_utf8_lossy(&response))
}

fn parse(response: &str) -> (u16, String) {
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((response, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, body.to_owned())
}

async fn create<K>(api: &Api<K>, value: Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(value).expect("object");
    api.create(&PostParams::default(), &object)
        .await
        .expect("create")
}

/// A selector-less Service `name` (port 80 "http") whose slice lists
/// `endpoints` with their readiness.
async fn service(admin: &kube::Client, name: &str, endpoints: &[(SocketAddr, bool)]) {
    create(
        &Api::<Service>::namespaced(admin.clone(), "default"),
        json!({"metadata": {"name": name},
               "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}),
    )
    .await;
    let port = endpoints.first().map(|(a, _)| a.port()).unwrap_or(8080);
    let endpoints: Vec<Value> = endpoints
        .iter()
        .map(
            |(a, ready)| json!({"addresses": [a.ip().to_string()], "conditions": {"ready": ready}}),
        )
        .collect();
    create(
        &Api::<EndpointSlice>::namespaced(admin.clone(), "default"),
        json!({"metadata": {"name": format!("{name}-1"),
                            "labels": {"kubernetes.io/service-name": name}},
               "addressType": "IPv4",
               "ports": [{"name": "http", "port": port}],
               "endpoints": endpoints}),
    )
    .await;
}

fn rule(host: &str, path: &str, path_type: &str, service: &str) -> Value {
    json!({"host": host, "http": {"paths": [{"path": path, "pathType": path_type,
        "backend": {"service": {"name": service, "port": {"name": "http"}}}}]}})
}

async fn start_ingress(cluster: &TestCluster) -> RunningIngress {
    let client = cluster.client_as(UserInfo::new(INGRESS_USER, Vec::<String>::new()));
    let factory = skiff_informer::SharedInformerFactory::new(client);
    let any: SocketAddr = "127.0.0.1:0".parse().expect("addr");
    let config = IngressConfig::new(any, any, vec!["192.0.2.10".parse().expect("ip")]);
    RunningIngress::start(&factory, config)
        .await
        .expect("ingress starts")
}

#[tokio::test]
async fn routes_by_host_and_path_to_ready_endpoints() {
    let cluster = TestCluster::start().await;
    let admin = cluster.admin();
    let (a, b) = (backend("a").await, backend("b").await);
    // Both backends listen on different ports; one Service per backend
    // keeps the slice's single port right.
    service(&admin, "web", &[(a, true)]).await;
    service(&admin, "api", &[(b, true)]).await;
    service(&admin, "down", &[(a, false)]).await;
    // Ready in its slice, but nothing listens there.
    let closed = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let closed_address = closed.local_addr().expect("address");
    drop(closed);
    service(&admin, "closed", &[(closed_address, true)]).await;
    let ingress = start_ingress(&cluster).await;
    let http = ingress.http.expect("http listener");

    let ingresses: Api<Ingress> = Api::namespaced(admin.clone(), "default");
    create(
        &ingresses,
        json!({"metadata": {"name": "web"},
        "spec": {"rules": [
            rule("web.example", "/", "Prefix", "web"),
            rule("web.example", "/api", "Prefix", "api"),
            rule("*.wild.example", "/", "Prefix", "api"),
            rule("down.example", "/", "Prefix", "down"),
            rule("closed.example", "/", "Prefix", "closed"),
        ]}}),
    )
    .await;
    // DefaultIngressClass admission gave the classless Ingress the default
    // class, which the ingress created at start.
    let created = ingresses.get("web").await.expect("web");
    assert_eq!(
        created.spec.and_then(|s| s.ingress_class_name).as_deref(),
        Some("skiff")
    );
    let (status, body) = eventually("web.example to be routed", || async {
        let answer = get(http, "web.example", "/index.html").await;
        (answer.0 == 200).then_some(answer)
    })
    .await;
    assert_eq!(status, 200);
    let seen: Value = serde_json::from_str(&body).expect("backend JSON");
    assert_eq!(seen["name"], "a");
    assert_eq!(seen["path"], "/index.html");
    assert_eq!(seen["host"], "web.example");
    assert_eq!(seen["forwarded_for"], "127.0.0.1");
    assert_eq!(seen["forwarded_proto"], "http");
    assert_eq!(seen["forwarded_host"], "web.example");

    let name = |body: &str| serde_json::from_str::<Value>(body).expect("JSON")["name"].clone();
    let (_, body) = get(http, "web.example", "/api/v1?x=1").await;
    assert_eq!(name(&body), "b");
    let (_, body) = get(http, "web.example", "/apix").await;
    assert_eq!(name(&body), "a", "Prefix matches whole path elements");
    let (_, body) = get(http, "one.wild.example", "/").await;
    assert_eq!(name(&body), "b");
    assert_eq!(get(http, "other.example", "/").await.0, 404);
    assert_eq!(get(http, "down.example", "/").await.0, 503);
    assert_eq!(get(http, "closed.example", "/").await.0, 502);

    // The ingress reports its address; the class exists as the default.
    let status = eventually("status.loadBalancer", || async {
        let current = ingresses.get("web").await.ok()?;
        let lb = current.status?.load_balancer?.ingress?;
        (!lb.is_empty()).then_some(lb)
    })
    .await;
    assert_eq!(status[0].ip.as_deref(), Some("192.0.2.10"));
    let class = Api::<IngressClass>::all(admin.clone())
        .get("skiff")
        .await
        .expect("IngressClass skiff");
    assert_eq!(
        class.spec.and_then(|s| s.controller).as_deref(),
        Some("skiff.io/ingress")
    );
    assert_eq!(
        class.metadata.annotations.expect("annotations")["ingressclass.kubernetes.io/is-default-class"],
        "true"
    );

    // Readiness follows the slice: the down backend becomes ready.
    Api::<EndpointSlice>::namespaced(admin.clone(), "default")
        .patch(
            "down-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"endpoints": [
                {"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]})),
        )
        .await
        .expect("patch slice");
    eventually("the ready endpoint to be used", || async {
        (get(http, "down.example", "/").await.0 == 200).then_some(())
    })
    .await;

    // An Ingress of another class is not served.
    create(
        &ingresses,
        json!({"metadata": {"name": "other"},
               "spec": {"ingressClassName": "nginx",
                        "rules": [rule("other.example", "/", "Prefix", "web")]}}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(get(http, "other.example", "/").await.0, 404);
    let other = ingresses.get("other").await.expect("other");
    assert!(
        other
            .status
            .and_then(|s| s.load_balancer)
            .and_then(|l| l.ingress)
            .is_none()
    );
    ingress.shutdown().await;
}

#[tokio::test]
async fn balances_round_robin_over_the_ready_endpoints() {
    let cluster = TestCluster::start().await;
    let admin = cluster.admin();
    // Two endpoints on one port: 127.0.0.1 and 127.0.0.2 (all of 127/8 is
    // loopback).
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let serve = |ip: &'static str, name: &'static str| async move {
        let listener = TcpListener::bind((ip, port)).await.expect("bind backend");
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let service = service_fn(move |_req: Request<hyper::body::Incoming>| async move {
                    Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from(name))))
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service),
                );
            }
        });
    };
    serve("127.0.0.1", "one").await;
    serve("127.0.0.2", "two").await;
    let one: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let two: SocketAddr = format!("127.0.0.2:{port}").parse().expect("addr");
    service(&admin, "web", &[(one, true), (two, true)]).await;
    let ingress = start_ingress(&cluster).await;
    let http = ingress.http.expect("http");
    create(
        &Api::<Ingress>::namespaced(admin.clone(), "default"),
        json!({"metadata": {"name": "web"},
               "spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}}}),
    )
    .await;
    eventually("the default backend", || async {
        (get(http, "anything", "/").await.0 == 200).then_some(())
    })
    .await;
    let mut bodies = Vec::new();
    for _ in 0..4 {
        bodies.push(get(http, "anything", "/").await.1);
    }
    bodies.sort();
    assert_eq!(bodies, ["one", "one", "two", "two"]);
    // HTTP/1.0 without a Host header reaches the default backend too.
    let mut stream = TcpStream::connect(http).await.expect("connect");
    stream
        .write_all(b"GET / HTTP/1.0\r\n\r\n")
        .await
        .expect("send");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.expect("read");
    assert_eq!(parse(&String::from_utf8_lossy(&response)).0, 200);
    ingress.shutdown().await;
}

#[tokio::test]
async fn websocket_upgrades_pass_through() {
    let cluster = TestCluster::start().await;
    let admin = cluster.admin();
    let a = backend("a").await;
    service(&admin, "ws", &[(a, true)]).await;
    let ingress = start_ingress(&cluster).await;
    let http = ingress.http.expect("http");
    create(
        &Api::<Ingress>::namespaced(admin.clone(), "default"),
        json!({"metadata": {"name": "ws"},
               "spec": {"rules": [rule("ws.example", "/", "Prefix", "ws")]}}),
    )
    .await;
    eventually("ws.example to be routed", || async {
        (get(http, "ws.example", "/").await.0 == 200).then_some(())
    })
    .await;
    let mut stream = TcpStream::connect(http).await.expect("connect");
    stream
        .write_all(
            b"GET /chat HTTP/1.1\r\nHost: ws.example\r\nConnection: Upgrade\r\n\
              Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
              Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
        )
        .await
        .expect("send upgrade");
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        let n = stream.read(&mut byte).await.expect("read head");
        assert_eq!(n, 1, "connection closed in the head: {head:?}");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_lowercase();
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(head.contains("upgrade: websocket"), "{head}");
    stream
        .write_all(b"ping through the proxy")
        .await
        .expect("write");
    let mut echoed = [0u8; 22];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut echoed))
        .await
        .expect("echo in time")
        .expect("echo");
    assert_eq!(&echoed, b"ping through the proxy");
    ingress.shutdown().await;
}

/// A self-signed certificate for `host` as a `kubernetes.io/tls` Secret's
/// data, and its DER.
fn tls_secret(name: &str, host: &str) -> (Value, Vec<u8>) {
    let mut params = rcgen::CertificateParams::new(vec![host.to_owned()]).expect("params");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, host);
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = params.self_signed(&key).expect("cert");
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let secret = json!({"metadata": {"name": name}, "type": "kubernetes.io/tls",
        "data": {"tls.crt": b64(&cert.pem()), "tls.key": b64(&key.serialize_pem())}});
    (secret, cert.der().to_vec())
}

/// The certificate the HTTPS listener presents for `sni` (verification
/// off: the test compares the certificate itself).
async fn presented_certificate(address: SocketAddr, sni: &str) -> Vec<u8> {
    #[derive(Debug)]
    struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);
    impl rustls::client::danger::ServerCertVerifier for AcceptAny {
        fn verify_server_cert(
            &self,
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &[rustls::pki_types::CertificateDer<'_>],
            _: &rustls::pki_types::ServerName<'_>,
            _: &[u8],
            _: rustls::pki_types::UnixTime,
        ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &rustls::pki_types::CertificateDer<'_>,
            dss: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }
        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &rustls::pki_types::CertificateDer<'_>,
            dss: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }
        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let stream = TcpStream::connect(address).await.expect("connect");
    let name = rustls::pki_types::ServerName::try_from(sni.to_owned()).expect("name");
    let tls = connector.connect(name, stream).await.expect("handshake");
    let (_, session) = tls.get_ref();
    session.peer_certificates().expect("certificates")[0].to_vec()
}

#[tokio::test]
async fn tls_hosts_get_their_secrets_certificate_by_sni() {
    let cluster = TestCluster::start().await;
    let admin = cluster.admin();
    let a = backend("a").await;
    service(&admin, "web", &[(a, true)]).await;
    let (secret, der) = tls_secret("secure-tls", "secure.example");
    create(&Api::<Secret>::namespaced(admin.clone(), "default"), secret).await;
    let ingress = start_ingress(&cluster).await;
    let https = ingress.https.expect("https");
    create(
        &Api::<Ingress>::namespaced(admin.clone(), "default"),
        json!({"metadata": {"name": "secure"},
               "spec": {"tls": [{"hosts": ["secure.example"], "secretName": "secure-tls"}],
                        "rules": [rule("secure.example", "/", "Prefix", "web")]}}),
    )
    .await;
    eventually("the Secret's certificate for secure.example", || async {
        (presented_certificate(https, "secure.example").await == der).then_some(())
    })
    .await;
    let other = presented_certificate(https, "other.example").await;
    assert_ne!(other, der, "other names get the default certificate");
    let (_, parsed) = x509_parser::parse_x509_certificate(&other).expect("X.509");
    assert!(
        parsed
            .subject()
            .to_string()
            .contains("skiff ingress default certificate"),
        "{}",
        parsed.subject()
    );
    ingress.shutdown().await;
}

#[tokio::test]
async fn an_edited_class_is_kept_and_the_identity_is_least_privilege() {
    let cluster = TestCluster::start().await;
    let admin = cluster.admin();
    create(
        &Api::<IngressClass>::all(admin.clone()),
        json!({"metadata": {"name": "skiff",
                            "annotations": {"ingressclass.kubernetes.io/is-default-class": "false"}},
               "spec": {"controller": "skiff.io/ingress"}}),
    )
    .await;
    let ingress = start_ingress(&cluster).await;
    let class = Api::<IngressClass>::all(admin.clone())
        .get("skiff")
        .await
        .expect("class");
    assert_eq!(
        class.metadata.annotations.expect("annotations")["ingressclass.kubernetes.io/is-default-class"],
        "false",
        "the user's edit stays"
    );
    ingress.shutdown().await;

    // The ingress's identity reads what it routes by and nothing else.
    let client = cluster.client_as(UserInfo::new(INGRESS_USER, Vec::<String>::new()));
    let forbidden = |result: Result<_, kube::Error>| match result {
        Err(kube::Error::Api(status)) => status.code == 403,
        _ => false,
    };
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}))
    .expect("pod");
    assert!(forbidden(
        Api::<Pod>::namespaced(client.clone(), "default")
            .create(&PostParams::default(), &pod)
            .await
            .map(|_| ())
    ));
    assert!(forbidden(
        Api::<ConfigMap>::namespaced(client.clone(), "default")
            .list(&Default::default())
            .await
            .map(|_| ())
    ));
    let ingresses: Api<Ingress> = Api::namespaced(client.clone(), "default");
    let created: Result<Ingress, _> = ingresses
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "x"}, "spec": {}}))
                .expect("ingress"),
        )
        .await;
    assert!(forbidden(created.map(|_| ())));
    assert!(forbidden(
        Api::<Secret>::namespaced(client.clone(), "default")
            .delete("anything", &Default::default())
            .await
            .map(|_| ())
    ));
    assert!(forbidden(
        Api::<IngressClass>::all(client.clone())
            .delete("skiff", &Default::default())
            .await
            .map(|_| ())
    ));
}
