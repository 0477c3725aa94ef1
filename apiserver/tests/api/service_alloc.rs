//! Service cluster IP and node port allocation through the API: distinct
//! under concurrent creates, upstream's 500 (never a duplicate) when the
//! range is full, 422 when a requested address or port is taken or out of
//! range, released on
//! delete, and remembered across a restart; unique across two API servers
//! sharing one store (each allocation is a record in the store, created
//! only if absent), and repaired at start (leaked records released, missing
//! ones written).

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use serde_json::{Value, json};
use skiff_apiserver::{ApiServer, ApiServerConfig};
use skiff_store::{SledStore, Store};

use crate::harness::{Client, Expect, TestServer, assert_status, eventually};

const SERVICES: &str = "/api/v1/namespaces/default/services";

fn config(cidr: &str) -> ApiServerConfig {
    ApiServerConfig {
        service_cidr: cidr.to_string(),
        ..ApiServerConfig::default()
    }
}

fn service(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    if spec.get("ports").is_none() {
        spec["ports"] = json!([{"port": 80}]);
    }
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec})
}

fn cluster_ip(body: &Value) -> Ipv4Addr {
    body["spec"]["clusterIP"]
        .as_str()
        .and_then(|ip| ip.parse().ok())
        .unwrap_or_else(|| panic!("no cluster IP: {body}"))
}

/// Creates `count` Services at once; returns each response.
async fn create_concurrently(
    server: &TestServer,
    count: usize,
    spec: Value,
) -> Vec<(StatusCode, Value)> {
    let creates = (0..count).map(|i| {
        let body = service(&format!("svc-{i}"), spec.clone());
        async move { server.post(SERVICES, body).await }
    });
    futures::future::join_all(creates).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_creates_get_distinct_cluster_ips() {
    let server = TestServer::with_config(config("10.43.0.0/16")).await;
    let results = create_concurrently(&server, 1000, json!({})).await;
    let mut ips = BTreeSet::new();
    for (code, body) in &results {
        assert_eq!(*code, StatusCode::CREATED, "{body}");
        let ip = cluster_ip(body);
        assert_eq!(ip.octets()[..2], [10, 43], "{ip} outside 10.43.0.0/16");
        assert_ne!(
            ip,
            Ipv4Addr::new(10, 43, 0, 1),
            "the kubernetes Service's address"
        );
        ips.insert(ip);
    }
    assert_eq!(ips.len(), 1000, "duplicate cluster IPs handed out");
    // What is stored agrees with what was answered.
    let (_, list) = server.get(SERVICES).await;
    let stored: BTreeSet<Ipv4Addr> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("svc-"))
        })
        .map(cluster_ip)
        .collect();
    assert_eq!(stored, ips);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_range_answers_as_upstream_never_a_duplicate() {
    // A /28: 16 addresses, minus network, broadcast and the first (kept for
    // the `kubernetes` Service) = 13 for Services.
    let server = TestServer::with_config(config("10.99.0.0/28")).await;
    let results = create_concurrently(&server, 20, json!({})).await;
    let mut ips = BTreeSet::new();
    let mut refused = 0;
    for (code, body) in &results {
        if *code == StatusCode::CREATED {
            let ip = cluster_ip(body);
            assert!(ips.insert(ip), "{ip} handed out twice");
            let last = ip.octets()[3];
            assert!((2..=14).contains(&last), "{ip} outside the usable range");
        } else {
            assert_status(*code, body, 500, "InternalError");
            assert_eq!(
                body["message"],
                "Internal error occurred: failed to allocate a serviceIP: range is full",
                "{body}"
            );
            refused += 1;
        }
    }
    assert_eq!((ips.len(), refused), (13, 7));
    // Headless Services need no address and still fit.
    let body = server
        .created(SERVICES, service("headless", json!({"clusterIP": "None"})))
        .await;
    assert_eq!(body["spec"]["clusterIPs"], json!(["None"]));
}

/// A NodePort Service asking for address 10.99.0.10 and node port 30555.
fn fixed_service(name: &str) -> Value {
    service(
        name,
        json!({"type": "NodePort", "clusterIP": "10.99.0.10",
            "ports": [{"port": 80, "nodePort": 30555}]}),
    )
}

