//! API creates, gets and lists with the store on sled and on etcd, side by
//! side in one run: two API servers over HTTPS on loopback, one on the
//! embedded `SledStore`, one on `EtcdStore` against a real etcd the bench
//! starts (`/usr/bin/etcd`, data on the same disk as the sled store; both
//! durable). Rounds alternate between the two so the shared machine's noise
//! falls on both; the table gives medians over rounds.
//!
//! Run: `cargo bench -p skiff-apiserver --bench api_on_etcd`
//! (env `BENCH_SCALE=0.1` for a quick smoke run, `BENCH_ROUNDS` rounds,
//! default 3).

// A test stops at the first surprise (unwrapping is how it says so), and
// nothing outside this binary sees its items.
#![allow(clippy::unwrap_used, unreachable_pub)]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::{Api, Client, Config};
use skiff_apiserver::authn::Authenticator;
use skiff_apiserver::tls::ClusterCerts;
use skiff_apiserver::{ApiServer, ApiServerConfig};
use skiff_store::testing::EtcdProcess;
use skiff_store::{EtcdConfig, EtcdStore, SledConfig, SledStore, Store};

use crate::support::{env_number, scale};

type BenchResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const CONCURRENCY: usize = 64;

/// One API server on one store, with an admin client.
struct Served {
    api: ApiServer,
    store: Arc<dyn Store>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: tokio::task::JoinHandle<()>,
    cms: Api<ConfigMap>,
}

async fn serve(store: Arc<dyn Store>, dir: &std::path::Path) -> BenchResult<Served> {
    let api = ApiServer::new(store.clone(), ApiServerConfig::default()).await?;
    let certs = ClusterCerts::load_or_create(dir, &["localhost".into(), "127.0.0.1".into()])?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(skiff_apiserver::serve::serve_https(
        listener,
        certs.server_config()?,
        Arc::new(Authenticator::default()),
        api.router(),
        async {
            let _ = stopped.await;
        },
        Duration::from_secs(2),
    ));
    let kubeconfig: kube::config::Kubeconfig =
        serde_yaml::from_str(&certs.admin_kubeconfig(&format!("https://127.0.0.1:{port}")))?;
    let client =
        Client::try_from(Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?)?;
    Ok(Served {
        api,
        store,
        stop: Some(stop),
        server,
        cms: Api::namespaced(client, "default"),
    })
}

impl Served {
    async fn stop(mut self) -> BenchResult<()> {
        self.api.shutdown();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = self.server.await;
        self.store.close().await?;
        Ok(())
    }
}

fn configmap(name: &str, payload: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        data: Some([("payload".to_owned(), payload.to_owned())].into()),
        ..Default::default()
    }
}

/// Runs `op(0..total)` on `CONCURRENCY` tasks; the wall time and the
/// sorted latencies.
async fn concurrently<F, Fut>(total: usize, op: F) -> (Duration, Vec<Duration>)
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let op = Arc::new(op);
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..CONCURRENCY)
        .map(|_| {
            let (op, next) = (op.clone(), next.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= total {
                        break latencies;
                    }
                    let t = Instant::now();
                    op(i).await;
                    latencies.push(t.elapsed());
                }
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap_or_default());
    }
    let elapsed = started.elapsed();
    all.sort();
    (elapsed, all)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// What one round measured on one backend.
#[derive(Default, Clone, Copy)]
struct Round {
    creates_per_sec: f64,
    get_p50: Duration,
    get_p99: Duration,
    list: Duration,
}

async fn round(cms: &Api<ConfigMap>, round: usize, creates: usize) -> BenchResult<Round> {
    let payload = "x".repeat(256);
    let failures = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (elapsed, _) = {
        let (cms, failures) = (cms.clone(), failures.clone());
        concurrently(creates, move |i| {
            let (cms, failures) = (cms.clone(), failures.clone());
            let cm = configmap(&format!("r{round}-{i:06}"), &payload);
            async move {
                if cms.create(&PostParams::default(), &cm).await.is_err() {
                    failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        })
        .await
    };
    let failed = failures.load(std::sync::atomic::Ordering::Relaxed);
    if failed > 0 {
        return Err(format!("{failed} creates failed").into());
    }
    let (_, gets) = {
        let cms = cms.clone();
        concurrently(creates, move |i| {
            let cms = cms.clone();
            let name = format!("r{round}-{i:06}");
            async move {
                let _ = cms.get(&name).await;
            }
        })
        .await
    };
    let started = Instant::now();
    let listed = cms.list(&ListParams::default()).await?;
    let list = started.elapsed();
    if listed.items.len() < creates {
        return Err(format!("listed {} of {creates}", listed.items.len()).into());
    }
    Ok(Round {
        creates_per_sec: creates as f64 / elapsed.as_secs_f64(),
        get_p50: percentile(&gets, 0.5),
        get_p99: percentile(&gets, 0.99),
        list,
    })
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

async fn run() -> BenchResult<()> {
    // Both stores on the same (real) disk, so both pay the same fsyncs.
    let dir = tempfile::tempdir_in(std::env::temp_dir())?;
    let etcd = EtcdProcess::start(dir.path())?;
    let sled: Arc<dyn Store> = Arc::new(SledStore::open(SledConfig::new(dir.path().join("db")))?);
    let on_etcd: Arc<dyn Store> =
        Arc::new(EtcdStore::connect(EtcdConfig::new([etcd.endpoint()])).await?);
    let sled = serve(sled, &dir.path().join("sled-api")).await?;
    let on_etcd = serve(on_etcd, &dir.path().join("etcd-api")).await?;

    let creates = scale(5_000);
    let rounds = env_number("BENCH_ROUNDS", 3.0).max(1.0) as usize;
    let mut results: Vec<(Round, Round)> = Vec::new();
    for n in 0..rounds {
        let s = round(&sled.cms, n, creates).await?;
        let e = round(&on_etcd.cms, n, creates).await?;
        eprintln!(
            "round {n}: creates/s sled {:.0} etcd {:.0}",
            s.creates_per_sec, e.creates_per_sec
        );
        results.push((s, e));
    }
    let pick = |f: &dyn Fn(&Round) -> f64| {
        (
            median(results.iter().map(|(s, _)| f(s)).collect()),
            median(results.iter().map(|(_, e)| f(e)).collect()),
            median(
                results
                    .iter()
                    .map(|(s, e)| f(s) / f(e).max(1e-12))
                    .collect(),
            ),
        )
    };
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "| operation (median of {rounds} rounds, {CONCURRENCY} concurrent clients) | API on sled | API on etcd 3.4 | sled / etcd |"
    );
    println!("|---|---|---|---|");
    let (s, e, r) = pick(&|r| r.creates_per_sec);
    println!("| creates/s ({creates} ConfigMaps of 256 B per round) | {s:.0} | {e:.0} | {r:.2} |");
    let (s, e, r) = pick(&|r| ms(r.get_p50));
    println!("| get p50 | {s:.2} ms | {e:.2} ms | {r:.2} |");
    let (s, e, r) = pick(&|r| ms(r.get_p99));
    println!("| get p99 | {s:.2} ms | {e:.2} ms | {r:.2} |");
    let (s, e, r) = pick(&|r| ms(r.list));
    println!(
        "| list all ConfigMaps (round n: n+1 × {creates}), served from the watch cache | {s:.1} ms | {e:.1} ms | {r:.2} |"
    );
    sled.stop().await?;
    on_etcd.stop().await?;
    drop(etcd);
    Ok(())
}

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("benchmark failed: {e}");
        std::process::exit(1);
    }
}
