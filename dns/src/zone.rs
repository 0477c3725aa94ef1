//! The cluster zone: answers for `*.svc.<domain>`, `*.pod.<domain>` and the
//! reverse names of Service and Pod IPs, read straight from the informer
//! caches on every query (so a change is visible as soon as the cache has it).

use std::net::IpAddr;
use std::sync::Arc;

use hickory_proto::rr::rdata::{A, AAAA, CNAME, NS, PTR, SOA, SRV};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use k8s_openapi::api::core::v1::{Pod, Service, ServicePort};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};
use skiff_informer::{Cache, CacheError, IndexFn};

use crate::names::{dashed, is_reverse, reverse_ip, undashed};

/// Label that ties an EndpointSlice to its Service.
pub(crate) const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// EndpointSlices by "namespace/service".
const SLICE_BY_SERVICE: &str = "dns/service";
/// Services by each of their cluster IPs.
const SERVICE_BY_IP: &str = "dns/cluster-ip";
/// Pods by each of their IPs.
const POD_BY_IP: &str = "dns/pod-ip";
/// EndpointSlices by the addresses of endpoints that have a hostname.
const SLICE_BY_HOSTNAME_IP: &str = "dns/hostname-ip";

/// What the zone says about a query.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    /// The name has records of the asked type.
    Answer {
        /// The answer section.
        answers: Vec<Record>,
        /// Addresses of SRV targets.
        additionals: Vec<Record>,
    },
    /// The name exists but has no record of the asked type (NOERROR, SOA).
    NoData,
    /// The name is in the cluster zone and does not exist (NXDOMAIN, SOA).
    NxDomain,
    /// Not a cluster name: the upstream resolvers answer it.
    Forward,
}

/// The caches the zone reads.
#[derive(Clone)]
pub struct ZoneSources {
    /// Every Service.
    pub services: Arc<Cache<Service>>,
    /// Every EndpointSlice.
    pub slices: Arc<Cache<EndpointSlice>>,
    /// Every Pod.
    pub pods: Arc<Cache<Pod>>,
}

/// The cluster zone over the informer caches.
pub struct ClusterZone {
    domain: String,
    origin: Name,
    ttl: u32,
    soa: Record,
    sources: ZoneSources,
}

