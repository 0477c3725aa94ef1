//! Policy semantics: which traffic each pod on this node may receive and
//! send, as upstream defines it. A pod selected by any policy whose types
//! include Ingress accepts only what one of those policies' ingress rules
//! allows (plus replies); the same for Egress. Policies add up, never
//! subtract; a pod no policy selects is not isolated.
//!
//! A rule's peers (`from`/`to`) are pods by podSelector in the policy's
//! namespace, pods in namespaces by namespaceSelector, pods by both, or
//! ipBlocks less their exceptions; no peers means every source or
//! destination. Its ports are numbered (with `endPort` ranges) or named,
//! per protocol (TCP by default, UDP, SCTP); none means every port. A named
//! port is resolved on the pod that owns it: for ingress the target pod
//! (so the rule differs per pod), for egress each destination pod (so the
//! rule matches `address . protocol . port` of the peer pods having it).
//!
//! Peers are matched by address among all the cluster's pods, not only this
//! node's, so the same plan enforces policies for traffic between nodes.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use skiff_common::labels::Selector;

use crate::facts::{NamespaceLabels, PodFacts, Protocol};
use crate::ranges::Ranges;

/// A port or range of ports of one protocol; `None` is every port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PortRange {
    /// The protocol.
    pub protocol: Protocol,
    /// `(first, last)`, inclusive.
    pub ports: Option<(u16, u16)>,
}

impl PortRange {
    fn matches(&self, protocol: Protocol, port: u16) -> bool {
        self.protocol == protocol && self.ports.is_none_or(|(f, l)| f <= port && port <= l)
    }
}

/// What one allow rule requires of the traffic's ports.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum PortsMatch {
    /// Any protocol and port.
    Any,
    /// This protocol and port or range.
    Range(PortRange),
    /// The destination `address . protocol . port` is in this set of
    /// [`Plan::endpoint_sets`] (egress named ports).
    Endpoints(String),
}

/// One allow rule of a pod's chain: both parts must match.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Allow {
    /// The peer's address must be in this set of [`Plan::peer_sets`];
    /// `None`: any peer.
    pub peers: Option<String>,
    /// What the ports must be.
    pub ports: PortsMatch,
}

/// What one pod on this node may receive and send. `None` in a direction:
/// not isolated that way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodPlan {
    /// `namespace/name`.
    pub key: String,
    /// Its address.
    pub ip: Ipv4Addr,
    /// Ingress allow rules when isolated for ingress.
    pub ingress: Option<Vec<Allow>>,
    /// Egress allow rules when isolated for egress.
    pub egress: Option<Vec<Allow>>,
}

/// The whole node's plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// This node's pods isolated in at least one direction, by key.
    pub pods: BTreeMap<String, PodPlan>,
    /// Peer address sets by name.
    pub peer_sets: BTreeMap<String, Ranges>,
    /// `address . protocol . port` sets by name.
    pub endpoint_sets: BTreeMap<String, BTreeSet<(Ipv4Addr, Protocol, u16)>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Ingress,
    Egress,
}

impl Direction {
    fn tag(self) -> &'static str {
        match self {
            Direction::Ingress => "in",
            Direction::Egress => "eg",
        }
    }
}

/// The policy types in effect: as listed, else Ingress always and Egress
/// when the policy has egress rules (the API's defaulting rule).
fn types(spec: &NetworkPolicySpec) -> (bool, bool) {
    match &spec.policy_types {
        Some(types) if !types.is_empty() => (
            types.iter().any(|t| t == "Ingress"),
            types.iter().any(|t| t == "Egress"),
        ),
        _ => (true, spec.egress.as_ref().is_some_and(|e| !e.is_empty())),
    }
}

impl<'a> Rule<'a> {
    fn new(
        peers: &'a Option<Vec<NetworkPolicyPeer>>,
        ports: &'a Option<Vec<NetworkPolicyPort>>,
    ) -> Self {
        Self {
            peers: peers.as_deref().unwrap_or_default(),
            ports: ports.as_deref().unwrap_or_default(),
        }
    }
}

