//! Backends: an Ingress's Service port resolved to the ready endpoints of
//! the Service's EndpointSlices, picked round-robin.
//!
//! The Service port is found by name or number; the slices' port of the
//! same name (empty for an unnamed Service port) gives each endpoint's
//! port, as the service proxy pairs them. Endpoints count when
//! `conditions.ready` is not false (unset is ready, as upstream says).

use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use skiff_informer::Cache;

use crate::routes::{BackendRef, PortRef};

/// The label tying an EndpointSlice to its Service.
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// The ready endpoints of one backend, taken in turn.
#[derive(Debug, Default)]
pub struct Pool {
    endpoints: Vec<SocketAddr>,
    next: AtomicUsize,
}

impl Pool {
    /// A pool of these endpoints (in this order).
    pub fn new(endpoints: Vec<SocketAddr>) -> Self {
        Self {
            endpoints,
            next: AtomicUsize::new(0),
        }
    }

    /// The next endpoint, or None when none is ready.
    pub fn pick(&self) -> Option<SocketAddr> {
        if self.endpoints.is_empty() {
            return None;
        }
        let turn = self.next.fetch_add(1, Ordering::Relaxed);
        Some(self.endpoints[turn % self.endpoints.len()])
    }

    /// Every endpoint of the pool.
    pub fn endpoints(&self) -> &[SocketAddr] {
        &self.endpoints
    }
}

/// The ready endpoints of `backend`'s Service port (empty when the Service
/// or port does not exist), sorted.
pub(crate) fn resolve(
    backend: &BackendRef,
    services: &Cache<Service>,
    slices: &Cache<EndpointSlice>,
) -> Vec<SocketAddr> {
    let Some(service) = services.get(&backend.namespace, &backend.service) else {
        return Vec::new();
    };
    let Some(ports) = service.spec.as_ref().and_then(|s| s.ports.as_ref()) else {
        return Vec::new();
    };
    let port = ports.iter().find(|p| match &backend.port {
        PortRef::Number(n) => p.port == *n,
        PortRef::Name(name) => p.name.as_deref() == Some(name.as_str()),
    });
    let Some(port) = port else {
        return Vec::new();
    };
    let port_name = port.name.clone().unwrap_or_default();
    let mut found = BTreeSet::new();
    for slice in slices.list_namespace(&backend.namespace) {
        let owner = slice
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(SERVICE_NAME_LABEL));
        if owner != Some(&backend.service) {
            continue;
        }
        let slice_port = slice
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.clone().unwrap_or_default() == port_name)
            .and_then(|p| p.port);
        let Some(number) = slice_port.and_then(|p| u16::try_from(p).ok()) else {
            continue;
        };
        for endpoint in &slice.endpoints {
            let ready = endpoint.conditions.as_ref().and_then(|c| c.ready);
            if ready == Some(false) {
                continue;
            }
            for address in &endpoint.addresses {
                if let Ok(ip) = address.parse::<IpAddr>() {
                    found.insert(SocketAddr::new(ip, number));
                }
            }
        }
    }
    found.into_iter().collect()
}

/// Resolves every backend in `backends` once.
pub(crate) fn resolve_all<'a>(
    backends: impl IntoIterator<Item = &'a BackendRef>,
    services: &Cache<Service>,
    slices: &Cache<EndpointSlice>,
) -> HashMap<BackendRef, Pool> {
    let mut pools = HashMap::new();
    for backend in backends {
        if !pools.contains_key(backend) {
            let endpoints = resolve(backend, services, slices);
            pools.insert(backend.clone(), Pool::new(endpoints));
        }
    }
    pools
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    fn caches() -> (Cache<Service>, Cache<EndpointSlice>) {
        let services = Cache::new();
        services.insert(Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": "web", "namespace": "ns"},
                "spec": {"ports": [
                    {"name": "http", "port": 80, "targetPort": 8080},
                    {"name": "admin", "port": 9000, "targetPort": 9090},
                ]},
            }))
            .expect("Service"),
        ));
        let slices = Cache::new();
        slices.insert(Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": "web-1", "namespace": "ns",
                             "labels": {"kubernetes.io/service-name": "web"}},
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": 8080}, {"name": "admin", "port": 9090}],
                "endpoints": [
                    {"addresses": ["10.0.0.1"], "conditions": {"ready": true}},
                    {"addresses": ["10.0.0.2"], "conditions": {"ready": false}},
                    {"addresses": ["10.0.0.3"]},
                ],
            }))
            .expect("EndpointSlice"),
        ));
        (services, slices)
    }

    fn backend(port: PortRef) -> BackendRef {
        BackendRef {
            namespace: "ns".into(),
            service: "web".into(),
            port,
        }
    }

    #[test]
    fn ready_endpoints_of_the_named_or_numbered_port() {
        let (services, slices) = caches();
        let by_number = resolve(&backend(PortRef::Number(80)), &services, &slices);
        let addrs: Vec<String> = by_number.iter().map(|a| a.to_string()).collect();
        assert_eq!(addrs, ["10.0.0.1:8080", "10.0.0.3:8080"]);
        let by_name = resolve(&backend(PortRef::Name("admin".into())), &services, &slices);
        let addrs: Vec<String> = by_name.iter().map(|a| a.to_string()).collect();
        assert_eq!(addrs, ["10.0.0.1:9090", "10.0.0.3:9090"]);
    }

    #[test]
    fn unknown_services_and_ports_have_no_endpoints() {
        let (services, slices) = caches();
        assert!(resolve(&backend(PortRef::Number(81)), &services, &slices).is_empty());
        let mut other = backend(PortRef::Number(80));
        other.service = "other".into();
        assert!(resolve(&other, &services, &slices).is_empty());
    }

    #[test]
    fn the_pool_takes_endpoints_in_turn() {
        let a: SocketAddr = "10.0.0.1:80".parse().expect("addr");
        let b: SocketAddr = "10.0.0.2:80".parse().expect("addr");
        let pool = Pool::new(vec![a, b]);
        let picks: Vec<_> = (0..4).filter_map(|_| pool.pick()).collect();
        assert_eq!(picks, [a, b, a, b]);
        assert_eq!(Pool::new(Vec::new()).pick(), None);
    }
}
