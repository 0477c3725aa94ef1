//! The API server's overhead as a ratio: the same operations through HTTPS
//! (kube-rs client, 64 concurrent keep-alive connections) and directly on the
//! bare store, side by side in one run.
//!
//! Run: `cargo bench -p skiff-apiserver --bench api_vs_store`
//! (env `BENCH_SCALE=0.1` for a quick smoke run).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, ObjectMeta, PostParams, WatchEvent, WatchParams};
use kube::{Api, Client, Config};
use skiff_apiserver::authn::Authenticator;
use skiff_apiserver::tls::ClusterCerts;
use skiff_apiserver::{ApiServer, ApiServerConfig};
use skiff_store::{SledConfig, SledStore, Store};
use tokio::sync::Semaphore;

const CONCURRENCY: usize = 64;
/// Objects the watch fan-out's events are spread over.
const FANOUT_OBJECTS: usize = 100;

fn scale(n: usize) -> usize {
    let factor: f64 = std::env::var("BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    ((n as f64 * factor) as usize).max(1)
}

fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn configmap(name: &str, payload: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        data: Some([("payload".to_string(), payload.to_string())].into()),
        ..Default::default()
    }
}

/// The JSON the store would hold for the same object, so both sides move the
/// same bytes.
fn stored_bytes(name: &str, payload: &str) -> Bytes {
    Bytes::from(
        serde_json::to_vec(&serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "uid": "00000000-0000-0000-0000-000000000000",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "data": {"payload": payload}
        }))
        .unwrap_or_default(),
    )
}

struct Row {
    what: String,
    api: String,
    store: String,
    ratio: String,
}

