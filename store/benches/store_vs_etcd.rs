//! Side-by-side benchmark of the sled store against etcd 3.4 (both durable:
//! every acknowledged write is synced to disk), in one run so the ratios are
//! meaningful on a noisy shared machine.
//!
//! Run: `cargo bench -p skiff-store --bench store_vs_etcd`
//! (needs /usr/bin/etcd, from Debian's `etcd-server`; the benchmark starts its
//! own etcd on loopback with a temporary data directory and kills it at the end).
//!
//! Measured: durable puts/s with 1, 16 and 64 concurrent writers; watch
//! delivery latency (put call to event arrival) p50/p99; listing 10,000 keys;
//! disk use after 100,000 updates over 1,000 keys and a compaction, against
//! the live data size; the sled store's memory.

// A test stops at the first surprise (unwrapping is how it says so), and
// nothing outside this binary sees its items.
#![allow(clippy::unwrap_used, unreachable_pub)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use etcd_client::{Client, CompactionOptions, GetOptions, WatchOptions};
use futures::StreamExt;
use skiff_store::testing::EtcdProcess;
use skiff_store::{SledConfig, SledStore, Store, StoreError};

type BenchResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const VALUE_SIZE: usize = 1024;
const PUT_SECONDS: u64 = 3;
const LIST_KEYS: usize = 10_000;
const SPACE_KEYS: usize = 1_000;
const SPACE_UPDATES: usize = 100_000;

/// An etcd server of our own (killed by PID when dropped) with its
/// temporary directory, and a client.
struct Etcd {
    process: EtcdProcess,
    _dir: tempfile::TempDir,
}

async fn start_etcd() -> BenchResult<(Etcd, Client)> {
    let dir = tempfile::tempdir_in(std::env::temp_dir())?;
    let process = EtcdProcess::start(dir.path())?;
    let client = Client::connect([process.endpoint()], None).await?;
    Ok((Etcd { process, _dir: dir }, client))
}

/// `VmRSS` and `VmHWM` of a process, in bytes.
fn memory(pid: &str) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// A value carrying the time it was sent (nanoseconds since `epoch`).
fn stamped(epoch: Instant) -> Vec<u8> {
    let mut value = vec![b'x'; VALUE_SIZE];
    let nanos = epoch.elapsed().as_nanos() as u64;
    value[..8].copy_from_slice(&nanos.to_be_bytes());
    value
}

fn latency_of(epoch: Instant, value: &[u8]) -> Option<Duration> {
    let sent = u64::from_be_bytes(value.get(..8)?.try_into().ok()?);
    Some(epoch.elapsed().saturating_sub(Duration::from_nanos(sent)))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at]
}

