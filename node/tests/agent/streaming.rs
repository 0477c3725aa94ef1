//! The node server on a real agent: TLS with client certificates from the
//! cluster CA (the API server's), container logs
//! (options, follow until the container exits), and exec over WebSocket
//! `v5.channel.k8s.io` (translated to containerd's v4) with output
//! channels, stdin and the exit code in the error channel.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use serde_json::json;
use skiff_node::images::BUSYBOX_IMAGE;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::harness::{TestCluster, phase};

const LONG: Duration = Duration::from_secs(60);

/// Where the node server is, and who calls it.
pub(crate) struct NodeServer {
    address: String,
    port: u16,
    ca_pem: String,
    /// The API server's client certificate and key (PEM).
    client: (String, String),
}

impl NodeServer {
    /// A TLS connection verifying the node's certificate, presenting the
    /// API server's client certificate when `authenticated`.
    async fn connect(&self, authenticated: bool) -> TlsStream<TcpStream> {
        let mut roots = rustls::RootCertStore::empty();
        for ca in rustls_pemfile::certs(&mut self.ca_pem.as_bytes()) {
            roots.add(ca.expect("CA PEM")).expect("CA");
        }
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("protocols")
        .with_root_certificates(roots);
        let config = if authenticated {
            let chain = rustls_pemfile::certs(&mut self.client.0.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .expect("client cert");
            let key = rustls_pemfile::private_key(&mut self.client.1.as_bytes())
                .expect("key PEM")
                .expect("key");
            builder
                .with_client_auth_cert(chain, key)
                .expect("client auth")
        } else {
            builder.with_no_client_auth()
        };
        let tcp = TcpStream::connect((self.address.as_str(), self.port))
            .await
            .expect("connect");
        let name = rustls::pki_types::ServerName::try_from(self.address.clone()).expect("name");
        tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .expect("TLS handshake with the node server")
    }
}

/// One HTTP/1.1 GET; returns status and body (read to the end).
pub(crate) async fn get(node: &NodeServer, path: &str, authenticated: bool) -> (u16, String) {
    let mut tcp = node.connect(authenticated).await;
    let request = format!("GET {path} HTTP/1.1\r\nHost: node\r\nConnection: close\r\n\r\n");
    tcp.write_all(request.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    tokio::time::timeout(LONG, tcp.read_to_end(&mut raw))
        .await
        .expect("response in time")
        .expect("read");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("response head");
    let status: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status code");
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    (
        status,
        if chunked {
            dechunk(body)
        } else {
            body.to_string()
        },
    )
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// What a remote-command WebSocket session returned, per channel.
#[derive(Debug, Default)]
struct Session {
    protocol: String,
    stdout: String,
    stderr: String,
    error: String,
}

/// Runs `/exec/...` over WebSocket as kubectl 1.32 does (v5 protocol),
/// sending `stdin` (if any) on channel 0.
async fn exec_ws(node: &NodeServer, path_and_query: &str, stdin: Option<&[u8]>) -> Session {
    let mut tcp = node.connect(true).await;
    let request = format!(
        "GET {path_and_query} HTTP/1.1\r\nHost: node\r\n\
         Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n"
    );
    tcp.write_all(request.as_bytes()).await.expect("write");
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        tcp.read_exact(&mut byte).await.expect("response head");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    let mut session = Session {
        protocol: head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("sec-websocket-protocol:")
                    .map(|p| p.trim().to_string())
            })
            .unwrap_or_default(),
        ..Default::default()
    };
    if let Some(input) = stdin {
        let mut payload = vec![0u8];
        payload.extend_from_slice(input);
        tcp.write_all(&client_frame(&payload)).await.expect("stdin");
    }
    let read = async {
        loop {
            let Some((opcode, payload)) = read_frame(&mut tcp).await else {
                break;
            };
            if opcode == 8 {
                break;
            }
            let Some((&channel, data)) = payload.split_first() else {
                continue;
            };
            let text = String::from_utf8_lossy(data);
            match channel {
                1 => session.stdout.push_str(&text),
                2 => session.stderr.push_str(&text),
                3 => session.error.push_str(&text),
                _ => {}
            }
        }
    };
    tokio::time::timeout(LONG, read)
        .await
        .expect("session ends in time");
    session
}

/// A masked binary frame, as a client must send.
fn client_frame(payload: &[u8]) -> Vec<u8> {
    let mask = [7u8, 1, 9, 3];
    let mut out = vec![0x82];
    match payload.len() {
        n if n < 126 => out.push(0x80 | n as u8),
        n => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
    }
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    out
}

/// The next server frame (unmasked), or `None` at end of stream.
async fn read_frame(tcp: &mut (impl AsyncRead + Unpin)) -> Option<(u8, Vec<u8>)> {
    let mut h = [0u8; 2];
    tcp.read_exact(&mut h).await.ok()?;
    let opcode = h[0] & 0x0f;
    let len = match h[1] & 0x7f {
        126 => {
            let mut b = [0u8; 2];
            tcp.read_exact(&mut b).await.ok()?;
            u64::from(u16::from_be_bytes(b))
        }
        127 => {
            let mut b = [0u8; 8];
            tcp.read_exact(&mut b).await.ok()?;
            u64::from_be_bytes(b)
        }
        n => u64::from(n),
    };
    let mut payload = vec![0u8; len as usize];
    tcp.read_exact(&mut payload).await.ok()?;
    Some((opcode, payload))
}

/// The node server of `cluster`'s node, as its Node publishes it, called
/// with the API server's client certificate.
pub(crate) async fn node_server(cluster: &TestCluster) -> NodeServer {
    let node = Api::<Node>::all(cluster.client.clone())
        .get(&cluster.config.node_name)
        .await
        .expect("node");
    let port = node
        .status
        .as_ref()
        .and_then(|s| s.daemon_endpoints.as_ref())
        .and_then(|d| d.kubelet_endpoint.as_ref())
        .map(|k| k.port)
        .expect("daemonEndpoints.kubeletEndpoint.port published");
    let port = u16::try_from(port).expect("port");
    assert_ne!(port, 0);
    let address = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
        .map(|a| a.address.clone())
        .expect("InternalIP published");
    NodeServer {
        address,
        port,
        ca_pem: cluster.certs.ca_cert_pem.clone(),
        client: (
            cluster.certs.kubelet_client_cert_pem.clone(),
            cluster.certs.kubelet_client_key_pem.clone(),
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn node_server_serves_logs_and_exec_on_real_containerd() {
    let cluster = TestCluster::start(3).await;
    let node = node_server(&cluster).await;

    // A pod that ticks and exits, and one that keeps running.
    cluster
        .create_pod(json!({
            "metadata": {"name": "ticker"},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": BUSYBOX_IMAGE,
                "command": ["sh", "-c", "for i in 1 2 3 4 5; do echo tick $i; sleep 0.4; done"]}]}
        }))
        .await;
    cluster
        .create_pod(json!({
            "metadata": {"name": "shell"},
            "spec": {"containers": [{
                "name": "main", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"]}]}
        }))
        .await;
    cluster
        .wait_pod("ticker", LONG, "running", |p| {
            matches!(phase(p), "Running" | "Succeeded")
        })
        .await;

    // Without a client certificate: 401 and nothing else.
    let (code, body) = get(&node, "/containerLogs/default/ticker/main", false).await;
    assert_eq!(code, 401, "{body}");
    assert!(!body.contains("tick"), "{body}");

    // follow=true streams until the container exits, then ends.
    let ticker_logs = async |query: &str| {
        get(
            &node,
            &format!("/containerLogs/default/ticker/main{query}"),
            true,
        )
        .await
    };
    let (code, body) = ticker_logs("?follow=true").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body, "tick 1\ntick 2\ntick 3\ntick 4\ntick 5\n");
    cluster.wait_phase("ticker", LONG, "Succeeded").await;
    let (_, tail) = ticker_logs("?tailLines=2&timestamps=true").await;
    let lines: Vec<&str> = tail.lines().collect();
    assert_eq!(lines.len(), 2, "{tail}");
    assert!(
        lines[0].ends_with(" tick 4") && lines[0].contains('T'),
        "{tail}"
    );
    let (_, limited) = ticker_logs("?limitBytes=8").await;
    assert_eq!(limited, "tick 1\nt");
    let (code, body) = ticker_logs("?previous=true").await;
    assert_eq!(code, 400, "{body}");
    let (code, body) = get(&node, "/containerLogs/default/missing/main", true).await;
    assert_eq!(code, 404, "{body}");
    assert!(body.contains("\"kind\":\"Status\""), "{body}");

    // exec: stdout, stderr and the exit code as a v5 session.
    cluster.wait_phase("shell", LONG, "Running").await;
    let session = exec_ws(
        &node,
        "/exec/default/shell/main?command=sh&command=-c&command=echo+out%3B+echo+err+%3E%262%3B+exit+3&stdout=true&stderr=true",
        None,
    )
    .await;
    assert_eq!(session.protocol, "v5.channel.k8s.io");
    assert_eq!(session.stdout, "out\n");
    assert_eq!(session.stderr, "err\n");
    let status: serde_json::Value = serde_json::from_str(&session.error).expect("status JSON");
    assert_eq!(status["status"], "Failure", "{status}");
    assert_eq!(status["reason"], "NonZeroExitCode", "{status}");
    assert_eq!(status["details"]["causes"][0]["reason"], "ExitCode");
    assert_eq!(status["details"]["causes"][0]["message"], "3");

    // stdin reaches the command.
    let session = exec_ws(
        &node,
        "/exec/default/shell/main?command=head&command=-n1&stdin=true&stdout=true&stderr=true",
        Some(b"hello through stdin\n"),
    )
    .await;
    assert_eq!(session.stdout, "hello through stdin\n");
    let status: serde_json::Value = serde_json::from_str(&session.error).expect("status JSON");
    assert_eq!(status["status"], "Success", "{status}");

    cluster.teardown().await;
}
