//! A full disk, for real: the store on a small tmpfs (the tests run as
//! root), filled with ConfigMaps until writes are refused.

use std::path::PathBuf;
use std::sync::Arc;

use http::StatusCode;
use serde_json::json;
use skiff_apiserver::{ApiServer, ApiServerConfig};
use skiff_store::{SledConfig, SledStore, SpaceReserve, Store};
use skiff_testkit::tmpfs::Tmpfs;

use crate::harness::{Client, Expect, TestServer, assert_mentions, assert_status};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn filler(name: &str) -> serde_json::Value {
    // 100 KiB per object: a 24 MiB disk fills in about a hundred and fifty.
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"fill": "yes"}},
        "data": {"blob": "x".repeat(100 * 1024)}})
}

#[tokio::test]
async fn a_full_disk_refuses_writes_and_keeps_reads_watches_and_deletes() {
    let disk = Tmpfs::mount(24);
    let store_dir: PathBuf = disk.path().join("store");
    let open = |dir: PathBuf| {
        SledStore::open(SledConfig::new(dir).space_reserve(Some(SpaceReserve::new(8 << 20))))
            .unwrap()
    };
    let store = Arc::new(open(store_dir.clone()));
    let server = ApiServer::new(store.clone(), ApiServerConfig::default())
        .await
        .unwrap();
    let s = TestServer::wrap(server, store.clone());

    s.configmap("default", "keep", json!({})).await;
    let mut stored = Vec::new();
    let (code, body) = fill(&s, &mut stored).await;
    assert_status(code, &body, 507, "InsufficientStorage");
    assert_mentions(
        &body,
        &["storage space exhausted", &store_dir.display().to_string()],
    );
    assert!(stored.len() > 10, "only {} fitted", stored.len());

    // Updates are refused too (one that changes something: an unchanged
    // object is not written at all); reads and watches go on. The store may
    // give space back between two requests (it reclaims a short disk in the
    // background), so an update let through is followed by filling the disk
    // again, a few times at most.
    for attempt in 1.. {
        let (code, body) = s
            .put(
                &format!("{CMS}/{}", stored[0]),
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": stored[0], "labels": {"fill": "yes"}},
                        "data": {"blob": format!("smaller-{attempt}")}}),
            )
            .await;
        if code == StatusCode::OK && attempt < 5 {
            fill(&s, &mut stored).await;
            continue;
        }
        assert_status(code, &body, 507, "InsufficientStorage");
        break;
    }
    // Readiness says the store is failing (after filling again, should a
    // reclaim have given space back meanwhile).
    for attempt in 1.. {
        let readyz = s.call(http::Method::GET, "/readyz", None).await;
        if readyz.0 != StatusCode::INTERNAL_SERVER_ERROR && attempt < 5 {
            fill(&s, &mut stored).await;
            continue;
        }
        let readyz = readyz.expect_code(StatusCode::INTERNAL_SERVER_ERROR);
        // Writes are refused, reads still answer: upstream's names for the two.
        let listed = readyz.as_str().unwrap();
        assert!(
            listed.contains("[-]etcd failed: reason withheld"),
            "{readyz}"
        );
        assert!(listed.contains("[+]etcd-readiness ok"), "{readyz}");
        // The single check names the reason; liveness does not ask the store.
        let (code, store) = s.get("/readyz/etcd").await;
        assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR, "{store}");
        assert!(
            store
                .as_str()
                .unwrap()
                .starts_with("internal server error: "),
            "{store}"
        );
        assert_eq!(s.get("/livez").await.0, StatusCode::OK);
        break;
    }
    let list = s.get_ok(&format!("{CMS}?labelSelector=fill")).await;
    assert_eq!(list["items"].as_array().unwrap().len(), stored.len());
    let mut watch = s
        .watch(&format!(
            "{CMS}?watch=1&resourceVersion={}",
            list["metadata"]["resourceVersion"].as_str().unwrap()
        ))
        .await;

    // Deletes work and are seen by watchers.
    for name in &stored {
        s.delete_ok(&format!("{CMS}/{name}")).await;
    }
    assert_eq!(
        watch.next_summary().await,
        ("DELETED".into(), stored[0].clone())
    );
    // A log-structured store gives space back only once it rewrites its
    // live data (which the store does on a short disk when a look is due):
    // until then writes are refused cleanly, after it they go on. Either
    // way the answer is one of the two, and what it acknowledged is kept.
    let (code, body) = s.post(CMS, filler("after")).await;
    let after_acknowledged = match code.as_u16() {
        201 => true,
        507 => {
            assert_status(code, &body, 507, "InsufficientStorage");
            false
        }
        other => panic!("a write after the deletes got {other}: {body}"),
    };

    // What was acknowledged survives a restart.
    s.server.shutdown();
    store.close().await.unwrap();
    drop(watch);
    drop(s);
    drop(store);
    let store = crate::harness::open_store(store_dir).await;
    let key = |name: &str| format!("/registry/core/configmaps/default/{name}");
    assert!(store.get(&key("keep")).await.unwrap().is_some());
    assert!(store.get(&key("fill-0")).await.unwrap().is_none());
    assert_eq!(
        store.get(&key("after")).await.unwrap().is_some(),
        after_acknowledged
    );
}

/// Creates 100 KiB ConfigMaps (`fill-<n>`, named in `stored`) until one is
/// refused, and returns the refusal.
async fn fill(s: &TestServer, stored: &mut Vec<String>) -> (StatusCode, serde_json::Value) {
    loop {
        let name = format!("fill-{}", stored.len());
        let (code, body) = s.post(CMS, filler(&name)).await;
        if code != StatusCode::CREATED {
            return (code, body);
        }
        stored.push(name);
        assert!(stored.len() < 400, "the disk never filled up");
    }
}
