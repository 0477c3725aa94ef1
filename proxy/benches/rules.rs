//! Time from a Service/endpoint change to working rules, with 1,000
//! Services and 5,000 endpoints, in a network namespace the bench creates:
//! plan + render from the API objects, then `nft -f` (the whole table, and
//! the difference after one change). Needs root, nft and ip.
//!
//! `cargo bench -p skiff-proxy --bench rules [-- SERVICES ENDPOINTS_PER_SERVICE ROUNDS]`

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;
use skiff_proxy::render::{self, Ruleset};
use skiff_proxy::{Applied, Applier, Nft, NodeFacts, plan};

const TABLE: &str = "skiff-bench";

fn service(i: usize) -> Service {
    serde_json::from_value(json!({
        "metadata": {"namespace": format!("ns{}", i % 10), "name": format!("svc-{i}")},
        "spec": {
            "type": if i.is_multiple_of(10) { "NodePort" } else { "ClusterIP" },
            "clusterIP": format!("10.43.{}.{}", i / 250, 1 + i % 250),
            "ports": [{"name": "http", "port": 80, "protocol": "TCP",
                "nodePort": if i.is_multiple_of(10) { json!(30000 + i) } else { json!(null) }}]
        }
    }))
    .expect("service")
}

/// `ready` endpoints of service `i`, numbered from `first`.
fn slice(i: usize, first: usize, count: usize) -> EndpointSlice {
    let endpoints: Vec<_> = (first..first + count)
        .map(|e| {
            json!({"addresses": [format!("10.42.{}.{}", e / 250, 1 + e % 250)],
                "nodeName": "bench-node",
                "conditions": {"ready": true, "serving": true, "terminating": false}})
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"namespace": format!("ns{}", i % 10), "name": format!("svc-{i}-x"),
            "labels": {"kubernetes.io/service-name": format!("svc-{i}")}},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]
    }))
    .expect("slice")
}

fn ruleset(services: &[Service], slices: &[EndpointSlice], node: &NodeFacts) -> Ruleset {
    let plans = plan::plan("bench-node", services, slices);
    render::render(TABLE, &plans, node)
}

/// Renders the whole state and applies it, timed together as a sync does
/// them, and checks nft was asked the `expected` way (whole table or diff).
fn timed_apply(
    applier: &mut Applier,
    services: &[Service],
    slices: &[EndpointSlice],
    node: &NodeFacts,
    expected: Applied,
) -> Duration {
    let t = Instant::now();
    let how = applier
        .apply(ruleset(services, slices, node))
        .unwrap_or_else(|e| panic!("{expected:?} apply: {e}"));
    let elapsed = t.elapsed();
    assert_eq!(how, expected);
    elapsed
}

struct Netns(String);

impl Netns {
    fn new() -> Self {
        let name = format!("skp-bench-{}", std::process::id());
        let ok = std::process::Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "ip netns add {name} (root needed)");
        Self(name)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.0])
            .status();
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Median and worst of `samples` in ms.
fn summary(samples: &mut [Duration]) -> String {
    samples.sort();
    format!(
        "median {:.1} ms, max {:.1} ms",
        ms(samples[samples.len() / 2]),
        ms(samples[samples.len() - 1])
    )
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n_services = args.first().copied().unwrap_or(1000);
    let per_service = args.get(1).copied().unwrap_or(5);
    let rounds = args.get(2).copied().unwrap_or(10);
    let ns = Netns::new();
    let nft = Nft::in_netns(ns.0.clone());
    let node = NodeFacts {
        addresses: ["192.0.2.2".parse().expect("ip")].into(),
        pod_cidrs: ["10.42.0.0/16".to_string()].into(),
    };
    let services: Vec<Service> = (0..n_services).map(service).collect();
    let mut slices: Vec<EndpointSlice> = (0..n_services)
        .map(|i| slice(i, i * per_service, per_service))
        .collect();
    let endpoints = n_services * per_service;

    // Plan + render alone.
    let mut render_times = Vec::new();
    let mut rules = None;
    for _ in 0..rounds {
        let t = Instant::now();
        rules = Some(ruleset(&services, &slices, &node));
        render_times.push(t.elapsed());
    }
    let rules = rules.expect("rendered");
    let script = render::full_script(&rules);
    println!(
        "{n_services} services, {endpoints} endpoints: {} chains, {} sets/maps, full script {} KiB",
        rules.chains.len(),
        rules.sets.len(),
        script.len() / 1024
    );
    println!(
        "plan + render:                {}",
        summary(&mut render_times)
    );

    // Full replacement of the table (first sync, restart, flushed table).
    let mut full_times = Vec::new();
    for _ in 0..rounds {
        let mut applier = Applier::new(nft.clone(), skiff_proxy::Family::Ip, TABLE);
        full_times.push(timed_apply(
            &mut applier,
            &services,
            &slices,
            &node,
            Applied::Full,
        ));
    }
    println!("full: render + nft -f:        {}", summary(&mut full_times));

    // One endpoint of one Service replaced (a pod rolled), as a diff.
    let mut applier = Applier::new(nft.clone(), skiff_proxy::Family::Ip, TABLE);
    applier
        .apply(ruleset(&services, &slices, &node))
        .expect("initial apply");
    let mut incremental_times = Vec::new();
    let mut apply_times = Vec::new();
    for round in 0..rounds {
        let i = (round * 37) % n_services;
        let first = endpoints + 100 * round;
        slices[i] = slice(i, first, per_service);
        let t = Instant::now();
        let new = ruleset(&services, &slices, &node);
        let applying = Instant::now();
        let how = applier.apply(new).expect("incremental apply");
        incremental_times.push(t.elapsed());
        apply_times.push(applying.elapsed());
        assert_eq!(how, Applied::Incremental);
    }
    println!(
        "endpoint change: render + diff + nft -f: {}",
        summary(&mut incremental_times)
    );
    println!(
        "  of which diff + nft -f:                {}",
        summary(&mut apply_times)
    );

    // One new Service with its endpoints.
    let mut services = services;
    let mut add_times = Vec::new();
    for round in 0..rounds {
        let i = n_services + round;
        services.push(service(i));
        slices.push(slice(i, 60_000 + round * per_service, per_service));
        add_times.push(timed_apply(
            &mut applier,
            &services,
            &slices,
            &node,
            Applied::Incremental,
        ));
    }
    println!(
        "new service: render + diff + nft -f:     {}",
        summary(&mut add_times)
    );
    // What nft itself costs per transaction on a table this size (it reads
    // the kernel's ruleset before applying anything).
    let mut noop_times = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        nft.apply(&format!("add table ip {TABLE}\n"))
            .expect("no-op apply");
        noop_times.push(t.elapsed());
    }
    println!(
        "no-op nft -f on this table:              {}",
        summary(&mut noop_times)
    );
    let listed = nft
        .list_table(skiff_proxy::Family::Ip, TABLE)
        .expect("nft list")
        .expect("table");
    assert!(listed.contains(&format!(
        "10.43.{}.{} . tcp . 80",
        (n_services + rounds - 1) / 250,
        1 + (n_services + rounds - 1) % 250
    )));
}