/// The pods a peer names (ipBlocks name none).
fn peer_pods<'a>(
    policy_namespace: &str,
    peer: &NetworkPolicyPeer,
    pods: &'a [PodFacts],
    namespaces: &NamespaceLabels,
) -> Vec<&'a PodFacts> {
    if peer.pod_selector.is_none() && peer.namespace_selector.is_none() {
        return Vec::new();
    }
    let pod_selector = peer
        .pod_selector
        .as_ref()
        .map_or_else(Selector::everything, Selector::from_label_selector);
    let namespace_selector = peer
        .namespace_selector
        .as_ref()
        .map(Selector::from_label_selector);
    let empty = Default::default();
    pods.iter()
        .filter(|pod| match &namespace_selector {
            None => pod.namespace == policy_namespace,
            Some(selector) => selector.matches(namespaces.get(&pod.namespace).unwrap_or(&empty)),
        })
        .filter(|pod| pod_selector.matches(&pod.labels))
        .collect()
}

/// The addresses of an ipBlock less its exceptions (IPv6 blocks: none).
fn block_ranges(peer: &NetworkPolicyPeer, into: &mut Ranges) {
    let Some(block) = &peer.ip_block else {
        return;
    };
    let Some(net) = parse_net(&block.cidr) else {
        return;
    };
    let mut ranges = Ranges::new();
    ranges.add_net(net);
    for except in block.except.iter().flatten() {
        if let Some(except) = parse_net(except) {
            ranges.remove_net(except);
        }
    }
    into.extend(&ranges);
}

fn parse_net(cidr: &str) -> Option<(Ipv4Addr, u8)> {
    let (addr, prefix) = cidr.split_once('/')?;
    let addr = addr.parse::<Ipv4Addr>().ok()?;
    let prefix = prefix.parse::<u8>().ok().filter(|p| *p <= 32)?;
    Some((addr, prefix))
}

/// A policy port as a range, or the name of a named port.
enum PortSpec {
    Range(PortRange),
    Named(Protocol, String),
}

fn port_spec(port: &NetworkPolicyPort) -> Option<PortSpec> {
    let protocol = Protocol::parse(port.protocol.as_deref())?;
    match &port.port {
        None => Some(PortSpec::Range(PortRange {
            protocol,
            ports: None,
        })),
        Some(IntOrString::Int(n)) => {
            let first = u16::try_from(*n).ok()?;
            let last = match port.end_port {
                Some(end) => u16::try_from(end).ok()?.max(first),
                None => first,
            };
            Some(PortSpec::Range(PortRange {
                protocol,
                ports: Some((first, last)),
            }))
        }
        Some(IntOrString::String(name)) => match name.parse::<u16>() {
            // A number written as a string is still a number.
            Ok(n) => Some(PortSpec::Range(PortRange {
                protocol,
                ports: Some((n, n)),
            })),
            Err(_) => Some(PortSpec::Named(protocol, name.clone())),
        },
    }
}

/// A name nft accepts for a chain or set: the parts joined by `/`, cut and
/// made unique by a hash when too long (nft names stop at 256 bytes).
pub fn object_name(prefix: &str, parts: &[&str]) -> String {
    use std::hash::{Hash, Hasher};
    let name = format!("{prefix}-{}", parts.join("/"));
    if name.len() <= 200 {
        return name;
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut hasher);
    let mut cut = 180;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}~{:016x}", &name[..cut], hasher.finish())
}

/// One policy's view: its identity, the pods it selects and its rules.
struct Compiled<'a> {
    namespace: &'a str,
    name: &'a str,
    selects: Selector,
    /// The ingress rules, when the policy governs ingress.
    ingress: Option<Vec<Rule<'a>>>,
    /// The egress rules, when the policy governs egress.
    egress: Option<Vec<Rule<'a>>>,
}

