//! Throughput of the informer machinery, run with
//! `cargo bench -p skiff-informer --bench informer_throughput`.
//!
//! Prints one line per scenario (wall time and rate) and the peak RSS. The
//! machines are shared, so compare figures from one run rather than across runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher;
use skiff_informer::{
    Cache, HandlerFns, Informer, NODE_NAME_INDEX, WorkQueue, pod_node_name_index,
};

fn config_map(name: usize, rv: usize) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            namespace: Some("bench".into()),
            name: Some(format!("cm-{name}")),
            resource_version: Some(rv.to_string()),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn report(scenario: &str, count: u64, unit: &str, elapsed: Duration) {
    println!(
        "{scenario:<48} {count:>9} {unit:<14} in {:>8.1} ms = {:>12.0} {unit}/s",
        elapsed.as_secs_f64() * 1e3,
        count as f64 / elapsed.as_secs_f64()
    );
}

async fn work_queue(workers: usize, adds: u64, keys: u64) {
    let queue = WorkQueue::<u64>::new();
    let processed = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let handles: Vec<_> = (0..workers)
        .map(|_| {
            let (queue, processed) = (queue.clone(), processed.clone());
            tokio::spawn(async move {
                while let Some(key) = queue.get().await {
                    processed.fetch_add(1, Ordering::Relaxed);
                    queue.done(&key);
                }
            })
        })
        .collect();
    for i in 0..adds {
        queue.add(i % keys);
        if i % 1024 == 0 {
            tokio::task::yield_now().await;
        }
    }
    queue.shutdown_with_drain().await;
    for handle in handles {
        let _ = handle.await;
    }
    let elapsed = start.elapsed();
    report(
        &format!("workqueue: {workers} workers, {keys} keys"),
        adds,
        "adds",
        elapsed,
    );
    println!(
        "{:<48} {:>9} reconciles (de-duplicated from {adds} adds)",
        "",
        processed.load(Ordering::Relaxed)
    );
}

async fn fan_out(listeners: usize, events: usize, names: usize) {
    let informer = Informer::<ConfigMap>::without_source();
    let delivered = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..listeners)
        .map(|_| {
            let counted = delivered.clone();
            informer
                .add_event_handler(
                    HandlerFns::new()
                        .on_add({
                            let c = counted.clone();
                            move |_: &Arc<ConfigMap>| {
                                c.fetch_add(1, Ordering::Relaxed);
                            }
                        })
                        .on_update(move |_, _| {
                            counted.fetch_add(1, Ordering::Relaxed);
                        }),
                )
                .expect("inside a runtime")
        })
        .collect();
    let start = Instant::now();
    for i in 0..events {
        informer.handle_event(watcher::Event::Apply(config_map(i % names, i)));
    }
    let applied = start.elapsed();
    for handle in &handles {
        handle.wait_idle().await;
    }
    let all_delivered = start.elapsed();
    report(
        &format!("informer apply, {listeners} listeners (reflector)"),
        events as u64,
        "events",
        applied,
    );
    report(
        &format!("informer apply, {listeners} listeners (all handled)"),
        delivered.load(Ordering::Relaxed),
        "notifications",
        all_delivered,
    );

    // A relist of the whole set: every object becomes an update for every listener.
    let start = Instant::now();
    informer.handle_event(watcher::Event::Init);
    for i in 0..names {
        informer.handle_event(watcher::Event::InitApply(config_map(i, events + i)));
    }
    informer.handle_event(watcher::Event::InitDone);
    for handle in &handles {
        handle.wait_idle().await;
    }
    report(
        &format!("relist of {names} objects, {listeners} listeners"),
        names as u64,
        "objects",
        start.elapsed(),
    );
}

fn index_lookups(pods: usize, nodes: usize, lookups: usize) {
    let cache: Cache<Pod> = Cache::new();
    cache
        .add_index(NODE_NAME_INDEX, pod_node_name_index())
        .expect("fresh cache");
    let start = Instant::now();
    for i in 0..pods {
        cache.insert(Arc::new(Pod {
            metadata: ObjectMeta {
                namespace: Some("bench".into()),
                name: Some(format!("pod-{i}")),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some(format!("node-{}", i % nodes)),
                ..Default::default()
            }),
            ..Default::default()
        }));
    }
    report(
        "cache insert (namespace + nodeName indexes)",
        pods as u64,
        "inserts",
        start.elapsed(),
    );
    let start = Instant::now();
    let mut found = 0;
    for i in 0..lookups {
        found += cache
            .by_index(NODE_NAME_INDEX, &format!("node-{}", i % nodes))
            .map(|p| p.len())
            .unwrap_or(0);
    }
    report(
        &format!("by_index(spec.nodeName), {} pods/node", pods / nodes),
        lookups as u64,
        "lookups",
        start.elapsed(),
    );
    assert_eq!(found, lookups * (pods / nodes));
}

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        work_queue(4, 1_000_000, 10_000).await;
        work_queue(4, 1_000_000, 1_000_000).await;
        fan_out(1, 200_000, 10_000).await;
        fan_out(10, 200_000, 10_000).await;
    });
    index_lookups(100_000, 1_000, 100_000);
    if let Some(kib) = peak_rss_kib() {
        println!("peak RSS {:.1} MiB", kib as f64 / 1024.0);
    }
}