impl ClusterZone {
    /// A zone for `domain` (e.g. `cluster.local`) answering with `ttl`
    /// seconds; registers the indexes it needs on the caches.
    pub fn new(domain: &str, ttl: u32, sources: ZoneSources) -> Result<Self, ZoneError> {
        let domain = domain.trim_end_matches('.').to_ascii_lowercase();
        let origin = fqdn(&domain)?;
        add_index(&sources.slices, SLICE_BY_SERVICE, slice_service_index())?;
        add_index(
            &sources.slices,
            SLICE_BY_HOSTNAME_IP,
            slice_hostname_ip_index(),
        )?;
        add_index(&sources.services, SERVICE_BY_IP, service_ip_index())?;
        add_index(&sources.pods, POD_BY_IP, pod_ip_index())?;
        let serial = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs() as u32);
        let soa = Record::from_rdata(
            origin.clone(),
            ttl,
            RData::SOA(SOA::new(
                fqdn(&format!("ns.dns.{domain}"))?,
                fqdn(&format!("hostmaster.{domain}"))?,
                serial,
                7200,
                1800,
                86400,
                ttl,
            )),
        );
        Ok(Self {
            domain,
            origin,
            ttl,
            soa,
            sources,
        })
    }

    /// The cluster domain, lowercase, without the trailing dot.
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// The zone's SOA record (the authority of negative answers).
    pub fn soa(&self) -> &Record {
        &self.soa
    }

    /// Answers `qtype` for `name` (any case, with or without the trailing dot).
    pub fn lookup(&self, name: &str, qtype: RecordType) -> Lookup {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        if is_reverse(&name) {
            return self.reverse(&name, qtype);
        }
        if name == self.domain {
            return match qtype {
                RecordType::SOA => answer(vec![self.soa.clone()]),
                RecordType::NS => match fqdn(&format!("ns.dns.{}", self.domain)) {
                    Ok(ns) => answer(vec![self.record(&name, RData::NS(NS(ns)))]),
                    Err(_) => Lookup::NoData,
                },
                _ => Lookup::NoData,
            };
        }
        let Some(relative) = name
            .strip_suffix(&self.domain)
            .and_then(|r| r.strip_suffix('.'))
        else {
            return Lookup::Forward;
        };
        let labels: Vec<&str> = relative.split('.').collect();
        match labels.as_slice() {
            ["svc"] | ["pod"] => Lookup::NoData,
            [namespace, "svc"] | [namespace, "pod"] => {
                if self.sources.services.list_namespace(namespace).is_empty()
                    && self.sources.pods.list_namespace(namespace).is_empty()
                {
                    Lookup::NxDomain
                } else {
                    Lookup::NoData
                }
            }
            [service, namespace, "svc"] => self.service(&name, namespace, service, qtype),
            [host, service, namespace, "svc"] => {
                self.endpoint_host(&name, namespace, service, host, qtype)
            }
            [port, proto, service, namespace, "svc"] => {
                match (port.strip_prefix('_'), proto.strip_prefix('_')) {
                    (Some(port), Some(proto)) => self.srv(namespace, service, port, proto, qtype),
                    _ => Lookup::NxDomain,
                }
            }
            [ip, _namespace, "pod"] => match undashed(ip) {
                Some(ip) => self.addresses(&name, &[ip], qtype),
                None => Lookup::NxDomain,
            },
            _ => Lookup::NxDomain,
        }
    }

    fn record(&self, name: &str, data: RData) -> Record {
        let name = fqdn(name).unwrap_or_else(|_| self.origin.clone());
        Record::from_rdata(name, self.ttl, data)
    }

    /// A/AAAA records of `ips` for `name`, filtered by the query type.
    fn addresses(&self, name: &str, ips: &[IpAddr], qtype: RecordType) -> Lookup {
        let records: Vec<Record> = ips
            .iter()
            .filter_map(|ip| self.address_record(name, *ip, qtype))
            .collect();
        if records.is_empty() {
            Lookup::NoData
        } else {
            answer(records)
        }
    }

    fn address_record(&self, name: &str, ip: IpAddr, qtype: RecordType) -> Option<Record> {
        match (ip, qtype) {
            (IpAddr::V4(v4), RecordType::A | RecordType::ANY) => {
                Some(self.record(name, RData::A(A(v4))))
            }
            (IpAddr::V6(v6), RecordType::AAAA | RecordType::ANY) => {
                Some(self.record(name, RData::AAAA(AAAA(v6))))
            }
            _ => None,
        }
    }

    fn service(&self, name: &str, namespace: &str, service: &str, qtype: RecordType) -> Lookup {
        let Some(svc) = self.sources.services.get(namespace, service) else {
            return Lookup::NxDomain;
        };
        let Some(spec) = svc.spec.as_ref() else {
            return Lookup::NoData;
        };
        if spec.type_.as_deref() == Some("ExternalName") {
            return match spec.external_name.as_deref().map(fqdn) {
                Some(Ok(target)) => answer(vec![self.record(name, RData::CNAME(CNAME(target)))]),
                _ => Lookup::NoData,
            };
        }
        let ips: Vec<IpAddr> = if is_headless(&svc) {
            self.ready_endpoints(namespace, service)
                .iter()
                .flat_map(|(_, e)| e.addresses.iter())
                .filter_map(|a| a.parse().ok())
                .collect()
        } else {
            cluster_ips(&svc)
        };
        self.addresses(name, &ips, qtype)
    }

    /// A headless Service's endpoint by hostname (StatefulSet pods) or dashed IP.
    fn endpoint_host(
        &self,
        name: &str,
        namespace: &str,
        service: &str,
        host: &str,
        qtype: RecordType,
    ) -> Lookup {
        let ips: Vec<IpAddr> = self
            .ready_endpoints(namespace, service)
            .iter()
            .flat_map(|(_, e)| {
                let named = e.hostname.as_deref() == Some(host);
                e.addresses
                    .iter()
                    .filter_map(|a| a.parse::<IpAddr>().ok())
                    .filter(move |ip| named || dashed(*ip) == host)
            })
            .collect();
        if ips.is_empty() {
            return Lookup::NxDomain;
        }
        self.addresses(name, &ips, qtype)
    }

    /// `_port._proto.service.namespace.svc`: one SRV per endpoint for headless
    /// Services, else one pointing at the Service name.
    fn srv(
        &self,
        namespace: &str,
        service: &str,
        port: &str,
        proto: &str,
        qtype: RecordType,
    ) -> Lookup {
        let Some(svc) = self.sources.services.get(namespace, service) else {
            return Lookup::NxDomain;
        };
        let wanted = |p: &ServicePort| {
            p.name.as_deref() == Some(port)
                && p.protocol
                    .as_deref()
                    .unwrap_or("TCP")
                    .eq_ignore_ascii_case(proto)
        };
        let Some(service_port) = svc
            .spec
            .as_ref()
            .and_then(|s| s.ports.as_ref())
            .and_then(|ports| ports.iter().find(|p| wanted(p)))
        else {
            return Lookup::NxDomain;
        };
        if !matches!(qtype, RecordType::SRV | RecordType::ANY) {
            return Lookup::NoData;
        }
        let owner = format!("_{port}._{proto}.{service}.{namespace}.svc.{}", self.domain);
        let service_name = format!("{service}.{namespace}.svc.{}", self.domain);
        let mut answers = Vec::new();
        let mut additionals = Vec::new();
        if !is_headless(&svc) {
            let Ok(target) = fqdn(&service_name) else {
                return Lookup::NxDomain;
            };
            let port = u16::try_from(service_port.port).unwrap_or(0);
            answers.push(self.record(&owner, RData::SRV(SRV::new(0, 100, port, target))));
            for ip in cluster_ips(&svc) {
                additionals.extend(self.address_record(&service_name, ip, RecordType::ANY));
            }
            return Lookup::Answer {
                answers,
                additionals,
            };
        }
        for (slice, endpoint) in self.ready_endpoints(namespace, service) {
            let Some(endpoint_port) = slice.ports.iter().flatten().find(|p| {
                p.name.as_deref().unwrap_or("") == port
                    && p.protocol
                        .as_deref()
                        .unwrap_or("TCP")
                        .eq_ignore_ascii_case(proto)
            }) else {
                continue;
            };
            let Some(port) = endpoint_port.port.and_then(|p| u16::try_from(p).ok()) else {
                continue;
            };
            for ip in endpoint.addresses.iter().filter_map(|a| a.parse().ok()) {
                let host = endpoint.hostname.clone().unwrap_or_else(|| dashed(ip));
                let target_name = format!("{host}.{service_name}");
                let Ok(target) = fqdn(&target_name) else {
                    continue;
                };
                answers.push(self.record(&owner, RData::SRV(SRV::new(0, 100, port, target))));
                additionals.extend(self.address_record(&target_name, ip, RecordType::ANY));
            }
        }
        if answers.is_empty() {
            Lookup::NoData
        } else {
            Lookup::Answer {
                answers,
                additionals,
            }
        }
    }

    /// PTR for Service cluster IPs, headless endpoints with a hostname and pod
    /// IPs; any other address is the upstream's business.
    fn reverse(&self, name: &str, qtype: RecordType) -> Lookup {
        let Some(ip) = reverse_ip(name) else {
            return Lookup::Forward;
        };
        let key = ip.to_string();
        let target = if let Some(svc) = first(self.sources.services.by_index(SERVICE_BY_IP, &key)) {
            Some(format!(
                "{}.{}.svc.{}",
                svc.metadata.name.as_deref().unwrap_or_default(),
                svc.metadata.namespace.as_deref().unwrap_or_default(),
                self.domain
            ))
        } else if let Some((slice, host)) = self.hostname_of(ip) {
            Some(format!(
                "{host}.{}.{}.svc.{}",
                service_of(&slice).unwrap_or_default(),
                slice.metadata.namespace.as_deref().unwrap_or_default(),
                self.domain
            ))
        } else {
            first(self.sources.pods.by_index(POD_BY_IP, &key)).map(|pod| {
                format!(
                    "{}.{}.pod.{}",
                    dashed(ip),
                    pod.metadata.namespace.as_deref().unwrap_or_default(),
                    self.domain
                )
            })
        };
        let Some(target) = target else {
            return Lookup::Forward;
        };
        if !matches!(qtype, RecordType::PTR | RecordType::ANY) {
            return Lookup::NoData;
        }
        match fqdn(&target) {
            Ok(target) => answer(vec![self.record(name, RData::PTR(PTR(target)))]),
            Err(_) => Lookup::NoData,
        }
    }

    fn hostname_of(&self, ip: IpAddr) -> Option<(Arc<EndpointSlice>, String)> {
        let key = ip.to_string();
        let slices = self
            .sources
            .slices
            .by_index(SLICE_BY_HOSTNAME_IP, &key)
            .ok()?;
        slices.into_iter().find_map(|slice| {
            let host = slice
                .endpoints
                .iter()
                .filter(|e| {
                    e.addresses
                        .iter()
                        .any(|a| a.parse::<IpAddr>().ok() == Some(ip))
                })
                .find_map(|e| e.hostname.clone())?;
            Some((slice, host))
        })
    }

    /// Ready endpoints of a Service with the slice each came from.
    fn ready_endpoints(
        &self,
        namespace: &str,
        service: &str,
    ) -> Vec<(Arc<EndpointSlice>, Endpoint)> {
        let slices = self
            .sources
            .slices
            .by_index(SLICE_BY_SERVICE, &format!("{namespace}/{service}"))
            .unwrap_or_default();
        let mut endpoints = Vec::new();
        for slice in slices {
            for endpoint in &slice.endpoints {
                let ready = endpoint
                    .conditions
                    .as_ref()
                    .and_then(|c| c.ready)
                    .unwrap_or(true);
                if ready {
                    endpoints.push((slice.clone(), endpoint.clone()));
                }
            }
        }
        endpoints
    }
}

