//! Reopening a store directory: revision, values and history survive.

use bytes::Bytes;
use skiff_store::{EventKind, Store, StoreError};

use super::common::{open, take, tmp};

fn v(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

#[tokio::test]
async fn reopening_keeps_revision_values_and_history() {
    let dir = tmp();
    {
        let store = open(dir.path());
        store.create("a", v("1")).await.unwrap();
        store.update("a", v("2"), None).await.unwrap();
        store.create("b", v("1")).await.unwrap();
        store.delete("b", None).await.unwrap();
        store.close().await.unwrap();
    }
    let store = open(dir.path());
    assert_eq!(store.current_revision(), 5);
    let a = store.get("a").await.unwrap().unwrap();
    assert_eq!(
        (a.value, a.create_revision, a.mod_revision, a.version),
        (v("2"), 2, 3, 2)
    );
    assert_eq!(store.get("b").await.unwrap(), None);
    let mut watch = store.watch("", 1).unwrap();
    let events = take(&mut watch, 4).await;
    let summary: Vec<_> = events
        .iter()
        .map(|e| (e.kv.key.as_str(), e.kind, e.revision()))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("a", EventKind::Put, 2),
            ("a", EventKind::Put, 3),
            ("b", EventKind::Put, 4),
            ("b", EventKind::Delete, 5)
        ]
    );
    assert_eq!(
        events[1].prev.as_ref().map(|p| p.value.clone()),
        Some(v("1"))
    );
    assert_eq!(store.create("c", v("1")).await.unwrap().mod_revision, 6);
}

#[tokio::test]
async fn dropping_the_store_without_close_keeps_acknowledged_writes() {
    let dir = tmp();
    {
        let store = open(dir.path());
        store.create("a", v("1")).await.unwrap();
    }
    let store = open(dir.path());
    assert_eq!(store.get("a").await.unwrap().unwrap().mod_revision, 2);
}

#[tokio::test]
async fn compacting_away_a_delete_never_moves_the_revision_back() {
    let dir = tmp();
    {
        let store = open(dir.path());
        store.create("gone", v("1")).await.unwrap();
        store.delete("gone", None).await.unwrap();
        store.compact(3).await.unwrap();
        store.close().await.unwrap();
    }
    let store = open(dir.path());
    assert_eq!(store.current_revision(), 3);
    assert_eq!(store.compact_revision(), 3);
    assert!(matches!(
        store.watch("", 2),
        Err(StoreError::Compacted { .. })
    ));
    assert_eq!(store.create("gone", v("2")).await.unwrap().mod_revision, 4);
}

#[tokio::test]
async fn a_damaged_store_is_an_error_not_a_panic() {
    let dir = tmp();
    {
        let store = open(dir.path());
        for i in 0..200 {
            store
                .create(&format!("k/{i}"), Bytes::from(vec![b'x'; 500]))
                .await
                .unwrap();
        }
        store.close().await.unwrap();
    }
    // Overwrite the whole log with garbage.
    let log = dir.path().join("gen-0").join("db");
    let len = std::fs::metadata(&log).unwrap().len() as usize;
    std::fs::write(&log, vec![0xA5u8; len]).unwrap();
    match skiff_store::SledStore::open(super::common::config(dir.path())) {
        Err(StoreError::Corrupt { .. }) => {}
        Err(other) => panic!("unexpected error {other}"),
        Ok(_) => panic!("a store whose log is garbage must not open as an empty store"),
    }
}

#[tokio::test]
async fn a_malformed_entry_reads_as_corrupt() {
    let dir = tmp();
    {
        let store = open(dir.path());
        store.create("good", v("1")).await.unwrap();
        store.close().await.unwrap();
    }
    {
        // Write a broken index entry behind the store's back.
        let db = super::common::raw_sled(&dir.path().join("gen-0"));
        db.insert(b"kbad", &b"\x07garbage"[..]).unwrap();
        db.flush().unwrap();
    }
    let store = open(dir.path());
    assert!(matches!(
        store.get("bad").await,
        Err(StoreError::Corrupt { .. })
    ));
    assert!(matches!(
        store.list("", None, 0).await,
        Err(StoreError::Corrupt { .. })
    ));
    assert_eq!(store.get("good").await.unwrap().unwrap().value, v("1"));
}
