//! Defragmentation: giving back the space sled keeps after compaction.

use std::time::{Duration, Instant};

use bytes::Bytes;
use skiff_store::{DefragPolicy, SledStore, Store};

use super::common::{config, open, take, tmp};

fn generations(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter(|n| n.starts_with("gen-"))
        .collect();
    names.sort();
    names
}

async fn churn(store: &SledStore, keys: usize, updates: usize) {
    let value = Bytes::from(vec![b'x'; 4096]);
    for k in 0..keys {
        store
            .create(&format!("k/{k}"), value.clone())
            .await
            .unwrap();
    }
    for n in 0..updates {
        store
            .update(&format!("k/{}", n % keys), value.clone(), None)
            .await
            .unwrap();
    }
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn defragmenting_gives_back_space_and_keeps_everything() {
    let dir = tmp();
    let store = open(dir.path());
    churn(&store, 10, 3000).await;
    let compact_at = store.current_revision();
    store.compact(compact_at).await.unwrap();
    let last = store
        .update("k/0", Bytes::from_static(b"after"), None)
        .await
        .unwrap();
    let before = store.stats().unwrap();
    let listed = store.list("", None, 0).await.unwrap();

    store.defragment().await.unwrap();
    wait_for("the old generation to be removed", || {
        generations(dir.path()).len() == 1
    })
    .await;
    let after = store.stats().unwrap();
    assert_eq!(after.defragmentations, 1);
    assert!(
        after.disk_usage * 4 < before.disk_usage,
        "disk use {} -> {} bytes",
        before.disk_usage,
        after.disk_usage
    );
    assert_eq!(store.list("", None, 0).await.unwrap(), listed);
    assert_eq!(store.current_revision(), last.mod_revision);
    let mut watch = store.watch("", compact_at).unwrap();
    let events = take(&mut watch, 1).await;
    assert_eq!(events[0].kv, last);
    assert!(events[0].prev.is_some(), "history kept across the rewrite");
    let next = store
        .update("k/1", Bytes::from_static(b"next"), None)
        .await
        .unwrap();
    assert_eq!(next.mod_revision, last.mod_revision + 1);
    store.close().await.unwrap();
    drop(watch);
    drop(store);

    let reopened = open(dir.path());
    assert_eq!(generations(dir.path()), vec!["gen-1".to_owned()]);
    assert_eq!(reopened.current_revision(), next.mod_revision);
    assert_eq!(reopened.get("k/1").await.unwrap(), Some(next));
}

#[tokio::test]
async fn leftover_generations_are_removed_at_open() {
    let dir = tmp();
    {
        let store = open(dir.path());
        store.create("a", Bytes::from_static(b"1")).await.unwrap();
    }
    // As if a defragmentation died half-way through its copy.
    std::fs::create_dir_all(dir.path().join("gen-1")).unwrap();
    std::fs::write(dir.path().join("gen-1").join("db"), b"partial").unwrap();
    let store = open(dir.path());
    assert_eq!(generations(dir.path()), vec!["gen-0".to_owned()]);
    assert_eq!(
        store.get("a").await.unwrap().unwrap().value,
        Bytes::from_static(b"1")
    );
}

#[tokio::test]
async fn compaction_triggers_defragmentation_when_the_file_outgrows_the_data() {
    let dir = tmp();
    let policy = DefragPolicy {
        min_size: 0,
        max_amplification: 3,
    };
    let store = SledStore::open(config(dir.path()).defragmentation(Some(policy))).unwrap();
    churn(&store, 10, 2000).await;
    store.compact(store.current_revision()).await.unwrap();
    wait_for("an automatic defragmentation", || {
        store.stats().unwrap().defragmentations == 1
    })
    .await;
    assert_eq!(store.list("k/", None, 0).await.unwrap().items.len(), 10);
}
