//! The API server's overhead as a ratio: the same operations through HTTPS
//! (kube-rs client, 64 concurrent keep-alive connections) and directly on the
//! bare store, side by side in one run. Creates and lists are also run with
//! the same typed calls over one multiplexed HTTP/2 connection, the transport
//! client-go and kubectl use; the summary keeps the HTTP/1.1 figures.
//!
//! The watch fan-out: 1,000 watchers (HTTPS watches with a label selector, one
//! connection each; store prefix watches on the bare side), 1,000 writes a second
//! spread over 100 objects for 5 s, each write carrying its send time in the object,
//! so every delivery's latency is its arrival time minus that.
//!
//! Run: `cargo bench -p skiff-apiserver --bench api_vs_store`
//! (env `BENCH_SCALE=0.1` for a quick smoke run; it scales object counts and the
//! number of watchers, not the event rate). The last line is the summary compared
//! over time (issue #17):
//! `api_vs_store: creates_ratio=… list_ratio=… get_p99_ms=… watch_p99_ms=…`.

// A test stops at the first surprise (unwrapping is how it says so), and
// nothing outside this binary sees its items.
#![allow(clippy::unwrap_used, unreachable_pub)]

#[path = "support/https.rs"]
mod https;
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, ObjectMeta, PostParams, WatchParams};
use kube::{Api, Client};
use skiff_store::{SledConfig, SledStore, Store};
use tokio::sync::Semaphore;

use crate::https::{CONCURRENCY, configmap, percentile, serve};
use crate::support::{concurrently, process_cpu, scale};

/// Objects the watch fan-out's events are spread over.
const FANOUT_OBJECTS: usize = 100;

fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

/// `template` (what the API server stored for one ConfigMap: its uid,
/// timestamp and managed fields included) under another name, so the bare
/// store writes and lists the very bytes the API's store holds.
fn stored_like(template: &serde_json::Value, name: &str) -> Bytes {
    let mut object = template.clone();
    object["metadata"]["name"] = name.into();
    Bytes::from(serde_json::to_vec(&object).unwrap_or_default())
}

struct Row {
    what: String,
    api: String,
    store: String,
    ratio: String,
}

