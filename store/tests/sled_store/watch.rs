//! Watch: ordering, previous values, history replay, the start-up race,
//! slow watchers and closing.

use std::sync::Arc;

use bytes::Bytes;
use skiff_store::{EventKind, SledStore, Store, StoreError};

use super::common::{assert_quiet, config, next, open, take, tmp};

fn v(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

#[tokio::test]
async fn events_carry_kind_revision_and_previous_value() {
    let dir = tmp();
    let store = open(dir.path());
    let mut watch = store.watch("k", store.current_revision()).unwrap();
    let created = store.create("k", v("1")).await.unwrap();
    let updated = store.update("k", v("2"), None).await.unwrap();
    let deleted = store.delete("k", None).await.unwrap();
    let events = take(&mut watch, 3).await;

    assert_eq!(events[0].kind, EventKind::Put);
    assert_eq!(events[0].kv, created);
    assert_eq!(events[0].prev, None);

    assert_eq!(events[1].kind, EventKind::Put);
    assert_eq!(events[1].kv, updated);
    assert_eq!(events[1].prev, Some(created));

    assert_eq!(events[2].kind, EventKind::Delete);
    assert_eq!(events[2].revision(), deleted.mod_revision);
    assert_eq!(events[2].kv.key, "k");
    assert!(events[2].kv.value.is_empty());
    assert_eq!(events[2].prev, Some(updated));
    assert_quiet(&mut watch).await;
}

#[tokio::test]
async fn a_watch_sees_only_its_prefix_and_replays_history_after_from_revision() {
    let dir = tmp();
    let store = open(dir.path());
    store.create("a/1", v("x")).await.unwrap();
    let mid = store.create("b/1", v("x")).await.unwrap().mod_revision;
    store.create("a/2", v("x")).await.unwrap();
    store.update("a/1", v("y"), None).await.unwrap();

    let mut from_start = store.watch("a/", 1).unwrap();
    let keys: Vec<_> = take(&mut from_start, 3)
        .await
        .into_iter()
        .map(|e| (e.kv.key.clone(), e.revision()))
        .collect();
    assert_eq!(
        keys,
        vec![("a/1".into(), 2), ("a/2".into(), 4), ("a/1".into(), 5)]
    );
    assert_quiet(&mut from_start).await;

    let mut from_mid = store.watch("a/", mid).unwrap();
    let revs: Vec<_> = take(&mut from_mid, 2)
        .await
        .iter()
        .map(|e| e.revision())
        .collect();
    assert_eq!(revs, vec![4, 5]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watches_started_while_writes_race_see_no_gap_and_no_duplicate() {
    const WRITES: u64 = 600;
    let dir = tmp();
    let store = Arc::new(open(dir.path()));
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            for i in 0..WRITES {
                store.create(&format!("r/{i}"), v("x")).await.unwrap();
            }
        })
    };
    let mut watchers = Vec::new();
    while !writer.is_finished() {
        let from = store.current_revision();
        watchers.push((from, store.watch("r/", from).unwrap()));
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    }
    writer.await.unwrap();
    let last = 1 + WRITES;
    assert!(
        watchers.len() >= 3,
        "only {} watches raced the writer",
        watchers.len()
    );
    for (from, mut watch) in watchers {
        let events = take(&mut watch, (last - from) as usize).await;
        let revs: Vec<u64> = events.iter().map(|e| e.revision()).collect();
        let expected: Vec<u64> = (from + 1..=last).collect();
        assert_eq!(revs, expected, "watch from {from}");
        assert_quiet(&mut watch).await;
    }
}

#[tokio::test]
async fn a_watcher_behind_the_memory_ring_reads_history_from_disk() {
    let dir = tmp();
    let store = SledStore::open(config(dir.path()).event_ring(8, 1 << 20)).unwrap();
    let mut watch = store.watch("", 1).unwrap();
    for i in 0..300 {
        store.create(&format!("k/{i}"), v("x")).await.unwrap();
    }
    for i in 0..300u64 {
        store.update(&format!("k/{i}"), v("y"), None).await.unwrap();
    }
    let events = take(&mut watch, 600).await;
    assert!(
        events
            .windows(2)
            .all(|w| w[0].revision() + 1 == w[1].revision())
    );
    assert_eq!(events[0].revision(), 2);
    // Prev values also come from disk.
    assert_eq!(
        events[300].prev.as_ref().map(|p| p.value.clone()),
        Some(v("x"))
    );
    assert!(store.stats().unwrap().history_reads > 0);
}

#[tokio::test]
async fn a_future_from_revision_waits_for_that_revision() {
    let dir = tmp();
    let store = open(dir.path());
    let mut watch = store.watch("", 3).unwrap();
    store.create("a", v("x")).await.unwrap();
    store.create("b", v("x")).await.unwrap();
    store.create("c", v("x")).await.unwrap();
    let event = next(&mut watch).await.unwrap();
    assert_eq!((event.kv.key.as_str(), event.revision()), ("c", 4));
}

#[tokio::test]
async fn compaction_overtaking_a_slow_watcher_ends_it_with_compacted() {
    let dir = tmp();
    let store = SledStore::open(config(dir.path()).event_ring(8, 1 << 20)).unwrap();
    let mut watch = store.watch("", 1).unwrap();
    for i in 0..2000 {
        store.create(&format!("k/{i}"), v("x")).await.unwrap();
    }
    let first = next(&mut watch).await.unwrap();
    assert_eq!(first.revision(), 2);
    let current = store.current_revision();
    store.compact(current).await.unwrap();
    let mut delivered = 1;
    loop {
        match next(&mut watch).await {
            Ok(event) => {
                delivered += 1;
                assert_eq!(event.revision(), delivered + 1);
            }
            Err(StoreError::Compacted {
                compact_revision, ..
            }) => {
                assert_eq!(compact_revision, current);
                break;
            }
            Err(other) => panic!("unexpected error {other}"),
        }
    }
    assert!(
        delivered < 2000,
        "the watcher had not yet received everything"
    );
    assert!(
        futures::StreamExt::next(&mut watch).await.is_none(),
        "the stream ends after Compacted"
    );
}

#[tokio::test]
async fn watch_streams_end_when_the_store_closes() {
    let dir = tmp();
    let store = open(dir.path());
    let mut watch = store.watch("", 1).unwrap();
    store.create("a", v("x")).await.unwrap();
    store.close().await.unwrap();
    assert_eq!(next(&mut watch).await.unwrap().kv.key, "a");
    let end = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        futures::StreamExt::next(&mut watch),
    )
    .await
    .expect("stream ends after close");
    assert!(end.is_none());
}
