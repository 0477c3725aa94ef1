//! Watch: ordering, previous values, history replay, the start-up race,
//! closing.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use skiff_store::{EventKind, Store};

use crate::backend::{assert_quiet, next, take, v};

pub async fn events_carry_kind_revision_and_previous_value(store: Arc<dyn Store>) {
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

pub async fn a_watch_sees_only_its_prefix_and_replays_history_after_from_revision(
    store: Arc<dyn Store>,
) {
    store.create("a/1", v("x")).await.unwrap();
    let mid = store.create("b/1", v("x")).await.unwrap().mod_revision;
    store.create("a/2", v("x")).await.unwrap();
    store.update("a/1", v("y"), None).await.unwrap();
    store.create("a0", v("just past the prefix")).await.unwrap();

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

    // The empty prefix watches every key.
    let mut everything = store.watch("", 1).unwrap();
    assert_eq!(take(&mut everything, 5).await[4].kv.key, "a0");
}

pub async fn watches_started_while_writes_race_see_no_gap_and_no_duplicate(store: Arc<dyn Store>) {
    const WRITES: u64 = 300;
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
        tokio::time::sleep(Duration::from_millis(3)).await;
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
        assert!(store.current_revision() >= last);
        assert_quiet(&mut watch).await;
    }
}

pub async fn a_future_from_revision_waits_for_that_revision(store: Arc<dyn Store>) {
    let mut watch = store.watch("", 3).unwrap();
    store.create("a", v("x")).await.unwrap();
    store.create("b", v("x")).await.unwrap();
    store.create("c", v("x")).await.unwrap();
    let event = next(&mut watch).await.unwrap();
    assert_eq!((event.kv.key.as_str(), event.revision()), ("c", 4));
}

/// Closing ends every watch stream; what it delivered before ending was
/// written before the close.
pub async fn watch_streams_end_when_the_store_closes(store: Arc<dyn Store>) {
    let mut watch = store.watch("", 1).unwrap();
    store.create("a", v("x")).await.unwrap();
    store.close().await.unwrap();
    let rest = tokio::time::timeout(Duration::from_secs(5), async {
        let mut items = Vec::new();
        while let Some(item) = watch.next().await {
            items.push(item);
        }
        items
    })
    .await
    .expect("stream ends after close");
    assert!(rest.len() <= 1, "{rest:?}");
    if let Some(item) = rest.first() {
        assert_eq!(item.as_ref().unwrap().kv.key, "a");
    }
}
