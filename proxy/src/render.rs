//! The nftables ruleset for a plan, as data (`skiff_common::nft::Ruleset`:
//! named chains holding rules and named sets/maps holding elements) in one
//! `ip` table; `full_script`/`diff_script` (re-exported from there) turn it
//! into nft input.
//!
//! Traffic path: the nat hooks (prerouting for pods and other hosts, output
//! for this host) jump to `services`, which looks the destination up in
//! `service-ips` (cluster and external IPs) and, for this node's addresses,
//! in `service-nodeports`; each hit goes to a per-port chain that balances
//! with `numgen random` over per-endpoint chains that DNAT. Destinations
//! without usable endpoints are instead listed in `no-endpoint-*` maps read
//! by the filter hooks, which reject (or drop, for `Local` policies).

use std::collections::BTreeSet;

use skiff_common::nft::Family;
pub use skiff_common::nft::{Chain, Ruleset, Set, diff_script, full_script};

use crate::plan::{Endpoint, NodeFacts, PortPlan, Target};

/// Mark bit that asks the postrouting chain to masquerade.
pub const MASQUERADE_MARK: u32 = 0x4000;

/// The loopback addresses. Node ports answer there for this host's own
/// clients (`curl 127.0.0.1:30080`, as k3s's kube-proxy answers), which
/// needs the `route_localnet` sysctl; so the filter input hook drops what
/// arrives for them from another host (CVE-2020-8558).
pub const LOOPBACK: &str = "127.0.0.0/8";

/// How `nft list ruleset` shows the loopback guard's match on the source:
/// while any table holds it, `route_localnet` stays safe to leave on.
pub const LOOPBACK_GUARD_LISTED: &str = "ip saddr != 127.0.0.0/8";

/// Chains every ruleset has.
pub mod chains {
    /// nat prerouting hook.
    pub const NAT_PREROUTING: &str = "nat-prerouting";
    /// nat output hook.
    pub const NAT_OUTPUT: &str = "nat-output";
    /// nat postrouting hook.
    pub const NAT_POSTROUTING: &str = "nat-postrouting";
    /// filter input hook.
    pub const FILTER_INPUT: &str = "filter-input";
    /// filter forward hook.
    pub const FILTER_FORWARD: &str = "filter-forward";
    /// filter output hook.
    pub const FILTER_OUTPUT: &str = "filter-output";
    /// Destination lookup (cluster IPs, external IPs, node ports).
    pub const SERVICES: &str = "services";
    /// Rejects or drops new connections to Services that cannot be served.
    pub const ENDPOINTS_CHECK: &str = "endpoints-check";
    /// Sets the masquerade mark.
    pub const MARK_FOR_MASQUERADE: &str = "mark-for-masquerade";
    /// Masquerades marked packets.
    pub const MASQUERADING: &str = "masquerading";
    /// Refuses with an ICMP port unreachable or a TCP reset.
    pub const REJECT: &str = "reject-chain";
}

/// Sets and maps every ruleset has.
pub mod sets {
    /// `ip . proto . port : verdict` for cluster and external IPs.
    pub const SERVICE_IPS: &str = "service-ips";
    /// `proto . port : verdict` for node ports on `nodeport-ips`.
    pub const SERVICE_NODEPORTS: &str = "service-nodeports";
    /// `ip . proto . port : verdict` (reject or drop) for unserved IPs.
    pub const NO_ENDPOINT_SERVICES: &str = "no-endpoint-services";
    /// `proto . port : verdict` (reject or drop) for unserved node ports.
    pub const NO_ENDPOINT_NODEPORTS: &str = "no-endpoint-nodeports";
    /// The node's addresses node ports answer on.
    pub const NODEPORT_IPS: &str = "nodeport-ips";
    /// Every node's pod CIDR (traffic from elsewhere is masqueraded).
    pub const POD_CIDRS: &str = "pod-cidrs";
}

