//! Compaction: what is dropped, what is kept, and how watchers learn about
//! it.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use skiff_store::{EventKind, Store, StoreError};

use crate::backend::{assert_quiet, take, v};

pub async fn compaction_keeps_latest_values_and_fails_old_watches(store: Arc<dyn Store>) {
    for round in 0..5 {
        for k in ["a", "b", "c"] {
            if round == 0 {
                store.create(k, v("0")).await.unwrap();
            } else {
                store.update(k, v(&round.to_string()), None).await.unwrap();
            }
        }
    }
    store.delete("c", None).await.unwrap();
    let before = store.list("", None, 0).await.unwrap();
    let compact_at = store.current_revision();
    store.compact(compact_at).await.unwrap();
    assert_eq!(store.compact_revision(), compact_at);

    let after = store.list("", None, 0).await.unwrap();
    assert_eq!(after.items, before.items, "live values survive compaction");
    assert_eq!(after.items.len(), 2);
    assert_eq!(store.get("c").await.unwrap(), None);

    match store.watch("", compact_at - 1) {
        Err(StoreError::Compacted {
            requested,
            compact_revision,
        }) => {
            assert_eq!((requested, compact_revision), (compact_at - 1, compact_at));
        }
        Err(other) => panic!("unexpected error {other}"),
        Ok(_) => panic!("a watch before the compact revision must fail"),
    }
    // Right at the compact revision nothing is missing.
    let mut watch = store.watch("", compact_at).unwrap();
    let a = store.get("a").await.unwrap().unwrap();
    store.update("a", v("new"), None).await.unwrap();
    store.delete("b", None).await.unwrap();
    store.create("c", v("again")).await.unwrap();
    let events = take(&mut watch, 3).await;
    assert_eq!(
        events[0].prev,
        Some(a),
        "prev values older than the compaction stay"
    );
    assert_eq!(events[1].kind, EventKind::Delete);
    assert_eq!(
        events[1].prev.as_ref().map(|p| p.value.clone()),
        Some(v("4"))
    );
    assert_eq!(events[2].prev, None);
    assert_quiet(&mut watch).await;
}

pub async fn compacting_the_future_clamps_and_compacting_the_past_is_a_no_op(
    store: Arc<dyn Store>,
) {
    store.create("a", v("1")).await.unwrap();
    store.update("a", v("2"), None).await.unwrap();
    store.compact(1_000).await.unwrap();
    assert_eq!(store.compact_revision(), 3);
    store.compact(2).await.unwrap();
    assert_eq!(store.compact_revision(), 3);
    // New writes continue after the clamped compaction.
    assert_eq!(
        store.update("a", v("3"), None).await.unwrap().mod_revision,
        4
    );
    let mut watch = store.watch("", 3).unwrap();
    assert_eq!(
        take(&mut watch, 1).await[0]
            .prev
            .as_ref()
            .map(|p| p.value.clone()),
        Some(v("2"))
    );
}

pub async fn compaction_runs_alongside_writes(store: Arc<dyn Store>) {
    const KEYS: usize = 100;
    for i in 0..KEYS {
        store.create(&format!("k/{i}"), v("0")).await.unwrap();
    }
    for round in 1..5 {
        for i in 0..KEYS {
            store
                .update(&format!("k/{i}"), v(&round.to_string()), None)
                .await
                .unwrap();
        }
    }
    let target = store.current_revision();
    let compacting = {
        let store = store.clone();
        tokio::spawn(async move { store.compact(target).await })
    };
    for i in 0..KEYS {
        store
            .update(&format!("k/{i}"), v("during"), None)
            .await
            .unwrap();
    }
    compacting.await.unwrap().unwrap();
    let listed = store.list("k/", None, 0).await.unwrap();
    assert_eq!(listed.items.len(), KEYS);
    assert!(listed.items.iter().all(|kv| kv.value == v("during")));
    let mut watch = store.watch("k/", target).unwrap();
    let events = take(&mut watch, KEYS).await;
    assert!(
        events
            .iter()
            .all(|e| e.prev.as_ref().map(|p| p.value.clone()) == Some(v("4")))
    );
}

/// A watch opened before a compaction and read after it either delivers
/// its events in order (a backend may still hold them) or ends with
/// `Compacted` naming the compaction; it never skips events or delivers
/// an update without its previous value.
pub async fn a_watch_behind_a_compaction_skips_nothing_silently(store: Arc<dyn Store>) {
    const KEYS: u64 = 50;
    let mut watch = store.watch("k/", 1).unwrap();
    for i in 0..KEYS {
        store.create(&format!("k/{i}"), v("0")).await.unwrap();
    }
    for i in 0..KEYS {
        store.update(&format!("k/{i}"), v("1"), None).await.unwrap();
    }
    let compact_at = store.current_revision();
    store.compact(compact_at).await.unwrap();
    let mut expected = 2;
    loop {
        match tokio::time::timeout(Duration::from_secs(10), watch.next())
            .await
            .expect("an item within 10 s")
        {
            Some(Ok(event)) => {
                assert_eq!(event.revision(), expected, "no gap");
                if event.revision() > 1 + KEYS {
                    assert!(event.prev.is_some(), "an update keeps its previous value");
                }
                expected += 1;
                if expected > compact_at {
                    assert_quiet(&mut watch).await;
                    return;
                }
            }
            Some(Err(StoreError::Compacted {
                compact_revision, ..
            })) => {
                assert_eq!(compact_revision, compact_at);
                let end = tokio::time::timeout(Duration::from_secs(5), watch.next()).await;
                assert!(
                    matches!(end, Ok(None)),
                    "the stream ends after Compacted: {end:?}"
                );
                return;
            }
            other => panic!("unexpected watch item {other:?}"),
        }
    }
}

pub async fn defragmenting_after_compaction_keeps_every_live_value(store: Arc<dyn Store>) {
    for i in 0..50 {
        store.create(&format!("d/{i}"), v("0")).await.unwrap();
    }
    for i in 0..50 {
        store.update(&format!("d/{i}"), v("1"), None).await.unwrap();
    }
    store.delete("d/0", None).await.unwrap();
    let before = store.list("", None, 0).await.unwrap();
    store.compact(store.current_revision()).await.unwrap();
    store.defragment().await.unwrap();
    let after = store.list("", None, 0).await.unwrap();
    assert_eq!(after.items, before.items);
    assert_eq!(
        after.revision, before.revision,
        "defragmenting writes nothing"
    );
    let mut watch = store.watch("d/", after.revision).unwrap();
    let next = store.update("d/1", v("2"), None).await.unwrap();
    assert_eq!(next.mod_revision, after.revision + 1);
    let events = take(&mut watch, 1).await;
    assert_eq!(events[0].prev.as_ref().unwrap().value, v("1"));
}
