//! Three servers on one etcd with simulated nodes attached through a joined
//! agent (issue #16): the bench starts Debian's etcd, a first `skiff server`
//! on it, a second and a third joined by the first's token, and one
//! `skiff agent --simulated-nodes N` joined by the same token to the second
//! server, each hollow node bootstrapping its own `system:node:<name>`
//! client certificate. Measured: seconds until every Node is Ready, each
//! server's and the agent's memory, API creates/s through each server in
//! turn (the same load, one after another, so the ratios compare the
//! servers), and a Deployment of R replicas created through the first
//! server until every pod is Running and available (the scheduler and
//! controllers run on whichever server holds their leases).
//!
//! Run: `cargo bench -p skiff --bench ha_scale`
//! (`HA_NODES` default 1000, `HA_REPLICAS` default 3000, `HA_CREATES`
//! creates per server, default 2000). The last line is the summary:
//! `ha_scale: nodes=… nodes_ready_s=… creates_per_s=a/b/c replicas=… pods_running_s=… server_rss_mib=a/b/c agent_rss_mib=…`.

#![allow(clippy::unwrap_used, unreachable_pub)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::Api;
use kube::api::{ListParams, PostParams};
use skiff_store::testing::EtcdProcess;

#[path = "support/mod.rs"]
mod support;

use support::{
    admin_client, env_or, free_port, payload_configmap, server_command, status_mib, terminate,
    wait_rolled_out,
};

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Creates in flight at once through one server.
const CONCURRENCY: usize = 64;
/// How long any phase may take before the bench gives up.
const PHASE_LIMIT: Duration = Duration::from_secs(900);

/// One `skiff server` process of the bench.
struct ServerProc {
    child: Child,
    port: u16,
    dir: std::path::PathBuf,
}