/// The chain balancing in-cluster traffic of a Service port.
pub fn service_chain(plan: &PortPlan) -> String {
    format!("svc-{}", plan.id())
}

/// The chain for traffic arriving on a node port or external IP.
pub fn external_chain(plan: &PortPlan) -> String {
    format!("ext-{}", plan.id())
}

/// The chain DNATing to one endpoint of a Service port.
pub fn endpoint_chain(plan: &PortPlan, endpoint: &Endpoint) -> String {
    format!("ep-{}__{}/{}", plan.id(), endpoint.ip, endpoint.port)
}

/// The affinity set of one endpoint of a Service port.
pub fn affinity_set(plan: &PortPlan, endpoint: &Endpoint) -> String {
    format!("aff-{}__{}/{}", plan.id(), endpoint.ip, endpoint.port)
}

fn base(hook: &str) -> Chain {
    Chain::base(hook)
}

fn chain(rules: Vec<String>) -> Chain {
    Chain::regular(rules)
}

fn map(declaration: &str) -> Set {
    Set::map(declaration)
}

fn set(declaration: &str) -> Set {
    Set::new(declaration)
}

/// The ruleset for `plans` on a node described by `node`.
pub fn render(table: &str, plans: &[PortPlan], node: &NodeFacts) -> Ruleset {
    use chains::*;
    use sets::*;
    let mut r = Ruleset::new(Family::Ip, table);
    // The nat hooks: traffic from pods and other hosts (prerouting) and
    // from this host (output) looks its destination up among the
    // Services; postrouting masquerades what was marked.
    let nat = [
        (NAT_PREROUTING, "prerouting priority dstnat", SERVICES),
        (NAT_OUTPUT, "output priority -100", SERVICES),
        (NAT_POSTROUTING, "postrouting priority srcnat", MASQUERADING),
    ];
    for (name, hook, target) in nat {
        let mut c = base(&format!("type nat hook {hook}; policy accept;"));
        c.rules = vec![format!("jump {target}")];
        if name == NAT_OUTPUT {
            c.rules.push(format!(
                "ip daddr {LOOPBACK} meta l4proto . th dport vmap @{SERVICE_NODEPORTS}"
            ));
        }
        r.chains.insert(name.into(), c);
    }
    // Every filter hook checks new connections for Services that cannot
    // be served.
    let filter = [
        (FILTER_INPUT, "input"),
        (FILTER_FORWARD, "forward"),
        (FILTER_OUTPUT, "output"),
    ];
    for (name, hook) in filter {
        let mut c = base(&format!(
            "type filter hook {hook} priority filter; policy accept;"
        ));
        c.rules = vec![format!("ct state new jump {ENDPOINTS_CHECK}")];
        r.chains.insert(name.into(), c);
    }
    if let Some(input) = r.chains.get_mut(FILTER_INPUT) {
        // Only this host may reach its loopback addresses (node ports
        // there are DNATed away before this hook).
        input.rules.insert(
            0,
            format!(
                "iifname != \"lo\" ip daddr {LOOPBACK} ip saddr != {LOOPBACK} \
                 ct state != {{ established, related }} ct status & dnat == 0 drop"
            ),
        );
    }
    if let Some(output) = r.chains.get_mut(FILTER_OUTPUT) {
        output.rules.push(format!(
            "ct state new ip daddr {LOOPBACK} meta l4proto . th dport vmap @{NO_ENDPOINT_NODEPORTS}"
        ));
    }
    r.chains.insert(
        SERVICES.into(),
        chain(vec![
            format!("ip daddr . meta l4proto . th dport vmap @{SERVICE_IPS}"),
            format!("ip daddr @{NODEPORT_IPS} meta l4proto . th dport vmap @{SERVICE_NODEPORTS}"),
        ]),
    );
    r.chains.insert(
        ENDPOINTS_CHECK.into(),
        chain(vec![
            format!("ip daddr . meta l4proto . th dport vmap @{NO_ENDPOINT_SERVICES}"),
            format!(
                "ip daddr @{NODEPORT_IPS} meta l4proto . th dport vmap @{NO_ENDPOINT_NODEPORTS}"
            ),
        ]),
    );
    r.chains.insert(
        MARK_FOR_MASQUERADE.into(),
        chain(vec![format!(
            "meta mark set meta mark | {MASQUERADE_MARK:#x}"
        )]),
    );
    r.chains.insert(
        MASQUERADING.into(),
        chain(vec![
            format!("meta mark & {MASQUERADE_MARK:#x} == 0 return"),
            format!("meta mark set meta mark ^ {MASQUERADE_MARK:#x}"),
            "masquerade fully-random".into(),
        ]),
    );
    r.chains.insert(
        REJECT.into(),
        chain(vec![
            "meta l4proto tcp reject with tcp reset".into(),
            "reject".into(),
        ]),
    );
    // Verdict maps keyed by address, protocol and port (cluster and
    // external IPs), or by protocol and port alone (node ports).
    let by_address = "type ipv4_addr . inet_proto . inet_service : verdict;";
    let by_port = "type inet_proto . inet_service : verdict;";
    let maps = [
        (SERVICE_IPS, by_address),
        (NO_ENDPOINT_SERVICES, by_address),
        (SERVICE_NODEPORTS, by_port),
        (NO_ENDPOINT_NODEPORTS, by_port),
    ];
    for (name, declaration) in maps {
        r.sets.insert(name.into(), map(declaration));
    }
    let mut node_ips = set("type ipv4_addr;");
    node_ips.elements = node.addresses.iter().map(|a| a.to_string()).collect();
    r.sets.insert(NODEPORT_IPS.into(), node_ips);
    let mut cidrs = set("type ipv4_addr; flags interval; auto-merge;");
    cidrs.elements = node.pod_cidrs.clone();
    r.sets.insert(POD_CIDRS.into(), cidrs);

    for plan in plans {
        render_port(&mut r, plan);
    }
    r
}

