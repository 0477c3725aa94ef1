//! `status.loadBalancer.ingress` of served Ingresses: the node addresses the
//! listeners are reachable on, as k3s's Traefik reports its ServiceLB
//! addresses.

use std::net::IpAddr;

use k8s_openapi::api::networking::v1::{
    Ingress, IngressLoadBalancerIngress, IngressLoadBalancerStatus, IngressStatus,
};
use kube::Api;
use kube::api::PostParams;

/// The status an Ingress served on `addresses` should have.
pub(crate) fn desired(addresses: &[IpAddr]) -> IngressLoadBalancerStatus {
    IngressLoadBalancerStatus {
        ingress: Some(
            addresses
                .iter()
                .map(|ip| IngressLoadBalancerIngress {
                    ip: Some(ip.to_string()),
                    ..IngressLoadBalancerIngress::default()
                })
                .collect(),
        ),
    }
}

/// True when `ingress` already reports `wanted`.
pub(crate) fn is_current(ingress: &Ingress, wanted: &IngressLoadBalancerStatus) -> bool {
    let current = ingress
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref());
    let empty = |s: &IngressLoadBalancerStatus| s.ingress.as_ref().is_none_or(|i| i.is_empty());
    match current {
        Some(current) => current == wanted || (empty(current) && empty(wanted)),
        None => empty(wanted),
    }
}

/// Writes `wanted` into `ingress`'s status (a PUT of the status
/// subresource with the cached resourceVersion: a conflict means a newer
/// version is on its way through the informer, which brings another try).
pub(crate) async fn write(
    client: kube::Client,
    ingress: &Ingress,
    wanted: &IngressLoadBalancerStatus,
) -> Result<(), kube::Error> {
    let namespace = ingress.metadata.namespace.as_deref().unwrap_or("default");
    let name = ingress.metadata.name.as_deref().unwrap_or_default();
    let mut updated = ingress.clone();
    updated.metadata.managed_fields = None;
    updated.status = Some(IngressStatus {
        load_balancer: Some(wanted.clone()),
    });
    let api: Api<Ingress> = Api::namespaced(client, namespace);
    api.replace_status(name, &PostParams::default(), &updated)
        .await
        .map(|_| ())
}
