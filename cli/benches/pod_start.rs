//! Pod start latency on real containerd, side by side in one run: pods
//! created through `skiff server` (API → scheduler → node agent → CRI,
//! Running observed through a watch) against the same pods started by a raw
//! CRI driver (RunPodSandbox + CreateContainer + StartContainer, with the
//! agent's own CRI configs) on the same containerd; 50 sequential and 20
//! concurrent pods each. Also the time from `skiff server` start to Node
//! Ready and the server's idle RSS with its agent (containerd excluded).
//!
//! Run (root, containerd/runc/CNI installed):
//! `cargo bench -p skiff --bench pod_start`
//! (`POD_START_SEQUENTIAL`, `POD_START_CONCURRENT` change the counts).

// A bench or test stops at the first surprise (unwrapping is how it says so),
// and nothing outside this binary sees its items.
#![allow(clippy::unwrap_used, unreachable_pub)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client, Config};
use skiff_node::agent::pod::cri_config::{self, ContainerInputs};
use skiff_node::agent::pod::dns_config::{ClusterDnsSettings, PodDnsInputs};
use skiff_node::agent::pod::labels;
use skiff_node::{CriRuntime, Runtime, images};

const NODE: &str = "bench-node";

type Error = Box<dyn std::error::Error + Send + Sync>;

#[path = "support/mod.rs"]
mod support;

use support::{env_or, free_port, node_server_command, status_mib, stop_node_server};

fn rss_mib(pid: u32) -> f64 {
    status_mib(pid, "VmRSS:")
}

fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn bench_pod(name: &str, namespace: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uuid_like(name)},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
            "name": "main", "image": images::BUSYBOX_IMAGE, "imagePullPolicy": "Never",
            "command": ["sleep", "3600"]}]}
    }))
    .unwrap_or_default()
}

fn uuid_like(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("raw-{name}-{nanos}")
}

/// When each pod was first seen Running, from one watch.
#[derive(Clone, Default)]
struct RunningSeen(Arc<Mutex<HashMap<String, Instant>>>);

