//! The built-in ingress against Debian's nginx as a reverse proxy, side by
//! side in one run, with the same client (wrk) and the same backends.
//!
//! A real `skiff server` with its containerd node agent runs two busybox
//! `httpd` pods behind a Service and an Ingress for `web.example`; nginx
//! (started by the bench on a free loopback port, `daemon off`, two
//! workers like the two cores) proxies to the same two pod endpoints with
//! the headers the ingress sets. busybox httpd closes every connection, so
//! a second pair of runs uses a keep-alive backend the bench itself serves
//! on the node's address (a selector-less Service with a hand-written
//! EndpointSlice for the ingress, an upstream with `keepalive` for nginx),
//! where the proxies' own cost shows more.
//!
//! Each target is loaded in turn (skiff, nginx, skiff, nginx, ...) for
//! `INGRESS_BENCH_SECONDS` (10) on two wrk threads with
//! `INGRESS_BENCH_POD_CONNECTIONS` (8) connections to the pods and
//! `INGRESS_BENCH_CONNECTIONS` (32) to the keep-alive backend,
//! `INGRESS_BENCH_ROUNDS` (2) rounds; the best round of each counts.
//! Requests/s, p50 and p99 from wrk's latency distribution; non-2xx answers
//! and socket errors are counted and shown. The last line is the summary.
//!
//! Run (root, containerd/runc/CNI, nginx and wrk from `scripts/bootstrap`):
//! `cargo bench -p skiff --bench ingress_vs_nginx`. Not part of CI.

// A bench or test stops at the first surprise (unwrapping is how it says so),
// and nothing outside this binary sees its items.
#![allow(clippy::unwrap_used, unreachable_pub)]

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use skiff_node::images;

#[path = "support/mod.rs"]
mod support;

use support::{admin_client, env_or, free_port, node_server_command, stop_node_server, terminate};

type Error = Box<dyn std::error::Error>;

const NODE: &str = "bench-ingress";
const POD_CIDR: &str = "10.233.31.0/24";
const SERVICE_CIDR: &str = "10.234.31.0/24";

/// What wrk measured in one run.
#[derive(Debug, Clone, Copy, Default)]
struct Run {
    rps: f64,
    p50_ms: f64,
    p99_ms: f64,
    /// Non-2xx/3xx answers plus socket errors.
    errors: u64,
}

