//! Sled-only watch behaviour: the memory ring and its fall-back to disk,
//! slow watchers overtaken by compaction, and events written before a close
//! still delivered. Ordering, previous values and replay are checked on
//! every backend in `tests/conformance/`.

use std::path::Path;

use bytes::Bytes;
use skiff_store::{SledStore, Store, StoreError, WatchStream};

use super::common::{config, next, open, take, tmp};

fn v(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// A store whose memory ring holds only 8 events, a watch from its first
/// revision, and `keys` keys `k/<i>` created since: the watcher is far
/// behind the ring.
async fn behind_a_small_ring(dir: &Path, keys: usize) -> (SledStore, WatchStream) {
    let store = SledStore::open(config(dir).event_ring(8, 1 << 20)).unwrap();
    let watch = store.watch("", 1).unwrap();
    for i in 0..keys {
        store.create(&format!("k/{i}"), v("x")).await.unwrap();
    }
    (store, watch)
}

#[tokio::test]
async fn a_watcher_behind_the_memory_ring_reads_history_from_disk() {
    let dir = tmp();
    let (store, mut watch) = behind_a_small_ring(dir.path(), 300).await;
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
async fn compaction_overtaking_a_slow_watcher_ends_it_with_compacted() {
    let dir = tmp();
    let (store, mut watch) = behind_a_small_ring(dir.path(), 2000).await;
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

/// Polls `watch` until it has nothing to give within a short while (the
/// consumer is idle); what it gave meanwhile.
async fn drain_idle(watch: &mut skiff_store::WatchStream) -> Vec<skiff_store::Event> {
    let mut got = Vec::new();
    while let Ok(Some(event)) = tokio::time::timeout(
        std::time::Duration::from_millis(100),
        futures::StreamExt::next(watch),
    )
    .await
    {
        got.push(event.unwrap());
    }
    got
}

#[tokio::test]
async fn progress_passes_other_prefixes_writes_but_never_an_event_not_yet_taken() {
    let dir = tmp();
    let store = open(dir.path());
    let start = store.current_revision();
    let (mut watch, progress) = store.watch_with_progress("a/", start).unwrap();
    let progress = progress.expect("sled keeps progress");
    assert_eq!(progress.get(), start);

    // Writes elsewhere: once the idle consumer polls, it is current there.
    store.create("b/1", v("x")).await.unwrap();
    store.create("b/2", v("x")).await.unwrap();
    assert!(drain_idle(&mut watch).await.is_empty());
    assert_eq!(progress.get(), store.current_revision());

    // A change of its own: progress stays below it until the consumer
    // took it and came back.
    let own = store.create("a/1", v("x")).await.unwrap().mod_revision;
    store.create("b/3", v("x")).await.unwrap();
    let first = next(&mut watch).await.unwrap();
    assert_eq!(first.revision(), own);
    assert!(progress.get() < own, "{} >= {own}", progress.get());
    assert!(drain_idle(&mut watch).await.is_empty());
    assert_eq!(progress.get(), store.current_revision());
}