impl Row {
    /// A row of two times, in milliseconds with `digits` decimals, and
    /// their ratio.
    fn times(what: String, api: Duration, store: Duration, digits: usize) -> Self {
        Row {
            what,
            api: format!("{:.*} ms", digits, api.as_secs_f64() * 1e3),
            store: format!("{:.*} ms", digits, store.as_secs_f64() * 1e3),
            ratio: format!("{:.1}", api.as_secs_f64() / store.as_secs_f64().max(1e-9)),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let api_sled = Arc::new(SledStore::open(SledConfig::new(dir.path().join("api-db")))?);
    let bare_sled = Arc::new(SledStore::open(SledConfig::new(
        dir.path().join("bare-db"),
    ))?);
    let api_store: Arc<dyn Store> = api_sled.clone();
    let bare: Arc<dyn Store> = bare_sled.clone();

    let served = serve(api_store, dir.path())
        .await
        .map_err(|e| e.to_string())?;
    let client = served.client.clone();
    let cms: Api<ConfigMap> = served.configmaps();
    let payload = "x".repeat(256);
    let mut rows = Vec::new();

    // Creates.
    let creates = scale(20_000);
    let (api_t, api_create_cpu) = api_creates(&cms, "cm", creates, &payload).await;
    let template: Arc<serde_json::Value> = {
        let first = api_sled
            .get("/registry/core/configmaps/default/cm-000000")
            .await?
            .ok_or("the API server stored no cm-000000")?;
        println!(
            "each ConfigMap as stored, on both sides: {} bytes",
            first.value.len()
        );
        Arc::new(serde_json::from_slice(&first.value)?)
    };
    let store_creates = concurrently(CONCURRENCY, creates, bare.clone(), {
        let template = template.clone();
        move |bare, i| {
            let name = format!("cm-{i:06}");
            let key = format!("/registry/core/configmaps/default/{name}");
            let value = stored_like(&template, &name);
            async move {
                let created = bare.create(&key, value).await;
                created
                    .inspect_err(|e| eprintln!("store create failed: {e}"))
                    .is_ok()
            }
        }
    })
    .await;
    // The API store's counters before the HTTP/2 run, so each run's writes
    // per flush are read apart.
    let before_h2 = api_sled.stats()?;
    // The same creates over one HTTP/2 connection, as client-go sends them
    // (names after the first run's, so the lists below still read those).
    let h2_cms: Api<ConfigMap> = Api::namespaced(served.h2_client.clone(), "default");
    let (h2_t, h2_create_cpu) = api_creates(&h2_cms, "h2", creates, &payload).await;
    // How many writes each durable flush carried: the store's CPU per write
    // falls as commit groups grow, so this explains much of the gap below.
    let per_flush = |writes: u64, flushes: u64| writes as f64 / flushes.max(1) as f64;
    let (after_h2, bare_stats) = (api_sled.stats()?, bare_sled.stats()?);
    let api_per_flush = per_flush(before_h2.writes, before_h2.flushes);
    let store_per_flush = per_flush(bare_stats.writes, bare_stats.flushes);
    let h2_per_flush = per_flush(
        after_h2.writes - before_h2.writes,
        after_h2.flushes - before_h2.flushes,
    );
    let api_rate = creates as f64 / api_t.as_secs_f64();
    let h2_rate = creates as f64 / h2_t.as_secs_f64();
    let store_rate = creates as f64 / store_creates.took.as_secs_f64();
    for (what, rate) in [
        (
            format!("creates/s ({creates} objects, {CONCURRENCY} concurrent)"),
            api_rate,
        ),
        (
            format!("creates/s over one HTTP/2 connection ({CONCURRENCY} streams)"),
            h2_rate,
        ),
    ] {
        rows.push(Row {
            what,
            api: format!("{rate:.0}"),
            store: format!("{store_rate:.0}"),
            ratio: format!("{:.2}", rate / store_rate),
        });
    }
    for (during, carried) in [("creates", api_per_flush), ("HTTP/2 creates", h2_per_flush)] {
        rows.push(Row {
            what: format!("writes per durable flush (during the {during})"),
            api: format!("{carried:.1}"),
            store: format!("{store_per_flush:.1}"),
            ratio: format!("{:.2}", carried / store_per_flush.max(1e-9)),
        });
    }
    // Wall time of each stage of the store's commit pipeline per flush
    // (HTTP/1.1 creates against the bare store's): where the two sides'
    // flushes differ while the process is not CPU-bound.
    let micros_per_flush =
        |time: Duration, flushes: u64| time.as_secs_f64() * 1e6 / flushes.max(1) as f64;
    for (stage, api, store) in [
        (
            "applying a commit group",
            before_h2.apply_time,
            bare_stats.apply_time,
        ),
        ("sled's flush", before_h2.flush_time, bare_stats.flush_time),
        ("fdatasync", before_h2.sync_time, bare_stats.sync_time),
    ] {
        let (api, store) = (
            micros_per_flush(api, before_h2.flushes),
            micros_per_flush(store, bare_stats.flushes),
        );
        rows.push(Row {
            what: format!("{stage}, per durable flush (during the creates)"),
            api: format!("{api:.0} us"),
            store: format!("{store:.0} us"),
            ratio: format!("{:.2}", api / store.max(1e-9)),
        });
    }

    // Gets.
    let gets = scale(20_000);
    let api_gets = concurrently(CONCURRENCY, gets, cms.clone(), move |cms, i| {
        let name = format!("cm-{:06}", i % creates);
        async move { cms.get(&name).await.is_ok() }
    })
    .await;
    let store_gets = concurrently(CONCURRENCY, gets, bare.clone(), move |bare, i| {
        let key = format!("/registry/core/configmaps/default/cm-{:06}", i % creates);
        async move { bare.get(&key).await.is_ok() }
    })
    .await;
    // CPU per operation (the whole process: client, server and store) is
    // steadier than the rates when other work shares the machine.
    for (what, n, api, store) in [
        ("create", creates, api_create_cpu, store_creates.cpu),
        (
            "create over HTTP/2",
            creates,
            h2_create_cpu,
            store_creates.cpu,
        ),
        ("get", gets, api_gets.cpu, store_gets.cpu),
    ] {
        let per = |cpu: Duration| cpu.as_secs_f64() * 1e6 / n.max(1) as f64;
        rows.push(Row {
            what: format!("CPU per {what} (process, client included)"),
            api: format!("{:.1} us", per(api)),
            store: format!("{:.1} us", per(store)),
            ratio: format!("{:.1}", per(api) / per(store).max(1e-9)),
        });
    }
    for (label, p) in [("get p50", 0.5), ("get p99", 0.99)] {
        rows.push(Row::times(
            format!("{label} ({CONCURRENCY} concurrent)"),
            percentile(&api_gets.latencies, p),
            percentile(&store_gets.latencies, p),
            3,
        ));
    }

    // Listing 10,000 objects (the first 10,000 created above). Each round
    // runs every kind of list once, one after the other, so whatever else
    // the two cores are doing (the stores' background flushes after the
    // creates) falls on all of them alike; each row is the median round,
    // which one slow round does not move.
    let list_n = scale(10_000).min(creates);
    let rounds = 7;
    let (mut api_list, mut h2_list, mut store_list) = (Vec::new(), Vec::new(), Vec::new());
    let (mut body_list, mut decode_only) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        for (api, times) in [(&cms, &mut api_list), (&h2_cms, &mut h2_list)] {
            let t = Instant::now();
            let list = api
                .list(&ListParams::default().limit(list_n as u32))
                .await?;
            times.push(t.elapsed());
            assert_eq!(list.items.len(), list_n);
        }
        let t = Instant::now();
        let list = bare
            .list("/registry/core/configmaps/default/", None, list_n)
            .await?;
        store_list.push(t.elapsed());
        assert_eq!(list.items.len(), list_n);
        drop(list);
        // The same list as the body only: what the server and the
        // connection cost, without the kube client decoding 10,000 typed
        // objects (which the bare store's side has no counterpart of).
        let t = Instant::now();
        let request = http::Request::get(format!(
            "/api/v1/namespaces/default/configmaps?limit={list_n}"
        ))
        .body(Vec::new())?;
        let body = client.request_text(request).await?;
        body_list.push(t.elapsed());
        let items =
            memchr::memmem::find_iter(body.as_bytes(), br#"{"metadata":{"name":"cm-"#).count();
        assert_eq!(items, list_n, "every item in the body");
        // The typed list's floor: decoding the same body into typed
        // ConfigMaps with no server or connection at all.
        let t = Instant::now();
        let typed: kube::core::ObjectList<ConfigMap> = serde_json::from_str(&body)?;
        decode_only.push(t.elapsed());
        assert_eq!(typed.items.len(), list_n);
    }
    let median = |mut times: Vec<Duration>| {
        times.sort();
        percentile(&times, 0.5)
    };
    let (list_api, list_store) = (median(api_list), median(store_list));
    for (what, api) in [
        (format!("list {list_n} configmaps"), list_api),
        (
            format!("list {list_n} configmaps over HTTP/2"),
            median(h2_list),
        ),
        (
            format!("list {list_n} configmaps, body only (no client decode)"),
            median(body_list),
        ),
        (
            format!("decoding that body into {list_n} typed ConfigMaps alone (client, no server)"),
            median(decode_only),
        ),
    ] {
        rows.push(Row::times(what, api, list_store, 1));
    }

    // Watch fan-out: W watchers, E events/s spread over 100 objects.
    let watchers = scale(1000);
    let events_per_sec = 1000usize;
    let seconds = 5usize;
    let api_fan = watch_fanout_api(&client, watchers, events_per_sec, seconds).await?;
    api_fan.report("API");
    let store_fan = watch_fanout_store(&bare, watchers, events_per_sec, seconds).await?;
    store_fan.report("store");
    let ms = |d: Option<Duration>| match d {
        Some(d) => format!("{:.1} ms", d.as_secs_f64() * 1e3),
        None => "not all arrived".to_string(),
    };
    let ratio = |a: Option<Duration>, s: Option<Duration>| match (a, s) {
        (Some(a), Some(s)) => format!("{:.1}", a.as_secs_f64() / s.as_secs_f64().max(1e-9)),
        _ => "—".to_string(),
    };
    for (label, p) in [("p50", 0.5), ("p99", 0.99)] {
        let (a, s) = (api_fan.quantile(p), store_fan.quantile(p));
        rows.push(Row {
            what: format!(
                "watch delivery {label} ({watchers} watchers, {events_per_sec} events/s over {FANOUT_OBJECTS} objects, {seconds} s)"
            ),
            api: ms(a),
            store: ms(s),
            ratio: ratio(a, s),
        });
    }

    println!("| operation | API (HTTPS) | bare store | API / store |");
    println!("|---|---|---|---|");
    for r in rows {
        println!("| {} | {} | {} | {} |", r.what, r.api, r.store, r.ratio);
    }

    // The line compared over time; a fan-out p99 that falls among deliveries
    // that never arrived is printed as `inf`.
    let get_p99 = percentile(&api_gets.latencies, 0.99);
    println!(
        "api_vs_store: creates_ratio={:.2} list_ratio={:.2} get_p99_ms={:.2} watch_p99_ms={}",
        api_rate / store_rate,
        list_api.as_secs_f64() / list_store.as_secs_f64().max(1e-9),
        get_p99.as_secs_f64() * 1e3,
        api_fan
            .quantile(0.99)
            .map_or("inf".to_string(), |d| format!(
                "{:.1}",
                d.as_secs_f64() * 1e3
            ))
    );

    served.stop().await.map_err(|e| e.to_string())?;
    bare.close().await?;
    Ok(())
}

/// Where the writer puts each event's send time (nanoseconds since the epoch)
/// in the object, so every delivery's latency is read off the event itself.
const SENT_KEY: &[u8] = b"\"sent\":\"";

/// The send time carried by one encoded event (a watch line or a stored
/// value). The data field sits near the end of a ConfigMap, so the search runs
/// from the end; a plain byte search keeps the watchers' own cost small next to
/// the server's, since they share the two cores.
fn sent_nanos(encoded: &[u8]) -> Option<u128> {
    let at = memchr::memmem::rfind(encoded, SENT_KEY)? + SENT_KEY.len();
    let digits = encoded.get(at..)?;
    let end = digits.iter().position(|b| !b.is_ascii_digit())?;
    std::str::from_utf8(&digits[..end]).ok()?.parse().ok()
}

/// The stored form of a fan-out object carrying a send time.
fn fanout_value(name: &str, sent: u128) -> Bytes {
    Bytes::from(
        serde_json::to_vec(&serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "fanout",
                         "uid": "00000000-0000-0000-0000-000000000000",
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "labels": {"fanout": "yes"}},
            "data": {"sent": sent.to_string()}
        }))
        .unwrap_or_default(),
    )
}

