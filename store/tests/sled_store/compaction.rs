//! The sled store's background compaction policy. What compaction keeps and
//! how watchers learn about it is checked on every backend in
//! `tests/conformance/`.

use bytes::Bytes;
use skiff_store::Store;

use super::common::{take, tmp};

fn v(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
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