fn unserved_verdict(target: &Target) -> Option<String> {
    match target {
        Target::Endpoints(_) => None,
        Target::Reject => Some(format!("goto {}", chains::REJECT)),
        Target::Drop => Some("drop".into()),
    }
}

fn render_port(r: &mut Ruleset, plan: &PortPlan) {
    use sets::*;
    let proto = plan.protocol.nft();
    let mut add = |set: &str, element: String| {
        if let Some(s) = r.sets.get_mut(set) {
            s.elements.insert(element);
        }
    };
    if let Some(ip) = plan.cluster_ip {
        let key = format!("{ip} . {proto} . {}", plan.port);
        match unserved_verdict(&plan.internal) {
            None => add(SERVICE_IPS, format!("{key} : goto {}", service_chain(plan))),
            Some(v) => add(NO_ENDPOINT_SERVICES, format!("{key} : {v}")),
        }
    }
    for ip in &plan.external_ips {
        let key = format!("{ip} . {proto} . {}", plan.port);
        match unserved_verdict(&plan.external) {
            None => add(
                SERVICE_IPS,
                format!("{key} : goto {}", external_chain(plan)),
            ),
            Some(v) => add(NO_ENDPOINT_SERVICES, format!("{key} : {v}")),
        }
    }
    if let Some(node_port) = plan.node_port {
        let key = format!("{proto} . {node_port}");
        match unserved_verdict(&plan.external) {
            None => add(
                SERVICE_NODEPORTS,
                format!("{key} : goto {}", external_chain(plan)),
            ),
            Some(v) => add(NO_ENDPOINT_NODEPORTS, format!("{key} : {v}")),
        }
    }

    let mut endpoints: BTreeSet<Endpoint> = BTreeSet::new();
    if let Target::Endpoints(eps) = &plan.internal
        && plan.cluster_ip.is_some()
    {
        let mut rules = vec![format!(
            "ip saddr != @{POD_CIDRS} jump {}",
            chains::MARK_FOR_MASQUERADE
        )];
        rules.extend(balance(plan, eps));
        r.chains.insert(service_chain(plan), chain(rules));
        endpoints.extend(eps);
    }
    let exposed = plan.node_port.is_some() || !plan.external_ips.is_empty();
    if let Target::Endpoints(eps) = &plan.external
        && exposed
    {
        let mut rules = Vec::new();
        if plan.external_local {
            // Pods and this host reach the Service as in-cluster clients
            // would; only traffic from elsewhere keeps its source and stays
            // on this node's endpoints.
            if r.chains.contains_key(&service_chain(plan)) {
                rules.push(format!(
                    "ip saddr @{POD_CIDRS} goto {}",
                    service_chain(plan)
                ));
            }
            rules.push(format!(
                "fib saddr type local jump {}",
                chains::MARK_FOR_MASQUERADE
            ));
        } else {
            rules.push(format!("jump {}", chains::MARK_FOR_MASQUERADE));
        }
        rules.extend(balance(plan, eps));
        r.chains.insert(external_chain(plan), chain(rules));
        endpoints.extend(eps);
    }
    for endpoint in &endpoints {
        let mut rules = vec![format!(
            // Hairpin: a pod reaching itself must not see its own address
            // as the source, or its reply would never leave it.
            "ip saddr {} jump {}",
            endpoint.ip,
            chains::MARK_FOR_MASQUERADE
        )];
        if let Some(timeout) = plan.affinity_seconds {
            let name = affinity_set(plan, endpoint);
            rules.push(format!("update @{name} {{ ip saddr }}"));
            r.sets.insert(
                name,
                set(&format!(
                    "type ipv4_addr; flags dynamic,timeout; timeout {timeout}s;"
                )),
            );
        }
        rules.push(format!(
            "meta l4proto {proto} dnat to {}:{}",
            endpoint.ip, endpoint.port
        ));
        r.chains
            .insert(endpoint_chain(plan, endpoint), chain(rules));
    }
}

