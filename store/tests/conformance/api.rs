//! Reads and writes: revisions, create/update/delete rules, listing,
//! concurrency.

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;
use skiff_store::{Store, StoreError};

use crate::backend::{take, v};

pub async fn a_new_store_is_at_revision_one_and_each_write_takes_the_next(store: Arc<dyn Store>) {
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
    assert_eq!(store.get("missing").await.unwrap(), None);
}

pub async fn create_refuses_an_existing_key_and_failed_writes_take_no_revision(
    store: Arc<dyn Store>,
) {
    store.create("k", v("1")).await.unwrap();
    let err = store.create("k", v("2")).await.unwrap_err();
    assert!(
        matches!(err, StoreError::AlreadyExists { ref key } if key == "k"),
        "{err}"
    );
    assert!(matches!(
        store.update("k", v("3"), Some(99)).await,
        Err(StoreError::Conflict { .. })
    ));
    assert_eq!(store.current_revision(), 2);
    // The next successful write takes the very next revision.
    assert_eq!(store.create("j", v("1")).await.unwrap().mod_revision, 3);
    assert_eq!(store.get("k").await.unwrap().unwrap().value, v("1"));
}

pub async fn update_and_delete_of_a_missing_key_are_not_found(store: Arc<dyn Store>) {
    assert!(matches!(
        store.update("nope", v("x"), None).await,
        Err(StoreError::NotFound { ref key }) if key == "nope"
    ));
    assert!(matches!(
        store.delete("nope", None).await,
        Err(StoreError::NotFound { .. })
    ));
    // An expected revision does not turn a missing key into a conflict.
    assert!(matches!(
        store.update("nope", v("x"), Some(1)).await,
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

pub async fn compare_and_swap_refuses_a_stale_mod_revision(store: Arc<dyn Store>) {
    let created = store.create("k", v("1")).await.unwrap();
    let updated = store
        .update("k", v("2"), Some(created.mod_revision))
        .await
        .unwrap();
    assert_eq!(updated.version, 2);
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
    assert_eq!(store.current_revision(), deleted.mod_revision);
    assert_eq!(store.get("k").await.unwrap(), None);
}

pub async fn a_recreated_key_starts_a_new_incarnation(store: Arc<dyn Store>) {
    store.create("k", v("1")).await.unwrap();
    store.update("k", v("2"), None).await.unwrap();
    store.delete("k", None).await.unwrap();
    let again = store.create("k", v("3")).await.unwrap();
    assert_eq!(
        (again.create_revision, again.mod_revision, again.version),
        (5, 5, 1)
    );
}

pub async fn mod_revision_follows_writes_as_get_reports_them(store: Arc<dyn Store>) {
    assert_eq!(store.mod_revision("k").await.unwrap(), None);
    let created = store.create("k", v("1")).await.unwrap();
    assert_eq!(
        store.mod_revision("k").await.unwrap(),
        Some(created.mod_revision)
    );
    let updated = store.update("k", v("2"), None).await.unwrap();
    assert_eq!(
        store.mod_revision("k").await.unwrap(),
        Some(updated.mod_revision)
    );
    assert_eq!(
        store.mod_revision("k").await.unwrap(),
        store.get("k").await.unwrap().map(|kv| kv.mod_revision)
    );
    store.delete("k", None).await.unwrap();
    assert_eq!(store.mod_revision("k").await.unwrap(), None);
    let again = store.create("k", v("3")).await.unwrap();
    assert_eq!(
        store.mod_revision("k").await.unwrap(),
        Some(again.mod_revision)
    );
    // A key that only shares a prefix with another is a different key.
    assert_eq!(store.mod_revision("k2").await.unwrap(), None);
}

pub async fn list_pages_through_a_prefix_in_key_order(store: Arc<dyn Store>) {
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
    assert!(all.items.iter().all(|kv| kv.mod_revision <= all.revision));

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
    // A start before the prefix starts at the prefix; one past it is empty.
    let head = store.list("a/", Some("a"), 1).await.unwrap();
    assert_eq!(head.items[0].key, "a/00");
    assert!(head.more);
    let beyond = store.list("a/", Some("b"), 0).await.unwrap();
    assert!(beyond.items.is_empty() && !beyond.more);
    // The empty prefix is every key.
    let everything = store.list("", None, 0).await.unwrap();
    assert_eq!(everything.items.len(), 26);
}

/// `(key, value)` of each item of a list, in order.
fn pairs(list: &skiff_store::ListResult) -> Vec<(String, bytes::Bytes)> {
    list.items
        .iter()
        .map(|kv| (kv.key.clone(), kv.value.clone()))
        .collect()
}

pub async fn a_list_at_a_past_revision_shows_the_keys_as_they_were(store: Arc<dyn Store>) {
    let a1 = store.create("p/a", v("a1")).await.unwrap();
    store.create("p/b", v("b1")).await.unwrap();
    store.create("q/x", v("other prefix")).await.unwrap();
    let then = store.current_revision();
    // Since then: an update, a delete, a key deleted and created again, and
    // a new key.
    store.update("p/a", v("a2"), None).await.unwrap();
    store.delete("p/b", None).await.unwrap();
    store.create("p/b", v("b2")).await.unwrap();
    store.create("p/c", v("c1")).await.unwrap();
    let deleted_b = store.delete("p/b", None).await.unwrap().mod_revision;

    let past = store.list_at("p/", then).await.unwrap();
    assert_eq!(past.revision, then);
    assert!(!past.more);
    assert_eq!(
        pairs(&past),
        vec![("p/a".into(), v("a1")), ("p/b".into(), v("b1"))]
    );
    assert_eq!(past.items[0], a1, "revisions as they were");
    // Between the recreate and its delete, b is its second incarnation.
    let mid = store.list_at("p/", deleted_b - 1).await.unwrap();
    assert_eq!(
        pairs(&mid),
        vec![
            ("p/a".into(), v("a2")),
            ("p/b".into(), v("b2")),
            ("p/c".into(), v("c1"))
        ]
    );
    // At the current revision it is the plain list.
    let now = store.list_at("p/", store.current_revision()).await.unwrap();
    assert_eq!(now.items, store.list("p/", None, 0).await.unwrap().items);
    // Once compacted past, that history is gone.
    store.compact(then + 1).await.unwrap();
    match store.list_at("p/", then).await {
        Err(skiff_store::StoreError::Compacted { requested, .. }) => assert_eq!(requested, then),
        other => panic!("a list before the compaction must fail, not {other:?}"),
    }
    assert_eq!(
        pairs(&store.list_at("p/", then + 1).await.unwrap()),
        vec![("p/a".into(), v("a2")), ("p/b".into(), v("b1"))]
    );
}

pub async fn more_is_false_when_only_deleted_keys_remain(store: Arc<dyn Store>) {
    for k in ["p/1", "p/2", "p/3"] {
        store.create(k, v("x")).await.unwrap();
    }
    store.delete("p/2", None).await.unwrap();
    store.delete("p/3", None).await.unwrap();
    let page = store.list("p/", None, 1).await.unwrap();
    assert_eq!(page.items.len(), 1);
    assert!(!page.more);
}

pub async fn concurrent_writers_get_distinct_increasing_revisions_that_watch_confirms(
    store: Arc<dyn Store>,
) {
    const WRITERS: usize = 32;
    const EACH: usize = 10;
    let start = store.current_revision();
    let mut watch = store.watch("w/", start).unwrap();
    let tasks: Vec<_> = (0..WRITERS)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut acks = Vec::new();
                for i in 0..EACH {
                    let key = format!("w/{w}/{i}");
                    let kv = store.create(&key, Bytes::from(key.clone())).await.unwrap();
                    // The store's revision never lags what it acknowledged.
                    assert!(store.current_revision() >= kv.mod_revision);
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
}

/// Read-modify-write increments of one counter under compare-and-swap:
/// every increment lands exactly once whatever the interleaving.
pub async fn contended_compare_and_swap_loses_no_update(store: Arc<dyn Store>) {
    const TASKS: usize = 8;
    const EACH: usize = 15;
    store.create("counter", v("0")).await.unwrap();
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut conflicts = 0;
                let mut done = 0;
                while done < EACH {
                    let current = store.get("counter").await.unwrap().unwrap();
                    let n: u64 = std::str::from_utf8(&current.value)
                        .unwrap()
                        .parse()
                        .unwrap();
                    match store
                        .update(
                            "counter",
                            Bytes::from((n + 1).to_string()),
                            Some(current.mod_revision),
                        )
                        .await
                    {
                        Ok(kv) => {
                            assert_eq!(kv.version, current.version + 1);
                            done += 1;
                        }
                        Err(StoreError::Conflict { actual, .. }) => {
                            assert!(actual > current.mod_revision);
                            conflicts += 1;
                        }
                        Err(other) => panic!("unexpected error {other}"),
                    }
                }
                conflicts
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let last = store.get("counter").await.unwrap().unwrap();
    assert_eq!(last.value, Bytes::from((TASKS * EACH).to_string()));
    assert_eq!(last.version, 1 + (TASKS * EACH) as u64);
    assert_eq!(last.mod_revision, store.current_revision());
}

pub async fn writes_after_close_fail_with_closed(store: Arc<dyn Store>) {
    store.create("k", v("1")).await.unwrap();
    store.close().await.unwrap();
    assert!(matches!(
        store.create("j", v("1")).await,
        Err(StoreError::Closed)
    ));
    assert!(matches!(
        store.update("k", v("2"), None).await,
        Err(StoreError::Closed)
    ));
    assert!(matches!(
        store.delete("k", None).await,
        Err(StoreError::Closed)
    ));
    // Reads of what was written still work on the open handle.
    assert_eq!(store.get("k").await.unwrap().unwrap().value, v("1"));
}