/// Failures building the zone.
#[derive(Debug, thiserror::Error)]
pub enum ZoneError {
    /// The cluster domain is not a valid DNS name.
    #[error("cluster domain {domain:?} is not a valid DNS name: {reason}")]
    Domain {
        /// The domain as given.
        domain: String,
        /// Why it was refused.
        reason: String,
    },
    /// An index could not be registered on a cache.
    #[error("registering a DNS index: {0}")]
    Index(#[from] CacheError),
}

fn answer(answers: Vec<Record>) -> Lookup {
    Lookup::Answer {
        answers,
        additionals: Vec::new(),
    }
}

fn fqdn(name: &str) -> Result<Name, ZoneError> {
    let mut parsed = Name::from_ascii(name).map_err(|e| ZoneError::Domain {
        domain: name.to_owned(),
        reason: e.to_string(),
    })?;
    parsed.set_fqdn(true);
    Ok(parsed)
}

fn first<K>(found: Result<Vec<Arc<K>>, CacheError>) -> Option<Arc<K>> {
    found.ok().and_then(|mut v| v.pop())
}

fn add_index<K: kube::Resource>(
    cache: &Cache<K>,
    name: &str,
    index: IndexFn<K>,
) -> Result<(), ZoneError> {
    match cache.add_index(name, index) {
        Ok(()) | Err(CacheError::IndexExists(_)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn is_headless(svc: &Service) -> bool {
    svc.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None")
}

fn cluster_ips(svc: &Service) -> Vec<IpAddr> {
    let Some(spec) = svc.spec.as_ref() else {
        return Vec::new();
    };
    let listed: Vec<IpAddr> = spec
        .cluster_ips
        .iter()
        .flatten()
        .filter_map(|ip| ip.parse().ok())
        .collect();
    if !listed.is_empty() {
        return listed;
    }
    spec.cluster_ip
        .iter()
        .filter_map(|ip| ip.parse().ok())
        .collect()
}

fn service_of(slice: &EndpointSlice) -> Option<String> {
    slice
        .metadata
        .labels
        .as_ref()?
        .get(SERVICE_NAME_LABEL)
        .cloned()
}

fn slice_service_index() -> IndexFn<EndpointSlice> {
    Arc::new(|slice: &EndpointSlice| {
        match (slice.metadata.namespace.as_deref(), service_of(slice)) {
            (Some(ns), Some(service)) => vec![format!("{ns}/{service}")],
            _ => Vec::new(),
        }
    })
}

fn slice_hostname_ip_index() -> IndexFn<EndpointSlice> {
    Arc::new(|slice: &EndpointSlice| {
        slice
            .endpoints
            .iter()
            .filter(|e| e.hostname.is_some())
            .flat_map(|e| e.addresses.iter())
            .filter_map(|a| a.parse::<IpAddr>().ok())
            .map(|ip| ip.to_string())
            .collect()
    })
}

fn service_ip_index() -> IndexFn<Service> {
    Arc::new(|svc: &Service| cluster_ips(svc).iter().map(IpAddr::to_string).collect())
}

fn pod_ip_index() -> IndexFn<Pod> {
    Arc::new(|pod: &Pod| {
        let Some(status) = pod.status.as_ref() else {
            return Vec::new();
        };
        // Host-network pods share the node's IP; they get no pod PTR.
        if pod.spec.as_ref().and_then(|s| s.host_network) == Some(true) {
            return Vec::new();
        }
        let mut ips: Vec<String> = status
            .pod_ips
            .iter()
            .flatten()
            .filter_map(|p| p.ip.parse::<IpAddr>().ok())
            .map(|ip| ip.to_string())
            .collect();
        if ips.is_empty() {
            ips.extend(
                status
                    .pod_ip
                    .iter()
                    .filter_map(|ip| ip.parse::<IpAddr>().ok())
                    .map(|ip| ip.to_string()),
            );
        }
        ips
    })
}

#[cfg(test)]
#[path = "zone_tests.rs"]
mod tests;
