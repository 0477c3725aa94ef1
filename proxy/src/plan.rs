//! What the proxy must do, decided from Services, EndpointSlices and Nodes
//! before any nftables syntax: one [`PortPlan`] per Service port with the
//! endpoints chosen for in-cluster and for external traffic. Keeping the
//! decisions here (and the syntax in `render`) lets tests assert behaviour
//! as data.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{Node, Service, ServicePort};
use k8s_openapi::api::discovery::v1::EndpointSlice;
pub use skiff_common::nft::Protocol;

/// Label linking an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Upstream's default ClientIP affinity timeout (3 hours).
pub const DEFAULT_AFFINITY_SECONDS: u32 = 10_800;

/// One backend address and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    /// Pod (or other backend) address.
    pub ip: Ipv4Addr,
    /// Target port.
    pub port: u16,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.ip, self.port)
    }
}

/// Where traffic for a set of destinations goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Balanced across these endpoints (never empty).
    Endpoints(Vec<Endpoint>),
    /// No endpoint at all: refused (ICMP port unreachable / TCP reset).
    Reject,
    /// Endpoints exist, but none that this traffic may use (a `Local`
    /// traffic policy with no endpoint on this node): dropped, as upstream.
    Drop,
}

/// Everything the proxy does for one port of one Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortPlan {
    /// `namespace/name`.
    pub service: String,
    /// The Service port's name ("" when unnamed).
    pub port_name: String,
    /// Protocol.
    pub protocol: Protocol,
    /// Service port.
    pub port: u16,
    /// The cluster IP (absent for headless and ExternalName Services).
    pub cluster_ip: Option<Ipv4Addr>,
    /// Node port (NodePort and LoadBalancer Services).
    pub node_port: Option<u16>,
    /// `spec.externalIPs` and `status.loadBalancer.ingress[].ip`.
    pub external_ips: Vec<Ipv4Addr>,
    /// Target of traffic to the cluster IP.
    pub internal: Target,
    /// Target of traffic to the node port and external IPs.
    pub external: Target,
    /// `externalTrafficPolicy: Local`: external traffic keeps its source
    /// address (not masqueraded), except from this host or from pods.
    pub external_local: bool,
    /// ClientIP affinity timeout, when `sessionAffinity: ClientIP`.
    pub affinity_seconds: Option<u32>,
}

impl PortPlan {
    /// A stable, readable id used in chain names: `ns/name/proto/port`.
    pub fn id(&self) -> String {
        let port = if self.port_name.is_empty() {
            self.port.to_string()
        } else {
            self.port_name.clone()
        };
        format!("{}/{}/{}", self.service, self.protocol.nft(), port)
    }
}

/// One endpoint as an EndpointSlice reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Candidate {
    endpoint: Endpoint,
    ready: bool,
    serving: bool,
    terminating: bool,
    local: bool,
}

/// The node-level facts the plan needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFacts {
    /// Addresses NodePorts answer on (the Node's InternalIP/ExternalIP).
    pub addresses: BTreeSet<Ipv4Addr>,
    /// Pod CIDRs of every Node (traffic from elsewhere is masqueraded).
    pub pod_cidrs: BTreeSet<String>,
}

impl NodeFacts {
    /// Facts for `node_name` from every Node in the cluster.
    pub fn from_nodes<'a>(node_name: &str, nodes: impl IntoIterator<Item = &'a Node>) -> Self {
        let mut facts = Self::default();
        for node in nodes {
            let spec = node.spec.as_ref();
            let cidrs = spec
                .and_then(|s| s.pod_cidrs.clone())
                .unwrap_or_default()
                .into_iter()
                .chain(spec.and_then(|s| s.pod_cidr.clone()));
            facts
                .pod_cidrs
                .extend(cidrs.filter(|c| valid_v4_cidr(c)).collect::<Vec<_>>());
            if node.metadata.name.as_deref() != Some(node_name) {
                continue;
            }
            let addresses = node
                .status
                .as_ref()
                .and_then(|s| s.addresses.as_ref())
                .into_iter()
                .flatten()
                .filter(|a| a.type_ == "InternalIP" || a.type_ == "ExternalIP")
                .filter_map(|a| a.address.parse::<Ipv4Addr>().ok());
            facts.addresses.extend(addresses);
        }
        facts
    }
}