/// What one side's fan-out measured.
struct Fanout {
    /// Delivery latencies of the deliveries that arrived, sorted.
    latencies: Vec<Duration>,
    /// Deliveries expected: watchers × successful writes.
    expected: usize,
    /// The writer's side (failed writes' events are not expected).
    writes: Writes,
    /// Watch streams that ended before the run did (closed by the server or
    /// failed to start).
    ended_early: usize,
    /// CPU time the whole process (server, store, writer and watchers) used
    /// from the first write until every delivery arrived: the cost of the
    /// fan-out, steadier from run to run than its latency near saturation.
    cpu: Duration,
}

impl Fanout {
    /// The `p` quantile over every expected delivery, counting a delivery
    /// that never arrived as later than any that did; `None` when that
    /// quantile falls among the missing ones.
    fn quantile(&self, p: f64) -> Option<Duration> {
        if self.expected == 0 {
            return None;
        }
        let index = ((self.expected as f64 - 1.0) * p).round() as usize;
        self.latencies.get(index).copied()
    }

    fn report(&self, side: &str) {
        eprintln!(
            "fan-out {side}: {} of {} deliveries arrived, {} watches ended early, process CPU {:.2} s",
            self.latencies.len(),
            self.expected,
            self.ended_early,
            self.cpu.as_secs_f64()
        );
        self.writes.report(side);
    }
}