/// One ingress or egress rule: the peers (`from` or `to`) and the ports.
struct Rule<'a> {
    peers: &'a [NetworkPolicyPeer],
    ports: &'a [NetworkPolicyPort],
}

/// Plans the rules for the pods on `node` under `policies`, with `pods`
/// every pod of the cluster (targets and peers).
pub fn plan(
    node: &str,
    policies: &[&NetworkPolicy],
    pods: &[PodFacts],
    namespaces: &NamespaceLabels,
) -> Plan {
    let mut compiled: Vec<Compiled> = policies
        .iter()
        .filter_map(|p| {
            let spec = p.spec.as_ref()?;
            let (ingress, egress) = types(spec);
            let ingress = ingress.then(|| {
                let rules = spec.ingress.iter().flatten();
                rules.map(|r| Rule::new(&r.from, &r.ports)).collect()
            });
            let egress = egress.then(|| {
                let rules = spec.egress.iter().flatten();
                rules.map(|r| Rule::new(&r.to, &r.ports)).collect()
            });
            Some(Compiled {
                namespace: p.metadata.namespace.as_deref()?,
                name: p.metadata.name.as_deref()?,
                selects: spec
                    .pod_selector
                    .as_ref()
                    .map_or_else(Selector::everything, Selector::from_label_selector),
                ingress,
                egress,
            })
        })
        .collect();
    // A stable order: the rules of a pod's chain come out the same however
    // the informer listed the policies.
    compiled.sort_by(|a, b| (a.namespace, a.name).cmp(&(b.namespace, b.name)));

    let mut out = Plan::default();
    for pod in pods.iter().filter(|p| p.node == node) {
        let mut ingress: Option<Vec<Allow>> = None;
        let mut egress: Option<Vec<Allow>> = None;
        for policy in &compiled {
            if policy.namespace != pod.namespace || !policy.selects.matches(&pod.labels) {
                continue;
            }
            let directions = [
                (Direction::Ingress, &policy.ingress, &mut ingress),
                (Direction::Egress, &policy.egress, &mut egress),
            ];
            for (direction, rules, allows) in directions {
                let Some(rules) = rules else { continue };
                let allows = allows.get_or_insert_with(Vec::new);
                for (i, rule) in rules.iter().enumerate() {
                    allows.extend(rule_allows(
                        &mut out, policy, direction, i, rule, pod, pods, namespaces,
                    ));
                }
            }
        }
        if ingress.is_some() || egress.is_some() {
            let dedup = |v: Option<Vec<Allow>>| {
                v.map(|mut v| {
                    let mut seen = BTreeSet::new();
                    v.retain(|a| seen.insert(a.clone()));
                    v
                })
            };
            out.pods.insert(
                pod.key(),
                PodPlan {
                    key: pod.key(),
                    ip: pod.ip,
                    ingress: dedup(ingress),
                    egress: dedup(egress),
                },
            );
        }
    }
    out
}

