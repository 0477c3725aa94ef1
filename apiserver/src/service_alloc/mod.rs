//! Cluster IPs and node ports for Services, allocated on create from the
//! service CIDR and the node-port range, unique across every API server on
//! one store: each allocated address and port is a record in the store
//! (`claims`), created only if absent, so of two servers choosing the same
//! one only the first stores it and the other chooses again. The choice
//! itself starts from what the services watch cache shows (so conflicts are
//! rare); a Service's records are released when it is deleted or stops
//! holding them, and a repair loop (`repair`) releases leaked records and
//! records what stored Services hold without one.

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::ops::RangeInclusive;

use serde_json::{Value, json};

use crate::object::{set_field, str_items};
use crate::status::FieldError;

mod claims;
pub(crate) mod repair;

pub(crate) use claims::AllocationGuard;
pub(crate) use claims::claim_for;

/// A service CIDR or node-port range that cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
#[error("invalid service network configuration: {0}")]
pub struct AllocConfigError(String);

/// Why a Service got no address or node port.
#[derive(Debug)]
pub(crate) enum AllocationError {
    /// What the Service asks for cannot be had (422, field by field).
    Invalid(Vec<FieldError>),
    /// Nothing is left to hand out: upstream answers 500 with `range is
    /// full` after this prefix.
    Full(&'static str),
}

/// Allocates cluster IPs and node ports.
pub(crate) struct ServiceAllocator {
    network: u32,
    size: u32,
    cidr: String,
    node_ports: RangeInclusive<u16>,
}

/// Addresses and ports known to be taken when choosing.
#[derive(Default, Debug)]
pub(crate) struct Used {
    pub ips: HashSet<String>,
    pub ports: HashSet<u16>,
}

impl Used {
    /// What `services` hold.
    pub(crate) fn of<'a>(services: impl Iterator<Item = &'a Value>) -> Self {
        let mut used = Used::default();
        for service in services {
            used.ips.extend(ips_of(service).map(String::from));
            used.ports.extend(node_ports_of(service));
        }
        used
    }
}

pub(crate) fn ips_of(service: &Value) -> impl Iterator<Item = &str> {
    let spec = &service["spec"];
    str_items(&spec["clusterIPs"]).chain(spec["clusterIP"].as_str())
}

