//! The rendered rules in a real kernel: applied with `nft -f`, listed back,
//! and exercised with real TCP traffic from busybox `wget` to busybox
//! `httpd` servers.

use std::net::Ipv4Addr;

use skiff_proxy::render;
use skiff_proxy::{Applied, Applier, Endpoint, Nft, NodeFacts, PortPlan, Protocol, Target};

use super::netns::{netns, network};

fn ep(ip: &str) -> Endpoint {
    Endpoint {
        ip: ip.parse().unwrap(),
        port: 8080,
    }
}

fn port(service: &str, cluster_ip: &str, target: Target) -> PortPlan {
    PortPlan {
        service: service.into(),
        port_name: "http".into(),
        protocol: Protocol::Tcp,
        port: 80,
        cluster_ip: Some(cluster_ip.parse().unwrap()),
        node_port: None,
        external_ips: Vec::new(),
        external: target.clone(),
        internal: target,
        external_local: false,
        affinity_seconds: None,
    }
}

fn facts(node_ip: &str, pod_cidr: &str) -> NodeFacts {
    NodeFacts {
        addresses: [node_ip.parse::<Ipv4Addr>().unwrap()].into(),
        pod_cidrs: [pod_cidr.to_string()].into(),
    }
}

/// Chain names and the elements of `map` as `nft list table` shows them.
fn listed(nft: &Nft, table: &str) -> String {
    nft.list_table(skiff_proxy::Family::Ip, table)
        .unwrap()
        .expect("table exists")
}

