//! A cluster zone over hand-filled caches served on loopback, a raw DNS
//! client, and a fake upstream resolver.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{Name, RData, Record, RecordType};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;
use skiff_dns::{ClusterZone, DnsHandler, Forwarder, RunningServer, ZoneSources};
use skiff_informer::Cache;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

pub struct TestDns {
    pub server: RunningServer,
    pub sources: ZoneSources,
}

impl TestDns {
    pub async fn start(upstreams: Vec<SocketAddr>) -> Self {
        let sources = ZoneSources {
            services: Arc::new(Cache::new()),
            slices: Arc::new(Cache::new()),
            pods: Arc::new(Cache::new()),
        };
        let zone = Arc::new(ClusterZone::new("cluster.local", 5, sources.clone()).unwrap());
        let forwarder = Forwarder::new(upstreams, Duration::from_millis(500));
        let server = RunningServer::bind(
            &["127.0.0.1:0".parse().unwrap()],
            DnsHandler::new(zone, forwarder),
        )
        .await
        .unwrap();
        Self { server, sources }
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.local_addrs()[0]
    }

    pub fn add_service(&self, ns: &str, name: &str, spec: serde_json::Value) {
        let svc: Service = serde_json::from_value(
            json!({"metadata": {"namespace": ns, "name": name}, "spec": spec}),
        )
        .unwrap();
        self.sources.services.insert(Arc::new(svc));
    }

    pub fn add_slice(
        &self,
        ns: &str,
        service: &str,
        endpoints: serde_json::Value,
        ports: serde_json::Value,
    ) {
        let slice: EndpointSlice = serde_json::from_value(json!({
            "metadata": {"namespace": ns, "name": format!("{service}-x"),
                "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4", "endpoints": endpoints, "ports": ports
        }))
        .unwrap();
        self.sources.slices.insert(Arc::new(slice));
    }

    pub fn add_pod(&self, ns: &str, name: &str, ip: &str) {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"namespace": ns, "name": name},
            "status": {"podIP": ip, "podIPs": [{"ip": ip}]}
        }))
        .unwrap();
        self.sources.pods.insert(Arc::new(pod));
    }
}

fn query_bytes(name: &str, qtype: RecordType, id: u16) -> Vec<u8> {
    let mut message = Message::query();
    message.metadata.id = id;
    message.metadata.recursion_desired = true;
    message.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    message.to_vec().unwrap()
}

/// Sends one query over UDP (or TCP) and decodes the answer.
pub async fn ask(server: SocketAddr, name: &str, qtype: RecordType, tcp: bool) -> Message {
    let id = 0x1234;
    let bytes = query_bytes(name, qtype, id);
    let answer = if tcp {
        let mut stream = TcpStream::connect(server).await.unwrap();
        let mut framed = (bytes.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&bytes);
        stream.write_all(&framed).await.unwrap();
        let mut len = [0u8; 2];
        stream.read_exact(&mut len).await.unwrap();
        let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
        stream.read_exact(&mut buf).await.unwrap();
        buf
    } else {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        socket.send_to(&bytes, server).await.unwrap();
        let mut buf = vec![0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(5), socket.recv(&mut buf))
            .await
            .expect("an answer within 5 s")
            .unwrap();
        buf.truncate(n);
        buf
    };
    let message = Message::from_vec(&answer).unwrap();
    assert_eq!(message.metadata.id, id);
    assert_eq!(message.metadata.message_type, MessageType::Response);
    message
}

/// The answer section's data as text, sorted.
pub fn answers(message: &Message) -> Vec<String> {
    let mut v: Vec<String> = message.answers.iter().map(|r| r.data.to_string()).collect();
    v.sort();
    v
}

/// A fake upstream on loopback (UDP and TCP on one port): `example.com` and
/// `big.example.com` have A records (the latter too many for one UDP
/// answer, so it comes back truncated over UDP); every other name is
/// NXDOMAIN. Counts the queries it got per protocol.
pub struct FakeUpstream {
    pub addr: SocketAddr,
    pub udp_queries: Arc<std::sync::atomic::AtomicUsize>,
    pub tcp_queries: Arc<std::sync::atomic::AtomicUsize>,
}

pub const EXAMPLE_IP: &str = "192.0.2.80";

fn upstream_answer(query: &[u8], udp: bool) -> Vec<u8> {
    let request = Message::from_vec(query).unwrap();
    let mut reply = Message::new(request.metadata.id, MessageType::Response, OpCode::Query);
    reply.metadata.recursion_available = true;
    reply.add_queries(request.queries.clone());
    let q = &request.queries[0];
    let name = q.name().to_ascii().to_ascii_lowercase();
    match name.as_str() {
        "example.com." => {
            reply.add_answer(Record::from_rdata(
                q.name().clone(),
                60,
                RData::A(A(EXAMPLE_IP.parse().unwrap())),
            ));
        }
        "big.example.com." if udp => reply.metadata.truncation = true,
        "big.example.com." => {
            for i in 0..100u8 {
                reply.add_answer(Record::from_rdata(
                    q.name().clone(),
                    60,
                    RData::A(A([198, 51, 100, i].into())),
                ));
            }
        }
        _ => reply.metadata.response_code = ResponseCode::NXDomain,
    }
    reply.to_vec().unwrap()
}

impl FakeUpstream {
    pub async fn start() -> Self {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = udp.local_addr().unwrap();
        let tcp = TcpListener::bind(addr).await.unwrap();
        let udp_queries = Arc::new(AtomicUsize::new(0));
        let tcp_queries = Arc::new(AtomicUsize::new(0));
        let counter = udp_queries.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            while let Ok((n, from)) = udp.recv_from(&mut buf).await {
                counter.fetch_add(1, Ordering::Relaxed);
                let _ = udp.send_to(&upstream_answer(&buf[..n], true), from).await;
            }
        });
        let counter = tcp_queries.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = tcp.accept().await {
                counter.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    let mut len = [0u8; 2];
                    stream.read_exact(&mut len).await.ok()?;
                    let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
                    stream.read_exact(&mut buf).await.ok()?;
                    let answer = upstream_answer(&buf, false);
                    let mut framed = (answer.len() as u16).to_be_bytes().to_vec();
                    framed.extend_from_slice(&answer);
                    stream.write_all(&framed).await.ok()
                });
            }
        });
        Self {
            addr,
            udp_queries,
            tcp_queries,
        }
    }
}