pub(crate) fn node_ports_of(service: &Value) -> impl Iterator<Item = u16> {
    service["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["nodePort"].as_u64())
        .filter_map(|p| u16::try_from(p).ok())
}

impl ServiceAllocator {
    /// `cidr` like `10.43.0.0/16` (IPv4, prefix 8..=30).
    pub(crate) fn new(
        cidr: &str,
        node_ports: RangeInclusive<u16>,
    ) -> Result<Self, AllocConfigError> {
        let bad = || AllocConfigError(format!("service CIDR {cidr:?}"));
        let net = skiff_common::cidr::parse_v4(cidr)
            .and_then(|net| skiff_common::cidr::check_prefix(cidr, net, 8..=30))
            .map_err(|_| bad())?;
        if node_ports.is_empty() {
            return Err(bad());
        }
        Ok(Self {
            network: u32::from(net.network()),
            size: 1 << (32 - u32::from(net.prefix_len())),
            cidr: cidr.to_string(),
            node_ports,
        })
    }

    /// The address of the `kubernetes` Service (first in the range, never
    /// handed out to other Services).
    pub(crate) fn first_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.network + 1)
    }

    fn contains(&self, ip: Ipv4Addr) -> bool {
        let n = u32::from(ip);
        n > self.network && n < self.network + self.size - 1
    }

    /// Fills `spec.clusterIP(s)` and node ports of a new Service, given the
    /// Services already stored (only a choice: [`claim_for`] makes it
    /// durable).
    #[cfg(test)]
    pub(crate) fn allocate<'a>(
        &self,
        service: &mut Value,
        existing: impl Iterator<Item = &'a Value>,
    ) -> Result<(), AllocationError> {
        // A Service of the same name is not competition: the create fails
        // with AlreadyExists (409), as it should, not with its own address
        // "already allocated" (the kubernetes Service is re-created so at
        // every start).
        let same = |other: &Value| {
            let (a, b) = (&other["metadata"], &service["metadata"]);
            b["name"].as_str().is_some_and(|n| !n.is_empty())
                && a["name"] == b["name"]
                && a["namespace"] == b["namespace"]
        };
        let used = Used::of(existing.filter(|o| !same(o)));
        self.allocate_with(service, &used)
    }

    /// [`ServiceAllocator::allocate`] with what is taken given directly.
    pub(crate) fn allocate_with(
        &self,
        service: &mut Value,
        taken: &Used,
    ) -> Result<(), AllocationError> {
        let Some(spec) = service.get_mut("spec").filter(|s| s.is_object()) else {
            return Ok(());
        };
        let kind = spec["type"].as_str().unwrap_or("ClusterIP").to_string();
        let mut errors = Vec::new();
        if kind != "ExternalName" {
            let used: HashSet<&str> = taken.ips.iter().map(String::as_str).collect();
            let requested = spec["clusterIP"]
                .as_str()
                .or_else(|| spec["clusterIPs"][0].as_str())
                .map(String::from);
            let ip = match requested.as_deref() {
                Some("None") => Some("None".to_string()),
                Some("") | None => self.free_ip(&used).map(|ip| ip.to_string()),
                Some(wanted) => {
                    match wanted.parse::<Ipv4Addr>() {
                        Ok(addr) if !self.contains(addr) => {
                            errors.push(FieldError::invalid(
                            "spec.clusterIPs[0]",
                            wanted,
                            format!(
                                "failed to allocate IP {wanted}: provided IP is not in the valid range. The range of valid IPs is {}",
                                self.cidr
                            ),
                        ));
                            None
                        }
                        Ok(_) if used.contains(wanted) => {
                            errors.push(FieldError::invalid(
                            "spec.clusterIPs[0]",
                            wanted,
                            format!("failed to allocate IP {wanted}: provided IP is already allocated"),
                        ));
                            None
                        }
                        Ok(addr) => Some(addr.to_string()),
                        Err(_) => {
                            errors.push(FieldError::invalid(
                                "spec.clusterIPs[0]",
                                wanted,
                                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                            ));
                            None
                        }
                    }
                }
            };
            match ip {
                Some(ip) => {
                    set_field(spec, "clusterIP", json!(ip));
                    set_field(spec, "clusterIPs", json!([ip]));
                    set_field(spec, "ipFamilies", json!(["IPv4"]));
                    set_field(spec, "ipFamilyPolicy", json!("SingleStack"));
                    if spec.get("internalTrafficPolicy").is_none() {
                        set_field(spec, "internalTrafficPolicy", json!("Cluster"));
                    }
                }
                None if errors.is_empty() => {
                    return Err(AllocationError::Full("failed to allocate a serviceIP"));
                }
                None => {}
            }
        }
        if kind == "NodePort" || kind == "LoadBalancer" {
            let mut used: HashSet<u16> = taken.ports.clone();
            if spec.get("externalTrafficPolicy").is_none() {
                set_field(spec, "externalTrafficPolicy", json!("Cluster"));
            }
            if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
                for (i, port) in ports.iter_mut().enumerate() {
                    // 0 is Go's "unset" (protobuf bodies carry it explicitly).
                    if port["nodePort"] == 0
                        && let Some(p) = port.as_object_mut()
                    {
                        p.remove("nodePort");
                    }
                    match port["nodePort"].as_u64() {
                        Some(wanted) => {
                            let ok = u16::try_from(wanted)
                                .ok()
                                .filter(|p| self.node_ports.contains(p));
                            match ok {
                                Some(p) if used.insert(p) => {}
                                Some(_) => errors.push(FieldError::invalid(
                                    format!("spec.ports[{i}].nodePort"),
                                    wanted,
                                    "provided port is already allocated",
                                )),
                                None => errors.push(FieldError::invalid(
                                    format!("spec.ports[{i}].nodePort"),
                                    wanted,
                                    format!(
                                        "provided port is not in the valid range. The range of valid ports is {}-{}",
                                        self.node_ports.start(),
                                        self.node_ports.end()
                                    ),
                                )),
                            }
                        }
                        None => match self.free_node_port(&used) {
                            Some(p) => {
                                used.insert(p);
                                set_field(port, "nodePort", json!(p));
                            }
                            None => {
                                return Err(AllocationError::Full("failed to allocate a nodePort"));
                            }
                        },
                    }
                }
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(AllocationError::Invalid(errors))
        }
    }

    /// A free node port from a random starting point, as upstream: fixed
    /// ports chosen by users are then unlikely to be taken already, and
    /// separate clusters on one host rarely pick the same port.
    fn free_node_port(&self, used: &HashSet<u16>) -> Option<u16> {
        let first = u32::from(*self.node_ports.start());
        let span = u32::from(*self.node_ports.end()) - first + 1;
        let start = rand::random::<u32>() % span;
        (0..span)
            .filter_map(|i| u16::try_from(first + (start + i) % span).ok())
            .find(|p| !used.contains(p))
    }

    fn free_ip(&self, used: &HashSet<&str>) -> Option<Ipv4Addr> {
        // The first address is kept for the `kubernetes` service.
        let first = self.network + 2;
        let last = self.network + self.size - 2;
        let span = last.checked_sub(first)? + 1;
        let start = rand::random::<u32>() % span;
        (0..span)
            .map(|i| Ipv4Addr::from(first + (start + i) % span))
            .find(|ip| !used.contains(ip.to_string().as_str()))
    }
}

