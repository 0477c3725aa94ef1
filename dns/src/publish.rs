//! Publishes where this DNS server listens as the `kube-dns` Service's
//! endpoints, so the service proxy can send 10.43.0.10:53 here.
//!
//! Each server writes a slice of its own, named after its API server
//! identity Lease and owned by it: servers sharing one store no longer
//! overwrite each other's address, and when a server dies its Lease is
//! deleted (`peer_endpoints` in the API server) and the garbage collector
//! takes its slice with it, so the proxy stops sending queries there.

use std::net::{IpAddr, SocketAddr};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use serde_json::json;

use crate::zone::SERVICE_NAME_LABEL;

/// Namespace of the `kube-dns` Service.
pub const NAMESPACE: &str = "kube-system";
/// Name of the Service pods' nameserver IP belongs to.
pub const SERVICE: &str = "kube-dns";
/// Name of the EndpointSlice of a DNS server with no owner Lease, and the
/// prefix of the others' (`kube-dns-skiff-<hash of the Lease>`). Before
/// slices were per server, every server wrote this one.
pub const SLICE: &str = "kube-dns-skiff";
/// Where the API servers' identity Leases are.
const LEASE_NAMESPACE: &str = "kube-system";
/// `endpointslice.kubernetes.io/managed-by` value of that slice (the
/// EndpointSlice controller leaves slices of other managers alone).
pub const MANAGED_BY: &str = "skiff-dns";

/// Why publishing failed (retried).
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// Reading or writing through the API failed.
    #[error("publishing the kube-dns endpoints: {0}")]
    Api(#[from] kube::Error),
    /// The server's identity Lease, the slice's owner, is not there (yet:
    /// the API server writes it soon after it starts serving).
    #[error(
        "publishing the kube-dns endpoints: the owner Lease kube-system/{0} does not exist yet"
    )]
    OwnerMissing(String),
}

/// The slice a server whose identity Lease is `owner_lease` publishes;
/// [`SLICE`] without one.
pub fn slice_name(owner_lease: Option<&str>) -> String {
    match owner_lease {
        Some(lease) => format!("{SLICE}-{}", lease.trim_start_matches("apiserver-")),
        None => SLICE.to_owned(),
    }
}

/// The EndpointSlice `name` saying `kube-dns` is served at `ip`:`port`
/// (UDP and TCP), its metrics at `ip`:`metrics_port`.
pub fn endpoint_slice(
    name: &str,
    ip: IpAddr,
    port: u16,
    metrics_port: Option<u16>,
    node: Option<&str>,
) -> EndpointSlice {
    let family = if ip.is_ipv4() { "IPv4" } else { "IPv6" };
    let mut endpoint = json!({"addresses": [ip.to_string()], "conditions": {"ready": true}});
    if let Some(node) = node {
        endpoint["nodeName"] = json!(node);
    }
    let mut ports = vec![
        json!({"name": "dns", "port": port, "protocol": "UDP"}),
        json!({"name": "dns-tcp", "port": port, "protocol": "TCP"}),
    ];
    if let Some(metrics) = metrics_port {
        ports.push(json!({"name": "metrics", "port": metrics, "protocol": "TCP"}));
    }
    serde_json::from_value(json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {
            SERVICE_NAME_LABEL: SERVICE,
            "endpointslice.kubernetes.io/managed-by": MANAGED_BY,
        }},
        "addressType": family,
        "endpoints": [endpoint],
        "ports": ports,
    }))
    .unwrap_or_default()
}

/// The `kube-dns` Service at `cluster_ip`: no selector (its endpoints are
/// this server's slice), ports `dns` 53/UDP, `dns-tcp` 53/TCP and `metrics`
/// 9153/TCP, labelled `k8s-app=kube-dns` as upstream.
pub fn service(cluster_ip: IpAddr) -> Service {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": SERVICE, "namespace": NAMESPACE, "labels": {
            "k8s-app": "kube-dns",
            "kubernetes.io/cluster-service": "true",
            "kubernetes.io/name": "CoreDNS",
        }},
        "spec": {
            "type": "ClusterIP",
            "clusterIP": cluster_ip.to_string(),
            "clusterIPs": [cluster_ip.to_string()],
            "ports": [
                {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53},
                {"name": "metrics", "port": 9153, "protocol": "TCP", "targetPort": 9153},
            ],
        },
    }))
    .unwrap_or_default()
}

