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

#[path = "support/https.rs"]
mod https;
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, PostParams};
use skiff_store::testing::EtcdProcess;
use skiff_store::{EtcdConfig, EtcdStore, SledConfig, SledStore, Store};

use crate::https::{BenchResult, CONCURRENCY, configmap, percentile, serve};
use crate::support::{concurrently, env_number, scale};

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
    let created = concurrently(CONCURRENCY, creates, cms.clone(), move |cms, i| {
        let cm = configmap(&format!("r{round}-{i:06}"), &payload);
        async move { cms.create(&PostParams::default(), &cm).await.is_ok() }
    })
    .await;
    if created.failed > 0 {
        return Err(format!("{} creates failed", created.failed).into());
    }
    let gets = concurrently(CONCURRENCY, creates, cms.clone(), move |cms, i| {
        let name = format!("r{round}-{i:06}");
        async move { cms.get(&name).await.is_ok() }
    })
    .await;
    let started = Instant::now();
    let listed = cms.list(&ListParams::default()).await?;
    let list = started.elapsed();
    if listed.items.len() < creates {
        return Err(format!("listed {} of {creates}", listed.items.len()).into());
    }
    Ok(Round {
        creates_per_sec: creates as f64 / created.took.as_secs_f64(),
        get_p50: percentile(&gets.latencies, 0.5),
        get_p99: percentile(&gets.latencies, 0.99),
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
        let s = round(&sled.configmaps(), n, creates).await?;
        let e = round(&on_etcd.configmaps(), n, creates).await?;
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