impl RunningSeen {
    fn start(&self, api: Api<Pod>) {
        let seen = self.0.clone();
        tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default()).boxed();
            while let Some(Ok(event)) = events.next().await {
                let pod = match event {
                    watcher::Event::Apply(p) | watcher::Event::InitApply(p) => p,
                    _ => continue,
                };
                let running =
                    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
                if running && let Some(name) = pod.metadata.name {
                    seen.lock()
                        .map(|mut s| s.entry(name).or_insert_with(Instant::now).to_owned())
                        .ok();
                }
            }
        });
    }

    async fn wait(&self, name: &str) -> Instant {
        loop {
            if let Some(at) = self.0.lock().ok().and_then(|s| s.get(name).copied()) {
                return at;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

/// The skiff path: create → Running seen through the watch.
async fn through_skiff(
    api: &Api<Pod>,
    seen: &RunningSeen,
    name: String,
) -> Result<Duration, Error> {
    let mut pod = bench_pod(&name, "default");
    pod.metadata.uid = None;
    let started = Instant::now();
    api.create(&PostParams::default(), &pod).await?;
    let running = seen.wait(&name).await;
    Ok(running.duration_since(started))
}

/// The raw path: the agent's CRI configs without the pod UID label (so the
/// agent leaves these sandboxes alone), sandbox → create → start.
async fn through_cri(
    cri: &CriRuntime,
    log_root: &Path,
    name: String,
) -> Result<(Duration, String), Error> {
    let pod = bench_pod(&name, "bench-raw");
    // The same DNS settings the agent hands its pods by default.
    let dns = PodDnsInputs::load(&ClusterDnsSettings::default());
    let mut sandbox = cri_config::sandbox_config(&pod, log_root, 0, &dns, None);
    sandbox.labels.remove(labels::POD_UID);
    let container_spec = pod
        .spec
        .as_ref()
        .map(|s| s.containers[0].clone())
        .unwrap_or_default();
    let volumes = HashMap::new();
    let inputs = ContainerInputs {
        pod: &pod,
        image: images::BUSYBOX_IMAGE.to_string(),
        env: Vec::new(),
        command: vec!["sleep".into(), "3600".into()],
        args: Vec::new(),
        volumes: &volumes,
        sub_paths: HashMap::new(),
        restart_count: 0,
        init: false,
        pid_target: None,
        termination_log: None,
        hosts_file: None,
        seccomp_root: std::path::Path::new("/nonexistent"),
        // The bench pod is BestEffort: the node's memory does not enter.
        oom_score_adj: skiff_node::oom_score::for_container(&pod, &container_spec, 1 << 30),
    };
    let mut container = cri_config::container_config(&container_spec, &inputs);
    container.labels.remove(labels::POD_UID);
    let started = Instant::now();
    std::fs::create_dir_all(&sandbox.log_directory)?;
    let sandbox_id = cri.run_pod_sandbox(&sandbox, "").await?;
    let id = cri
        .create_container(&sandbox_id, &container, &sandbox)
        .await?;
    cri.start_container(&id).await?;
    Ok((started.elapsed(), sandbox_id))
}

struct Row {
    what: String,
    skiff: Vec<Duration>,
    raw: Vec<Duration>,
}

fn print_rows(rows: &[Row]) {
    println!(
        "| pods | skiff p50 | raw CRI p50 | ratio p50 | skiff p99 | raw CRI p99 | ratio p99 |"
    );
    println!("|---|---|---|---|---|---|---|");
    for r in rows {
        let (s50, r50) = (percentile(&r.skiff, 0.5), percentile(&r.raw, 0.5));
        let (s99, r99) = (percentile(&r.skiff, 0.99), percentile(&r.raw, 0.99));
        println!(
            "| {} | {:.0} ms | {:.0} ms | {:.2}× | {:.0} ms | {:.0} ms | {:.2}× |",
            r.what,
            ms(s50),
            ms(r50),
            ms(s50) / ms(r50),
            ms(s99),
            ms(r99),
            ms(s99) / ms(r99)
        );
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let sequential = env_or("POD_START_SEQUENTIAL", 50);
    let concurrent = env_or("POD_START_CONCURRENT", 20);
    let dir = tempfile::tempdir()?;
    let bridge = format!("skb{}", std::process::id() % 100_000);
    let port = free_port();
    let mut command = node_server_command(dir.path(), port, NODE, &bridge, "10.233.11.0/24")?;
    command.arg("--disable-ingress");
    let spawned = Instant::now();
    let mut server = command.spawn()?;
    let pid = server.id();
    let result = run(dir.path(), pid, spawned, sequential, concurrent).await;
    stop_node_server(&mut server, dir.path(), &bridge, result.is_err());
    result
}

async fn run(
    dir: &Path,
    pid: u32,
    spawned: Instant,
    sequential: usize,
    concurrent: usize,
) -> Result<(), Error> {
    let kubeconfig_path = dir.join("kubeconfig.yaml");
    while !kubeconfig_path.exists() {
        if spawned.elapsed() > Duration::from_secs(60) {
            return Err("server did not start".into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let kubeconfig = kube::config::Kubeconfig::read_from(&kubeconfig_path)?;
    let client =
        Client::try_from(Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?)?;
    let nodes: Api<Node> = Api::all(client.clone());
    let ready_after = loop {
        let ready = nodes.get(NODE).await.ok().is_some_and(|n| {
            n.status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        });
        if ready {
            break spawned.elapsed();
        }
        if spawned.elapsed() > Duration::from_secs(120) {
            return Err("node not Ready".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };

    let cri = support::import_busybox(dir).await?;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let idle_rss = rss_mib(pid);

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let seen = RunningSeen::default();
    seen.start(pods.clone());
    let log_root: PathBuf = dir.join("raw-logs");
    let mut raw_sandboxes = Vec::new();

    // One warm-up pod each way (first sandbox pays for CNI set-up).
    through_skiff(&pods, &seen, "warm".into()).await?;
    raw_sandboxes.push(through_cri(&cri, &log_root, "warm".into()).await?.1);

    let mut rows = Vec::new();
    let mut skiff = Vec::new();
    let mut raw = Vec::new();
    for i in 0..sequential {
        skiff.push(through_skiff(&pods, &seen, format!("seq-{i}")).await?);
        let (took, sandbox) = through_cri(&cri, &log_root, format!("seq-{i}")).await?;
        raw.push(took);
        raw_sandboxes.push(sandbox);
    }
    rows.push(Row {
        what: format!("{sequential} sequential"),
        skiff,
        raw,
    });

    let skiff = futures::future::try_join_all(
        (0..concurrent).map(|i| through_skiff(&pods, &seen, format!("conc-{i}"))),
    )
    .await?;
    let raw_runs = futures::future::try_join_all(
        (0..concurrent).map(|i| through_cri(&cri, &log_root, format!("conc-{i}"))),
    )
    .await?;
    let raw = raw_runs.iter().map(|(d, _)| *d).collect();
    raw_sandboxes.extend(raw_runs.into_iter().map(|(_, s)| s));
    rows.push(Row {
        what: format!("{concurrent} concurrent"),
        skiff,
        raw,
    });

    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| `skiff server` start → Node Ready | {:.2} s |",
        ready_after.as_secs_f64()
    );
    println!(
        "| `skiff server` idle RSS with its agent (containerd excluded) | {idle_rss:.0} MiB |"
    );
    println!();
    print_rows(&rows);

    for id in raw_sandboxes {
        let _ = cri.stop_pod_sandbox(&id).await;
        let _ = cri.remove_pod_sandbox(&id).await;
    }
    let _ = pods
        .delete_collection(
            &DeleteParams::default().grace_period(0),
            &ListParams::default(),
        )
        .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline
        && pods
            .list(&ListParams::default())
            .await
            .map(|l| !l.items.is_empty())
            .unwrap_or(false)
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}
