//! Soak: a real `skiff server --simulated-nodes N` under steady churn for a
//! long time (issue #15), to see whether anything grows with time rather than
//! with the load: the server's resident memory, its open file descriptors,
//! the store on disk, request latency.
//!
//! The churn, all through the HTTPS API with kube-rs (its own retries off, so
//! 429s are counted instead of hidden): `SOAK_RATE` writes per second, in turn
//! a ConfigMap create, an update (PUT) of one created a while ago and a
//! delete of an older one, so the live ConfigMaps stay at `SOAK_WINDOW`; and
//! a Deployment on the simulated nodes scaled between `SOAK_REPLICAS / 10`
//! and `SOAK_REPLICAS` every `SOAK_SCALE_PERIOD` seconds, which has the
//! controllers, scheduler and simulated kubelets create and delete pods.
//!
//! Every `SOAK_SAMPLE` seconds it records the server's VmRSS and thread
//! count, its open fds (`/proc/<pid>/fd`), the bytes under its data
//! directory, the window's writes, 429s and other errors, and p50/p99
//! latency per kind of request. All samples go to a CSV in the target dir,
//! a table (a row per `SOAK_TABLE_EVERY` seconds) to stdout, a plot to
//! `SOAK_PNG` (default `docs/soak.png`, drawn by `soak_plot.py` with
//! matplotlib), and a one-line summary last; "start" there is the idle
//! server with its nodes up, right before the churn starts.
//!
//! Run: `cargo bench -p skiff --bench soak` (30 minutes; `SOAK_SECONDS=120`
//! for a short run). Not part of `scripts/test`.

// A bench or test stops at the first surprise (unwrapping is how it says so),
// and nothing outside this binary sees its items.
#![allow(clippy::unwrap_used, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use tokio::sync::Semaphore;
use tokio::time::MissedTickBehavior;

#[path = "support/mod.rs"]
mod support;

use support::{
    admin_client, env_or, free_port, payload_configmap, server_command, status_mib, terminate,
};

const NAMESPACE: &str = "soak";
const DEPLOYMENT: &str = "soak";
/// Requests in flight at most; when the server is slower than the rate
/// allows for, the churn falls behind (and the table shows it) instead of
/// piling up connections.
const IN_FLIGHT: usize = 64;

/// The kinds of request whose latency is tracked separately.
#[derive(Clone, Copy)]
enum Op {
    Create,
    Update,
    Delete,
    Scale,
}

impl Op {
    /// In the order of the CSV's and the table's columns.
    const ALL: [Op; 4] = [Op::Create, Op::Update, Op::Delete, Op::Scale];
}

/// What the requests of one sampling window did.
#[derive(Default)]
struct Window {
    /// Milliseconds of each successful request, by `Op` index.
    latencies: [Vec<f64>; 4],
    /// 429 TooManyRequests answers.
    throttled: usize,
    /// Any other failure (status or transport).
    errors: usize,
}

impl Window {
    fn record(&mut self, op: Op, started: Instant, result: Result<(), kube::Error>) {
        match result {
            Ok(()) => self.latencies[op as usize].push(started.elapsed().as_secs_f64() * 1e3),
            Err(kube::Error::Api(status)) if status.code == 429 => self.throttled += 1,
            Err(_) => self.errors += 1,
        }
    }
}

/// One row of the CSV.
struct Sample {
    seconds: f64,
    rss_mib: f64,
    threads: usize,
    fds: usize,
    store_mib: f64,
    configmaps: usize,
    pods: usize,
    writes_per_second: f64,
    throttled: usize,
    errors: usize,
    /// p50 and p99 in ms by `Op` index; NaN when the window had none.
    p50: [f64; 4],
    p99: [f64; 4],
}

impl Sample {
    const CSV_HEADER: &'static str = "seconds,rss_mib,threads,fds,store_mib,configmaps,pods,writes_per_second,throttled,errors,\
         create_p50_ms,create_p99_ms,update_p50_ms,update_p99_ms,delete_p50_ms,delete_p99_ms,scale_p50_ms,scale_p99_ms";