async fn run_concurrent<F, Fut>(total: usize, op: F) -> (Duration, Vec<Duration>)
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let op = Arc::new(op);
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..CONCURRENCY {
        let op = op.clone();
        let next = next.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= total {
                    break;
                }
                let t = Instant::now();
                op(i).await;
                latencies.push(t.elapsed());
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap_or_default());
    }
    let elapsed = started.elapsed();
    all.sort();
    (elapsed, all)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let api_store: Arc<dyn Store> =
        Arc::new(SledStore::open(SledConfig::new(dir.path().join("api-db")))?);
    let bare: Arc<dyn Store> = Arc::new(SledStore::open(SledConfig::new(
        dir.path().join("bare-db"),
    ))?);

    let api = ApiServer::new(api_store.clone(), ApiServerConfig::default()).await?;
    let certs =
        ClusterCerts::load_or_create(dir.path(), &["localhost".into(), "127.0.0.1".into()])?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(skiff_apiserver::serve::serve_https(
        listener,
        certs.server_config()?,
        Arc::new(Authenticator::default()),
        api.router(),
        async {
            let _ = stop_rx.await;
        },
        Duration::from_secs(2),
    ));
    let kubeconfig: kube::config::Kubeconfig =
        serde_yaml::from_str(&certs.admin_kubeconfig(&format!("https://127.0.0.1:{port}")))?;
    let client =
        Client::try_from(Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?)?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let payload = "x".repeat(256);
    let mut rows = Vec::new();

    // Creates.
    let creates = scale(20_000);
    let (api_t, _) = {
        let cms = cms.clone();
        let payload = payload.clone();
        run_concurrent(creates, move |i| {
            let cms = cms.clone();
            let cm = configmap(&format!("cm-{i:06}"), &payload);
            async move {
                if let Err(e) = cms.create(&PostParams::default(), &cm).await {
                    eprintln!("create failed: {e}");
                }
            }
        })
        .await
    };
    let (store_t, _) = {
        let bare = bare.clone();
        let payload = payload.clone();
        run_concurrent(creates, move |i| {
            let bare = bare.clone();
            let name = format!("cm-{i:06}");
            let key = format!("/registry/core/configmaps/default/{name}");
            let value = stored_bytes(&name, &payload);
            async move {
                if let Err(e) = bare.create(&key, value).await {
                    eprintln!("store create failed: {e}");
                }
            }
        })
        .await
    };
    let api_rate = creates as f64 / api_t.as_secs_f64();
    let store_rate = creates as f64 / store_t.as_secs_f64();
    rows.push(Row {
        what: format!("creates/s ({creates} objects, {CONCURRENCY} concurrent)"),
        api: format!("{api_rate:.0}"),
        store: format!("{store_rate:.0}"),
        ratio: format!("{:.2}", api_rate / store_rate),
    });

    // Gets.
    let gets = scale(20_000);
    let (_, api_lat) = {
        let cms = cms.clone();
        run_concurrent(gets, move |i| {
            let cms = cms.clone();
            let name = format!("cm-{:06}", i % creates);
            async move {
                let _ = cms.get(&name).await;
            }
        })
        .await
    };
    let (_, store_lat) = {
        let bare = bare.clone();
        run_concurrent(gets, move |i| {
            let bare = bare.clone();
            let key = format!("/registry/core/configmaps/default/cm-{:06}", i % creates);
            async move {
                let _ = bare.get(&key).await;
            }
        })
        .await
    };
    for (label, p) in [("get p50", 0.5), ("get p99", 0.99)] {
        let a = percentile(&api_lat, p);
        let s = percentile(&store_lat, p);
        rows.push(Row {
            what: format!("{label} ({CONCURRENCY} concurrent)"),
            api: format!("{:.3} ms", a.as_secs_f64() * 1e3),
            store: format!("{:.3} ms", s.as_secs_f64() * 1e3),
            ratio: format!("{:.1}", a.as_secs_f64() / s.as_secs_f64().max(1e-9)),
        });
    }

    // Listing 10,000 objects (the first 10,000 created above).
    let list_n = scale(10_000).min(creates);
    let rounds = 5;
    let mut api_list = Duration::ZERO;
    let mut store_list = Duration::ZERO;
    for _ in 0..rounds {
        let t = Instant::now();
        let list = cms
            .list(&ListParams::default().limit(list_n as u32))
            .await?;
        api_list += t.elapsed();
        assert_eq!(list.items.len(), list_n);
        let t = Instant::now();
        let list = bare
            .list("/registry/core/configmaps/default/", None, list_n)
            .await?;
        store_list += t.elapsed();
        assert_eq!(list.items.len(), list_n);
    }
    let (a, s) = (api_list / rounds, store_list / rounds);
    rows.push(Row {
        what: format!("list {list_n} configmaps"),
        api: format!("{:.1} ms", a.as_secs_f64() * 1e3),
        store: format!("{:.1} ms", s.as_secs_f64() * 1e3),
        ratio: format!("{:.1}", a.as_secs_f64() / s.as_secs_f64().max(1e-9)),
    });

    // Watch fan-out: W watchers, E events/s for a few seconds.
    let watchers = scale(1000);
    let events_per_sec = 1000usize;
    let seconds = 5usize;
    let (a99, a50) = watch_fanout_api(&cms, watchers, events_per_sec, seconds).await?;
    let (s99, s50) = watch_fanout_store(&bare, watchers, events_per_sec, seconds).await?;
    rows.push(Row {
        what: format!("watch delivery p50 ({watchers} watchers, {events_per_sec} events/s)"),
        api: format!("{:.1} ms", a50.as_secs_f64() * 1e3),
        store: format!("{:.1} ms", s50.as_secs_f64() * 1e3),
        ratio: format!("{:.1}", a50.as_secs_f64() / s50.as_secs_f64().max(1e-9)),
    });
    rows.push(Row {
        what: format!("watch delivery p99 ({watchers} watchers, {events_per_sec} events/s)"),
        api: format!("{:.1} ms", a99.as_secs_f64() * 1e3),
        store: format!("{:.1} ms", s99.as_secs_f64() * 1e3),
        ratio: format!("{:.1}", a99.as_secs_f64() / s99.as_secs_f64().max(1e-9)),
    });

    println!("| operation | API (HTTPS) | bare store | API / store |");
    println!("|---|---|---|---|");
    for r in rows {
        println!("| {} | {} | {} | {} |", r.what, r.api, r.store, r.ratio);
    }

    api.shutdown();
    let _ = stop_tx.send(());
    let _ = server.await;
    api_store.close().await?;
    bare.close().await?;
    Ok(())
}

