//! Publishes where this DNS server listens as the `kube-dns` Service's
//! endpoints, so the service proxy can send 10.43.0.10:53 here.

use std::net::{IpAddr, SocketAddr};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use serde_json::json;

use crate::zone::SERVICE_NAME_LABEL;

/// Namespace of the `kube-dns` Service.
pub const NAMESPACE: &str = "kube-system";
/// Name of the Service pods' nameserver IP belongs to.
pub const SERVICE: &str = "kube-dns";
/// Name of the EndpointSlice this server owns.
pub const SLICE: &str = "kube-dns-skiff";
/// `endpointslice.kubernetes.io/managed-by` value of that slice (the
/// EndpointSlice controller leaves slices of other managers alone).
pub const MANAGED_BY: &str = "skiff-dns";

/// Why publishing failed.
#[derive(Debug, thiserror::Error)]
#[error("publishing the kube-dns endpoints: {0}")]
pub struct PublishError(#[from] kube::Error);

/// The EndpointSlice saying `kube-dns` is served at `ip`:`port` (UDP and
/// TCP), its metrics at `ip`:`metrics_port`.
pub fn endpoint_slice(
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
        "metadata": {"name": SLICE, "namespace": NAMESPACE, "labels": {
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

/// Creates or updates the slice for `address` (and the metrics port).
pub async fn publish(
    client: &kube::Client,
    address: SocketAddr,
    metrics_port: Option<u16>,
    node: Option<&str>,
) -> Result<(), PublishError> {
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), NAMESPACE);
    let mut wanted = endpoint_slice(address.ip(), address.port(), metrics_port, node);
    match api.get_opt(SLICE).await? {
        None => {
            api.create(&PostParams::default(), &wanted).await?;
        }
        Some(current) if current.endpoints == wanted.endpoints && current.ports == wanted.ports => {
        }
        Some(current) => {
            wanted.metadata = ObjectMeta {
                resource_version: current.metadata.resource_version,
                ..wanted.metadata
            };
            api.replace(SLICE, &PostParams::default(), &wanted).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slice_names_the_service_both_protocols_and_the_metrics_port() {
        let slice = endpoint_slice("192.0.2.2".parse().unwrap(), 53, Some(9153), Some("n1"));
        let labels = slice.metadata.labels.unwrap();
        assert_eq!(labels[SERVICE_NAME_LABEL], "kube-dns");
        assert_eq!(slice.address_type, "IPv4");
        assert_eq!(slice.endpoints[0].addresses, ["192.0.2.2"]);
        assert_eq!(slice.endpoints[0].node_name.as_deref(), Some("n1"));
        let ports: Vec<(String, i32, String)> = slice
            .ports
            .unwrap()
            .into_iter()
            .map(|p| (p.name.unwrap(), p.port.unwrap(), p.protocol.unwrap()))
            .collect();
        assert_eq!(
            ports,
            [
                ("dns".to_string(), 53, "UDP".to_string()),
                ("dns-tcp".to_string(), 53, "TCP".to_string()),
                ("metrics".to_string(), 9153, "TCP".to_string())
            ]
        );
    }
}
