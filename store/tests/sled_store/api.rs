//! Sled-only write behaviour: group commit and statistics. The trait's
//! read and write rules are checked on every backend in `tests/conformance/`.

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;
use skiff_store::Store;

use super::common::{open, take, tmp};

fn v(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_get_distinct_increasing_revisions_that_watch_confirms() {
    const WRITERS: usize = 64;
    const EACH: usize = 20;
    let dir = tmp();
    let store = Arc::new(open(dir.path()));
    let start = store.current_revision();
    let mut watch = store.watch("w/", start).unwrap();
    let before = store.stats().unwrap();
    let tasks: Vec<_> = (0..WRITERS)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut acks = Vec::new();
                for i in 0..EACH {
                    let key = format!("w/{w}/{i}");
                    let kv = store.create(&key, Bytes::from(key.clone())).await.unwrap();
                    acks.push((key, kv.mod_revision));
                }
                acks
            })
        })
        .collect();
    let mut acks = Vec::new();
    for task in tasks {
        let mine = task.await.unwrap();
        assert!(
            mine.windows(2).all(|w| w[0].1 < w[1].1),
            "one writer's revisions increase"
        );
        acks.extend(mine);
    }
    let total = WRITERS * EACH;
    let revisions: HashSet<u64> = acks.iter().map(|a| a.1).collect();
    assert_eq!(revisions.len(), total, "every write got its own revision");
    assert_eq!(*revisions.iter().max().unwrap(), start + total as u64);

    let events = take(&mut watch, total).await;
    assert!(
        events
            .windows(2)
            .all(|w| w[0].revision() + 1 == w[1].revision())
    );
    let delivered: HashSet<(String, u64)> = events
        .iter()
        .map(|e| (e.kv.key.clone(), e.revision()))
        .collect();
    let acked: HashSet<(String, u64)> = acks.into_iter().collect();
    assert_eq!(
        delivered, acked,
        "each ack's revision is what watch delivers"
    );

    let after = store.stats().unwrap();
    let flushes = after.flushes - before.flushes;
    assert!(
        flushes * 4 < total as u64,
        "{flushes} flushes for {total} concurrent writes: group commit is not grouping"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_simultaneous_writes_share_few_flushes() {
    let dir = tmp();
    let store = Arc::new(open(dir.path()));
    let before = store.stats().unwrap().flushes;
    let barrier = Arc::new(tokio::sync::Barrier::new(64));
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let (store, barrier) = (store.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                store.create(&format!("g/{i}"), v("x")).await.unwrap()
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let flushes = store.stats().unwrap().flushes - before;
    assert!(flushes >= 1);
    assert!(
        flushes <= 16,
        "64 simultaneous writes took {flushes} flushes"
    );
}

#[tokio::test]
async fn stats_report_disk_and_memory_budget() {
    let dir = tmp();
    let store =
        skiff_store::SledStore::open(super::common::config(dir.path()).cache_capacity(4 << 20))
            .unwrap();
    store
        .create("k", Bytes::from(vec![7u8; 10_000]))
        .await
        .unwrap();
    let stats = store.stats().unwrap();
    assert_eq!(stats.cache_capacity, 4 << 20);
    assert!(stats.size_on_disk > 10_000);
    assert_eq!(stats.writes, 1);
    assert_eq!(stats.current_revision, 2);
    assert_eq!(stats.ring_events, 1);
}
