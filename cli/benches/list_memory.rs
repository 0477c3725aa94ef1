//! What a real `skiff server` holds in memory for many objects, and what
//! big unpaginated lists of them cost it: 20,000 ConfigMaps of 2 KiB
//! created, then five concurrent unpaginated lists, then 30 s of quiet.
//! The server's resident memory (`/proc/<pid>/status`) is read at each
//! step, and sampled every 20 ms during the lists for their peak.
//!
//! Issue #15's goals on this VM: the objects held in at most 160 MiB, the
//! lists raising it by at most 100 MiB, and 30 s later back within 1.2× of
//! where it was before them.
//!
//! Run: `cargo bench -p skiff --bench list_memory`
//! (`MEM_CONFIGMAPS`, `MEM_LISTS`, `MEM_QUIET_SECONDS` change the sizes;
//! `MEM_SERVER_ENV=NAME=VALUE,...` starts the server with extra environment,
//! e.g. allocator settings, to compare them; `SKIFF_BENCH_BIN` runs another
//! build of skiff, e.g. an older commit's, for a before/after).

// A bench or test stops at the first surprise (unwrapping is how it says so),
// and nothing outside this binary sees its items.
#![allow(clippy::unwrap_used, unreachable_pub)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use kube::api::{ListParams, ObjectMeta, PostParams};

#[path = "support/mod.rs"]
mod support;

use support::{admin_client, env_or, free_port, payload_configmap, server_command, status_mib};

const NAMESPACE: &str = "mem";
const WRITERS: usize = 32;

fn configmap(i: usize) -> ConfigMap {
    // 2 KiB of data per object, different in each.
    payload_configmap(format!("cm-{i:05}"), format!("{i:05}").repeat(2048 / 5))
}

fn rss(pid: u32) -> f64 {
    status_mib(pid, "VmRSS:")
}

/// Extra environment for the server from `MEM_SERVER_ENV`.
fn server_env() -> Vec<(String, String)> {
    std::env::var("MEM_SERVER_ENV")
        .unwrap_or_default()
        .split(',')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let count = env_or("MEM_CONFIGMAPS", 20_000);
    let lists = env_or("MEM_LISTS", 5);
    let quiet = Duration::from_secs(env_or("MEM_QUIET_SECONDS", 30) as u64);
    let dir = tempfile::tempdir()?;
    let port = free_port();
    let log = dir.path().join("server.log");
    let mut server = server_command(support::skiff_binary(), dir.path(), port, &log)?
        .envs(server_env())
        .spawn()?;
    let pid = server.id();
    let result = run(pid, dir.path(), count, lists, quiet).await;
    let _ = server.kill();
    let _ = server.wait();
    let line = result?;
    println!("{line}");
    Ok(())
}

async fn run(
    pid: u32,
    dir: &std::path::Path,
    count: usize,
    lists: usize,
    quiet: Duration,
) -> Result<String, Box<dyn std::error::Error>> {
    let client = admin_client(dir, true).await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(NAMESPACE.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let mut created_namespace = false;
    for _ in 0..100 {
        if namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .is_ok()
        {
            created_namespace = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if !created_namespace {
        return Err("the server never took the namespace".into());
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = rss(pid);

    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let next = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| {
            let (api, next, failed) = (configmaps.clone(), next.clone(), failed.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        break;
                    }
                    if api
                        .create(&PostParams::default(), &configmap(i))
                        .await
                        .is_err()
                    {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await?;
    }
    let create_seconds = started.elapsed().as_secs_f64();
    if failed.load(Ordering::Relaxed) > 0 {
        return Err(format!("{} creates failed", failed.load(Ordering::Relaxed)).into());
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let held = rss(pid);

    // The lists' peak, sampled while they run.
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let sampling = sampling.clone();
        tokio::spawn(async move {
            let mut peak: f64 = 0.0;
            while sampling.load(Ordering::Relaxed) {
                peak = peak.max(rss(pid));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            peak
        })
    };
    let started = Instant::now();
    let listers: Vec<_> = (0..lists)
        .map(|_| {
            let api = configmaps.clone();
            tokio::spawn(async move {
                api.list(&ListParams::default())
                    .await
                    // The namespace also holds kube-root-ca.crt.
                    .map(|l| {
                        l.items
                            .iter()
                            .filter(|cm| {
                                cm.metadata
                                    .name
                                    .as_deref()
                                    .is_some_and(|n| n.starts_with("cm-"))
                            })
                            .count()
                    })
                    .unwrap_or(0)
            })
        })
        .collect();
    let mut listed = Vec::new();
    for lister in listers {
        listed.push(lister.await?);
    }
    let list_seconds = started.elapsed().as_secs_f64();
    sampling.store(false, Ordering::Relaxed);
    let peak = sampler.await?.max(rss(pid));
    if listed.iter().any(|&n| n != count) {
        return Err(format!("lists returned {listed:?} items, not {count}").into());
    }
    let after_lists = rss(pid);
    tokio::time::sleep(quiet).await;
    let settled = rss(pid);
    Ok(format!(
        "list_memory: {count} ConfigMaps of 2 KiB created in {create_seconds:.1} s; server RSS idle {idle:.0} MiB, \
         holding them {held:.0} MiB (+{:.0} MiB over idle; goal <= 160 MiB in all); {lists} concurrent unpaginated \
         lists in {list_seconds:.1} s peaked at {peak:.0} MiB (+{:.0} MiB; goal <= +100 MiB), {after_lists:.0} MiB \
         right after, {settled:.0} MiB {} s later ({:.2}x of before the lists; goal <= 1.2x)",
        held - idle,
        peak - held,
        quiet.as_secs(),
        settled / held
    ))
}