fn listed_chains(listing: &str) -> Vec<String> {
    let mut names: Vec<String> = listing
        .lines()
        .filter_map(|l| l.trim().strip_prefix("chain "))
        .map(|l| l.trim_end_matches(" {").to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn ruleset_round_trips_and_updates_incrementally() {
    let ns = netns();
    let nft = ns.nft();
    let node = facts("192.0.2.2", "10.42.0.0/24");
    let mut web = port(
        "ns/web",
        "10.43.0.20",
        Target::Endpoints(vec![ep("10.42.0.5"), ep("10.42.0.6")]),
    );
    web.node_port = Some(30080);
    let empty = port("ns/empty", "10.43.0.21", Target::Reject);
    let first = render::render("skp", &[web.clone(), empty.clone()], &node);
    let mut applier = Applier::new(nft.clone(), skiff_proxy::Family::Ip, "skp");
    assert_eq!(applier.apply(first.clone()).unwrap(), Applied::Full);
    let text = listed(&nft, "skp");
    assert_eq!(
        listed_chains(&text),
        first.chains.keys().cloned().collect::<Vec<_>>()
    );
    assert!(text.contains("10.43.0.20 . tcp . 80 : goto svc-ns/web/tcp/http"));
    // The loopback guard as the proxy looks for it before it turns
    // route_localnet back off.
    assert!(text.contains(render::LOOPBACK_GUARD_LISTED), "{text}");
    assert!(text.contains("10.43.0.21 . tcp . 80 : goto reject-chain"));
    assert!(text.contains("tcp . 30080 : goto ext-ns/web/tcp/http"));
    assert!(text.contains("dnat to 10.42.0.6:8080"));
    assert!(skiff_proxy::intact(&applier).unwrap());
    assert_eq!(applier.apply(first.clone()).unwrap(), Applied::Unchanged);

    // One endpoint leaves, the empty Service gets one: applied as a diff.
    web.internal = Target::Endpoints(vec![ep("10.42.0.5")]);
    web.external = web.internal.clone();
    let mut served = empty.clone();
    served.internal = Target::Endpoints(vec![ep("10.42.0.7")]);
    let second = render::render("skp", &[web, served], &node);
    assert_eq!(applier.apply(second.clone()).unwrap(), Applied::Incremental);
    let text = listed(&nft, "skp");
    assert_eq!(
        listed_chains(&text),
        second.chains.keys().cloned().collect::<Vec<_>>()
    );
    assert!(!text.contains("10.42.0.6"), "{text}");
    assert!(!text.contains("reject-chain }"), "{text}");
    assert!(text.contains("10.43.0.21 . tcp . 80 : goto svc-ns/empty/tcp/http"));
    assert!(text.contains("numgen random mod 1 vmap"));

    // Someone flushes the table: noticed, and rebuilt by a full apply.
    ns.exec_ok(&["nft", "flush", "table", "ip", "skp"]);
    assert!(!skiff_proxy::intact(&applier).unwrap());
    applier.invalidate();
    assert_eq!(applier.apply(second.clone()).unwrap(), Applied::Full);
    assert!(skiff_proxy::intact(&applier).unwrap());
    // Or deletes it.
    nft.delete_table(skiff_proxy::Family::Ip, "skp").unwrap();
    assert!(!skiff_proxy::intact(&applier).unwrap());
    assert_eq!(
        nft.list_table(skiff_proxy::Family::Ip, "skp").unwrap(),
        None
    );
}

#[test]
fn traffic_is_balanced_refused_and_sticky_as_planned() {
    let ns = netns();
    network(&ns, &["10.99.0.1", "10.99.0.2", "10.99.0.3"]);
    ns.serve("10.99.0.2", "two");
    ns.serve("10.99.0.3", "three");
    let both = Target::Endpoints(vec![ep("10.99.0.2"), ep("10.99.0.3")]);
    let mut web = port("ns/web", "10.43.0.20", both.clone());
    web.node_port = Some(30080);
    let empty = port("ns/empty", "10.43.0.21", Target::Reject);
    let mut sticky = port("ns/sticky", "10.43.0.22", both);
    sticky.affinity_seconds = Some(600);
    let mut external = port(
        "ns/ext",
        "10.43.0.23",
        Target::Endpoints(vec![ep("10.99.0.3")]),
    );
    external.external_ips = vec!["198.51.100.7".parse().unwrap()];
    let node = facts("10.99.0.1", "10.99.0.0/24");
    let ruleset = render::render("skp", &[web, empty, sticky, external], &node);
    let mut applier = Applier::new(ns.nft(), skiff_proxy::Family::Ip, "skp");
    applier.apply(ruleset).unwrap();

    // The cluster IP reaches both endpoints.
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..40 {
        seen.insert(ns.fetch("10.43.0.20").expect("through the cluster IP"));
        if seen.len() == 2 {
            break;
        }
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), ["three", "two"]);
    // So does the node port on the node's address, and on the loopback
    // address for this host's own clients.
    for address in ["10.99.0.1:30080", "127.0.0.1:30080"] {
        let answer = ns.fetch(address);
        assert!(
            ["two", "three"].contains(&answer.as_deref().unwrap_or_default()),
            "node port on {address}: {answer:?}"
        );
    }
    // And the external IP.
    assert_eq!(ns.fetch("198.51.100.7").unwrap(), "three");
    // A Service without endpoints is refused at once, not timed out.
    let refused = ns.fetch("10.43.0.21").unwrap_err();
    assert!(refused.contains("refused"), "{refused}");
    // ClientIP affinity: one client keeps its endpoint.
    let first = ns.fetch("10.43.0.22").unwrap();
    for _ in 0..10 {
        assert_eq!(ns.fetch("10.43.0.22").unwrap(), first);
    }
}

/// With node ports on the loopback address, `route_localnet` lets packets
/// for 127.0.0.0/8 in from other interfaces: another host on the link could
/// then reach whatever listens on this host's loopback (CVE-2020-8558).
/// The rules drop that, and still serve the host itself and the node port
/// on the node's own address.
#[test]
fn loopback_addresses_answer_this_host_only() {
    let node = netns();
    let attacker = netns();
    node.link_peer("vn", &attacker, "va");
    node.address("vn", "10.98.0.1/24");
    attacker.address("va", "10.98.0.2/24");
    // The proxy's sysctl on the node; the attacker routes loopback
    // addresses to the node.
    for ns in [&node, &attacker] {
        ns.exec_ok(&["sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1"]);
    }
    attacker.exec_ok(&["sysctl", "-qw", "net.ipv4.conf.va.route_localnet=1"]);
    // Without its own loopback addresses, 127.0.0.1 is not its own.
    attacker.exec_ok(&["ip", "addr", "flush", "dev", "lo"]);
    attacker.exec_ok(&["ip", "route", "add", "127.0.0.1/32", "via", "10.98.0.1"]);
    node.serve("127.0.0.1", "loopback only");
    node.serve("10.98.0.1", "web");
    // Without the rules the attack works: the test can see it.
    assert_eq!(
        attacker.fetch("127.0.0.1:8080").as_deref(),
        Ok("loopback only")
    );

    let mut web = port(
        "ns/web",
        "10.43.0.20",
        Target::Endpoints(vec![ep("10.98.0.1")]),
    );
    web.node_port = Some(30080);
    let ruleset = render::render("skp", &[web], &facts("10.98.0.1", "10.42.0.0/24"));
    Applier::new(node.nft(), skiff_proxy::Family::Ip, "skp")
        .apply(ruleset)
        .unwrap();

    let refused = attacker.fetch("127.0.0.1:8080");
    assert!(
        refused.is_err(),
        "another host reached the loopback: {refused:?}"
    );
    assert_eq!(node.fetch("127.0.0.1:8080").as_deref(), Ok("loopback only"));
    assert_eq!(node.fetch("127.0.0.1:30080").as_deref(), Ok("web"));
    assert_eq!(attacker.fetch("10.98.0.1:30080").as_deref(), Ok("web"));
}
