//! The plan as one nftables table (family `inet`, matching IPv4):
//!
//! - base chains on the `forward` hook (pod-to-pod traffic, routed or — with
//!   `br_netfilter` — bridged on one node) and the `input` hook (pods
//!   reaching this host), both accepting replies first
//!   (`ct state established,related`);
//! - `ingress-pods` maps an isolated pod's address to its ingress chain,
//!   `egress-pods` to its egress chain (a verdict map `jump`, so a packet
//!   between two pods of this node passes the target's chain and then the
//!   source's);
//! - a pod's chain `return`s on the first allow rule that matches and drops
//!   at its end;
//! - this host's own traffic to its pods (the kubelet's probes) is let in,
//!   as upstream's implementations do, by construction: it leaves through
//!   the `output` hook, which the table leaves alone;
//! - peer sets (`peers-<ns>/<policy>/<in|eg><i>`, intervals of addresses)
//!   and egress named-port sets (`ports-…`, `address . protocol . port`)
//!   are shared by every pod chain that refers to them, so pods coming and
//!   going change set elements, not rules.

use skiff_common::nft::{Chain, Family, Ruleset, Set};

use crate::plan::{Allow, Plan, PortsMatch, object_name};

/// Chain and set names every ruleset has.
pub mod names {
    /// forward hook.
    pub const FORWARD: &str = "forward";
    /// input hook.
    pub const INPUT: &str = "input";
    /// Isolated pods' addresses to their ingress chains.
    pub const INGRESS_PODS: &str = "ingress-pods";
    /// Isolated pods' addresses to their egress chains.
    pub const EGRESS_PODS: &str = "egress-pods";
}

/// The table's family.
pub const FAMILY: Family = Family::Inet;

/// The ingress chain of pod `key` (`namespace/name`).
pub fn ingress_chain(key: &str) -> String {
    object_name("in", &[key])
}

/// The egress chain of pod `key`.
pub fn egress_chain(key: &str) -> String {
    object_name("eg", &[key])
}

/// The rule text of one allow rule (`peer` is `saddr` or `daddr`).
fn allow_rule(allow: &Allow, peer: &str) -> String {
    let mut parts = Vec::new();
    if let Some(set) = &allow.peers {
        parts.push(format!("ip {peer} @{set}"));
    }
    match &allow.ports {
        PortsMatch::Any => {}
        PortsMatch::Range(range) => {
            parts.push(format!("meta l4proto {}", range.protocol.nft()));
            match range.ports {
                None => {}
                Some((f, l)) if f == l => parts.push(format!("th dport {f}")),
                Some((f, l)) => parts.push(format!("th dport {f}-{l}")),
            }
        }
        PortsMatch::Endpoints(set) => {
            parts.push(format!("ip daddr . meta l4proto . th dport @{set}"));
        }
    }
    parts.push("return".into());
    parts.join(" ")
}

