//! Sled-only write behaviour: group commit and statistics. The trait's
//! read and write rules are checked on every backend in `tests/conformance/`.

use std::sync::Arc;

use bytes::Bytes;
use skiff_store::Store;

use super::common::{open, tmp};

fn v(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// Revisions and what watch delivers under concurrent writers are checked
/// on every backend (`conformance::api`); here, that sustained writers'
/// commits share flushes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_share_flushes() {
    const WRITERS: usize = 64;
    const EACH: usize = 20;
    let dir = tmp();
    let store = Arc::new(open(dir.path()));
    let before = store.stats().unwrap();
    let tasks: Vec<_> = (0..WRITERS)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 0..EACH {
                    store.create(&format!("w/{w}/{i}"), v("x")).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let total = WRITERS * EACH;
    let after = store.stats().unwrap();
    assert_eq!(after.writes - before.writes, total as u64);
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