#[tokio::test]
async fn requested_addresses_and_ports_are_honoured_or_refused() {
    let server = TestServer::with_config(config("10.99.0.0/24")).await;
    let body = server.created(SERVICES, fixed_service("fixed")).await;
    assert_eq!(body["spec"]["clusterIP"], "10.99.0.10");
    assert_eq!(body["spec"]["ports"][0]["nodePort"], 30555);

    let refusals = [
        (
            json!({"clusterIP": "10.99.0.10"}),
            "failed to allocate IP 10.99.0.10: provided IP is already allocated",
        ),
        (
            json!({"clusterIP": "10.98.0.10"}),
            "failed to allocate IP 10.98.0.10: provided IP is not in the valid range. The range of valid IPs is 10.99.0.0/24",
        ),
        (
            json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30555}]}),
            "spec.ports[0].nodePort: Invalid value: 30555: provided port is already allocated",
        ),
        (
            json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 80}]}),
            "spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767",
        ),
    ];
    for (i, (spec, message)) in refusals.into_iter().enumerate() {
        server
            .post(SERVICES, service(&format!("bad-{i}"), spec))
            .await
            .expect_mentions(422, "Invalid", &[message]);
        // Nothing half-created.
        server.get_not_found(&format!("{SERVICES}/bad-{i}")).await;
    }

    // The same Service created twice: AlreadyExists, not its own address
    // "already allocated".
    let twice = fixed_service("fixed");
    server
        .post(SERVICES, twice)
        .await
        .expect_failure(409, "AlreadyExists");

    // Deleting the Service releases both; they can be taken again.
    server.delete_ok(&format!("{SERVICES}/fixed")).await;
    server.created(SERVICES, fixed_service("again")).await;
}

#[tokio::test]
async fn node_ports_are_distinct_and_released_on_delete() {
    let server = TestServer::with_config(config("10.99.0.0/24")).await;
    let results = create_concurrently(
        &server,
        50,
        json!({"type": "NodePort", "ports": [{"port": 80}]}),
    )
    .await;
    let mut ports = BTreeSet::new();
    for (code, body) in &results {
        assert_eq!(*code, StatusCode::CREATED, "{body}");
        let port = body["spec"]["ports"][0]["nodePort"]
            .as_u64()
            .expect("node port");
        assert!((30000..=32767).contains(&port), "{port}");
        assert!(ports.insert(port), "node port {port} handed out twice");
    }
}

/// A server with service range `range` on `store`, whose directory the
/// test keeps (a restart, or two servers on one store).
async fn server_on(store: &Arc<SledStore>, range: &str) -> TestServer {
    let server = ApiServer::new(store.clone(), config(range)).await.unwrap();
    TestServer::wrap(server, store.clone())
}

#[tokio::test]
async fn allocations_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let open = || crate::harness::open_store(dir.path().join("store"));
    let store = open().await;
    let first = server_on(&store, "10.99.0.0/28").await;
    let mut taken = BTreeSet::new();
    for i in 0..13 {
        let body = first
            .created(SERVICES, service(&format!("s{i}"), json!({})))
            .await;
        taken.insert(cluster_ip(&body));
    }
    first.stop().await;
    drop(store);

    let store = open().await;
    let second = server_on(&store, "10.99.0.0/28").await;
    // Still full after the restart: nothing handed out twice.
    let late = service("late", json!({}));
    second
        .post(SERVICES, late.clone())
        .await
        .expect_failure(500, "InternalError");
    // One released after the restart is handed out again.
    let s3 = format!("{SERVICES}/s3");
    let (_, gone) = second.get(&s3).await;
    let freed = cluster_ip(&gone);
    second.delete_ok(&s3).await;
    let body = second.created(SERVICES, late).await;
    assert_eq!(cluster_ip(&body), freed);
    assert!(taken.contains(&freed));
}

