//! `skiff server --datastore-endpoint`: the cluster's state in a real etcd
//! the test starts itself (Debian's `/usr/bin/etcd`; missing, the test
//! fails). kubectl works as on the embedded store, the objects are etcd's
//! keys, a restarted server finds them, and an unreachable etcd stops the
//! start with a message naming it.

use std::time::Duration;

use skiff_store::testing::{EtcdProcess, free_port};
use skiff_store::{EtcdConfig, EtcdStore, Store};

use super::support::{Server, assert_contains, eventually, refused_server};

fn start_etcd(dir: &std::path::Path) -> EtcdProcess {
    EtcdProcess::start(dir).unwrap_or_else(|e| panic!("cannot start the test etcd: {e}"))
}

/// The value etcd holds under `key`, read with a client of our own.
fn etcd_value(endpoint: &str, key: &str) -> Option<String> {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let store = EtcdStore::connect(EtcdConfig::new([endpoint]).compaction(None))
            .await
            .expect("connect to the test etcd");
        let kv = store.get(key).await.expect("read etcd");
        store.close().await.expect("close");
        kv.map(|kv| String::from_utf8_lossy(&kv.value).into_owned())
    })
}

#[test]
fn a_server_on_etcd_serves_kubectl_and_finds_its_objects_after_a_restart() {
    let etcd_dir = tempfile::tempdir().expect("temp dir");
    let etcd = start_etcd(etcd_dir.path());
    let mut server = Server::start_with(&[
        "--disable-agent",
        "--disable-cluster-dns",
        "--datastore-endpoint",
        etcd.endpoint(),
    ]);
    assert!(
        !server.data_dir().join("db").exists(),
        "no embedded store is opened"
    );

    server.kubectl_ok(&["create", "configmap", "a", "--from-literal=k=v1"]);
    let (mut watch, rx) = server.kubectl_lines(&["get", "configmaps", "-w", "-o", "name"]);
    server.kubectl_ok(&["create", "configmap", "b", "--from-literal=k=v2"]);
    eventually(Duration::from_secs(20), "configmap/b on the watch", || {
        rx.recv_timeout(Duration::from_millis(200))
            .ok()
            .filter(|line| line == "configmap/b")
    });
    let _ = watch.kill();
    let _ = watch.wait();

    let names = server.kubectl_ok(&["get", "configmaps", "-o", "name"]);
    assert!(
        names.contains("configmap/a") && names.contains("configmap/b"),
        "{names}"
    );
    assert_eq!(
        server.kubectl_ok(&["get", "configmap", "a", "-o", "jsonpath={.data.k}"]),
        "v1"
    );
    // The object is etcd's key, where kube-apiserver would keep it.
    let stored = etcd_value(etcd.endpoint(), "/registry/core/configmaps/default/b")
        .expect("configmap b is in etcd");
    assert_contains(&stored, "\"v2\"");

    let status = server.terminate();
    assert!(status.success(), "server stopped with {status}");
    server.restart();
    assert_eq!(
        server.kubectl_ok(&["get", "configmap", "b", "-o", "jsonpath={.data.k}"]),
        "v2"
    );
    server.kubectl_ok(&["delete", "configmap", "a"]);
    assert_eq!(
        etcd_value(etcd.endpoint(), "/registry/core/configmaps/default/a"),
        None
    );
}

#[test]
fn a_server_whose_etcd_is_unreachable_stops_at_start_up_naming_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let endpoint = format!("http://127.0.0.1:{}", free_port().expect("free port"));
    let stderr = refused_server(
        dir.path(),
        &[
            "--disable-agent",
            "--disable-cluster-dns",
            "--datastore-endpoint",
            &endpoint,
            "--datastore-connect-timeout",
            "2",
        ],
        Duration::from_secs(20),
        "the server kept running without its etcd",
    );
    assert_contains(
        &stderr,
        &format!("connecting to the datastore at {endpoint}"),
    );
    assert!(
        !dir.path().join("kubeconfig.yaml").exists(),
        "nothing was served"
    );
}
