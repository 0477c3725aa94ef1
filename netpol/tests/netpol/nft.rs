//! The rendered table in a real kernel: pods on one bridge (bridged
//! traffic, seen through br_netfilter) and a routed neighbour standing for
//! another node, with real TCP from busybox `wget` to busybox `httpd`.

use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde_json::json;
use skiff_common::labels::from_pairs;
use skiff_common::nft::{Applied, Applier};
use skiff_netpol::facts::NamedPort;
use skiff_netpol::{PodFacts, Protocol, render};

use super::netns::{Node, REMOTE};

const WEB: &str = "10.77.0.10";
const CLIENT: &str = "10.77.0.11";
const STRANGER: &str = "10.77.0.12";

fn pod(name: &str, ip: &str, labels: &[(&str, &str)]) -> PodFacts {
    PodFacts {
        namespace: "app".into(),
        name: name.into(),
        ip: ip.parse().unwrap(),
        labels: from_pairs(labels),
        node: "n1".into(),
        ports: Vec::new(),
    }
}

fn policy(name: &str, spec: serde_json::Value) -> NetworkPolicy {
    serde_json::from_value(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"namespace": "app", "name": name}, "spec": spec,
    }))
    .unwrap()
}

fn pods() -> Vec<PodFacts> {
    let mut web = pod("web", WEB, &[("app", "web")]);
    web.ports = vec![NamedPort::new("http", Protocol::Tcp, 8080)];
    vec![
        web,
        pod("client", CLIENT, &[("role", "client")]),
        pod("stranger", STRANGER, &[]),
    ]
}

fn ruleset(policies: &[NetworkPolicy]) -> skiff_common::nft::Ruleset {
    let refs: Vec<&NetworkPolicy> = policies.iter().collect();
    let plan = skiff_netpol::plan("n1", &refs, &pods(), &Default::default());
    render::render("npt", &plan)
}

#[test]
fn policies_admit_and_drop_real_traffic_on_the_bridge_and_routed() {
    let mut node = Node::new();
    let web = node.pod(WEB);
    let client = node.pod(CLIENT);
    let stranger = node.pod(STRANGER);
    node.serve(web, WEB, "web");
    node.serve(client, CLIENT, "client");
    node.serve_on_node(super::netns::GATEWAY, "node");
    let to_web = format!("{WEB}:8080");
    let to_client = format!("{CLIENT}:8080");
    // Open before any policy: bridged and routed.
    assert_eq!(node.pod_ns(client).fetch(&to_web).unwrap(), "web");
    assert_eq!(node.remote.fetch(&to_web).unwrap(), "web");

    let mut applier = Applier::new(node.nft(), render::FAMILY, "npt");
    let deny = policy(
        "deny",
        json!({"podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Ingress"]}),
    );
    assert_eq!(
        applier.apply(ruleset(std::slice::from_ref(&deny))).unwrap(),
        Applied::Full
    );
    assert!(skiff_netpol::intact(&applier).unwrap());
    node.pod_ns(client)
        .fetch(&to_web)
        .expect_err("default deny: bridged client dropped");
    node.remote
        .fetch(&to_web)
        .expect_err("default deny: routed client dropped");
    // The node itself still reaches the pod (kubelet probes), and the
    // unselected client is still open.
    assert_eq!(node.node.fetch(&to_web).unwrap(), "web");
    assert_eq!(node.pod_ns(stranger).fetch(&to_client).unwrap(), "client");
    // Replies to the isolated pod's own connections come back.
    assert_eq!(node.pod_ns(web).fetch(&to_client).unwrap(), "client");

    // Allow role=client on the named port: the client in, the stranger not.
    let allow = policy(
        "allow-client",
        json!({
            "podSelector": {"matchLabels": {"app": "web"}},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "client"}}}],
                         "ports": [{"port": "http"}]}]
        }),
    );
    let both = [deny.clone(), allow];
    assert_eq!(applier.apply(ruleset(&both)).unwrap(), Applied::Incremental);
    assert_eq!(node.pod_ns(client).fetch(&to_web).unwrap(), "web");
    node.pod_ns(stranger)
        .fetch(&to_web)
        .expect_err("unlabelled pod dropped");
    node.remote
        .fetch(&to_web)
        .expect_err("routed neighbour dropped");

    // An ipBlock admits the routed neighbour, less an exception.
    let block = |except: &[&str]| {
        policy(
            "from-remote",
            json!({
                "podSelector": {"matchLabels": {"app": "web"}},
                "ingress": [{"from": [{"ipBlock": {"cidr": "10.77.1.0/24", "except": except}}],
                             "ports": [{"port": 8080, "endPort": 8090}]}]
            }),
        )
    };
    applier.apply(ruleset(&[deny.clone(), block(&[])])).unwrap();
    assert_eq!(node.remote.fetch(&to_web).unwrap(), "web");
    applier
        .apply(ruleset(&[deny.clone(), block(&[&format!("{REMOTE}/32")])]))
        .unwrap();
    node.remote
        .fetch(&to_web)
        .expect_err("excepted address dropped");

    // Egress: the client may reach nothing but UDP 53; its own server still
    // answers (replies), and the web pod is out of reach for it.
    let egress = policy(
        "client-egress",
        json!({
            "podSelector": {"matchLabels": {"role": "client"}},
            "policyTypes": ["Egress"],
            "egress": [{"ports": [{"protocol": "UDP", "port": 53}]}]
        }),
    );
    applier.apply(ruleset(&[egress])).unwrap();
    node.pod_ns(client)
        .fetch(&to_web)
        .expect_err("egress denied");
    let to_node = format!("{}:8080", super::netns::GATEWAY);
    node.pod_ns(client)
        .fetch(&to_node)
        .expect_err("egress to the node denied too");
    assert_eq!(node.pod_ns(stranger).fetch(&to_node).unwrap(), "node");
    assert_eq!(node.pod_ns(stranger).fetch(&to_client).unwrap(), "client");

    // No policies: all open again.
    applier.apply(ruleset(&[])).unwrap();
    assert_eq!(node.pod_ns(client).fetch(&to_web).unwrap(), "web");
    assert_eq!(node.remote.fetch(&to_web).unwrap(), "web");

    // A flushed table is noticed.
    node.node.exec_ok(&["nft", "flush", "table", "inet", "npt"]);
    assert!(!skiff_netpol::intact(&applier).unwrap());
}
