//! The downward API: a pod's own fields and its containers' resources as
//! text, for env vars (`fieldRef`, `resourceFieldRef`) and downwardAPI volumes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, ResourceFieldSelector};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use skiff_common::quantity;

/// A field or resource the agent cannot provide.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FieldError {
    /// The field path is not one the downward API offers.
    #[error("unsupported fieldRef {0:?}")]
    UnsupportedField(String),
    /// The resource name is not one the downward API offers.
    #[error("unsupported resourceFieldRef {0:?}")]
    UnsupportedResource(String),
    /// The divisor is not a positive quantity.
    #[error("invalid divisor {0:?}")]
    InvalidDivisor(String),
}

/// The node's allocatable CPU (cores) and memory (bytes): the values of
/// `limits.*` for containers without a limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct NodeAllocatable {
    /// CPU cores.
    pub cpu: f64,
    /// Memory in bytes.
    pub memory: f64,
    /// Ephemeral storage in bytes.
    pub ephemeral_storage: f64,
    /// Pods.
    pub pods: u32,
}

/// The value of a pod field such as `metadata.name` or
/// `metadata.labels['app']`.
pub(crate) fn field_value(
    pod: &Pod,
    path: &str,
    host_ip: &str,
    pod_ip: &str,
) -> Result<String, FieldError> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let subscript = |prefix: &str, map: &Option<BTreeMap<String, String>>| {
        path.strip_prefix(prefix)
            .and_then(|rest| rest.strip_suffix("']"))
            .map(|key| {
                map.as_ref()
                    .and_then(|m| m.get(key))
                    .cloned()
                    .unwrap_or_default()
            })
    };
    if let Some(v) = subscript("metadata.labels['", &meta.labels) {
        return Ok(v);
    }
    if let Some(v) = subscript("metadata.annotations['", &meta.annotations) {
        return Ok(v);
    }
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    Ok(match path {
        "metadata.name" => text(&meta.name),
        "metadata.namespace" => text(&meta.namespace),
        "metadata.uid" => text(&meta.uid),
        "metadata.labels" => format_map(meta.labels.as_ref()),
        "metadata.annotations" => format_map(meta.annotations.as_ref()),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.hostIP" | "status.hostIPs" => host_ip.to_string(),
        "status.podIP" | "status.podIPs" => pod_ip.to_string(),
        other => return Err(FieldError::UnsupportedField(other.to_string())),
    })
}

/// `key="value"` lines, sorted by key, as downwardAPI files show maps
/// (upstream's: no newline after the last).
pub(crate) fn format_map(map: Option<&BTreeMap<String, String>>) -> String {
    let lines: Vec<String> = (map.into_iter().flatten())
        .map(|(k, v)| format!("{k}={v:?}"))
        .collect();
    lines.join("\n")
}

/// The value of `limits.cpu`, `requests.memory`, ... for `container`,
/// divided by the divisor and rounded up as upstream does.
pub(crate) fn resource_value(
    container: &Container,
    selector: &ResourceFieldSelector,
    allocatable: &NodeAllocatable,
) -> Result<String, FieldError> {
    let resources = container.resources.as_ref();
    let get = |which: &str, name: &str| {
        let map = match which {
            "limits" => resources.and_then(|r| r.limits.as_ref()),
            _ => resources.and_then(|r| r.requests.as_ref()),
        };
        map.and_then(|m| m.get(name))
            .and_then(quantity::milli_value)
    };
    let (which, name) = selector
        .resource
        .split_once('.')
        .ok_or_else(|| FieldError::UnsupportedResource(selector.resource.clone()))?;
    let node_default = match name {
        "cpu" => allocatable.cpu,
        "memory" => allocatable.memory,
        "ephemeral-storage" => allocatable.ephemeral_storage,
        _ => return Err(FieldError::UnsupportedResource(selector.resource.clone())),
    };
    // Everything in thousandths of a unit, so CPU and memory divide exactly.
    let value = match which {
        "limits" => get("limits", name).unwrap_or((node_default * 1000.0).round() as i64),
        "requests" => get("requests", name).unwrap_or(0),
        _ => return Err(FieldError::UnsupportedResource(selector.resource.clone())),
    };
    let default_divisor = Quantity("1".to_string());
    let divisor_q = selector.divisor.as_ref().unwrap_or(&default_divisor);
    let divisor = quantity::milli_value(divisor_q)
        .filter(|d| *d > 0)
        .ok_or_else(|| FieldError::InvalidDivisor(divisor_q.0.clone()))?;
    // Rounded up, as upstream does.
    let rounded = value / divisor + i64::from(value % divisor > 0);
    Ok(rounded.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "prod", "uid": "u-1",
                          "labels": {"app": "web", "tier": "front"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {
                "limits": {"memory": "64Mi"}, "requests": {"cpu": "250m"}}}]}
        }))
        .unwrap()
    }

    #[test]
    fn fields_and_subscripts() {
        let p = pod();
        let f = |path| field_value(&p, path, "192.0.2.1", "10.42.0.5").unwrap();
        assert_eq!(f("metadata.name"), "web");
        assert_eq!(f("metadata.namespace"), "prod");
        assert_eq!(f("metadata.labels['tier']"), "front");
        assert_eq!(f("spec.nodeName"), "n1");
        assert_eq!(f("status.podIP"), "10.42.0.5");
        assert_eq!(f("metadata.labels"), "app=\"web\"\ntier=\"front\"");
        assert!(field_value(&p, "spec.bogus", "", "").is_err());
    }

    #[test]
    fn resources_use_divisors_and_node_defaults() {
        let p = pod();
        let c = &p.spec.as_ref().unwrap().containers[0];
        let node = NodeAllocatable {
            cpu: 4.0,
            memory: 8.0 * 1024.0 * 1024.0 * 1024.0,
            ephemeral_storage: 1e10,
            pods: 110,
        };
        let sel = |resource: &str, divisor: Option<&str>| ResourceFieldSelector {
            resource: resource.to_string(),
            divisor: divisor.map(|d| Quantity(d.to_string())),
            container_name: None,
        };
        let v = |s| resource_value(c, &s, &node).unwrap();
        assert_eq!(v(sel("limits.memory", Some("1Mi"))), "64");
        assert_eq!(v(sel("requests.cpu", Some("1m"))), "250");
        assert_eq!(v(sel("requests.cpu", None)), "1");
        assert_eq!(v(sel("limits.cpu", None)), "4");
    }
}