/// Starts `watchers` API watches on one object, updates it at `rate`/s for
/// `seconds`, and returns delivery latency (p99, p50) over all deliveries.
async fn watch_fanout_api(
    cms: &Api<ConfigMap>,
    watchers: usize,
    rate: usize,
    seconds: usize,
) -> Result<(Duration, Duration), Box<dyn std::error::Error>> {
    // Events spread over many objects: one object's writes are serialized
    // by the store's durability, so a single hot object cannot take 1,000
    // writes a second on its own.
    let mut rv = String::new();
    for i in 0..FANOUT_OBJECTS {
        let mut cm = configmap(&format!("fanout-{i}"), "0");
        cm.metadata.labels = Some([("fanout".to_string(), "yes".to_string())].into());
        let created = cms.create(&PostParams::default(), &cm).await?;
        rv = created
            .metadata
            .resource_version
            .clone()
            .unwrap_or_default();
    }
    let total = rate * seconds;
    let gate = Arc::new(Semaphore::new(0));
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let cms = cms.clone();
        let rv = rv.clone();
        let gate = gate.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(total);
            let params = WatchParams::default()
                .fields("metadata.name=fanout")
                .timeout(120);
            let stream = cms.watch(&params, &rv).await;
            gate.add_permits(1);
            let Ok(stream) = stream else { return latencies };
            let mut stream = stream.boxed();
            while latencies.len() < total {
                match tokio::time::timeout(Duration::from_secs(30), stream.try_next()).await {
                    Ok(Ok(Some(WatchEvent::Modified(cm)))) => {
                        let sent: u128 = cm
                            .data
                            .and_then(|d| d.get("payload").and_then(|p| p.parse().ok()))
                            .unwrap_or(0);
                        latencies.push(Duration::from_nanos(
                            (now_nanos().saturating_sub(sent)) as u64,
                        ));
                    }
                    Ok(Ok(Some(_))) => {}
                    _ => break,
                }
            }
            latencies
        }));
    }
    let _ = gate.acquire_many(watchers as u32).await?;
    pace(total, rate, |i| {
        let cms = cms.clone();
        async move {
            let patch = serde_json::json!({"data": {"payload": now_nanos().to_string()}});
            let _ = cms
                .patch(
                    &format!("fanout-{}", i % FANOUT_OBJECTS),
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(patch),
                )
                .await;
        }
    })
    .await;
    collect(tasks, watchers * total).await
}

async fn watch_fanout_store(
    store: &Arc<dyn Store>,
    watchers: usize,
    rate: usize,
    seconds: usize,
) -> Result<(Duration, Duration), Box<dyn std::error::Error>> {
    let prefix = "/registry/core/configmaps/fanout/";
    for i in 0..FANOUT_OBJECTS {
        store
            .create(&format!("{prefix}{i}"), Bytes::from_static(b"0"))
            .await?;
    }
    let from = store.current_revision();
    let total = rate * seconds;
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let mut stream = store.watch(prefix, from)?;
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(total);
            while latencies.len() < total {
                match tokio::time::timeout(Duration::from_secs(30), stream.next()).await {
                    Ok(Some(Ok(event))) => {
                        let sent: u128 = std::str::from_utf8(&event.kv.value)
                            .ok()
                            .and_then(|s| s.parse().ok())
                            .unwrap_or(0);
                        latencies.push(Duration::from_nanos(
                            (now_nanos().saturating_sub(sent)) as u64,
                        ));
                    }
                    _ => break,
                }
            }
            latencies
        }));
    }
    pace(total, rate, |i| {
        let store = store.clone();
        let key = format!("{prefix}{}", i % FANOUT_OBJECTS);
        async move {
            let _ = store
                .update(&key, Bytes::from(now_nanos().to_string()), None)
                .await;
        }
    })
    .await;
    collect(tasks, watchers * total).await
}

/// Starts `op` `total` times at `rate` per second without waiting for each to
/// finish, so a slow write does not lower the offered rate.
async fn pace<F, Fut>(total: usize, rate: usize, op: F)
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let started = Instant::now();
    let mut inflight = Vec::with_capacity(total);
    for i in 0..total {
        let due = started + Duration::from_secs_f64(i as f64 / rate as f64);
        tokio::time::sleep_until(due.into()).await;
        inflight.push(tokio::spawn(op(i)));
    }
    for t in inflight {
        let _ = t.await;
    }
}

async fn collect(
    tasks: Vec<tokio::task::JoinHandle<Vec<Duration>>>,
    expected: usize,
) -> Result<(Duration, Duration), Box<dyn std::error::Error>> {
    let mut all = Vec::with_capacity(expected);
    for t in tasks {
        all.extend(t.await?);
    }
    if all.len() < expected {
        eprintln!("warning: {} of {expected} deliveries arrived", all.len());
    }
    all.sort();
    Ok((percentile(&all, 0.99), percentile(&all, 0.5)))
}