/// On update, fields allocated at create are kept when the new object
/// leaves them out (kubectl apply/replace often do).
pub(crate) fn keep_allocations(old: &Value, new: &mut Value) {
    let (old_spec, Some(spec)) = (&old["spec"], new.get_mut("spec").filter(|s| s.is_object()))
    else {
        return;
    };
    for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        if spec.get(field).is_none_or(|v| v.is_null() || v == "")
            && let Some(v) = old_spec.get(field)
        {
            set_field(spec, field, v.clone());
        }
    }
    let old_ports = old_spec["ports"].as_array().cloned().unwrap_or_default();
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports {
            if port.get("nodePort").is_some_and(|p| *p != 0) {
                continue;
            }
            let protocol = |p: &Value| p["protocol"].as_str().unwrap_or("TCP").to_string();
            let same = old_ports
                .iter()
                .find(|p| p["port"] == port["port"] && protocol(p) == protocol(port));
            if let Some(node_port) = same.and_then(|p| p.get("nodePort")) {
                set_field(port, "nodePort", node_port.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_unique_ips_and_ports() {
        let a = ServiceAllocator::new("10.43.0.0/29", 30000..=30001).unwrap();
        let mut existing: Vec<Value> = Vec::new();
        for _ in 0..5 {
            let mut svc = json!({"spec": {"type": "NodePort", "ports": [{"port": 80}]}});
            if existing.len() < 2 {
                a.allocate(&mut svc, existing.iter()).unwrap();
                assert!(svc["spec"]["ports"][0]["nodePort"].is_u64());
            } else {
                // Two node ports only.
                assert!(matches!(
                    a.allocate(&mut svc, existing.iter()),
                    Err(AllocationError::Full("failed to allocate a nodePort"))
                ));
                continue;
            }
            let ip: Ipv4Addr = svc["spec"]["clusterIP"].as_str().unwrap().parse().unwrap();
            assert!(a.contains(ip) && ip != a.first_ip());
            existing.push(svc);
        }
        let ips: HashSet<&str> = existing.iter().flat_map(ips_of).collect();
        assert_eq!(ips.len(), 2);
        let mut taken = json!({"spec": {"clusterIP": existing[0]["spec"]["clusterIP"].clone(), "ports": [{"port": 1}]}});
        let Err(AllocationError::Invalid(errors)) = a.allocate(&mut taken, existing.iter()) else {
            panic!("a taken address is invalid");
        };
        assert!(errors[0].render().contains("already allocated"));
        let mut outside = json!({"spec": {"clusterIP": "192.168.0.1"}});
        assert!(a.allocate(&mut outside, existing.iter()).is_err());
        let mut zero = json!({"spec": {"type": "NodePort", "ports": [{"port": 9, "nodePort": 0}]}});
        let fresh: Vec<Value> = Vec::new();
        a.allocate(&mut zero, fresh.iter()).unwrap();
        assert!(
            zero["spec"]["ports"][0]["nodePort"]
                .as_u64()
                .is_some_and(|p| p >= 30000)
        );
        let mut headless = json!({"spec": {"clusterIP": "None"}});
        a.allocate(&mut headless, existing.iter()).unwrap();
        assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
    }

    #[test]
    fn a_same_named_service_does_not_hold_the_address_against_it() {
        let a = ServiceAllocator::new("10.43.0.0/24", 30000..=30001).unwrap();
        let existing = [
            json!({"metadata": {"name": "kubernetes", "namespace": "default"},
            "spec": {"clusterIP": "10.43.0.1", "clusterIPs": ["10.43.0.1"]}}),
        ];
        let mut again = json!({"metadata": {"name": "kubernetes", "namespace": "default"},
            "spec": {"clusterIP": "10.43.0.1"}});
        assert!(a.allocate(&mut again, existing.iter()).is_ok());
        let mut other = json!({"metadata": {"name": "other", "namespace": "default"},
            "spec": {"clusterIP": "10.43.0.5"}});
        let taken = [json!({"metadata": {"name": "x", "namespace": "default"},
            "spec": {"clusterIP": "10.43.0.5"}})];
        assert!(a.allocate(&mut other, taken.iter()).is_err());
        let mut same_name_elsewhere = json!({"metadata": {"name": "x", "namespace": "other"},
            "spec": {"clusterIP": "10.43.0.5"}});
        assert!(a.allocate(&mut same_name_elsewhere, taken.iter()).is_err());
    }

    #[test]
    fn updates_keep_allocations() {
        let old = json!({"spec": {"clusterIP": "10.43.0.9", "clusterIPs": ["10.43.0.9"],
            "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30007}]}});
        let mut new = json!({"spec": {"ports": [{"port": 80, "protocol": "TCP"}]}});
        keep_allocations(&old, &mut new);
        assert_eq!(new["spec"]["clusterIP"], "10.43.0.9");
        assert_eq!(new["spec"]["ports"][0]["nodePort"], 30007);
    }
}