/// Creates the `kube-dns` Service when it is missing; an existing one
/// (perhaps edited by the admin) is left as it is.
pub async fn ensure_service(client: &kube::Client, cluster_ip: IpAddr) -> Result<(), PublishError> {
    let api: Api<Service> = Api::namespaced(client.clone(), NAMESPACE);
    if api.get_opt(SERVICE).await?.is_some() {
        return Ok(());
    }
    match api
        .create(&PostParams::default(), &service(cluster_ip))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Creates or updates this server's slice for `address` (and the metrics
/// port), owned by the Lease `owner_lease` when there is one, and removes
/// the slice all servers shared before.
pub async fn publish(
    client: &kube::Client,
    address: SocketAddr,
    metrics_port: Option<u16>,
    node: Option<&str>,
    owner_lease: Option<&str>,
) -> Result<(), PublishError> {
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), NAMESPACE);
    let name = slice_name(owner_lease);
    let mut wanted = endpoint_slice(&name, address.ip(), address.port(), metrics_port, node);
    if let Some(lease) = owner_lease {
        wanted.metadata.owner_references = Some(vec![lease_owner(client, lease).await?]);
    }
    match api.get_opt(&name).await? {
        None => {
            api.create(&PostParams::default(), &wanted).await?;
        }
        Some(current)
            if current.endpoints == wanted.endpoints
                && current.ports == wanted.ports
                && current.metadata.owner_references == wanted.metadata.owner_references => {}
        Some(current) => {
            wanted.metadata = ObjectMeta {
                resource_version: current.metadata.resource_version,
                ..wanted.metadata
            };
            api.replace(&name, &PostParams::default(), &wanted).await?;
        }
    }
    if name != SLICE {
        forget_shared_slice(&api).await?;
    }
    Ok(())
}

/// The owner reference naming the Lease `name` (its current uid).
async fn lease_owner(client: &kube::Client, name: &str) -> Result<OwnerReference, PublishError> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
    let lease = leases
        .get_opt(name)
        .await?
        .ok_or_else(|| PublishError::OwnerMissing(name.to_owned()))?;
    Ok(OwnerReference {
        api_version: "coordination.k8s.io/v1".into(),
        kind: "Lease".into(),
        name: name.to_owned(),
        uid: lease.metadata.uid.unwrap_or_default(),
        ..Default::default()
    })
}

/// Deletes the one slice every server wrote before slices were per
/// server: left behind, it would keep an address no server may serve.
async fn forget_shared_slice(api: &Api<EndpointSlice>) -> Result<(), PublishError> {
    let Some(shared) = api.get_opt(SLICE).await? else {
        return Ok(());
    };
    let ours = shared
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("endpointslice.kubernetes.io/managed-by"))
        .is_some_and(|m| m == MANAGED_BY);
    if !ours {
        return Ok(());
    }
    match api.delete(SLICE, &Default::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_server_s_slice_is_named_after_its_lease() {
        assert_eq!(slice_name(Some("apiserver-0a1b")), "kube-dns-skiff-0a1b");
        assert_eq!(slice_name(None), SLICE);
    }

    #[test]
    fn the_slice_names_the_service_both_protocols_and_the_metrics_port() {
        let slice = endpoint_slice(
            SLICE,
            "192.0.2.2".parse().unwrap(),
            53,
            Some(9153),
            Some("n1"),
        );
        let labels = slice.metadata.labels.unwrap();
        assert_eq!(labels[SERVICE_NAME_LABEL], "kube-dns");
        assert_eq!(slice.address_type, "IPv4");
        assert_eq!(slice.endpoints[0].addresses, ["192.0.2.2"]);
        assert_eq!(slice.endpoints[0].node_name.as_deref(), Some("n1"));
        let ports = slice.ports.unwrap_or_default();
        assert_kube_dns_ports(ports.into_iter().map(|p| (p.name, p.port, p.protocol)));
    }

    #[test]
    fn the_service_has_no_selector_and_the_dns_and_metrics_ports() {
        let svc = service("10.43.0.10".parse().unwrap());
        assert_eq!(svc.metadata.labels.unwrap()["k8s-app"], "kube-dns");
        let spec = svc.spec.unwrap();
        assert_eq!(spec.cluster_ip.as_deref(), Some("10.43.0.10"));
        assert!(spec.selector.is_none(), "its endpoints are the slices");
        let ports = spec.ports.unwrap_or_default();
        assert_kube_dns_ports(
            ports
                .into_iter()
                .map(|p| (p.name, Some(p.port), p.protocol)),
        );
    }

    /// Checks `ports` (name, port, protocol) are `dns` 53/UDP, `dns-tcp`
    /// 53/TCP and `metrics` 9153/TCP, in that order: what the Service and
    /// the slices both name.
    fn assert_kube_dns_ports(
        ports: impl Iterator<Item = (Option<String>, Option<i32>, Option<String>)>,
    ) {
        let ports: Vec<_> = ports.collect();
        let named = |name: &str, port, protocol: &str| {
            (Some(name.to_owned()), Some(port), Some(protocol.to_owned()))
        };
        assert_eq!(
            ports,
            [
                named("dns", 53, "UDP"),
                named("dns-tcp", 53, "TCP"),
                named("metrics", 9153, "TCP")
            ]
        );
    }
}
