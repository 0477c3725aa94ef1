//! Compaction: what is dropped, what is kept, and how watchers learn about it.

use bytes::Bytes;
use skiff_store::{EventKind, Store, StoreError};

use super::common::{assert_quiet, open, take, tmp};

fn v(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

#[tokio::test]
async fn compaction_keeps_latest_values_and_fails_old_watches() {
    let dir = tmp();
    let store = open(dir.path());
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

#[tokio::test]
async fn compacting_the_future_clamps_and_compacting_the_past_is_a_no_op() {
    let dir = tmp();
    let store = open(dir.path());
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

#[tokio::test]
async fn compaction_runs_alongside_writes() {
    let dir = tmp();
    let store = std::sync::Arc::new(open(dir.path()));
    for i in 0..3000 {
        store.create(&format!("k/{}", i % 300), v("x")).await.ok();
        if i >= 300 {
            store
                .update(&format!("k/{}", i % 300), v(&i.to_string()), None)
                .await
                .unwrap();
        }
    }
    let target = store.current_revision();
    let compacting = {
        let store = store.clone();
        tokio::spawn(async move { store.compact(target).await })
    };
    for i in 0..300 {
        store
            .update(&format!("k/{i}"), v("during"), None)
            .await
            .unwrap();
    }
    compacting.await.unwrap().unwrap();
    let listed = store.list("k/", None, 0).await.unwrap();
    assert_eq!(listed.items.len(), 300);
    assert!(listed.items.iter().all(|kv| kv.value == v("during")));
    let mut watch = store.watch("k/", target).unwrap();
    let events = take(&mut watch, 300).await;
    assert!(events.iter().all(|e| e.prev.is_some()));
}

#[tokio::test]
async fn the_background_policy_compacts_old_history_but_keeps_the_newest_revisions() {
    let dir = tmp();
    let policy = skiff_store::CompactionPolicy {
        interval: std::time::Duration::from_millis(20),
        min_age: std::time::Duration::ZERO,
        min_revisions: 10,
    };
    let store =
        skiff_store::SledStore::open(super::common::config(dir.path()).compaction(Some(policy)))
            .unwrap();
    store.create("k", v("0")).await.unwrap();
    for i in 1..100 {
        store.update("k", v(&i.to_string()), None).await.unwrap();
    }
    let current = store.current_revision();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while store.compact_revision() < current - 10 {
        assert!(
            std::time::Instant::now() < deadline,
            "no background compaction within 10 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        store.compact_revision(),
        current - 10,
        "the newest 10 revisions are kept"
    );
    let mut watch = store.watch("", current - 10).unwrap();
    let events = take(&mut watch, 10).await;
    assert_eq!(events.last().unwrap().kv.value, v("99"));
}
