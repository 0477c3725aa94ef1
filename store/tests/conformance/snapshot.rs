//! Snapshots: taken from either backend while writes go on, restored into a
//! new embedded store.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use skiff_store::snapshot::{Attachment, Snapshot};
use skiff_store::{SledConfig, SledStore, Store, StoreError};

use crate::backend::tmp;

fn key(i: u64) -> String {
    format!("/snap/{i:06}")
}

/// A writer creates keys one after another (and rewrites `/counter`) while
/// a snapshot is taken: the snapshot holds exactly the writes up to its
/// revision — a prefix of the creates and the counter's value at that
/// revision — so it is one point in time, not torn.
pub async fn a_snapshot_is_one_revision_while_writes_go_on(store: Arc<dyn Store>) {
    store.create("/counter", Bytes::from("0")).await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (store, stop) = (store.clone(), stop.clone());
        tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) || i < 50 {
                i += 1;
                store
                    .create(&key(i), Bytes::from(i.to_string()))
                    .await
                    .unwrap();
                store
                    .update("/counter", Bytes::from(i.to_string()), None)
                    .await
                    .unwrap();
            }
            i
        })
    };
    while store.current_revision() < 40 {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    let snapshot = Snapshot::take(store.as_ref(), Vec::new()).await.unwrap();
    stop.store(true, Ordering::Relaxed);
    let written = writer.await.unwrap();
    assert!(
        store.current_revision() > snapshot.revision,
        "writes went on"
    );

    let created: Vec<u64> = snapshot
        .entries
        .iter()
        .filter_map(|kv| kv.key.strip_prefix("/snap/"))
        .map(|n| n.parse().unwrap())
        .collect();
    let n = created.len() as u64;
    assert!(n > 0 && n < written, "{n} of {written}");
    assert_eq!(
        created,
        (1..=n).collect::<Vec<_>>(),
        "a prefix of the creates"
    );
    let counter = snapshot
        .entries
        .iter()
        .find(|kv| kv.key == "/counter")
        .unwrap();
    // The counter is written right after each create: n, or n-1 when the
    // snapshot fell between the two writes.
    let value: u64 = std::str::from_utf8(&counter.value)
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        value == n || value + 1 == n,
        "counter {value} beside {n} keys"
    );
    assert!(
        snapshot
            .entries
            .iter()
            .all(|kv| kv.mod_revision <= snapshot.revision)
    );
    let newest = snapshot.entries.iter().map(|kv| kv.mod_revision).max();
    assert_eq!(
        newest,
        Some(snapshot.revision),
        "nothing written at its revision is missing"
    );
}

/// A snapshot written to a file and restored into a new embedded store
/// gives back every key with its value and revisions, goes on from its
/// revision, and answers older watches `Compacted`; the file's attachments
/// come back as they went.
pub async fn a_restored_store_goes_on_from_the_snapshot(store: Arc<dyn Store>) {
    store.create("/a", Bytes::from("1")).await.unwrap();
    let b = store.create("/b", Bytes::from("2")).await.unwrap();
    store.update("/a", Bytes::from("3"), None).await.unwrap();
    store.delete("/b", Some(b.mod_revision)).await.unwrap();
    store.create("/c", Bytes::from("4")).await.unwrap();
    let before = store.list("", None, 0).await.unwrap();
    let attachment = Attachment {
        name: "tls/ca.key".into(),
        data: b"key".to_vec(),
    };
    let dir = tmp();
    let file = dir.path().join("snap");
    let snapshot = Snapshot::take(store.as_ref(), vec![attachment.clone()])
        .await
        .unwrap();
    snapshot.write(&file).unwrap();
    // Written after the snapshot: not in it.
    store.create("/d", Bytes::from("5")).await.unwrap();

    let read = Snapshot::read(&file).unwrap();
    assert_eq!(read.attachment("tls/ca.key"), Some(&attachment));
    let config = SledConfig::new(dir.path().join("db")).compaction(None);
    SledStore::restore(&config, &read).unwrap();
    // A second restore into the same directory is refused.
    assert!(SledStore::restore(&config, &read).is_err());
    let restored = SledStore::open(config).unwrap();
    assert_eq!(restored.current_revision(), before.revision);
    assert_eq!(restored.compact_revision(), before.revision);
    let after = restored.list("", None, 0).await.unwrap();
    assert_eq!(after.items, before.items);
    assert!(restored.get("/d").await.unwrap().is_none());
    assert!(matches!(
        restored.watch("/", before.revision - 1),
        Err(StoreError::Compacted { .. })
    ));
    let mut watch = restored.watch("/", before.revision).unwrap();
    let a = restored.get("/a").await.unwrap().unwrap();
    let updated = restored
        .update("/a", Bytes::from("6"), Some(a.mod_revision))
        .await
        .unwrap();
    assert_eq!(updated.mod_revision, before.revision + 1);
    assert_eq!(updated.version, a.version + 1);
    let event = crate::backend::next(&mut watch).await.unwrap();
    assert_eq!(event.prev.map(|p| p.value), Some(Bytes::from("3")));
    restored.close().await.unwrap();
}

/// A store that is open is found in use (so a restore can refuse to pull
/// it from under a running server), and no longer once it is closed.
#[test]
fn an_open_store_is_in_use() {
    let dir = tmp();
    let path = dir.path().join("db");
    assert!(!SledStore::in_use(&path).unwrap());
    let store = SledStore::open(SledConfig::new(&path).compaction(None)).unwrap();
    assert!(SledStore::exists(&path));
    assert!(SledStore::in_use(&path).unwrap());
    drop(store);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while SledStore::in_use(&path).unwrap() {
        assert!(
            std::time::Instant::now() < deadline,
            "still in use after close"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
