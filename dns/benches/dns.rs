//! DNS throughput and latency: cluster names (answered from the caches) and
//! forwarded names (relayed to a fake upstream on loopback), side by side in
//! one run, over UDP with concurrent clients.
//!
//! `cargo bench -p skiff-dns --bench dns` (env: DNS_BENCH_SECS per phase,
//! DNS_BENCH_CLIENTS concurrent clients, DNS_BENCH_SERVICES cluster size).

// A test stops at the first surprise (unwrapping is how it says so), and
// nothing outside this binary sees its items.
#![allow(clippy::unwrap_used, unreachable_pub)]

#[allow(dead_code)]
#[path = "../tests/dns/support.rs"]
mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType};
use serde_json::json;
use tokio::net::UdpSocket;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Phase {
    queries: u64,
    failures: u64,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Phase {
    fn percentile(&self, p: f64) -> Duration {
        let i = ((self.latencies.len() as f64 - 1.0) * p).round() as usize;
        self.latencies.get(i).copied().unwrap_or_default()
    }
}

/// Runs `clients` concurrent UDP clients for `secs`, each cycling through `names`.
async fn phase(server: SocketAddr, names: Vec<String>, clients: u64, secs: u64) -> Phase {
    let names = std::sync::Arc::new(names);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client in 0..clients {
        let names = names.clone();
        tasks.push(tokio::spawn(async move {
            let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            socket.connect(server).await.unwrap();
            let mut latencies = Vec::new();
            let mut failures = 0u64;
            let mut buf = vec![0u8; 4096];
            let mut i = client as usize;
            let mut id: u16 = (client as u16).wrapping_mul(7919);
            while Instant::now() < deadline {
                id = id.wrapping_add(1);
                let name = &names[i % names.len()];
                i += 1;
                let mut message = Message::query();
                message.metadata.id = id;
                message.metadata.recursion_desired = true;
                message.add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
                let bytes = message.to_vec().unwrap();
                let sent = Instant::now();
                socket.send(&bytes).await.unwrap();
                let ok = loop {
                    match tokio::time::timeout(Duration::from_secs(1), socket.recv(&mut buf)).await
                    {
                        Ok(Ok(n)) if n >= 2 && buf[..2] == id.to_be_bytes() => {
                            break Message::from_vec(&buf[..n])
                                .map(|m| !m.answers.is_empty())
                                .unwrap_or(false);
                        }
                        Ok(Ok(_)) => continue,
                        _ => break false,
                    }
                };
                if ok {
                    latencies.push(sent.elapsed());
                } else {
                    failures += 1;
                }
            }
            (latencies, failures)
        }));
    }
    let mut latencies = Vec::new();
    let mut failures = 0;
    for task in tasks {
        let (l, f) = task.await.unwrap();
        latencies.extend(l);
        failures += f;
    }
    let elapsed = started.elapsed();
    latencies.sort();
    Phase {
        queries: latencies.len() as u64,
        failures,
        elapsed,
        latencies,
    }
}

fn report(label: &str, p: &Phase) {
    println!(
        "{label:<10} {:>9.0} q/s  p50 {:>7.1} µs  p99 {:>7.1} µs  ({} answered, {} failed, {:.1} s)",
        p.queries as f64 / p.elapsed.as_secs_f64(),
        p.percentile(0.50).as_secs_f64() * 1e6,
        p.percentile(0.99).as_secs_f64() * 1e6,
        p.queries,
        p.failures,
        p.elapsed.as_secs_f64()
    );
}

fn main() {
    let secs = env("DNS_BENCH_SECS", 3);
    let clients = env("DNS_BENCH_CLIENTS", 8);
    let services = env("DNS_BENCH_SERVICES", 1000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let upstream = support::FakeUpstream::start().await;
        let dns = support::TestDns::start(vec![upstream.addr]).await;
        for i in 0..services {
            let ip = format!("10.43.{}.{}", 1 + i / 250, 1 + i % 250);
            dns.add_service(
                "bench",
                &format!("svc-{i}"),
                json!({"clusterIP": ip, "clusterIPs": [ip]}),
            );
        }
        let cluster: Vec<String> = (0..services)
            .map(|i| format!("svc-{i}.bench.svc.cluster.local."))
            .collect();
        let forwarded = vec!["example.com.".to_string()];
        println!(
            "skiff-dns: {services} Services, {clients} concurrent UDP clients, {secs} s per phase"
        );
        // Alternate the phases twice so drift on a shared machine hits both.
        let mut results: Vec<(&str, Phase)> = Vec::new();
        for _ in 0..2 {
            results.push((
                "cluster",
                phase(dns.addr(), cluster.clone(), clients, secs).await,
            ));
            results.push((
                "forwarded",
                phase(dns.addr(), forwarded.clone(), clients, secs).await,
            ));
        }
        for (label, result) in &results {
            report(label, result);
        }
    });
}