fn valid_v4_cidr(cidr: &str) -> bool {
    skiff_common::cidr::parse_v4(cidr).is_ok()
}

/// Plans every port of every Service, ordered by [`PortPlan::id`].
pub fn plan<'a>(
    node_name: &str,
    services: impl IntoIterator<Item = &'a Service>,
    slices: impl IntoIterator<Item = &'a EndpointSlice>,
) -> Vec<PortPlan> {
    let mut by_service: BTreeMap<(String, String), Vec<&EndpointSlice>> = BTreeMap::new();
    for slice in slices {
        if slice.address_type != "IPv4" {
            continue;
        }
        let (Some(ns), Some(name)) = (
            slice.metadata.namespace.clone(),
            slice
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(SERVICE_NAME_LABEL))
                .cloned(),
        ) else {
            continue;
        };
        by_service.entry((ns, name)).or_default().push(slice);
    }
    let mut plans = Vec::new();
    for service in services {
        let (Some(ns), Some(name)) = (&service.metadata.namespace, &service.metadata.name) else {
            continue;
        };
        let slices = by_service
            .get(&(ns.clone(), name.clone()))
            .map(Vec::as_slice)
            .unwrap_or_default();
        plans.extend(plan_service(node_name, ns, name, service, slices));
    }
    plans.sort_by_key(PortPlan::id);
    plans
}

fn plan_service(
    node_name: &str,
    ns: &str,
    name: &str,
    service: &Service,
    slices: &[&EndpointSlice],
) -> Vec<PortPlan> {
    let Some(spec) = &service.spec else {
        return Vec::new();
    };
    if spec.type_.as_deref() == Some("ExternalName") {
        return Vec::new();
    }
    let cluster_ip = spec
        .cluster_ip
        .as_deref()
        .and_then(|ip| ip.parse::<Ipv4Addr>().ok());
    let mut external_ips: Vec<Ipv4Addr> = spec
        .external_ips
        .iter()
        .flatten()
        .filter_map(|ip| ip.parse().ok())
        .collect();
    let is_lb = spec.type_.as_deref() == Some("LoadBalancer");
    if is_lb {
        let ingress = service
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|i| i.ip.as_deref()?.parse::<Ipv4Addr>().ok());
        external_ips.extend(ingress);
    }
    external_ips.sort();
    external_ips.dedup();
    if cluster_ip.is_none() && external_ips.is_empty() {
        // Headless: DNS hands out pod IPs, nothing to proxy.
        return Vec::new();
    }
    let affinity_seconds = (spec.session_affinity.as_deref() == Some("ClientIP")).then(|| {
        spec.session_affinity_config
            .as_ref()
            .and_then(|c| c.client_ip.as_ref())
            .and_then(|c| c.timeout_seconds)
            .and_then(|t| u32::try_from(t).ok())
            .filter(|t| *t > 0)
            .unwrap_or(DEFAULT_AFFINITY_SECONDS)
    });
    let internal_local = spec.internal_traffic_policy.as_deref() == Some("Local");
    let external_local = spec.external_traffic_policy.as_deref() == Some("Local");
    let node_ports = matches!(spec.type_.as_deref(), Some("NodePort" | "LoadBalancer"));
    let mut plans = Vec::new();
    for port in spec.ports.iter().flatten() {
        let Some(protocol) = Protocol::parse(port.protocol.as_deref()) else {
            continue;
        };
        let Ok(service_port) = u16::try_from(port.port) else {
            continue;
        };
        let candidates = candidates(node_name, port, protocol, slices);
        let node_port = port
            .node_port
            .filter(|_| node_ports)
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p != 0);
        plans.push(PortPlan {
            service: format!("{ns}/{name}"),
            port_name: port.name.clone().unwrap_or_default(),
            protocol,
            port: service_port,
            cluster_ip,
            node_port,
            external_ips: external_ips.clone(),
            internal: choose(&candidates, internal_local),
            external: choose(&candidates, external_local),
            external_local,
            affinity_seconds,
        });
    }
    plans
}