fn start_server(
    root: &Path,
    n: usize,
    etcd: &str,
    join: Option<(u16, &str)>,
) -> BenchResult<ServerProc> {
    let dir = root.join(format!("server-{n}"));
    std::fs::create_dir_all(&dir)?;
    let port = free_port();
    let mut command = server_command(support::skiff_binary(), &dir, port, &dir.join("server.log"))?;
    command.args([
        "--datastore-endpoint",
        etcd,
        "--disable-cluster-dns",
        "--disable-snapshots",
    ]);
    if let Some((first, token)) = join {
        command.args([
            "--server",
            &format!("https://127.0.0.1:{first}"),
            "--token",
            token,
        ]);
    }
    Ok(ServerProc {
        child: command.spawn()?,
        port,
        dir,
    })
}

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Waits until `want` Nodes of the agent are Ready; how long since `started`.
async fn wait_nodes_ready(
    nodes: &Api<Node>,
    prefix: &str,
    want: usize,
    started: Instant,
) -> BenchResult<Duration> {
    loop {
        let ready = nodes
            .list(&ListParams::default())
            .await
            .map(|l| {
                l.items
                    .iter()
                    .filter(|n| {
                        n.metadata
                            .name
                            .as_deref()
                            .is_some_and(|n| n.starts_with(prefix))
                    })
                    .filter(|n| is_ready(n))
                    .count()
            })
            .unwrap_or(0);
        if ready >= want {
            return Ok(started.elapsed());
        }
        if started.elapsed() > PHASE_LIMIT {
            return Err(format!("only {ready} of {want} simulated nodes Ready").into());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `total` ConfigMap creates through `client`, `CONCURRENCY` at a time;
/// creates per second.
async fn creates_per_sec(client: kube::Client, tag: &str, total: usize) -> BenchResult<f64> {
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let failures = Arc::new(AtomicUsize::new(0));
    let payload = "x".repeat(256);
    let started = Instant::now();
    futures::stream::iter(0..total)
        .map(|i| {
            let (api, failures) = (api.clone(), failures.clone());
            let cm = payload_configmap(format!("{tag}-{i:06}"), payload.clone());
            async move {
                if api.create(&PostParams::default(), &cm).await.is_err() {
                    failures.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<()>()
        .await;
    let elapsed = started.elapsed();
    let failed = failures.load(Ordering::Relaxed);
    if failed > 0 {
        return Err(format!("{failed} of {total} creates through {tag} failed").into());
    }
    Ok(total as f64 / elapsed.as_secs_f64())
}

fn deployment(replicas: i32) -> BenchResult<Deployment> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "ha-scale"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "ha-scale"}},
                 "template": {"metadata": {"labels": {"app": "ha-scale"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox:1",
                                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}
    }))?)
}

fn rss(pid: u32) -> f64 {
    status_mib(pid, "VmRSS:")
}

fn peak(pid: u32) -> f64 {
    status_mib(pid, "VmHWM:")
}

async fn run(
    root: &Path,
    etcd: &str,
    servers: &mut Vec<ServerProc>,
    agent: &mut Option<Child>,
) -> BenchResult<()> {
    let nodes = env_or("HA_NODES", 1000);
    let replicas = env_or("HA_REPLICAS", 3000) as i32;
    let creates = env_or("HA_CREATES", 2000);

    servers.push(start_server(root, 1, etcd, None)?);
    let first = admin_client(&servers[0].dir, true).await?;
    let token = std::fs::read_to_string(servers[0].dir.join("token"))?
        .trim()
        .to_string();
    let first_port = servers[0].port;
    for n in 2..=3 {
        servers.push(start_server(root, n, etcd, Some((first_port, &token)))?);
    }
    let mut clients = vec![first];
    for server in &servers[1..] {
        clients.push(admin_client(&server.dir, true).await?);
    }
    let idle: Vec<f64> = servers.iter().map(|s| rss(s.child.id())).collect();

    // The agent joins the second server; its hollow nodes are `ha-sim-<i>`.
    let agent_dir = root.join("agent");
    std::fs::create_dir_all(&agent_dir)?;
    let started = Instant::now();
    *agent = Some(
        Command::new(support::skiff_binary())
            .arg("agent")
            .arg("--data-dir")
            .arg(&agent_dir)
            .args([
                "--server",
                &format!("https://127.0.0.1:{}", servers[1].port),
            ])
            .args(["--token", &token, "--node-name", "ha"])
            .args(["--simulated-nodes", &nodes.to_string()])
            .env("SKIFF_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(agent_dir.join("agent.log"))?)
            .spawn()?,
    );
    let agent_pid = agent.as_ref().map_or(0, Child::id);
    let node_api: Api<Node> = Api::all(clients[0].clone());
    let nodes_ready = wait_nodes_ready(&node_api, "ha-sim-", nodes, started).await?;
    eprintln!(
        "{nodes} simulated nodes Ready in {:.1} s",
        nodes_ready.as_secs_f64()
    );
    let with_nodes: Vec<f64> = servers.iter().map(|s| rss(s.child.id())).collect();
    let agent_rss = rss(agent_pid);

    let mut rates = Vec::new();
    for (n, client) in clients.iter().enumerate() {
        let rate = creates_per_sec(client.clone(), &format!("s{}", n + 1), creates).await?;
        eprintln!("creates through server {}: {rate:.0}/s", n + 1);
        rates.push(rate);
    }

    let deployments: Api<Deployment> = Api::namespaced(clients[0].clone(), "default");
    let started = Instant::now();
    deployments
        .create(&PostParams::default(), &deployment(replicas)?)
        .await?;
    let rolled = tokio::time::timeout(
        PHASE_LIMIT,
        wait_rolled_out(&deployments, "ha-scale", replicas, started),
    )
    .await
    .map_err(|_| format!("{replicas} replicas not available within {PHASE_LIMIT:?}"))?;
    eprintln!("{replicas} pods Running in {:.1} s", rolled.as_secs_f64());
    let at_end: Vec<f64> = servers.iter().map(|s| rss(s.child.id())).collect();
    let peaks: Vec<f64> = servers.iter().map(|s| peak(s.child.id())).collect();
    let (agent_end, agent_peak) = (rss(agent_pid), peak(agent_pid));

    let per = |v: &[f64], f: &dyn Fn(f64) -> String| v.iter().map(|x| f(*x)).collect::<Vec<_>>();
    let mib = |x: f64| format!("{x:.0} MiB");
    let row = |what: &str, cells: Vec<String>, agent: String| {
        println!("| {what} | {} | {agent} |", cells.join(" | "));
    };
    println!(
        "| measure | server 1 | server 2 (agent's) | server 3 | agent ({nodes} hollow nodes) |"
    );
    println!("|---|---|---|---|---|");
    row(
        &format!("seconds from agent start until {nodes} Nodes Ready"),
        vec![
            format!("{:.1}", nodes_ready.as_secs_f64()),
            String::new(),
            String::new(),
        ],
        String::new(),
    );
    row(
        "RSS idle, before the agent",
        per(&idle, &mib),
        String::new(),
    );
    row(
        &format!("RSS with {nodes} Ready nodes"),
        per(&with_nodes, &mib),
        mib(agent_rss),
    );
    row(
        &format!("API creates/s ({creates} ConfigMaps of 256 B, {CONCURRENCY} in flight)"),
        per(&rates, &|x| format!("{x:.0}")),
        String::new(),
    );
    row(
        &format!("seconds from Deployment create until {replicas} pods Running and available"),
        vec![
            format!("{:.1}", rolled.as_secs_f64()),
            String::new(),
            String::new(),
        ],
        String::new(),
    );
    row(
        &format!("RSS after {replicas} pods"),
        per(&at_end, &mib),
        mib(agent_end),
    );
    row("peak RSS", per(&peaks, &mib), mib(agent_peak));

    let slash = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join("/")
    };
    println!(
        "ha_scale: nodes={nodes} nodes_ready_s={:.1} creates_per_s={} replicas={replicas} pods_running_s={:.1} server_rss_mib={} agent_rss_mib={:.0}",
        nodes_ready.as_secs_f64(),
        slash(&rates),
        rolled.as_secs_f64(),
        slash(&at_end),
        agent_end,
    );
    Ok(())
}

#[tokio::main]
async fn main() {
    let root = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("benchmark failed: {e}");
            std::process::exit(1);
        }
    };
    let etcd = match EtcdProcess::start(root.path()) {
        Ok(etcd) => etcd,
        Err(e) => {
            eprintln!("benchmark failed: starting etcd: {e}");
            std::process::exit(1);
        }
    };
    let mut servers = Vec::new();
    let mut agent = None;
    let result = run(root.path(), etcd.endpoint(), &mut servers, &mut agent).await;
    // The agent first, so its nodes do not outlive the servers' logs.
    if let Some(agent) = agent.as_mut() {
        terminate(agent);
    }
    for server in servers.iter_mut().rev() {
        terminate(&mut server.child);
    }
    if let Err(e) = result {
        eprintln!("benchmark failed: {e}");
        for log in [
            "agent/agent.log",
            "server-1/server.log",
            "server-2/server.log",
        ] {
            let text = std::fs::read_to_string(root.path().join(log)).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(20).collect();
            eprintln!("--- {log} (last lines) ---");
            for line in tail.into_iter().rev() {
                eprintln!("{line}");
            }
        }
        drop(etcd);
        std::process::exit(1);
    }
    drop(etcd);
}