/// Reads wrk's `--latency` report.
fn parse_wrk(output: &str) -> Run {
    let mut run = Run::default();
    for line in output.lines().map(str::trim) {
        let mut words = line.split_whitespace();
        match (words.next(), words.next()) {
            (Some("50%"), Some(value)) => run.p50_ms = duration_ms(value),
            (Some("99%"), Some(value)) => run.p99_ms = duration_ms(value),
            (Some("Requests/sec:"), Some(value)) => run.rps = value.parse().unwrap_or(0.0),
            _ => {}
        }
        if let Some(rest) = line.strip_prefix("Non-2xx or 3xx responses:") {
            run.errors += rest.trim().parse::<u64>().unwrap_or(0);
        }
        if let Some(rest) = line.strip_prefix("Socket errors:") {
            // "connect 0, read 0, write 0, timeout 0"
            run.errors += rest
                .split(',')
                .filter_map(|part| part.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>();
        }
    }
    run
}

/// `635.91us`, `1.10ms`, `2.00s` in milliseconds.
fn duration_ms(text: &str) -> f64 {
    let split = text
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().unwrap_or(f64::NAN);
    match unit {
        "us" => number / 1000.0,
        "ms" => number,
        "s" => number * 1000.0,
        "m" => number * 60_000.0,
        _ => f64::NAN,
    }
}

/// One wrk run against `address` with `Host: host`.
fn wrk(address: SocketAddr, host: &str, seconds: usize, connections: usize) -> Result<Run, Error> {
    let out = Command::new("wrk")
        .args(["-t2", &format!("-c{connections}"), &format!("-d{seconds}s")])
        .args(["--latency", "-H", &format!("Host: {host}")])
        .arg(format!("http://{address}/"))
        .output()?;
    if !out.status.success() {
        return Err(format!("wrk failed: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(parse_wrk(&String::from_utf8_lossy(&out.stdout)))
}

/// The best (highest requests/s) of each target's runs, taken in turn.
fn compare(
    rounds: usize,
    targets: [(SocketAddr, &str); 2],
    seconds: usize,
    connections: usize,
) -> Result<[Run; 2], Error> {
    let mut best = [Run::default(); 2];
    for round in 0..rounds {
        for (i, (address, host)) in targets.iter().enumerate() {
            let run = wrk(*address, host, seconds, connections)?;
            eprintln!("round {round} target {i} ({address}): {run:?}");
            if run.rps > best[i].rps {
                best[i] = run;
            }
        }
    }
    Ok(best)
}

fn nginx_config(dir: &Path, pods: (u16, &[SocketAddr]), host: (u16, SocketAddr)) -> String {
    let servers = |endpoints: &[SocketAddr]| {
        endpoints
            .iter()
            .map(|e| format!("        server {e};\n"))
            .collect::<String>()
    };
    let dir = dir.display();
    // The headers skiff's ingress sets, so both do the same work.
    let location = r#"
        location / {
            proxy_pass http://UPSTREAM;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-Host $host;
            proxy_set_header X-Real-IP $remote_addr;
        }"#;
    format!(
        r#"worker_processes 2;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {dir}/nginx-body;
    proxy_temp_path {dir}/nginx-proxy;
    fastcgi_temp_path {dir}/nginx-fastcgi;
    uwsgi_temp_path {dir}/nginx-uwsgi;
    scgi_temp_path {dir}/nginx-scgi;
    upstream pods {{
{pod_servers}        keepalive 32;
    }}
    upstream host {{
        server {host_backend};
        keepalive 32;
    }}
    server {{
        listen 127.0.0.1:{pods_port};{pods_location}
    }}
    server {{
        listen 127.0.0.1:{host_port};{host_location}
    }}
}}
"#,
        pod_servers = servers(pods.1),
        pods_port = pods.0,
        pods_location = location.replace("UPSTREAM", "pods"),
        host_backend = host.1,
        host_port = host.0,
        host_location = location.replace("UPSTREAM", "host"),
    )
}

/// A keep-alive HTTP/1.1 backend on `address` answering a short body.
async fn keep_alive_backend(address: SocketAddr) -> Result<(), Error> {
    let listener = tokio::net::TcpListener::bind(address).await?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let service = service_fn(|_request| async {
                Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from_static(
                    b"host backend\n",
                ))))
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    Ok(())
}

async fn create<K>(client: &Client, namespace: &str, value: Value) -> Result<(), Error>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let object: K = serde_json::from_value(value)?;
    Api::<K>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &object)
        .await?;
    Ok(())
}

/// Polls `check` every 200 ms for up to `timeout`.
async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}").into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Status code of `GET /` with `Host: host` through `address`.
async fn status_through(address: SocketAddr, host: &str) -> Option<u16> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
    let request = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.ok()?;
    String::from_utf8_lossy(&response)
        .split(' ')
        .nth(1)?
        .parse()
        .ok()
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let bridge = format!("skn{}", std::process::id() % 100_000);
    let table = format!("skiff-bench-{}", std::process::id());
    let (api_port, http_port, https_port) = (free_port(), free_port(), free_port());
    let mut server = node_server_command(dir.path(), api_port, NODE, &bridge, POD_CIDR)?
        .args(["--cluster-cidr", POD_CIDR, "--service-cidr", SERVICE_CIDR])
        .args(["--proxy-table", &table, "--disable-cluster-dns"])
        .args(["--ingress-http-port", &http_port.to_string()])
        .args(["--ingress-https-port", &https_port.to_string()])
        .spawn()?;
    let mut nginx: Option<Child> = None;
    let result = run(dir.path(), http_port, &mut nginx).await;
    if let Some(mut nginx) = nginx {
        terminate(&mut nginx);
    }
    if let Ok(client) = admin_client(dir.path(), true).await {
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
        let _ = deployments.delete("web", &Default::default()).await;
        let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client, "default");
        let _ = pods
            .delete_collection(&Default::default(), &ListParams::default())
            .await;
        let _ = wait_for("pods gone", Duration::from_secs(30), || {
            let pods = pods.clone();
            async move {
                pods.list(&ListParams::default())
                    .await
                    .ok()
                    .filter(|l| l.items.is_empty())
            }
        })
        .await;
    }
    stop_node_server(&mut server, dir.path(), &bridge, result.is_err());
    skiff_testkit::host::delete_nft_table("ip", &table);
    result
}

