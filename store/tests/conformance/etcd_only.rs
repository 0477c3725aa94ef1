//! What only the etcd backend has: other servers on the same cluster,
//! several endpoints, TLS, unreachable endpoints and etcd's NOSPACE alarm.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use skiff_store::testing::{EtcdProcess, EtcdTls, free_port};
use skiff_store::{EtcdConfig, EtcdStore, Store, StoreError};

use crate::backend::{config, connect, start_etcd, take, tmp, v};

/// Waits until `check` holds, for at most 5 s.
async fn soon(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !check() {
        assert!(Instant::now() < deadline, "not within 5 s: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_one_cluster_agree_on_revisions_conflicts_and_compaction() {
    let dir = tmp();
    let etcd = start_etcd(dir.path());
    let a = connect(etcd.endpoint()).await;
    let b = connect(etcd.endpoint()).await;

    // What A writes, B's revision reaches without B asking anything.
    let mut last = 0;
    for i in 0..10 {
        last = a
            .create(&format!("k/{i}"), v("a"))
            .await
            .unwrap()
            .mod_revision;
    }
    soon("B sees A's revision", || b.current_revision() >= last).await;
    assert_eq!(b.current_revision(), last);

    // Both compare-and-swap on one key: one wins, the other conflicts.
    let seen = b.get("k/0").await.unwrap().unwrap();
    a.update("k/0", v("a2"), Some(seen.mod_revision))
        .await
        .unwrap();
    assert!(matches!(
        b.update("k/0", v("b2"), Some(seen.mod_revision)).await,
        Err(StoreError::Conflict { .. })
    ));

    // B watches from an old revision, A compacts past it: B learns the
    // compact revision and its watch ends with Compacted.
    let mut watch = b.watch("k/", 1).unwrap();
    let compact_at = a.current_revision();
    a.compact(compact_at).await.unwrap();
    soon("B learns A's compaction", || {
        b.compact_revision() == compact_at
    })
    .await;
    match watch.next().await {
        Some(Err(StoreError::Compacted {
            compact_revision, ..
        })) => assert_eq!(compact_revision, compact_at),
        other => panic!("expected Compacted, got {other:?}"),
    }
    assert!(matches!(
        b.watch("k/", compact_at - 1),
        Err(StoreError::Compacted { .. })
    ));
    // B's watches from the compact revision on see A's writes.
    let mut watch = b.watch("k/", compact_at).unwrap();
    let written = a.delete("k/1", None).await.unwrap();
    let events = take(&mut watch, 1).await;
    assert_eq!(events[0].revision(), written.mod_revision);
    assert_eq!(events[0].prev.as_ref().unwrap().value, v("a"));
}

#[tokio::test]
async fn an_unreachable_cluster_fails_to_connect_naming_it() {
    let endpoint = format!("http://127.0.0.1:{}", free_port().unwrap());
    let started = Instant::now();
    let result = EtcdStore::connect(
        EtcdConfig::new([endpoint.as_str()]).connect_timeout(Duration::from_secs(1)),
    )
    .await;
    let err = match result {
        Ok(_) => panic!("connected to nothing"),
        Err(e) => e,
    };
    assert!(err.to_string().contains(&endpoint), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "gave up only after {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_endpoints_are_one_client_that_avoids_a_dead_one() {
    let dir = tmp();
    let etcd = start_etcd(dir.path());
    let dead = format!("http://127.0.0.1:{}", free_port().unwrap());
    let store = EtcdStore::connect(
        EtcdConfig::new([dead.as_str(), etcd.endpoint()])
            .compaction(None)
            .connect_timeout(Duration::from_secs(10)),
    )
    .await
    .expect("one live endpoint is enough");
    for i in 0..20 {
        store.create(&format!("k/{i}"), v("x")).await.unwrap();
    }
    assert_eq!(store.list("k/", None, 0).await.unwrap().items.len(), 20);
    assert!(store.health().is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_out_of_quota_is_unhealthy_and_refuses_writes_with_no_space() {
    let dir = tmp();
    let etcd = EtcdProcess::start_with(dir.path(), None, &["--quota-backend-bytes=1048576"])
        .unwrap_or_else(|e| panic!("cannot start the test etcd: {e}"));
    let store = Arc::new(connect(etcd.endpoint()).await);
    store.create("keep", v("x")).await.unwrap();
    let big = bytes::Bytes::from(vec![7u8; 64 << 10]);
    let mut refused = None;
    for i in 0..200 {
        match store.create(&format!("big/{i}"), big.clone()).await {
            Ok(_) => {}
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let refused = refused.expect("etcd's 1 MiB quota was reached");
    assert!(matches!(refused, StoreError::NoSpace { .. }), "{refused}");
    assert!(refused.to_string().contains(etcd.endpoint()), "{refused}");
    soon("health reports the alarm", || {
        matches!(store.health(), Err(StoreError::NoSpace { .. }))
    })
    .await;
    // Reads and deletes go on.
    assert_eq!(store.get("keep").await.unwrap().unwrap().value, v("x"));
    store.delete("keep", None).await.unwrap();
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate, as
/// PEM files in `dir`.
fn certificates(dir: &std::path::Path) -> (EtcdTls, std::path::PathBuf, std::path::PathBuf) {
    use rcgen::{
        BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, &ca_key);
    let leaf = |names: Vec<String>, usage: ExtendedKeyUsagePurpose| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(names).unwrap();
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = leaf(
        vec!["127.0.0.1".into(), "localhost".into()],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let (client_cert, client_key) = leaf(vec![], ExtendedKeyUsagePurpose::ClientAuth);
    let write = |name: &str, pem: &str| {
        let path = dir.join(name);
        std::fs::write(&path, pem).unwrap();
        path
    };
    let tls = EtcdTls {
        ca: write("ca.pem", &ca_cert.pem()),
        cert: write("server.pem", &server_cert),
        key: write("server-key.pem", &server_key),
    };
    (
        tls,
        write("client.pem", &client_cert),
        write("client-key.pem", &client_key),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_a_client_certificate_works_and_a_wrong_ca_is_refused() {
    let dir = tmp();
    let (tls, client_cert, client_key) = certificates(dir.path());
    let etcd = EtcdProcess::start_with(dir.path(), Some(&tls), &[])
        .unwrap_or_else(|e| panic!("cannot start the test etcd: {e}"));
    assert!(etcd.endpoint().starts_with("https://"));
    let store = EtcdStore::connect(
        config(etcd.endpoint())
            .client_identity(&client_cert, &client_key)
            .ca_file(&tls.ca),
    )
    .await
    .unwrap_or_else(|e| panic!("connecting over TLS: {e}"));
    let mut watch = store.watch("t/", store.current_revision()).unwrap();
    let kv = store.create("t/1", v("secret")).await.unwrap();
    assert_eq!(take(&mut watch, 1).await[0].kv, kv);
    assert_eq!(store.get("t/1").await.unwrap(), Some(kv));

    // A CA that did not sign etcd's certificate: no connection.
    let other = tmp();
    let (other_tls, _, _) = certificates(other.path());
    let refused = EtcdStore::connect(
        config(etcd.endpoint())
            .client_identity(&client_cert, &client_key)
            .ca_file(&other_tls.ca)
            .connect_timeout(Duration::from_secs(1)),
    )
    .await;
    assert!(refused.is_err(), "a wrong CA connected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_background_policy_compacts_etcd_but_keeps_the_newest_revisions() {
    let dir = tmp();
    let etcd = start_etcd(dir.path());
    let policy = skiff_store::CompactionPolicy {
        interval: Duration::from_millis(50),
        min_age: Duration::ZERO,
        min_revisions: 10,
    };
    let store = EtcdStore::connect(config(etcd.endpoint()).compaction(Some(policy)))
        .await
        .unwrap();
    store.create("k", v("0")).await.unwrap();
    for i in 1..60 {
        store.update("k", v(&i.to_string()), None).await.unwrap();
    }
    let current = store.current_revision();
    soon("background compaction", || {
        store.compact_revision() >= current - 10
    })
    .await;
    assert_eq!(store.compact_revision(), current - 10);
    let mut watch = store.watch("", current - 10).unwrap();
    let events = take(&mut watch, 10).await;
    assert_eq!(events.last().unwrap().kv.value, v("59"));
}

/// Sends `signal` to the test's own etcd.
fn signal(etcd: &EtcdProcess, signal: i32) {
    let pid = i32::try_from(etcd.pid()).expect("pid");
    // SAFETY: kill(2) on the PID of a child this test started.
    assert_eq!(
        unsafe { libc::kill(pid, signal) },
        0,
        "kill({pid}, {signal})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_fails_while_etcd_does_not_answer_and_recovers_with_it() {
    let dir = tmp();
    let etcd = start_etcd(dir.path());
    let store = connect(etcd.endpoint()).await;
    store.create("k", v("1")).await.unwrap();
    assert!(store.health().is_ok());
    signal(&etcd, libc::SIGSTOP);
    let deadline = Instant::now() + Duration::from_secs(10);
    let err = loop {
        if let Err(e) = store.health() {
            break e;
        }
        assert!(Instant::now() < deadline, "still healthy with etcd stopped");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    signal(&etcd, libc::SIGCONT);
    assert!(err.to_string().contains(etcd.endpoint()), "{err}");
    soon("healthy again", || store.health().is_ok()).await;
    store.update("k", v("2"), None).await.unwrap();
}