/// Shared by one side's watchers: deliveries so far, and the signal to stop
/// reading once the run is over.
struct FanoutRun {
    delivered: std::sync::atomic::AtomicUsize,
    stop: tokio::sync::watch::Sender<bool>,
}

impl FanoutRun {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            delivered: std::sync::atomic::AtomicUsize::new(0),
            stop: tokio::sync::watch::channel(false).0,
        })
    }

    fn record(&self, latencies: &mut Vec<Duration>, encoded: &[u8]) {
        if let Some(sent) = sent_nanos(encoded) {
            latencies.push(Duration::from_nanos(now_nanos().saturating_sub(sent) as u64));
            self.delivered
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// After the last write: waits until every expected delivery arrived, or
    /// none arrived for 10 s (at most 120 s in all), then stops the watchers.
    async fn drain(&self, expected: usize) {
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut last = self.delivered.load(std::sync::atomic::Ordering::Relaxed);
        let mut last_progress = Instant::now();
        while last < expected && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let now = self.delivered.load(std::sync::atomic::Ordering::Relaxed);
            if now != last {
                last = now;
                last_progress = Instant::now();
            } else if last_progress.elapsed() > Duration::from_secs(10) {
                break;
            }
        }
        let _ = self.stop.send(true);
    }

    /// The fan-out itself, once the watchers (`tasks`, one each) are
    /// reading: `write` paced at `rate`/s for `seconds` (see [`pace`]), then
    /// the deliveries drained and what the side measured gathered.
    async fn measure<F, Fut, T, E>(
        &self,
        tasks: Vec<tokio::task::JoinHandle<(Vec<Duration>, bool)>>,
        rate: usize,
        seconds: usize,
        write: F,
    ) -> Result<Fanout, Box<dyn std::error::Error>>
    where
        F: Fn(usize) -> Fut,
        Fut: std::future::Future<Output = Result<T, E>> + Send + 'static,
        E: std::fmt::Display,
    {
        let total = rate * seconds;
        let cpu_before = process_cpu();
        let writes = pace(total, rate, write).await;
        let expected = tasks.len() * (total - writes.failed);
        self.drain(expected).await;
        let cpu = process_cpu().saturating_sub(cpu_before);
        gather(tasks, expected, writes, cpu).await
    }
}