async fn run(dir: &Path, http_port: u16, nginx: &mut Option<Child>) -> Result<(), Error> {
    let seconds = env_or("INGRESS_BENCH_SECONDS", 10);
    let connections = env_or("INGRESS_BENCH_CONNECTIONS", 32);
    // busybox httpd forks per connection and has a short listen backlog:
    // more concurrent connections than it accepts at once time out SYNs
    // (1 s retransmits) for both proxies alike, hiding what is measured.
    let pod_connections = env_or("INGRESS_BENCH_POD_CONNECTIONS", 8);
    let rounds = env_or("INGRESS_BENCH_ROUNDS", 2);
    let client = admin_client(dir, true).await?;
    let nodes: Api<Node> = Api::all(client.clone());
    let node_ip: IpAddr = wait_for("node Ready", Duration::from_secs(120), || {
        let nodes = nodes.clone();
        async move {
            let status = nodes.get(NODE).await.ok()?.status?;
            let ready = status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            let ip = status
                .addresses
                .iter()
                .flatten()
                .find(|a| a.type_ == "InternalIP")?
                .address
                .parse()
                .ok()?;
            ready.then_some(ip)
        }
    })
    .await?;

    support::import_busybox(dir)
        .await
        .map_err(|e| e.to_string())?;

    // Two busybox httpd pods behind `web`, routed from web.example.
    create::<Deployment>(
        &client,
        "default",
        json!({"metadata": {"name": "web"},
           "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
             "template": {"metadata": {"labels": {"app": "web"}},
               "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
                 "name": "httpd", "image": images::BUSYBOX_IMAGE,
                 "command": ["sh", "-c",
                   "mkdir -p /tmp/www && echo hello > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"],
                 "ports": [{"containerPort": 8080, "name": "http"}],
                 "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1}}]}}}}),
    )
    .await?;
    create::<Service>(
        &client,
        "default",
        json!({"metadata": {"name": "web"},
           "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}),
    )
    .await?;
    // The keep-alive backend on the node's address.
    let host_backend = SocketAddr::new(node_ip, free_port());
    keep_alive_backend(host_backend).await?;
    create::<Service>(
        &client,
        "default",
        json!({"metadata": {"name": "host"},
           "spec": {"ports": [{"name": "http", "port": 80, "targetPort": host_backend.port()}]}}),
    )
    .await?;
    create::<EndpointSlice>(
        &client,
        "default",
        json!({"metadata": {"name": "host-1", "labels": {"kubernetes.io/service-name": "host"}},
           "addressType": "IPv4", "ports": [{"name": "http", "port": host_backend.port()}],
           "endpoints": [{"addresses": [node_ip.to_string()], "conditions": {"ready": true}}]}),
    )
    .await?;
    create::<Ingress>(
        &client,
        "default",
        json!({"metadata": {"name": "bench"},
           "spec": {"rules": [
             {"host": "web.example", "http": {"paths": [{"path": "/", "pathType": "Prefix",
               "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}},
             {"host": "host.example", "http": {"paths": [{"path": "/", "pathType": "Prefix",
               "backend": {"service": {"name": "host", "port": {"name": "http"}}}}]}}]}}),
    )
    .await?;

    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let pod_endpoints: Vec<SocketAddr> =
        wait_for("two ready pod endpoints", Duration::from_secs(120), || {
            let slices = slices.clone();
            async move {
                let list = slices
                    .list(&ListParams::default().labels("kubernetes.io/service-name=web"))
                    .await
                    .ok()?;
                let found: BTreeSet<SocketAddr> = list
                    .items
                    .iter()
                    .flat_map(|s| s.endpoints.iter())
                    .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
                    .filter_map(|e| e.addresses.first()?.parse::<IpAddr>().ok())
                    .map(|ip| SocketAddr::new(ip, 8080))
                    .collect();
                (found.len() == 2).then(|| found.into_iter().collect())
            }
        })
        .await?;
    let skiff: SocketAddr = SocketAddr::from(([127, 0, 0, 1], http_port));
    for host in ["web.example", "host.example"] {
        wait_for(
            &format!("{host} through the ingress"),
            Duration::from_secs(60),
            || async move { (status_through(skiff, host).await == Some(200)).then_some(()) },
        )
        .await?;
    }

    let (nginx_pods, nginx_host) = (free_port(), free_port());
    let config = dir.join("nginx.conf");
    std::fs::write(
        &config,
        nginx_config(
            dir,
            (nginx_pods, &pod_endpoints),
            (nginx_host, host_backend),
        ),
    )?;
    *nginx = Some(
        Command::new("nginx")
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let nginx_pods = SocketAddr::from(([127, 0, 0, 1], nginx_pods));
    let nginx_host = SocketAddr::from(([127, 0, 0, 1], nginx_host));
    for (address, host) in [(nginx_pods, "web.example"), (nginx_host, "host.example")] {
        wait_for("nginx", Duration::from_secs(20), || async move {
            (status_through(address, host).await == Some(200)).then_some(())
        })
        .await?;
    }

    // Warm both up (connections, caches) before measuring.
    for (address, host) in [(skiff, "web.example"), (nginx_pods, "web.example")] {
        wrk(address, host, 2, pod_connections)?;
    }
    let [skiff_pods, nginx_pods_run] = compare(
        rounds,
        [(skiff, "web.example"), (nginx_pods, "web.example")],
        seconds,
        pod_connections,
    )?;
    let [skiff_host, nginx_host_run] = compare(
        rounds,
        [(skiff, "host.example"), (nginx_host, "host.example")],
        seconds,
        connections,
    )?;

    println!(
        "wrk: 2 threads, {seconds} s per run, best of {rounds} rounds; \
         {pod_connections} connections to the pods, {connections} to the keep-alive backend"
    );
    println!("| backend | proxy | requests/s | p50 | p99 | errors |");
    println!("|---|---|---|---|---|---|");
    for (backend, proxy, run) in [
        ("2 busybox httpd pods", "skiff ingress", skiff_pods),
        ("2 busybox httpd pods", "nginx 1.22", nginx_pods_run),
        ("keep-alive host backend", "skiff ingress", skiff_host),
        ("keep-alive host backend", "nginx 1.22", nginx_host_run),
    ] {
        println!(
            "| {backend} | {proxy} | {:.0} | {:.2} ms | {:.2} ms | {} |",
            run.rps, run.p50_ms, run.p99_ms, run.errors
        );
    }
    println!(
        "ingress_vs_nginx: skiff_rps={:.0} nginx_rps={:.0} ratio={:.2} skiff_p99_ms={:.2} nginx_p99_ms={:.2} \
         keepalive_skiff_rps={:.0} keepalive_nginx_rps={:.0} keepalive_ratio={:.2} keepalive_skiff_p99_ms={:.2} keepalive_nginx_p99_ms={:.2}",
        skiff_pods.rps,
        nginx_pods_run.rps,
        skiff_pods.rps / nginx_pods_run.rps,
        skiff_pods.p99_ms,
        nginx_pods_run.p99_ms,
        skiff_host.rps,
        nginx_host_run.rps,
        skiff_host.rps / nginx_host_run.rps,
        skiff_host.p99_ms,
        nginx_host_run.p99_ms,
    );
    Ok(())
}