/// The allocation record of a cluster IP.
fn ip_record(ip: Ipv4Addr) -> String {
    format!("/skiff/ranges/serviceips/{ip}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_store_never_hand_out_the_same_address() {
    let dir = tempfile::tempdir().unwrap();
    let store = crate::harness::open_store(dir.path().join("store")).await;
    // A /26 (61 addresses for Services) and 50 Services: choosing at random
    // from their own watch caches, the two would collide without records.
    let a = server_on(&store, "10.99.0.0/26").await;
    let b = server_on(&store, "10.99.0.0/26").await;
    let creates = (0..50).map(|i| {
        let server = if i % 2 == 0 { &a } else { &b };
        let spec = json!({"type": "NodePort", "ports": [{"port": 80}]});
        async move {
            let body = service(&format!("svc-{i}"), spec);
            server.post(SERVICES, body).await
        }
    });
    let results = futures::future::join_all(creates).await;
    let mut ips = BTreeSet::new();
    let mut ports = BTreeSet::new();
    for (code, body) in &results {
        assert_eq!(*code, StatusCode::CREATED, "{body}");
        assert!(
            ips.insert(cluster_ip(body)),
            "{body}: address handed out twice"
        );
        let port = body["spec"]["ports"][0]["nodePort"].as_u64().unwrap();
        assert!(ports.insert(port), "{body}: node port handed out twice");
    }
    // One record per address a stored Service holds.
    let records = store
        .list("/skiff/ranges/serviceips/", None, 0)
        .await
        .unwrap();
    let (_, list) = a.get("/api/v1/services").await;
    let held = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["spec"]["clusterIP"]
                .as_str()
                .is_some_and(|ip| ip != "None")
        })
        .count();
    assert!(held >= 50, "{list}");
    assert_eq!(records.items.len(), held);
    // A deleted Service's address is free at once, through either server.
    let freed = cluster_ip(&results[0].1);
    b.delete_ok(&format!("{SERVICES}/svc-0")).await;
    assert!(store.get(&ip_record(freed)).await.unwrap().is_none());
    let again = service("again", json!({"clusterIP": freed.to_string()}));
    a.created(SERVICES, again).await;
    // An address the other server handed out is refused by this one.
    let taken = cluster_ip(&results[1].1);
    let thief = service("thief", json!({"clusterIP": taken.to_string()}));
    a.post(SERVICES, thief).await.expect_failure(422, "Invalid");
    a.server.shutdown();
    b.server.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_releases_leaked_records_and_records_what_services_hold() {
    let dir = tempfile::tempdir().unwrap();
    let open = || crate::harness::open_store(dir.path().join("store"));
    let store = open().await;
    let first = server_on(&store, "10.99.0.0/28").await;
    let body = first.created(SERVICES, service("kept", json!({}))).await;
    let kept = cluster_ip(&body);
    // Stopped, but its store stays open for the writes below.
    first.server.shutdown();
    drop(first);
    // A server that died between its record and its Service left one
    // behind, long ago; another record went missing.
    // (Two addresses of the range that `kept` did not get: its pick is
    // random.)
    let mut free = (2..15)
        .map(|last| Ipv4Addr::new(10, 99, 0, last))
        .filter(|ip| *ip != kept);
    let (leaked_ip, fresh_ip) = (free.next().unwrap(), free.next().unwrap());
    let leaked = ip_record(leaked_ip);
    let old = json!({"uid": "gone", "service": "default/gone", "allocatedAt": 0});
    store.create(&leaked, old.to_string().into()).await.unwrap();
    store.delete(&ip_record(kept), None).await.unwrap();
    // A record written just now (a create on its way) is left alone.
    let fresh = ip_record(fresh_ip);
    let now = json!({"uid": "new", "service": "default/new",
        "allocatedAt": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()});
    store.create(&fresh, now.to_string().into()).await.unwrap();
    store.close().await.unwrap();
    drop(store);

    let store = open().await;
    let second = ApiServer::new(store.clone(), config("10.99.0.0/28"))
        .await
        .unwrap();
    let (ten_seconds, every) = (Duration::from_secs(10), Duration::from_millis(50));
    eventually(ten_seconds, every, || async {
        let leaked_gone = store.get(&leaked).await.unwrap().is_none();
        let kept_back = store.get(&ip_record(kept)).await.unwrap().is_some();
        if leaked_gone && kept_back {
            Ok(())
        } else {
            Err(format!(
                "not repaired: leaked gone {leaked_gone}, kept recorded {kept_back}"
            ))
        }
    })
    .await;
    assert!(store.get(&fresh).await.unwrap().is_some());
    second.shutdown();
}