/// Puts (updates) for `PUT_SECONDS` with `writers` concurrent writers on the sled store.
async fn sled_puts(store: &Arc<SledStore>, writers: usize) -> BenchResult<f64> {
    let value = Bytes::from(vec![b'v'; VALUE_SIZE]);
    for w in 0..writers {
        match store.create(&format!("put/{w}"), value.clone()).await {
            Ok(_) | Err(StoreError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(PUT_SECONDS);
    let start = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let (store, done, value) = (store.clone(), done.clone(), value.clone());
            tokio::spawn(async move {
                let key = format!("put/{w}");
                while Instant::now() < deadline {
                    store.update(&key, value.clone(), None).await?;
                    done.fetch_add(1, Ordering::Relaxed);
                }
                Ok::<_, StoreError>(())
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    Ok(done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64())
}

async fn etcd_puts(client: &Client, writers: usize) -> BenchResult<f64> {
    let value = vec![b'v'; VALUE_SIZE];
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(PUT_SECONDS);
    let start = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let (mut client, done, value) = (client.clone(), done.clone(), value.clone());
            tokio::spawn(async move {
                let key = format!("put/{w}");
                while Instant::now() < deadline {
                    client.put(key.clone(), value.clone(), None).await?;
                    done.fetch_add(1, Ordering::Relaxed);
                }
                Ok::<_, etcd_client::Error>(())
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    Ok(done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64())
}

/// Watch latency with `writers` concurrent writers for `PUT_SECONDS`: (p50, p99, events).
async fn sled_watch_latency(
    store: &Arc<SledStore>,
    writers: usize,
) -> BenchResult<(Duration, Duration, usize)> {
    let epoch = Instant::now();
    let watch = store.watch("lat/", store.current_revision())?;
    let stop = Instant::now() + Duration::from_secs(PUT_SECONDS);
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                let key = format!("lat/{w}");
                let mut writes = 0usize;
                let _ = store.delete(&key, None).await;
                store.create(&key, Bytes::from(stamped(epoch))).await?;
                writes += 1;
                while Instant::now() < stop {
                    store
                        .update(&key, Bytes::from(stamped(epoch)), None)
                        .await?;
                    writes += 1;
                }
                Ok::<_, StoreError>(writes)
            })
        })
        .collect();
    let deliveries = watch.map(|event| -> BenchResult<Vec<Duration>> {
        let event = event?;
        let mut latencies = Vec::new();
        if event.kind == skiff_store::EventKind::Put {
            latencies.extend(latency_of(epoch, &event.kv.value));
        }
        Ok(latencies)
    });
    watch_latencies(tasks, deliveries).await
}

async fn etcd_watch_latency(
    client: &Client,
    writers: usize,
) -> BenchResult<(Duration, Duration, usize)> {
    let epoch = Instant::now();
    let mut watch_client = client.clone();
    let mut stream = watch_client
        .watch("lat/", Some(WatchOptions::new().with_prefix()))
        .await?;
    // The first response confirms the watch is created.
    stream.message().await?;
    let stop = Instant::now() + Duration::from_secs(PUT_SECONDS);
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let mut client = client.clone();
            tokio::spawn(async move {
                let key = format!("lat/{w}");
                let mut writes = 0usize;
                loop {
                    client.put(key.clone(), stamped(epoch), None).await?;
                    writes += 1;
                    if Instant::now() >= stop {
                        break;
                    }
                }
                Ok::<_, etcd_client::Error>(writes)
            })
        })
        .collect();
    let deliveries = stream.map(|response| -> BenchResult<Vec<Duration>> {
        let response = response?;
        let events = response.events().iter().filter_map(|e| e.kv());
        Ok(events
            .filter_map(|kv| latency_of(epoch, kv.value()))
            .collect())
    });
    watch_latencies(tasks, deliveries).await
}

/// Reads the latencies of each watch delivery while the writer `tasks` run,
/// until every write they report has been seen: (p50, p99, events).
async fn watch_latencies<E>(
    tasks: Vec<tokio::task::JoinHandle<Result<usize, E>>>,
    deliveries: impl futures::Stream<Item = BenchResult<Vec<Duration>>>,
) -> BenchResult<(Duration, Duration, usize)>
where
    E: std::error::Error + Send + Sync + 'static,
{
    let mut deliveries = std::pin::pin!(deliveries);
    let mut expected = 0usize;
    let mut latencies = Vec::new();
    let mut tasks = tasks.into_iter();
    let mut pending = tasks.next();
    loop {
        tokio::select! {
            delivered = deliveries.next() => latencies.extend(delivered.ok_or("watch ended")??),
            finished = async { pending.as_mut().expect("pending task").await }, if pending.is_some() => {
                expected += finished??;
                pending = tasks.next();
            }
        }
        if pending.is_none() && latencies.len() >= expected {
            break;
        }
    }
    latencies.sort();
    Ok((
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies.len(),
    ))
}

async fn sled_fill(store: &Arc<SledStore>, keys: usize, prefix: &str) -> BenchResult<()> {
    let tasks: Vec<_> = (0..64)
        .map(|w| {
            let store = store.clone();
            let prefix = prefix.to_owned();
            tokio::spawn(async move {
                for i in (w..keys).step_by(64) {
                    let value = Bytes::from(vec![b'l'; VALUE_SIZE]);
                    store.create(&format!("{prefix}{i:06}"), value).await?;
                }
                Ok::<_, StoreError>(())
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    Ok(())
}

async fn etcd_fill(client: &Client, keys: usize, prefix: &str) -> BenchResult<()> {
    let tasks: Vec<_> = (0..64)
        .map(|w| {
            let mut client = client.clone();
            let prefix = prefix.to_owned();
            tokio::spawn(async move {
                for i in (w..keys).step_by(64) {
                    client
                        .put(format!("{prefix}{i:06}"), vec![b'l'; VALUE_SIZE], None)
                        .await?;
                }
                Ok::<_, etcd_client::Error>(())
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    Ok(())
}

/// Median time of `runs` runs of `f`.
async fn median_of<F, Fut>(runs: usize, mut f: F) -> BenchResult<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = BenchResult<()>>,
{
    let mut times = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        f().await?;
        times.push(start.elapsed());
    }
    times.sort();
    Ok(times[times.len() / 2])
}

/// (full list, paged list by 500) medians for the sled store.
async fn sled_list(store: &Arc<SledStore>) -> BenchResult<(Duration, Duration)> {
    let full = median_of(5, || async {
        let listed = store.list("list/", None, 0).await?;
        assert_eq!(listed.items.len(), LIST_KEYS);
        Ok(())
    })
    .await?;
    let paged = median_of(5, || async {
        let mut after: Option<String> = None;
        let mut total = 0;
        loop {
            let page = store.list("list/", after.as_deref(), 500).await?;
            total += page.items.len();
            if !page.more {
                break;
            }
            after = page.items.last().map(|kv| kv.key.clone());
        }
        assert_eq!(total, LIST_KEYS);
        Ok(())
    })
    .await?;
    Ok((full, paged))
}

async fn etcd_list(client: &Client) -> BenchResult<(Duration, Duration)> {
    let full = median_of(5, || {
        // 10,000 values of 1 KiB exceed gRPC's default 4 MiB response limit.
        let mut client = client.kv_client().max_decoding_message_size(64 << 20);
        async move {
            let listed = client
                .get("list/", Some(GetOptions::new().with_prefix()))
                .await?;
            assert_eq!(listed.kvs().len(), LIST_KEYS);
            Ok(())
        }
    })
    .await?;
    let paged = median_of(5, || {
        let mut client = client.clone();
        async move {
            let mut start = b"list/".to_vec();
            let end = b"list0".to_vec();
            let mut total = 0;
            loop {
                let page = client
                    .get(
                        start.clone(),
                        Some(GetOptions::new().with_range(end.clone()).with_limit(500)),
                    )
                    .await?;
                total += page.kvs().len();
                if !page.more() {
                    break;
                }
                if let Some(last) = page.kvs().last() {
                    start = last.key().to_vec();
                    start.push(0);
                }
            }
            assert_eq!(total, LIST_KEYS);
            Ok(())
        }
    })
    .await?;
    Ok((full, paged))
}

struct Space {
    live: u64,
    before_compaction: u64,
    after_compaction: u64,
    /// After defragmentation.
    after_maintenance: u64,
    /// etcd only: the bbolt backend file alone (without the write-ahead log).
    backend: Option<u64>,
}

fn space_key(i: usize) -> String {
    format!("space/{i:04}")
}

async fn sled_space(dir: &Path) -> BenchResult<(Space, skiff_store::StoreStats, (u64, u64, u64))> {
    let pid = std::process::id().to_string();
    let (rss_before, _) = memory(&pid);
    // Defragmentation is run explicitly below, to measure before and after.
    let config = SledConfig::new(dir).defragmentation(None);
    let store = Arc::new(SledStore::open(config.clone())?);
    let value = Bytes::from(vec![b's'; VALUE_SIZE]);
    for i in 0..SPACE_KEYS {
        store.create(&space_key(i), value.clone()).await?;
    }
    let tasks: Vec<_> = (0..64)
        .map(|w| {
            let (store, value) = (store.clone(), value.clone());
            tokio::spawn(async move {
                for n in (w..SPACE_UPDATES).step_by(64) {
                    store
                        .update(&space_key(n % SPACE_KEYS), value.clone(), None)
                        .await?;
                }
                Ok::<_, StoreError>(())
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    let (rss_loaded, _) = memory(&pid);
    let before_compaction = store.stats()?.disk_usage;
    store.compact(store.current_revision()).await?;
    let stats = store.stats()?;
    let (rss_after, _) = memory(&pid);
    store.defragment().await?;
    // The old file is removed once no reader holds it (immediately here).
    let deadline = Instant::now() + Duration::from_secs(10);
    while store.stats()?.disk_usage > stats.disk_usage / 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let after_defrag = store.stats()?.disk_usage;
    let live = (SPACE_KEYS * (space_key(0).len() + VALUE_SIZE)) as u64;
    store.close().await?;
    Ok((
        Space {
            live,
            before_compaction,
            after_compaction: stats.disk_usage,
            after_maintenance: after_defrag,
            backend: None,
        },
        stats,
        (rss_before, rss_loaded, rss_after),
    ))
}

async fn etcd_space() -> BenchResult<(Space, (u64, u64))> {
    let (etcd, mut client) = start_etcd().await?;
    let value = vec![b's'; VALUE_SIZE];
    for i in 0..SPACE_KEYS {
        client.put(space_key(i), value.clone(), None).await?;
    }
    let tasks: Vec<_> = (0..64)
        .map(|w| {
            let (mut client, value) = (client.clone(), value.clone());
            tokio::spawn(async move {
                for n in (w..SPACE_UPDATES).step_by(64) {
                    client
                        .put(space_key(n % SPACE_KEYS), value.clone(), None)
                        .await?;
                }
                Ok::<_, etcd_client::Error>(())
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    let before_compaction = etcd.process.disk_usage();
    let status = client.status().await?;
    let revision = status.header().map_or(0, |h| h.revision());
    client
        .compact(revision, Some(CompactionOptions::new().with_physical()))
        .await?;
    let after_compaction = etcd.process.disk_usage();
    client.defragment().await?;
    let after_defrag = etcd.process.disk_usage();
    let backend = std::fs::metadata(etcd.process.data_dir().join("member/snap/db"))
        .map(|m| {
            use std::os::unix::fs::MetadataExt;
            m.blocks() * 512
        })
        .ok();
    let memory = memory(&etcd.process.pid().to_string());
    let live = (SPACE_KEYS * (space_key(0).len() + VALUE_SIZE)) as u64;
    Ok((
        Space {
            live,
            before_compaction,
            after_compaction,
            after_maintenance: after_defrag,
            backend,
        },
        (memory.0, memory.1),
    ))
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn ratio(sled: f64, etcd: f64) -> String {
    if etcd == 0.0 {
        return "-".into();
    }
    format!("{:.2}×", sled / etcd)
}

async fn run() -> BenchResult<()> {
    let host = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_default();
    println!(
        "# skiff store vs etcd 3.4 ({host}, {} cores)\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    // Space and memory first, while the process holds nothing else.
    let sled_dir = tempfile::tempdir_in(std::env::temp_dir())?;
    eprintln!("space: sled ...");
    let (sled_space, sled_stats, (rss_before, rss_loaded, rss_after)) =
        sled_space(&sled_dir.path().join("space")).await?;
    eprintln!("space: etcd ...");
    let (etcd_space, (etcd_rss, etcd_hwm)) = etcd_space().await?;

    eprintln!("throughput, latency, list ...");
    let store = Arc::new(SledStore::open(SledConfig::new(
        sled_dir.path().join("main"),
    ))?);
    let (etcd, client) = start_etcd().await?;
    let mut puts = Vec::new();
    for writers in [1, 16, 64] {
        let flushes = store.stats()?.flushes;
        let sled = sled_puts(&store, writers).await?;
        let flushes = store.stats()?.flushes - flushes;
        let etcd_rate = etcd_puts(&client, writers).await?;
        eprintln!(
            "  {writers} writers: sled {sled:.0}/s ({flushes} flushes), etcd {etcd_rate:.0}/s"
        );
        puts.push((writers, sled, etcd_rate, flushes));
    }
    let mut latency = Vec::new();
    for writers in [1, 16] {
        let sled = sled_watch_latency(&store, writers).await?;
        let etcd_lat = etcd_watch_latency(&client, writers).await?;
        latency.push((writers, sled, etcd_lat));
    }
    sled_fill(&store, LIST_KEYS, "list/").await?;
    etcd_fill(&client, LIST_KEYS, "list/").await?;
    let sled_lists = sled_list(&store).await?;
    let etcd_lists = etcd_list(&client).await?;
    let (etcd_rss_main, _) = memory(&etcd.process.pid().to_string());
    let main_stats = store.stats()?;
    let (bench_rss, bench_hwm) = memory(&std::process::id().to_string());
    drop(etcd);

    println!("| measure | sled store | etcd 3.4 | sled / etcd |");
    println!("|---|---|---|---|");
    for (writers, sled, etcd_rate, flushes) in &puts {
        println!(
            "| durable puts/s, {writers} writer(s), 1 KiB values | {sled:.0} ({flushes} flushes) | {etcd_rate:.0} | {} |",
            ratio(*sled, *etcd_rate)
        );
    }
    for (writers, sled, etcd_lat) in &latency {
        println!(
            "| watch latency p50, {writers} writer(s) | {} | {} | {} |",
            ms(sled.0),
            ms(etcd_lat.0),
            ratio(sled.0.as_secs_f64(), etcd_lat.0.as_secs_f64())
        );
        println!(
            "| watch latency p99, {writers} writer(s) ({} / {} events) | {} | {} | {} |",
            sled.2,
            etcd_lat.2,
            ms(sled.1),
            ms(etcd_lat.1),
            ratio(sled.1.as_secs_f64(), etcd_lat.1.as_secs_f64())
        );
    }
    println!(
        "| list 10,000 keys (one call), median of 5 | {} | {} | {} |",
        ms(sled_lists.0),
        ms(etcd_lists.0),
        ratio(sled_lists.0.as_secs_f64(), etcd_lists.0.as_secs_f64())
    );
    println!(
        "| list 10,000 keys (pages of 500), median of 5 | {} | {} | {} |",
        ms(sled_lists.1),
        ms(etcd_lists.1),
        ratio(sled_lists.1.as_secs_f64(), etcd_lists.1.as_secs_f64())
    );
    println!(
        "| disk after 100,000 updates over 1,000 keys, before compaction | {} | {} | {} |",
        mib(sled_space.before_compaction),
        mib(etcd_space.before_compaction),
        ratio(
            sled_space.before_compaction as f64,
            etcd_space.before_compaction as f64
        )
    );
    println!(
        "| disk right after compaction | {} | {} | {} |",
        mib(sled_space.after_compaction),
        mib(etcd_space.after_compaction),
        ratio(
            sled_space.after_compaction as f64,
            etcd_space.after_compaction as f64
        )
    );
    println!(
        "| disk after defragment | {} | {} | {} |",
        mib(sled_space.after_maintenance),
        mib(etcd_space.after_maintenance),
        ratio(
            sled_space.after_maintenance as f64,
            etcd_space.after_maintenance as f64
        )
    );
    let live = sled_space.live;
    println!(
        "| space amplification after compaction (disk / {} live) | {:.1}× | {:.1}× | |",
        mib(live),
        sled_space.after_compaction as f64 / live as f64,
        etcd_space.after_compaction as f64 / live as f64
    );
    println!(
        "| space amplification after maintenance | {:.1}× | {:.1}× | |",
        sled_space.after_maintenance as f64 / live as f64,
        etcd_space.after_maintenance as f64 / live as f64
    );
    if let Some(backend) = etcd_space.backend {
        println!(
            "| etcd after defragment: backend file alone (rest is the write-ahead log) | | {} | |",
            mib(backend)
        );
    }
    println!();
    println!("Memory:");
    println!(
        "- sled store, space workload: process RSS {} before open, {} after 100,000 updates, {} after compaction (page-cache budget {}; sled size_on_disk {})",
        mib(rss_before),
        mib(rss_loaded),
        mib(rss_after),
        mib(sled_stats.cache_capacity),
        mib(sled_stats.size_on_disk)
    );
    println!(
        "- etcd process after the space workload: RSS {}, peak {}; after the main workload: RSS {}",
        mib(etcd_rss),
        mib(etcd_hwm),
        mib(etcd_rss_main)
    );
    println!(
        "- whole benchmark process (sled store + etcd client + runtime) at the end: RSS {}, peak {}",
        mib(bench_rss),
        mib(bench_hwm)
    );
    println!(
        "- main sled store at the end: {} writes in {} flushes ({:.1} writes per flush), {} on disk; per flush: sled flush {:.2} ms + fdatasync {:.2} ms; applying: {:.1} µs per write",
        main_stats.writes,
        main_stats.flushes,
        main_stats.writes as f64 / main_stats.flushes.max(1) as f64,
        mib(main_stats.disk_usage),
        main_stats.flush_time.as_secs_f64() * 1000.0 / main_stats.flushes.max(1) as f64,
        main_stats.sync_time.as_secs_f64() * 1000.0 / main_stats.flushes.max(1) as f64,
        main_stats.apply_time.as_secs_f64() * 1e6 / main_stats.writes.max(1) as f64,
    );
    store.close().await?;
    Ok(())
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = runtime.block_on(run()) {
        eprintln!("benchmark failed: {e}");
        std::process::exit(1);
    }
}