    fn csv(&self) -> String {
        let mut line = format!(
            "{:.0},{:.1},{},{},{:.2},{},{},{:.1},{},{}",
            self.seconds,
            self.rss_mib,
            self.threads,
            self.fds,
            self.store_mib,
            self.configmaps,
            self.pods,
            self.writes_per_second,
            self.throttled,
            self.errors
        );
        for op in Op::ALL {
            let i = op as usize;
            line.push_str(&format!(",{:.1},{:.1}", self.p50[i], self.p99[i]));
        }
        line
    }

    fn table_row(&self) -> String {
        let p99 = Op::ALL
            .iter()
            .map(|&op| match self.p99[op as usize] {
                v if v.is_finite() => format!("{v:.0}"),
                _ => "–".to_string(),
            })
            .collect::<Vec<_>>()
            .join(" / ");
        format!(
            "| {:.0} | {:.0} | {} | {} | {:.1} | {} | {} | {:.0} | {} | {} | {p99} |",
            self.seconds / 60.0,
            self.rss_mib,
            self.fds,
            self.threads,
            self.store_mib,
            self.configmaps,
            self.pods,
            self.writes_per_second,
            self.throttled,
            self.errors
        )
    }
}

/// The `q` quantile of `values` (sorted in place); NaN when empty.
fn quantile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