/// The endpoints of the slices' port matching `port` (by name and protocol).
fn candidates(
    node_name: &str,
    port: &ServicePort,
    protocol: Protocol,
    slices: &[&EndpointSlice],
) -> Vec<Candidate> {
    let wanted_name = port.name.as_deref().unwrap_or("");
    let mut out: BTreeMap<Endpoint, Candidate> = BTreeMap::new();
    for slice in slices {
        let target = slice.ports.iter().flatten().find(|p| {
            p.name.as_deref().unwrap_or("") == wanted_name
                && Protocol::parse(p.protocol.as_deref()) == Some(protocol)
        });
        let Some(target) = target
            .and_then(|p| p.port)
            .and_then(|p| u16::try_from(p).ok())
        else {
            continue;
        };
        for endpoint in &slice.endpoints {
            let conditions = endpoint.conditions.clone().unwrap_or_default();
            // Unset conditions mean "ready" and "serving = ready" (upstream).
            let ready = conditions.ready.unwrap_or(true);
            let serving = conditions.serving.unwrap_or(ready);
            let terminating = conditions.terminating.unwrap_or(false);
            let local = endpoint.node_name.as_deref() == Some(node_name);
            for address in &endpoint.addresses {
                let Ok(ip) = address.parse::<Ipv4Addr>() else {
                    continue;
                };
                let endpoint = Endpoint { ip, port: target };
                // The same address in two slices (during a move): the more
                // usable report wins.
                let candidate = Candidate {
                    endpoint,
                    ready,
                    serving,
                    terminating,
                    local,
                };
                out.entry(endpoint)
                    .and_modify(|c| {
                        if candidate.ready && !c.ready {
                            *c = candidate.clone();
                        }
                    })
                    .or_insert(candidate);
            }
        }
    }
    out.into_values().collect()
}