/// The allow rules of one policy rule for `target`, registering the sets
/// they refer to.
#[allow(clippy::too_many_arguments)]
fn rule_allows(
    out: &mut Plan,
    policy: &Compiled,
    direction: Direction,
    index: usize,
    rule: &Rule,
    target: &PodFacts,
    pods: &[PodFacts],
    namespaces: &NamespaceLabels,
) -> Vec<Allow> {
    let Rule { peers, ports } = *rule;
    let rule_id = format!("{}{index}", direction.tag());
    let parts = [policy.namespace, policy.name, rule_id.as_str()];
    // The peers' pods (for egress named ports) and their address set.
    let peer_pods: Vec<&PodFacts> = if peers.is_empty() {
        pods.iter().collect()
    } else {
        peers
            .iter()
            .flat_map(|peer| peer_pods(policy.namespace, peer, pods, namespaces))
            .collect()
    };
    let peer_set = (!peers.is_empty()).then(|| {
        let name = object_name("peers", &parts);
        if !out.peer_sets.contains_key(&name) {
            let mut ranges = Ranges::new();
            for pod in &peer_pods {
                ranges.add_ip(pod.ip);
            }
            for peer in peers {
                block_ranges(peer, &mut ranges);
            }
            out.peer_sets.insert(name.clone(), ranges);
        }
        name
    });
    if ports.is_empty() {
        return vec![Allow {
            peers: peer_set,
            ports: PortsMatch::Any,
        }];
    }
    let mut allows = Vec::new();
    for (j, port) in ports.iter().enumerate() {
        match port_spec(port) {
            None => {}
            Some(PortSpec::Range(range)) => allows.push(Allow {
                peers: peer_set.clone(),
                ports: PortsMatch::Range(range),
            }),
            Some(PortSpec::Named(protocol, name)) => match direction {
                // Resolved on the target pod; a pod without it is not
                // reachable through this entry.
                Direction::Ingress => {
                    if let Some(n) = target.named_port(&name, protocol) {
                        allows.push(Allow {
                            peers: peer_set.clone(),
                            ports: PortsMatch::Range(PortRange {
                                protocol,
                                ports: Some((n, n)),
                            }),
                        });
                    }
                }
                // Resolved on each destination pod among the peers.
                Direction::Egress => {
                    let port_id = format!("{j}");
                    let set = object_name(
                        "ports",
                        &[policy.namespace, policy.name, &rule_id, &port_id],
                    );
                    out.endpoint_sets.entry(set.clone()).or_insert_with(|| {
                        peer_pods
                            .iter()
                            .filter_map(|p| Some((p.ip, protocol, p.named_port(&name, protocol)?)))
                            .collect()
                    });
                    allows.push(Allow {
                        peers: None,
                        ports: PortsMatch::Endpoints(set),
                    });
                }
            },
        }
    }
    allows
}

impl Plan {
    fn allowed(&self, rules: &[Allow], peer: Ipv4Addr, protocol: Protocol, port: u16) -> bool {
        rules.iter().any(|a| {
            let peer_ok = a
                .peers
                .as_ref()
                .is_none_or(|s| self.peer_sets.get(s).is_some_and(|r| r.contains(peer)));
            let ports_ok = match &a.ports {
                PortsMatch::Any => true,
                PortsMatch::Range(r) => r.matches(protocol, port),
                PortsMatch::Endpoints(s) => self
                    .endpoint_sets
                    .get(s)
                    .is_some_and(|e| e.contains(&(peer, protocol, port))),
            };
            peer_ok && ports_ok
        })
    }

    /// Whether a new connection from `source` to this node's pod `target`
    /// on `protocol`/`port` passes the target's ingress policies (the
    /// semantics the rendered rules implement; for tests and tools).
    pub fn ingress_allowed(
        &self,
        target: &str,
        source: Ipv4Addr,
        protocol: Protocol,
        port: u16,
    ) -> bool {
        match self.pods.get(target).and_then(|p| p.ingress.as_ref()) {
            None => true,
            Some(rules) => self.allowed(rules, source, protocol, port),
        }
    }

