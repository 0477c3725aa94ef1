//! Services and PersistentVolumeClaims under quota: a Service is charged a
//! load balancer and its node ports by type, a claim its requested storage,
//! in all and per storage class.

use serde_json::Value;

use super::ResourceList;
use crate::amount::Amount;

/// The suffix of per-class quota names (`gold` + this + `requests.storage`).
const STORAGE_CLASS: &str = ".storageclass.storage.k8s.io/";

pub(super) fn is_service_resource(name: &str) -> bool {
    matches!(
        name,
        "services" | "services.loadbalancers" | "services.nodeports"
    )
}

pub(super) fn is_claim_resource(name: &str) -> bool {
    match name {
        "persistentvolumeclaims" | "requests.storage" => true,
        other => other
            .split_once(STORAGE_CLASS)
            .is_some_and(|(class, what)| {
                !class.is_empty() && matches!(what, "requests.storage" | "persistentvolumeclaims")
            }),
    }
}

/// One Service; a LoadBalancer also one load balancer; NodePort and
/// LoadBalancer Services one node port per port (a LoadBalancer that
/// allocates none only the ports that name one).
pub(super) fn service_usage(service: &Value) -> ResourceList {
    let spec = &service["spec"];
    let ports = spec["ports"].as_array().map_or(&[][..], Vec::as_slice);
    let mut usage = ResourceList::new();
    usage.insert("services".into(), Amount::count(1));
    let node_ports = match spec["type"].as_str() {
        Some("NodePort") => Some(ports.len()),
        Some("LoadBalancer") => {
            usage.insert("services.loadbalancers".into(), Amount::count(1));
            if spec["allocateLoadBalancerNodePorts"] == false {
                Some(
                    ports
                        .iter()
                        .filter(|p| p["nodePort"].as_i64().is_some_and(|n| n != 0))
                        .count(),
                )
            } else {
                Some(ports.len())
            }
        }
        _ => None,
    };
    if let Some(n) = node_ports {
        usage.insert(
            "services.nodeports".into(),
            Amount::count(i64::try_from(n).unwrap_or(i64::MAX)),
        );
    }
    usage
}

/// The storage class a claim asks for: the field, else the beta annotation.
fn storage_class(claim: &Value) -> Option<&str> {
    claim["spec"]["storageClassName"]
        .as_str()
        .or_else(|| {
            claim["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-class"].as_str()
        })
        .filter(|c| !c.is_empty())
}

/// One claim and its storage (the larger of what it requests and what was
/// allocated to it by a resize), also under its class's names.
pub(super) fn claim_usage(claim: &Value) -> ResourceList {
    let mut usage = ResourceList::new();
    usage.insert("persistentvolumeclaims".into(), Amount::count(1));
    let requested = claim["spec"]["resources"]["requests"]["storage"]
        .as_str()
        .and_then(Amount::parse);
    let allocated = claim["status"]["allocatedResources"]["storage"]
        .as_str()
        .and_then(Amount::parse);
    let storage = match (requested, allocated) {
        (Some(r), Some(a)) => Some(r.max(a)),
        (r, a) => r.or(a),
    };
    let class = storage_class(claim);
    if let Some(class) = class {
        usage.insert(
            format!("{class}{STORAGE_CLASS}persistentvolumeclaims"),
            Amount::count(1),
        );
    }
    if let Some(storage) = storage {
        usage.insert("requests.storage".into(), storage);
        if let Some(class) = class {
            usage.insert(format!("{class}{STORAGE_CLASS}requests.storage"), storage);
        }
    }
    usage
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::quota::pretty;

    #[test]
    fn services_are_charged_by_type() {
        let svc = |ty: &str| json!({"spec": {"type": ty, "ports": [{"port": 80}, {"port": 443}]}});
        assert_eq!(pretty(&service_usage(&svc("ClusterIP"))), "services=1");
        assert_eq!(
            pretty(&service_usage(&svc("NodePort"))),
            "services=1,services.nodeports=2"
        );
        assert_eq!(
            pretty(&service_usage(&svc("LoadBalancer"))),
            "services=1,services.loadbalancers=1,services.nodeports=2"
        );
        let mut lb = svc("LoadBalancer");
        lb["spec"]["allocateLoadBalancerNodePorts"] = json!(false);
        lb["spec"]["ports"][0]["nodePort"] = json!(30080);
        assert_eq!(
            pretty(&service_usage(&lb)),
            "services=1,services.loadbalancers=1,services.nodeports=1"
        );
    }

    #[test]
    fn claims_are_charged_storage_in_all_and_per_class() {
        let claim = json!({"spec": {"storageClassName": "gold",
            "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"allocatedResources": {"storage": "2Gi"}}});
        assert_eq!(
            pretty(&claim_usage(&claim)),
            "gold.storageclass.storage.k8s.io/persistentvolumeclaims=1,\
             gold.storageclass.storage.k8s.io/requests.storage=2Gi,\
             persistentvolumeclaims=1,requests.storage=2Gi"
        );
        assert!(is_claim_resource(
            "gold.storageclass.storage.k8s.io/requests.storage"
        ));
        assert!(!is_claim_resource(
            ".storageclass.storage.k8s.io/requests.storage"
        ));
        assert!(!is_claim_resource(
            "gold.storageclass.storage.k8s.io/limits.storage"
        ));
    }
}