/// Ready endpoints; when none is ready, the serving terminating ones
/// (so connections drain instead of failing); optionally only this node's.
fn choose(candidates: &[Candidate], local_only: bool) -> Target {
    if candidates.is_empty() {
        return Target::Reject;
    }
    let eligible: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| !local_only || c.local)
        .collect();
    let ready: Vec<Endpoint> = eligible
        .iter()
        .filter(|c| c.ready)
        .map(|c| c.endpoint)
        .collect();
    let chosen = if ready.is_empty() {
        eligible
            .iter()
            .filter(|c| c.serving && c.terminating)
            .map(|c| c.endpoint)
            .collect()
    } else {
        ready
    };
    match (chosen.is_empty(), local_only) {
        (false, _) => Target::Endpoints(chosen),
        // Only unusable endpoints anywhere: nobody can serve, refuse.
        (true, false) => Target::Reject,
        (true, true) if candidates.iter().any(|c| c.ready || c.serving) => Target::Drop,
        (true, true) => Target::Reject,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(value: serde_json::Value) -> Service {
        serde_json::from_value(value).unwrap()
    }

    fn slice(value: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(value).unwrap()
    }

    fn web(spec: serde_json::Value) -> Service {
        let mut s = json!({"metadata": {"namespace": "ns", "name": "web"},
            "spec": {"clusterIP": "10.43.0.20", "ports": [{"name": "http", "port": 80}]}});
        for (k, v) in spec.as_object().unwrap() {
            s["spec"][k] = v.clone();
        }
        service(s)
    }

    /// Endpoints `(ip, node, ready, serving, terminating)` on port 8080 "http".
    fn web_slice(endpoints: &[(&str, &str, bool, bool, bool)]) -> EndpointSlice {
        let eps: Vec<_> = endpoints
            .iter()
            .map(|(ip, node, r, s, t)| {
                json!({"addresses": [ip], "nodeName": node,
                "conditions": {"ready": r, "serving": s, "terminating": t}})
            })
            .collect();
        slice(json!({"metadata": {"namespace": "ns", "name": "web-abc",
            "labels": {SERVICE_NAME_LABEL: "web"}},
            "addressType": "IPv4", "endpoints": eps,
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}))
    }

    fn ep(ip: &str) -> Endpoint {
        Endpoint {
            ip: ip.parse().unwrap(),
            port: 8080,
        }
    }

    #[test]
    fn cluster_ip_port_goes_to_ready_endpoints_on_the_target_port() {
        let svc = web(json!({}));
        let slices = [web_slice(&[
            ("10.42.0.5", "n1", true, true, false),
            ("10.42.0.6", "n2", true, true, false),
            ("10.42.0.7", "n1", false, false, false),
        ])];
        let plans = plan("n1", [&svc], &slices);
        assert_eq!(plans.len(), 1);
        let p = &plans[0];
        assert_eq!(p.id(), "ns/web/tcp/http");
        assert_eq!(p.cluster_ip, Some("10.43.0.20".parse().unwrap()));
        assert_eq!(p.port, 80);
        assert_eq!(
            p.internal,
            Target::Endpoints(vec![ep("10.42.0.5"), ep("10.42.0.6")])
        );
        assert_eq!(p.node_port, None);
        assert_eq!(p.affinity_seconds, None);
    }

    #[test]
    fn terminating_endpoints_serve_only_when_none_is_ready() {
        let svc = web(json!({}));
        // (ip, node, ready, serving, terminating) per endpoint, and the one
        // that serves: a ready one over a terminating one; with none ready,
        // the serving terminating one.
        for (endpoints, served) in [
            (
                [
                    ("10.42.0.5", "n1", true, true, false),
                    ("10.42.0.6", "n1", false, true, true),
                ],
                "10.42.0.5",
            ),
            (
                [
                    ("10.42.0.6", "n1", false, true, true),
                    ("10.42.0.7", "n1", false, false, true),
                ],
                "10.42.0.6",
            ),
        ] {
            let slices = [web_slice(&endpoints)];
            assert_eq!(
                plan("n1", [&svc], &slices)[0].internal,
                Target::Endpoints(vec![ep(served)]),
                "{endpoints:?}"
            );
        }
    }

    #[test]
    fn no_endpoints_rejects_and_local_policy_without_local_endpoints_drops() {
        let svc = web(json!({"type": "NodePort", "externalTrafficPolicy": "Local",
            "internalTrafficPolicy": "Local",
            "ports": [{"name": "http", "port": 80, "nodePort": 30080}]}));
        let empty: [EndpointSlice; 0] = [];
        let p = &plan("n1", [&svc], &empty)[0];
        assert_eq!(
            (&p.internal, &p.external),
            (&Target::Reject, &Target::Reject)
        );
        let remote = [web_slice(&[("10.42.1.5", "n2", true, true, false)])];
        let p = &plan("n1", [&svc], &remote)[0];
        assert_eq!((&p.internal, &p.external), (&Target::Drop, &Target::Drop));
        assert_eq!(p.node_port, Some(30080));
        assert!(p.external_local);
        let mixed = [web_slice(&[
            ("10.42.1.5", "n2", true, true, false),
            ("10.42.0.5", "n1", true, true, false),
        ])];
        let p = &plan("n1", [&svc], &mixed)[0];
        assert_eq!(p.external, Target::Endpoints(vec![ep("10.42.0.5")]));
    }

    #[test]
    fn cluster_policy_uses_every_node() {
        let svc = web(json!({"type": "NodePort",
            "ports": [{"name": "http", "port": 80, "nodePort": 30080}]}));
        let slices = [web_slice(&[
            ("10.42.1.5", "n2", true, true, false),
            ("10.42.0.5", "n1", true, true, false),
        ])];
        let p = &plan("n1", [&svc], &slices)[0];
        assert_eq!(
            p.external,
            Target::Endpoints(vec![ep("10.42.0.5"), ep("10.42.1.5")])
        );
        assert!(!p.external_local);
    }

    #[test]
    fn affinity_external_ips_and_load_balancer_ingress() {
        let mut svc = web(
            json!({"type": "LoadBalancer", "sessionAffinity": "ClientIP",
            "externalIPs": ["192.0.2.50"],
            "ports": [{"name": "http", "port": 80, "nodePort": 30080}]}),
        );
        svc.status = serde_json::from_value(
            json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.2"}, {"hostname": "x"}]}}),
        )
        .unwrap();
        let p = &plan("n1", [&svc], &[web_slice(&[])])[0];
        assert_eq!(p.affinity_seconds, Some(DEFAULT_AFFINITY_SECONDS));
        assert_eq!(
            p.external_ips,
            vec![
                "192.0.2.2".parse::<Ipv4Addr>().unwrap(),
                "192.0.2.50".parse().unwrap()
            ]
        );
        let timed = web(json!({"sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}}));
        assert_eq!(
            plan("n1", [&timed], &[web_slice(&[])])[0].affinity_seconds,
            Some(60)
        );
    }

    #[test]
    fn headless_external_name_and_unmatched_ports_are_skipped() {
        let headless = web(json!({"clusterIP": "None"}));
        let external = web(json!({"type": "ExternalName", "externalName": "example.com"}));
        assert!(plan("n1", [&headless, &external], &[web_slice(&[])]).is_empty());
        // The slice's port is named "http"; an unnamed service port does not
        // match it, so it has no endpoints.
        let unnamed = web(json!({"ports": [{"port": 80}]}));
        let slices = [web_slice(&[("10.42.0.5", "n1", true, true, false)])];
        let p = &plan("n1", [&unnamed], &slices)[0];
        assert_eq!(p.internal, Target::Reject);
        assert_eq!(p.id(), "ns/web/tcp/80");
    }

    #[test]
    fn slices_of_other_services_or_namespaces_do_not_count() {
        let svc = web(json!({}));
        let mut other = web_slice(&[("10.42.0.9", "n1", true, true, false)]);
        other.metadata.namespace = Some("elsewhere".into());
        assert_eq!(plan("n1", [&svc], &[other])[0].internal, Target::Reject);
    }

    #[test]
    fn node_facts_take_this_nodes_addresses_and_every_pod_cidr() {
        let nodes: Vec<Node> = vec![
            serde_json::from_value(json!({"metadata": {"name": "n1"},
                "spec": {"podCIDR": "10.42.0.0/24"},
                "status": {"addresses": [{"type": "InternalIP", "address": "192.0.2.2"},
                    {"type": "Hostname", "address": "n1"}]}}))
            .unwrap(),
            serde_json::from_value(json!({"metadata": {"name": "n2"},
                "spec": {"podCIDR": "10.42.1.0/24", "podCIDRs": ["10.42.1.0/24"]},
                "status": {"addresses": [{"type": "InternalIP", "address": "192.0.2.3"}]}}))
            .unwrap(),
        ];
        let facts = NodeFacts::from_nodes("n1", &nodes);
        assert_eq!(
            facts.addresses.into_iter().collect::<Vec<_>>(),
            vec!["192.0.2.2".parse::<Ipv4Addr>().unwrap()]
        );
        assert_eq!(
            facts.pod_cidrs.into_iter().collect::<Vec<_>>(),
            vec!["10.42.0.0/24".to_string(), "10.42.1.0/24".to_string()]
        );
    }
}