/// `total` ConfigMaps `<prefix>-000000`, … created through `cms` by
/// [`CONCURRENCY`] clients: how long they took and the process CPU they used.
async fn api_creates(
    cms: &Api<ConfigMap>,
    prefix: &'static str,
    total: usize,
    payload: &str,
) -> (Duration, Duration) {
    let payload = payload.to_owned();
    let run = concurrently(CONCURRENCY, total, cms.clone(), move |cms, i| {
        let cm = configmap(&format!("{prefix}-{i:06}"), &payload);
        async move {
            let created = cms.create(&PostParams::default(), &cm).await;
            created
                .inspect_err(|e| eprintln!("create of {prefix}-{i:06} failed: {e}"))
                .is_ok()
        }
    })
    .await;
    (run.took, run.cpu)
}

async fn gather(
    tasks: Vec<tokio::task::JoinHandle<(Vec<Duration>, bool)>>,
    expected: usize,
    writes: Writes,
    cpu: Duration,
) -> Result<Fanout, Box<dyn std::error::Error>> {
    let mut latencies = Vec::with_capacity(expected);
    let mut ended_early = 0;
    for t in tasks {
        let (got, early) = t.await?;
        latencies.extend(got);
        ended_early += usize::from(early);
    }
    latencies.sort();
    Ok(Fanout {
        latencies,
        expected,
        writes,
        ended_early,
        cpu,
    })
}

