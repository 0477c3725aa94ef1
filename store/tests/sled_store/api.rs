//! Reads and writes: revisions, create/update/delete rules, listing, group commit.

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;
use skiff_store::{Store, StoreError};

use super::common::{open, take, tmp};

fn v(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

#[tokio::test]
async fn a_new_store_is_at_revision_one_and_each_write_takes_the_next() {
    let dir = tmp();
    let store = open(dir.path());
    assert_eq!(store.current_revision(), 1);
    assert_eq!(store.compact_revision(), 0);
    let a = store.create("a", v("1")).await.unwrap();
    assert_eq!((a.create_revision, a.mod_revision, a.version), (2, 2, 1));
    let b = store.create("b", v("1")).await.unwrap();
    assert_eq!(b.mod_revision, 3);
    let a2 = store.update("a", v("2"), None).await.unwrap();
    assert_eq!((a2.create_revision, a2.mod_revision, a2.version), (2, 4, 2));
    assert_eq!(store.current_revision(), 4);
    assert_eq!(store.get("a").await.unwrap(), Some(a2));
}

#[tokio::test]
async fn create_refuses_an_existing_key_and_failed_writes_take_no_revision() {
    let dir = tmp();
    let store = open(dir.path());
    store.create("k", v("1")).await.unwrap();
    let err = store.create("k", v("2")).await.unwrap_err();
    assert!(
        matches!(err, StoreError::AlreadyExists { ref key } if key == "k"),
        "{err}"
    );
    assert_eq!(store.current_revision(), 2);
    assert_eq!(store.get("k").await.unwrap().unwrap().value, v("1"));
}

#[tokio::test]
async fn update_and_delete_of_a_missing_key_are_not_found() {
    let dir = tmp();
    let store = open(dir.path());
    assert!(matches!(
        store.update("nope", v("x"), None).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        store.delete("nope", None).await,
        Err(StoreError::NotFound { .. })
    ));
    store.create("k", v("1")).await.unwrap();
    store.delete("k", None).await.unwrap();
    assert!(matches!(
        store.update("k", v("x"), None).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        store.delete("k", None).await,
        Err(StoreError::NotFound { .. })
    ));
    assert_eq!(store.current_revision(), 3);
}

#[tokio::test]
async fn compare_and_swap_refuses_a_stale_mod_revision() {
    let dir = tmp();
    let store = open(dir.path());
    let created = store.create("k", v("1")).await.unwrap();
    let updated = store
        .update("k", v("2"), Some(created.mod_revision))
        .await
        .unwrap();
    match store.update("k", v("3"), Some(created.mod_revision)).await {
        Err(StoreError::Conflict {
            key,
            expected,
            actual,
        }) => {
            assert_eq!(
                (key.as_str(), expected, actual),
                ("k", created.mod_revision, updated.mod_revision)
            );
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert!(matches!(
        store.delete("k", Some(created.mod_revision)).await,
        Err(StoreError::Conflict { .. })
    ));
    assert_eq!(store.get("k").await.unwrap().unwrap().value, v("2"));
    let deleted = store.delete("k", Some(updated.mod_revision)).await.unwrap();
    assert_eq!(deleted.value, v("2"));
    assert_eq!(deleted.create_revision, created.create_revision);
    assert_eq!(deleted.mod_revision, updated.mod_revision + 1);
    assert_eq!(store.get("k").await.unwrap(), None);
}

#[tokio::test]
async fn a_recreated_key_starts_a_new_incarnation() {
    let dir = tmp();
    let store = open(dir.path());
    store.create("k", v("1")).await.unwrap();
    store.update("k", v("2"), None).await.unwrap();
    store.delete("k", None).await.unwrap();
    let again = store.create("k", v("3")).await.unwrap();
    assert_eq!(
        (again.create_revision, again.mod_revision, again.version),
        (5, 5, 1)
    );
}

#[tokio::test]
async fn list_pages_through_a_prefix_in_key_order() {
    let dir = tmp();
    let store = open(dir.path());
    for i in 0..25 {
        store.create(&format!("a/{i:02}"), v("x")).await.unwrap();
    }
    store.create("a", v("not under a/")).await.unwrap();
    store.create("b/00", v("other prefix")).await.unwrap();
    store.delete("a/03", None).await.unwrap();

    let all = store.list("a/", None, 0).await.unwrap();
    assert_eq!(all.items.len(), 24);
    assert!(!all.more);
    assert_eq!(all.revision, store.current_revision());
    assert!(all.items.iter().all(|kv| kv.key.starts_with("a/")));
    assert!(all.items.windows(2).all(|w| w[0].key < w[1].key));

    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    let mut pages = 0;
    loop {
        let page = store.list("a/", after.as_deref(), 10).await.unwrap();
        pages += 1;
        assert!(page.items.len() <= 10);
        seen.extend(page.items.iter().map(|kv| kv.key.clone()));
        if !page.more {
            break;
        }
        assert_eq!(page.items.len(), 10, "a page with more after it is full");
        after = page.items.last().map(|kv| kv.key.clone());
    }
    assert_eq!(pages, 3);
    let expected: Vec<String> = all.items.iter().map(|kv| kv.key.clone()).collect();
    assert_eq!(seen, expected);

    // Exactly `limit` items left: `more` is false.
    let tail = store.list("a/", Some("a/20"), 4).await.unwrap();
    assert_eq!(tail.items.len(), 4);
    assert!(!tail.more);
    // A start before the prefix starts at the prefix.
    let head = store.list("a/", Some("a"), 1).await.unwrap();
    assert_eq!(head.items[0].key, "a/00");
    assert!(head.more);
}

#[tokio::test]
async fn more_is_false_when_only_deleted_keys_remain() {
    let dir = tmp();
    let store = open(dir.path());
    for k in ["p/1", "p/2", "p/3"] {
        store.create(k, v("x")).await.unwrap();
    }
    store.delete("p/2", None).await.unwrap();
    store.delete("p/3", None).await.unwrap();
    let page = store.list("p/", None, 1).await.unwrap();
    assert_eq!(page.items.len(), 1);
    assert!(!page.more);
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

#[tokio::test]
async fn writes_after_close_fail_with_closed() {
    let dir = tmp();
    let store = open(dir.path());
    store.create("k", v("1")).await.unwrap();
    store.close().await.unwrap();
    assert!(matches!(
        store.create("j", v("1")).await,
        Err(StoreError::Closed)
    ));
    // Reads of what was written still work on the open handle.
    assert_eq!(store.get("k").await.unwrap().unwrap().value, v("1"));
}