fn threads(pid: u32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Bytes of the files under `dir`; files that vanish while it walks (the
/// store replaces segments) are left out.
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&entry.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

fn configmap(i: u64) -> ConfigMap {
    // 1 KiB of data, different in each object.
    payload_configmap(format!("cm-{i:08}"), format!("{i:08}").repeat(128))
}

fn deployment(replicas: i32) -> Result<Deployment, serde_json::Error> {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": DEPLOYMENT},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "soak"}},
                 "template": {"metadata": {"labels": {"app": "soak"}},
                              "spec": {"terminationGracePeriodSeconds": 0,
                                       "containers": [{"name": "c", "image": "busybox:1",
                                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}
    }))
}

/// Which ConfigMap the next churn write touches. Creates run ahead, updates
/// follow half a window behind and deletes a whole window behind; while the
/// window fills, the turns of updates and deletes go to creates.
struct Churn {
    window: u64,
    turn: u64,
    next_create: u64,
    next_update: u64,
    next_delete: u64,
}

impl Churn {
    fn next(&mut self) -> (Op, u64) {
        self.turn += 1;
        let (op, counter) = match self.turn % 3 {
            1 if self.next_update + self.window / 2 < self.next_create => {
                (Op::Update, &mut self.next_update)
            }
            2 if self.next_delete + self.window <= self.next_create => {
                (Op::Delete, &mut self.next_delete)
            }
            _ => (Op::Create, &mut self.next_create),
        };
        *counter += 1;
        (op, *counter - 1)
    }
}

async fn churn_one(api: Api<ConfigMap>, op: Op, i: u64) -> Result<(), kube::Error> {
    match op {
        Op::Create => api
            .create(&PostParams::default(), &configmap(i))
            .await
            .map(drop),
        Op::Update => {
            let mut cm = configmap(i);
            if let Some(data) = cm.data.as_mut() {
                data.insert("updated".into(), "yes".into());
            }
            api.replace(&format!("cm-{i:08}"), &PostParams::default(), &cm)
                .await
                .map(drop)
        }
        // `Churn` hands out no scaling; that is the Deployment's.
        Op::Delete | Op::Scale => api
            .delete(&format!("cm-{i:08}"), &DeleteParams::default())
            .await
            .map(drop),
    }
}

/// Settings from the environment.
struct Settings {
    seconds: u64,
    rate: usize,
    sample: u64,
    nodes: usize,
    window: u64,
    replicas: i32,
    scale_period: u64,
    table_every: u64,
    png: PathBuf,
    csv: PathBuf,
}

impl Settings {
    fn from_env() -> Self {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/soak.png");
        Settings {
            seconds: env_or("SOAK_SECONDS", 1800) as u64,
            rate: env_or("SOAK_RATE", 100).max(1),
            sample: env_or("SOAK_SAMPLE", 30).max(1) as u64,
            nodes: env_or("SOAK_NODES", 20),
            window: env_or("SOAK_WINDOW", 2000).max(2) as u64,
            replicas: env_or("SOAK_REPLICAS", 100) as i32,
            scale_period: env_or("SOAK_SCALE_PERIOD", 30).max(1) as u64,
            table_every: env_or("SOAK_TABLE_EVERY", 300).max(1) as u64,
            png: std::env::var_os("SOAK_PNG").map_or(docs, PathBuf::from),
            csv: Path::new(env!("CARGO_TARGET_TMPDIR")).join("soak.csv"),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let settings = Settings::from_env();
    let dir = tempfile::tempdir()?;
    let data_dir = dir.path().join("data");
    let log = dir.path().join("server.log");
    let mut server = server_command(support::skiff_binary(), &data_dir, free_port(), &log)?
        // Other servers on this machine may hold port 53; DNS is not what is soaked.
        .args(["--disable-cluster-dns", "--simulated-nodes"])
        .arg(settings.nodes.to_string())
        .spawn()?;
    let result = run(&settings, server.id(), &data_dir).await;
    terminate(&mut server);
    let samples = match result {
        Ok(samples) => samples,
        Err(error) => {
            eprintln!(
                "server log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            return Err(error);
        }
    };
    report(&settings, &samples)
}

/// Waits for the nodes, starts the churn and samples until the time is up.
async fn run(
    settings: &Settings,
    pid: u32,
    data_dir: &Path,
) -> Result<Vec<Sample>, Box<dyn std::error::Error>> {
    let client = admin_client(data_dir, false).await?;
    let nodes: Api<Node> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    while nodes
        .list(&ListParams::default())
        .await
        .map_or(0, |l| l.items.len())
        < settings.nodes
    {
        if Instant::now() > deadline {
            return Err("the simulated nodes did not register within 60 s".into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(NAMESPACE.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let low = (settings.replicas / 10).max(1);
    deployments
        .create(&PostParams::default(), &deployment(low)?)
        .await?;
    // Let the first pods settle so the start sample is the server at rest.
    tokio::time::sleep(Duration::from_secs(5)).await;

    let window = Arc::new(Mutex::new(Window::default()));
    let started = Instant::now();
    let mut samples = vec![sample(pid, data_dir, &client, 0.0, Window::default()).await];
    let churn = tokio::spawn(configmap_churn(
        client.clone(),
        settings.rate,
        settings.window,
        window.clone(),
    ));
    let scaler = tokio::spawn(scale_churn(
        deployments,
        low,
        settings.replicas,
        Duration::from_secs(settings.scale_period),
        window.clone(),
    ));
    let mut ticker = tokio::time::interval(Duration::from_secs(settings.sample));
    ticker.tick().await;
    let mut last = Instant::now();
    while started.elapsed() < Duration::from_secs(settings.seconds) {
        ticker.tick().await;
        let taken = match window.lock() {
            Ok(mut w) => std::mem::take(&mut *w),
            Err(_) => return Err("a churn task panicked".into()),
        };
        let elapsed = last.elapsed().as_secs_f64();
        last = Instant::now();
        let mut s = sample(
            pid,
            data_dir,
            &client,
            started.elapsed().as_secs_f64(),
            taken,
        )
        .await;
        s.writes_per_second /= elapsed;
        eprintln!("soak: {}", s.csv());
        samples.push(s);
    }
    churn.abort();
    scaler.abort();
    Ok(samples)
}

/// Writes `rate` ConfigMap requests per second until aborted.
async fn configmap_churn(client: Client, rate: usize, window: u64, stats: Arc<Mutex<Window>>) {
    let api: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
    let limit = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut churn = Churn {
        window,
        turn: 0,
        next_create: 0,
        next_update: 0,
        next_delete: 0,
    };
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
    // Behind schedule (all slots busy) means fewer writes, not a burst later.
    ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        ticker.tick().await;
        let Ok(permit) = limit.clone().acquire_owned().await else {
            return;
        };
        let (op, i) = churn.next();
        let (api, stats) = (api.clone(), stats.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let result = churn_one(api, op, i).await;
            if let Ok(mut w) = stats.lock() {
                w.record(op, started, result);
            }
            drop(permit);
        });
    }
}

/// Scales the Deployment between `low` and `high` every `period`.
async fn scale_churn(
    api: Api<Deployment>,
    low: i32,
    high: i32,
    period: Duration,
    stats: Arc<Mutex<Window>>,
) {
    let mut up = true;
    // A third of a period off the sampling (same period by default), so a
    // sample sees the pods settled at one size rather than mid-change.
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period / 3, period);
    loop {
        ticker.tick().await;
        let replicas = if up { high } else { low };
        up = !up;
        let started = Instant::now();
        let result = api
            .patch(
                DEPLOYMENT,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"spec": {"replicas": replicas}})),
            )
            .await
            .map(drop);
        if let Ok(mut w) = stats.lock() {
            w.record(Op::Scale, started, result);
        }
    }
}

/// The server's figures now, with the requests of `window`;
/// `writes_per_second` is left as the count of writes.
async fn sample(
    pid: u32,
    data_dir: &Path,
    client: &Client,
    seconds: f64,
    mut window: Window,
) -> Sample {
    // The namespace's kube-root-ca.crt counts too.
    let configmaps = Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default())
        .await
        .map_or(0, |l| l.items.len());
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default())
        .await
        .map_or(0, |l| l.items.len());
    let writes = window.latencies.iter().map(Vec::len).sum::<usize>();
    let mut p50 = [f64::NAN; 4];
    let mut p99 = [f64::NAN; 4];
    for (i, latencies) in window.latencies.iter_mut().enumerate() {
        p50[i] = quantile(latencies, 0.5);
        p99[i] = quantile(latencies, 0.99);
    }
    Sample {
        seconds,
        rss_mib: status_mib(pid, "VmRSS:"),
        threads: threads(pid),
        fds: open_fds(pid),
        store_mib: dir_bytes(data_dir) as f64 / (1024.0 * 1024.0),
        configmaps,
        pods,
        writes_per_second: writes as f64,
        throttled: window.throttled,
        errors: window.errors,
        p50,
        p99,
    }
}

/// Writes the CSV, prints the table, draws the plot and prints the summary.
fn report(settings: &Settings, samples: &[Sample]) -> Result<(), Box<dyn std::error::Error>> {
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else {
        return Err("no samples".into());
    };
    let mut csv = String::from(Sample::CSV_HEADER);
    for s in samples {
        csv.push('\n');
        csv.push_str(&s.csv());
    }
    csv.push('\n');
    std::fs::write(&settings.csv, csv)?;
    println!("samples: {}", settings.csv.display());
    println!(
        "| minute | RSS MiB | fds | threads | data dir MiB | ConfigMaps | pods | writes/s | 429s | errors | p99 ms create / update / delete / scale |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let mut next_row = 0.0;
    for (i, s) in samples.iter().enumerate() {
        if s.seconds + 1.0 >= next_row || i + 1 == samples.len() {
            println!("{}", s.table_row());
            next_row =
                s.seconds - s.seconds % settings.table_every as f64 + settings.table_every as f64;
        }
    }
    plot(&settings.csv, &settings.png)?;
    println!("plot: {}", settings.png.display());
    let p99_max = samples
        .iter()
        .flat_map(|s| s.p99)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    println!(
        "soak: minutes={:.1} rss_start_mib={:.0} rss_end_mib={:.0} rss_growth={:.2} fds_start={} fds_end={} store_mib_end={:.1} p99_ms_max={:.0}",
        last.seconds / 60.0,
        first.rss_mib,
        last.rss_mib,
        last.rss_mib / first.rss_mib,
        first.fds,
        last.fds,
        last.store_mib,
        p99_max
    );
    Ok(())
}

/// Draws the CSV with `soak_plot.py`, installing matplotlib from PyPI first
/// when it is missing (as `scripts/bootstrap` does for its Python packages).
fn plot(csv: &Path, png: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let has_matplotlib = std::process::Command::new("python3")
        .args(["-c", "import matplotlib"])
        .stderr(std::process::Stdio::null())
        .status()?
        .success();
    if !has_matplotlib {
        let installed = std::process::Command::new("python3")
            .args([
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "matplotlib",
            ])
            .status()?;
        if !installed.success() {
            return Err("could not install matplotlib to draw the plot".into());
        }
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/soak_plot.py");
    let drawn = std::process::Command::new("python3")
        .arg(script)
        .arg(csv)
        .arg(png)
        .status()?;
    if !drawn.success() {
        return Err("soak_plot.py failed".into());
    }
    Ok(())
}