/// The ruleset for `plan` in table `table`.
pub fn render(table: &str, plan: &Plan) -> Ruleset {
    use names::*;
    let mut r = Ruleset::new(FAMILY, table);
    let mut forward = Chain::base("type filter hook forward priority filter; policy accept;");
    forward.rules = vec![
        "ct state established,related accept".into(),
        format!("ip daddr vmap @{INGRESS_PODS}"),
        format!("ip saddr vmap @{EGRESS_PODS}"),
    ];
    let mut input = Chain::base("type filter hook input priority filter; policy accept;");
    input.rules = vec![
        "ct state established,related accept".into(),
        format!("ip saddr vmap @{EGRESS_PODS}"),
    ];
    r.chains.insert(FORWARD.into(), forward);
    r.chains.insert(INPUT.into(), input);
    let mut ingress_pods = Set::map("type ipv4_addr : verdict;");
    let mut egress_pods = Set::map("type ipv4_addr : verdict;");

    for (key, pod) in &plan.pods {
        // A governed direction gets a chain of its allows, then a drop; the
        // pod's address jumps to it. The peer is the source of ingress
        // traffic and the destination of egress traffic.
        let directions = [
            (&pod.ingress, ingress_chain(key), "saddr", &mut ingress_pods),
            (&pod.egress, egress_chain(key), "daddr", &mut egress_pods),
        ];
        for (allows, name, peer, pods) in directions {
            let Some(allows) = allows else { continue };
            let mut rules: Vec<String> = allows.iter().map(|a| allow_rule(a, peer)).collect();
            rules.push("drop".into());
            pods.elements.insert(format!("{} : jump {name}", pod.ip));
            r.chains.insert(name, Chain::regular(rules));
        }
    }
    r.sets.insert(INGRESS_PODS.into(), ingress_pods);
    r.sets.insert(EGRESS_PODS.into(), egress_pods);
    for (name, ranges) in &plan.peer_sets {
        let mut set = Set::new("type ipv4_addr; flags interval;");
        set.elements = ranges.nft_elements().into_iter().collect();
        r.sets.insert(name.clone(), set);
    }
    for (name, endpoints) in &plan.endpoint_sets {
        let mut set = Set::new("type ipv4_addr . inet_proto . inet_service;");
        set.elements = endpoints
            .iter()
            .map(|(ip, proto, port)| format!("{ip} . {} . {port}", proto.nft()))
            .collect();
        r.sets.insert(name.clone(), set);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::PodFacts;
    use crate::plan::plan;
    use crate::plan::tests::{pod, policy};
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    use serde_json::json;

    /// A set's elements, in order, to compare with the expected list.
    fn elements<'a>(r: &'a Ruleset, set: &str) -> Vec<&'a str> {
        r.sets[set].elements.iter().map(String::as_str).collect()
    }

    /// The table `np` for node `n1`: every case renders as that node.
    fn render_n1(policies: &[&NetworkPolicy], pods: &[PodFacts]) -> Ruleset {
        render("np", &plan("n1", policies, pods, &Default::default()))
    }

    #[test]
    fn isolated_pods_jump_to_chains_that_return_on_an_allow_and_drop_otherwise() {
        let pods = vec![
            pod("app", "web", "10.42.0.10", "n1", &[("app", "web")]),
            pod("app", "client", "10.42.0.11", "n1", &[("role", "client")]),
            pod("app", "far", "10.42.1.11", "n2", &[("role", "client")]),
        ];
        let policies = [
            policy(
                "app",
                "allow",
                json!({
                    "podSelector": {"matchLabels": {"app": "web"}},
                    "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "client"}}},
                                          {"ipBlock": {"cidr": "192.0.2.0/24", "except": ["192.0.2.0/25"]}}],
                                 "ports": [{"port": 80}, {"port": 9000, "endPort": 9009, "protocol": "UDP"}]}]
                }),
            ),
            policy(
                "app",
                "egress",
                json!({
                    "podSelector": {"matchLabels": {"role": "client"}},
                    "policyTypes": ["Egress"],
                    "egress": [{"to": [{"podSelector": {"matchLabels": {"app": "web"}}}]}]
                }),
            ),
        ];
        let refs: Vec<&NetworkPolicy> = policies.iter().collect();
        let r = render_n1(&refs, &pods);
        assert_eq!(r.family, Family::Inet);
        assert_eq!(
            elements(&r, names::INGRESS_PODS),
            ["10.42.0.10 : jump in-app/web"]
        );
        assert_eq!(
            elements(&r, names::EGRESS_PODS),
            ["10.42.0.11 : jump eg-app/client"]
        );
        assert_eq!(
            r.chains["in-app/web"].rules,
            [
                "ip saddr @peers-app/allow/in0 meta l4proto tcp th dport 80 return",
                "ip saddr @peers-app/allow/in0 meta l4proto udp th dport 9000-9009 return",
                "drop",
            ]
        );
        // Peers on every node, by address; the block less its exception.
        assert_eq!(
            elements(&r, "peers-app/allow/in0"),
            ["10.42.0.11", "10.42.1.11", "192.0.2.128/25"]
        );
        assert_eq!(
            r.chains["eg-app/client"].rules,
            ["ip daddr @peers-app/egress/eg0 return", "drop"]
        );
        assert_eq!(
            r.chains[names::FORWARD].rules,
            [
                "ct state established,related accept",
                "ip daddr vmap @ingress-pods",
                "ip saddr vmap @egress-pods",
            ]
        );
        let script = skiff_common::nft::full_script(&r);
        assert!(
            script.starts_with("add table inet np\ndelete table inet np\n"),
            "{script}"
        );
    }

    #[test]
    fn a_pod_coming_changes_set_elements_not_rules() {
        let policies = [policy(
            "app",
            "deny",
            json!({
                "podSelector": {},
                "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "client"}}}]}]
            }),
        )];
        let refs: Vec<&NetworkPolicy> = policies.iter().collect();
        let client = &[("role", "client")];
        let mut pods = vec![pod("app", "web", "10.42.0.10", "n2", &[])];
        let before = render_n1(&refs, &pods);
        pods.push(pod("app", "client", "10.42.0.11", "n2", client));
        let after = render_n1(&refs, &pods);
        // Neither pod is on n1: the table has no pod chains at all.
        assert_eq!(before, after);
        pods.push(pod("app", "local", "10.42.0.12", "n1", &[]));
        let first = render_n1(&refs, &pods);
        pods.push(pod("app", "client-2", "10.42.1.3", "n3", client));
        let second = render_n1(&refs, &pods);
        let diff = skiff_common::nft::diff_script(&first, &second).unwrap();
        assert_eq!(
            diff.lines().collect::<Vec<_>>(),
            ["add element inet np peers-app/deny/in0 { 10.42.1.3 }"]
        );
    }
}