/// `watchers` HTTPS watches (label selector over the fan-out objects, one
/// connection each, as separate clients would hold), merge patches at `rate`/s
/// spread over [`FANOUT_OBJECTS`] objects for `seconds`; each event's latency
/// is its arrival time minus the send time the patch carried.
async fn watch_fanout_api(
    client: &Client,
    watchers: usize,
    rate: usize,
    seconds: usize,
) -> Result<Fanout, Box<dyn std::error::Error>> {
    let ns = "fanout";
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &k8s_openapi::api::core::v1::Namespace {
                metadata: ObjectMeta {
                    name: Some(ns.into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    // Events spread over many objects: one object's writes are serialized by
    // the store's durability, so a single hot object cannot take 1,000 writes
    // a second on its own.
    let mut rv = String::new();
    for i in 0..FANOUT_OBJECTS {
        let mut cm = configmap(&format!("fanout-{i}"), "0");
        cm.metadata.labels = Some([("fanout".to_string(), "yes".to_string())].into());
        let created = cms.create(&PostParams::default(), &cm).await?;
        rv = created.metadata.resource_version.unwrap_or_default();
    }
    let run = FanoutRun::new();
    let started = Arc::new(Semaphore::new(0));
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let client = client.clone();
        let request = kube::core::Request::new(format!("/api/v1/namespaces/{ns}/configmaps"))
            .watch(
                &WatchParams::default().labels("fanout=yes").timeout(290),
                &rv,
            )?;
        let started = started.clone();
        let run = run.clone();
        let mut stop = run.stop.subscribe();
        tasks.push(tokio::spawn(async move {
            use futures::AsyncBufReadExt;
            let mut latencies = Vec::new();
            let stream = client.request_stream(request).await;
            started.add_permits(1);
            let Ok(stream) = stream else {
                return (latencies, true);
            };
            let mut stream = std::pin::pin!(stream);
            let mut line = Vec::with_capacity(1024);
            loop {
                line.clear();
                tokio::select! {
                    biased;
                    _ = stop.changed() => return (latencies, false),
                    read = stream.read_until(b'\n', &mut line) => match read {
                        Ok(n) if n > 0 => run.record(&mut latencies, &line),
                        _ => return (latencies, true),
                    },
                }
            }
        }));
    }
    // Every watch is established (its response headers arrived) before the
    // first write, so no watcher starts late.
    if tokio::time::timeout(
        Duration::from_secs(60),
        started.acquire_many(watchers as u32),
    )
    .await
    .is_err()
    {
        eprintln!("warning: not every watch had started after 60 s");
    }
    run.measure(tasks, rate, seconds, |i| {
        let cms = cms.clone();
        async move {
            let patch = serde_json::json!({"data": {"sent": now_nanos().to_string()}});
            cms.patch(
                &format!("fanout-{}", i % FANOUT_OBJECTS),
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(patch),
            )
            .await
        }
    })
    .await
}

/// The same fan-out on the bare store: `watchers` prefix watches, updates at
/// `rate`/s over [`FANOUT_OBJECTS`] keys carrying their send time.
async fn watch_fanout_store(
    store: &Arc<dyn Store>,
    watchers: usize,
    rate: usize,
    seconds: usize,
) -> Result<Fanout, Box<dyn std::error::Error>> {
    let prefix = "/registry/core/configmaps/fanout/";
    for i in 0..FANOUT_OBJECTS {
        let name = format!("fanout-{i}");
        store
            .create(&format!("{prefix}{name}"), fanout_value(&name, 0))
            .await?;
    }
    let from = store.current_revision();
    let run = FanoutRun::new();
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let mut stream = store.watch(prefix, from)?;
        let run = run.clone();
        let mut stop = run.stop.subscribe();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                tokio::select! {
                    biased;
                    _ = stop.changed() => return (latencies, false),
                    event = stream.next() => match event {
                        Some(Ok(event)) => run.record(&mut latencies, &event.kv.value),
                        _ => return (latencies, true),
                    },
                }
            }
        }));
    }
    run.measure(tasks, rate, seconds, |i| {
        let store = store.clone();
        let name = format!("fanout-{}", i % FANOUT_OBJECTS);
        async move {
            store
                .update(
                    &format!("{prefix}{name}"),
                    fanout_value(&name, now_nanos()),
                    None,
                )
                .await
        }
    })
    .await
}

/// What the writer of a fan-out saw.
struct Writes {
    failed: usize,
    first_error: Option<String>,
    /// Each write's own latency (sent to acknowledged), sorted: the part of a
    /// delivery's latency spent before the event exists.
    latencies: Vec<Duration>,
}

impl Writes {
    fn report(&self, side: &str) {
        eprintln!(
            "fan-out {side} writes: p50 {:.1} ms, p99 {:.1} ms, {} failed{}",
            percentile(&self.latencies, 0.5).as_secs_f64() * 1e3,
            percentile(&self.latencies, 0.99).as_secs_f64() * 1e3,
            self.failed,
            self.first_error
                .as_ref()
                .map_or(String::new(), |e| format!(" (first: {e})"))
        );
    }
}

/// Starts `op` `total` times at `rate` per second without waiting for each to
/// finish, so a slow write does not lower the offered rate.
async fn pace<F, Fut, T, E>(total: usize, rate: usize, op: F) -> Writes
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Result<T, E>> + Send + 'static,
    E: std::fmt::Display,
{
    let started = Instant::now();
    let mut inflight = Vec::with_capacity(total);
    for i in 0..total {
        let due = started + Duration::from_secs_f64(i as f64 / rate as f64);
        tokio::time::sleep_until(due.into()).await;
        let write = op(i);
        inflight.push(tokio::spawn(async move {
            let t = Instant::now();
            write.await.map(|_| t.elapsed()).map_err(|e| e.to_string())
        }));
    }
    let mut writes = Writes {
        failed: 0,
        first_error: None,
        latencies: Vec::with_capacity(total),
    };
    for t in inflight {
        match t.await {
            Ok(Ok(latency)) => writes.latencies.push(latency),
            Ok(Err(e)) => {
                writes.failed += 1;
                writes.first_error.get_or_insert(e);
            }
            Err(e) => {
                writes.failed += 1;
                writes.first_error.get_or_insert(e.to_string());
            }
        }
    }
    writes.latencies.sort();
    writes
}