    /// Whether a new connection from this node's pod `source` to
    /// `destination` on `protocol`/`port` passes its egress policies.
    pub fn egress_allowed(
        &self,
        source: &str,
        destination: Ipv4Addr,
        protocol: Protocol,
        port: u16,
    ) -> bool {
        match self.pods.get(source).and_then(|p| p.egress.as_ref()) {
            None => true,
            Some(rules) => self.allowed(rules, destination, protocol, port),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::facts::NamedPort;
    use serde_json::json;
    use skiff_common::labels::from_pairs;

    pub(crate) fn pod(
        ns: &str,
        name: &str,
        ip: &str,
        node: &str,
        labels: &[(&str, &str)],
    ) -> PodFacts {
        PodFacts {
            namespace: ns.into(),
            name: name.into(),
            ip: ip.parse().unwrap(),
            labels: from_pairs(labels),
            node: node.into(),
            ports: Vec::new(),
        }
    }

    pub(crate) fn policy(ns: &str, name: &str, spec: serde_json::Value) -> NetworkPolicy {
        serde_json::from_value(json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"namespace": ns, "name": name},
            "spec": spec,
        }))
        .unwrap()
    }

    fn namespaces() -> NamespaceLabels {
        [
            ("app", from_pairs(&[("team", "a")])),
            ("other", from_pairs(&[("team", "b")])),
            (
                "monitoring",
                from_pairs(&[("team", "a"), ("kind", "infra")]),
            ),
        ]
        .into_iter()
        .map(|(n, l)| (n.to_string(), l))
        .collect()
    }

    /// web (target, this node), client (role=client), stranger, a client in
    /// another namespace, and one in monitoring on another node.
    fn pods() -> Vec<PodFacts> {
        let mut web = pod("app", "web", "10.42.0.10", "n1", &[("app", "web")]);
        web.ports = vec![NamedPort::new("http", Protocol::Tcp, 8080)];
        vec![
            web,
            pod("app", "client", "10.42.0.11", "n1", &[("role", "client")]),
            pod("app", "stranger", "10.42.0.12", "n1", &[]),
            pod("other", "client", "10.42.0.13", "n1", &[("role", "client")]),
            pod(
                "monitoring",
                "scraper",
                "10.42.1.5",
                "n2",
                &[("role", "client")],
            ),
        ]
    }

    fn plan_of(policies: &[NetworkPolicy]) -> Plan {
        let refs: Vec<&NetworkPolicy> = policies.iter().collect();
        plan("n1", &refs, &pods(), &namespaces())
    }

    /// The plan for policy `name` of namespace `app`, alone.
    fn app_plan(name: &str, spec: serde_json::Value) -> Plan {
        plan_of(&[policy("app", name, spec)])
    }

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    const TCP: Protocol = Protocol::Tcp;

    /// Sources of traffic to `app/web`: (source IP, allowed, why).
    type Sources<'a> = &'a [(&'a str, bool, &'a str)];

    /// Asserts, for each of `cases`, whether `p` lets the source reach `app/web` on
    /// TCP `port`.
    fn assert_web_ingress(p: &Plan, port: u16, cases: Sources<'_>) {
        for (source, allowed, why) in cases {
            assert_eq!(
                p.ingress_allowed("app/web", ip(source), TCP, port),
                *allowed,
                "{source}: {why}"
            );
        }
    }

    #[test]
    fn unselected_pods_are_open_and_default_deny_closes_ingress_only() {
        let open = plan_of(&[]);
        assert!(open.pods.is_empty());
        assert!(open.ingress_allowed("app/web", ip("10.42.0.12"), TCP, 80));

        let deny = app_plan(
            "deny",
            json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
        );
        for source in ["10.42.0.11", "10.42.0.13", "10.42.1.5", "192.0.2.1"] {
            assert!(
                !deny.ingress_allowed("app/web", ip(source), TCP, 8080),
                "{source}"
            );
        }
        // Every pod of the namespace on this node is isolated; not others'.
        assert_eq!(
            deny.pods.keys().collect::<Vec<_>>(),
            ["app/client", "app/stranger", "app/web"]
        );
        // Egress stays open.
        assert!(deny.pods["app/web"].egress.is_none());
        assert!(deny.egress_allowed("app/web", ip("10.42.0.12"), TCP, 80));
    }

    #[test]
    fn each_kind_of_ingress_peer_lets_in_only_its_sources() {
        // Pods the policies isolate: `app/web`, or every pod of `app` on n1.
        let web_only: &[&str] = &["app/web"];
        let all_of_app: &[&str] = &["app/client", "app/stranger", "app/web"];
        // (policy, its pod selector, its one ingress peer, the pods it
        // isolates, the port, (source, allowed, why) on that port)
        type Case<'a> = (
            &'a str,
            serde_json::Value,
            serde_json::Value,
            &'a [&'a str],
            u16,
            Sources<'a>,
        );
        let cases: [Case<'_>; 5] = [
            (
                "allow-client",
                json!({"matchLabels": {"app": "web"}}),
                // Pod selector peers are the policy namespace's pods.
                json!({"podSelector": {"matchLabels": {"role": "client"}}}),
                web_only,
                8080,
                &[
                    ("10.42.0.11", true, "client"),
                    ("10.42.0.12", false, "unlabelled"),
                    ("10.42.0.13", false, "other namespace"),
                    ("10.42.1.5", false, "other namespace"),
                ],
            ),
            (
                "from-team-a",
                json!({}),
                json!({"namespaceSelector": {"matchLabels": {"team": "a"}}}),
                all_of_app,
                1,
                &[
                    ("10.42.0.12", true, "same ns, team a"),
                    ("10.42.1.5", true, "monitoring, other node"),
                    ("10.42.0.13", false, "team b"),
                ],
            ),
            (
                "infra-clients",
                json!({}),
                json!({
                    "namespaceSelector": {"matchExpressions": [{"key": "kind", "operator": "Exists"}]},
                    "podSelector": {"matchLabels": {"role": "client"}}
                }),
                all_of_app,
                1,
                &[
                    ("10.42.1.5", true, "client in a namespace with a kind"),
                    ("10.42.0.11", false, "client, but ns has no kind"),
                ],
            ),
            (
                "any-ns",
                json!({}),
                json!({"namespaceSelector": {}}),
                all_of_app,
                1,
                &[
                    ("10.42.0.13", true, "a pod in another namespace"),
                    ("192.0.2.1", false, "not a pod"),
                ],
            ),
            (
                "block",
                json!({"matchLabels": {"app": "web"}}),
                // IP blocks leave out their exceptions.
                json!({"ipBlock": {"cidr": "192.0.2.0/24", "except": ["192.0.2.128/25"]}}),
                web_only,
                1,
                &[
                    ("192.0.2.1", true, "in the block"),
                    ("192.0.2.200", false, "in an exception"),
                    ("10.42.0.11", false, "outside the block"),
                ],
            ),
        ];
        for (name, selector, peer, isolated, port, sources) in cases {
            let p = app_plan(
                name,
                json!({"podSelector": selector, "ingress": [{"from": [peer]}]}),
            );
            assert_web_ingress(&p, port, sources);
            assert_eq!(p.pods.keys().collect::<Vec<_>>(), isolated, "{name}");
        }
    }

    #[test]
    fn ports_numbered_ranged_per_protocol_and_named_on_the_target() {
        let p = app_plan(
            "ports",
            json!({
                "podSelector": {},
                "ingress": [{"ports": [
                    {"port": 80},
                    {"port": 9000, "endPort": 9010},
                    {"protocol": "UDP", "port": 53},
                    {"protocol": "SCTP", "port": 7777},
                    {"port": "http"}
                ]}]
            }),
        );
        let src = ip("10.42.0.12");
        assert!(p.ingress_allowed("app/web", src, TCP, 80));
        assert!(
            !p.ingress_allowed("app/web", src, Protocol::Udp, 80),
            "TCP by default"
        );
        assert!(p.ingress_allowed("app/web", src, TCP, 9005));
        assert!(!p.ingress_allowed("app/web", src, TCP, 9011));
        assert!(p.ingress_allowed("app/web", src, Protocol::Udp, 53));
        assert!(!p.ingress_allowed("app/web", src, TCP, 53));
        assert!(p.ingress_allowed("app/web", src, Protocol::Sctp, 7777));
        // "http" is 8080 on web; the client has no such port, so nothing.
        assert!(p.ingress_allowed("app/web", src, TCP, 8080));
        assert!(!p.ingress_allowed("app/client", src, TCP, 8080));
        assert!(p.ingress_allowed("app/client", src, TCP, 80));
    }

    #[test]
    fn an_empty_rule_allows_everything_and_rules_add_up() {
        let all = app_plan("all", json!({"podSelector": {}, "ingress": [{}]}));
        assert!(all.ingress_allowed("app/web", ip("203.0.113.9"), Protocol::Udp, 1));
        let p = plan_of(&[
            policy(
                "app",
                "deny",
                json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
            ),
            policy(
                "app",
                "allow-80",
                json!({"podSelector": {}, "ingress": [{"ports": [{"port": 80}]}]}),
            ),
        ]);
        assert!(p.ingress_allowed("app/web", ip("10.42.0.12"), TCP, 80));
        assert!(!p.ingress_allowed("app/web", ip("10.42.0.12"), TCP, 81));
    }

    #[test]
    fn egress_rules_and_named_ports_resolved_on_the_destination() {
        let p = app_plan(
            "egress",
            json!({
                "podSelector": {"matchLabels": {"app": "web"}},
                "policyTypes": ["Egress"],
                "egress": [
                    {"to": [{"ipBlock": {"cidr": "10.43.0.0/16"}}], "ports": [{"protocol": "UDP", "port": 53}]},
                    {"to": [{"podSelector": {}}], "ports": [{"port": "http"}]}
                ]
            }),
        );
        let web = "app/web";
        assert!(p.pods[web].ingress.is_none(), "egress only");
        assert!(p.egress_allowed(web, ip("10.43.0.10"), Protocol::Udp, 53));
        assert!(!p.egress_allowed(web, ip("10.43.0.10"), TCP, 53));
        // The "http" port of pods in app: only web itself has one (8080).
        assert!(p.egress_allowed(web, ip("10.42.0.10"), TCP, 8080));
        assert!(!p.egress_allowed(web, ip("10.42.0.11"), TCP, 8080));
        assert!(!p.egress_allowed(web, ip("192.0.2.1"), TCP, 80));
    }

    #[test]
    fn policy_types_default_to_ingress_plus_egress_when_it_has_egress_rules() {
        let ingress_only = app_plan("p", json!({"podSelector": {}}));
        assert!(ingress_only.pods["app/web"].ingress.is_some());
        assert!(ingress_only.pods["app/web"].egress.is_none());
        let both = app_plan(
            "p",
            json!({"podSelector": {}, "egress": [{"ports": [{"port": 443}]}]}),
        );
        assert_eq!(both.pods["app/web"].ingress.as_deref(), Some(&[][..]));
        assert!(both.egress_allowed("app/web", ip("1.1.1.1"), TCP, 443));
        assert!(!both.egress_allowed("app/web", ip("1.1.1.1"), TCP, 80));
    }

    #[test]
    fn only_this_nodes_pods_get_rules_but_peers_come_from_every_node() {
        let p = plan_of(&[policy("monitoring", "deny", json!({"podSelector": {}}))]);
        assert!(p.pods.is_empty(), "the scraper runs on n2");
        let on_n2 = plan(
            "n2",
            &[&policy("monitoring", "deny", json!({"podSelector": {}}))],
            &pods(),
            &namespaces(),
        );
        assert_eq!(
            on_n2.pods.keys().collect::<Vec<_>>(),
            ["monitoring/scraper"]
        );
    }

    #[test]
    fn long_names_are_cut_and_made_unique() {
        let long = "x".repeat(300);
        let a = object_name("in", &["ns", &long]);
        let b = object_name("in", &["ns2", &long]);
        assert!(a.len() < 256 && b.len() < 256);
        assert_ne!(a, b);
        assert_eq!(object_name("in", &["ns/pod"]), "in-ns/pod");
    }
}