/// Affinity lookups, then a random pick among `eps`.
fn balance(plan: &PortPlan, eps: &[Endpoint]) -> Vec<String> {
    let mut rules = Vec::new();
    if plan.affinity_seconds.is_some() {
        for ep in eps {
            rules.push(format!(
                "ip saddr @{} goto {}",
                affinity_set(plan, ep),
                endpoint_chain(plan, ep)
            ));
        }
    }
    let choices: Vec<String> = eps
        .iter()
        .enumerate()
        .map(|(i, ep)| format!("{i} : goto {}", endpoint_chain(plan, ep)))
        .collect();
    rules.push(format!(
        "numgen random mod {} vmap {{ {} }}",
        eps.len(),
        choices.join(", ")
    ));
    rules
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Protocol;
    use std::net::Ipv4Addr;

    fn ep(ip: &str, port: u16) -> Endpoint {
        Endpoint {
            ip: ip.parse().unwrap(),
            port,
        }
    }

    fn web(internal: Target) -> PortPlan {
        PortPlan {
            service: "ns/web".into(),
            port_name: "http".into(),
            protocol: Protocol::Tcp,
            port: 80,
            cluster_ip: Some("10.43.0.20".parse().unwrap()),
            node_port: None,
            external_ips: Vec::new(),
            external: internal.clone(),
            internal,
            external_local: false,
            affinity_seconds: None,
        }
    }

    fn node() -> NodeFacts {
        NodeFacts {
            addresses: ["192.0.2.2".parse::<Ipv4Addr>().unwrap()].into(),
            pod_cidrs: ["10.42.0.0/24".to_string()].into(),
        }
    }

    fn elements<'a>(r: &'a Ruleset, set: &str) -> Vec<&'a str> {
        r.sets[set].elements.iter().map(String::as_str).collect()
    }

    #[test]
    fn cluster_ip_maps_to_a_chain_balancing_over_endpoint_chains() {
        let plan = web(Target::Endpoints(vec![
            ep("10.42.0.5", 8080),
            ep("10.42.0.6", 8080),
        ]));
        let r = render("skiff-proxy", &[plan], &node());
        assert_eq!(
            elements(&r, sets::SERVICE_IPS),
            ["10.43.0.20 . tcp . 80 : goto svc-ns/web/tcp/http"]
        );
        assert!(r.sets[sets::NO_ENDPOINT_SERVICES].elements.is_empty());
        let svc = &r.chains["svc-ns/web/tcp/http"].rules;
        assert_eq!(
            svc.last().unwrap(),
            "numgen random mod 2 vmap { 0 : goto ep-ns/web/tcp/http__10.42.0.5/8080, \
             1 : goto ep-ns/web/tcp/http__10.42.0.6/8080 }"
        );
        // Clients outside the pod network are masqueraded.
        assert_eq!(svc[0], "ip saddr != @pod-cidrs jump mark-for-masquerade");
        let ep_rules = &r.chains["ep-ns/web/tcp/http__10.42.0.6/8080"].rules;
        assert_eq!(
            ep_rules,
            &[
                "ip saddr 10.42.0.6 jump mark-for-masquerade",
                "meta l4proto tcp dnat to 10.42.0.6:8080"
            ]
        );
        assert_eq!(elements(&r, sets::NODEPORT_IPS), ["192.0.2.2"]);
        assert_eq!(elements(&r, sets::POD_CIDRS), ["10.42.0.0/24"]);
        assert!(!r.chains.contains_key("ext-ns/web/tcp/http"));
    }

    #[test]
    fn services_without_endpoints_are_rejected_and_local_ones_dropped() {
        let mut rejected = web(Target::Reject);
        rejected.node_port = Some(30080);
        let mut dropped = web(Target::Endpoints(vec![ep("10.42.0.5", 8080)]));
        dropped.service = "ns/local".into();
        dropped.cluster_ip = Some("10.43.0.21".parse().unwrap());
        dropped.node_port = Some(30081);
        dropped.external = Target::Drop;
        dropped.external_local = true;
        let r = render("t", &[rejected, dropped], &node());
        assert_eq!(
            elements(&r, sets::NO_ENDPOINT_SERVICES),
            ["10.43.0.20 . tcp . 80 : goto reject-chain"]
        );
        assert_eq!(
            elements(&r, sets::NO_ENDPOINT_NODEPORTS),
            ["tcp . 30080 : goto reject-chain", "tcp . 30081 : drop"]
        );
        assert_eq!(
            elements(&r, sets::SERVICE_IPS),
            ["10.43.0.21 . tcp . 80 : goto svc-ns/local/tcp/http"]
        );
        assert!(r.sets[sets::SERVICE_NODEPORTS].elements.is_empty());
        assert!(!r.chains.contains_key("svc-ns/web/tcp/http"));
    }

    #[test]
    fn node_ports_and_external_ips_go_through_the_external_chain() {
        let mut plan = web(Target::Endpoints(vec![ep("10.42.0.5", 8080)]));
        plan.node_port = Some(30080);
        plan.external_ips = vec!["192.0.2.50".parse().unwrap()];
        let r = render("t", std::slice::from_ref(&plan), &node());
        assert_eq!(
            elements(&r, sets::SERVICE_NODEPORTS),
            ["tcp . 30080 : goto ext-ns/web/tcp/http"]
        );
        assert!(
            elements(&r, sets::SERVICE_IPS)
                .contains(&"192.0.2.50 . tcp . 80 : goto ext-ns/web/tcp/http")
        );
        let ext = &r.chains["ext-ns/web/tcp/http"].rules;
        assert_eq!(ext[0], "jump mark-for-masquerade");

        plan.external_local = true;
        let r = render("t", &[plan], &node());
        let ext = &r.chains["ext-ns/web/tcp/http"].rules;
        assert_eq!(ext[0], "ip saddr @pod-cidrs goto svc-ns/web/tcp/http");
        assert_eq!(ext[1], "fib saddr type local jump mark-for-masquerade");
        assert!(!ext.iter().any(|r| r == "jump mark-for-masquerade"));
    }

    #[test]
    fn client_ip_affinity_remembers_the_source_per_endpoint() {
        let mut plan = web(Target::Endpoints(vec![
            ep("10.42.0.5", 8080),
            ep("10.42.0.6", 8080),
        ]));
        plan.affinity_seconds = Some(60);
        let r = render("t", &[plan], &node());
        let set = &r.sets["aff-ns/web/tcp/http__10.42.0.5/8080"];
        assert_eq!(
            set.declaration,
            "type ipv4_addr; flags dynamic,timeout; timeout 60s;"
        );
        let svc = &r.chains["svc-ns/web/tcp/http"].rules;
        assert_eq!(
            svc[1],
            "ip saddr @aff-ns/web/tcp/http__10.42.0.5/8080 goto ep-ns/web/tcp/http__10.42.0.5/8080"
        );
        let ep_rules = &r.chains["ep-ns/web/tcp/http__10.42.0.5/8080"].rules;
        assert_eq!(
            ep_rules[1],
            "update @aff-ns/web/tcp/http__10.42.0.5/8080 { ip saddr }"
        );
    }

    #[test]
    fn full_script_replaces_the_table_in_one_batch() {
        let r = render("skiff-proxy", &[web(Target::Reject)], &node());
        let script = full_script(&r);
        let lines: Vec<&str> = script.lines().collect();
        assert_eq!(
            &lines[..3],
            &[
                "add table ip skiff-proxy",
                "delete table ip skiff-proxy",
                "add table ip skiff-proxy"
            ]
        );
        assert!(lines.contains(
            &"add chain ip skiff-proxy nat-prerouting { type nat hook prerouting priority dstnat; policy accept; }"
        ));
    }

    #[test]
    fn diff_touches_only_what_changed() {
        let two = web(Target::Endpoints(vec![
            ep("10.42.0.5", 8080),
            ep("10.42.0.6", 8080),
        ]));
        let one = web(Target::Endpoints(vec![ep("10.42.0.5", 8080)]));
        let old = render("t", &[two], &node());
        let new = render("t", &[one], &node());
        assert_eq!(diff_script(&old, &old).as_deref(), Some(""));
        let script = diff_script(&old, &new).unwrap();
        let lines: Vec<&str> = script.lines().collect();
        assert_eq!(
            lines,
            [
                "flush chain ip t svc-ns/web/tcp/http",
                "add rule ip t svc-ns/web/tcp/http ip saddr != @pod-cidrs jump mark-for-masquerade",
                "add rule ip t svc-ns/web/tcp/http numgen random mod 1 vmap { 0 : goto ep-ns/web/tcp/http__10.42.0.5/8080 }",
                "flush chain ip t ep-ns/web/tcp/http__10.42.0.6/8080",
                "delete chain ip t ep-ns/web/tcp/http__10.42.0.6/8080",
            ]
        );
        // Going to no endpoints: the map element moves, the chains go.
        let none = render("t", &[web(Target::Reject)], &node());
        let script = diff_script(&new, &none).unwrap();
        assert!(script.contains("delete element ip t service-ips { 10.43.0.20 . tcp . 80 }"));
        assert!(script.contains(
            "add element ip t no-endpoint-services { 10.43.0.20 . tcp . 80 : goto reject-chain }"
        ));
        assert!(script.contains("delete chain ip t svc-ns/web/tcp/http"));
    }

    #[test]
    fn a_changed_declaration_needs_a_full_replacement() {
        let mut a = web(Target::Endpoints(vec![ep("10.42.0.5", 8080)]));
        a.affinity_seconds = Some(60);
        let mut b = a.clone();
        b.affinity_seconds = Some(120);
        let old = render("t", &[a], &node());
        let new = render("t", &[b], &node());
        assert_eq!(diff_script(&old, &new), None);
    }
}
