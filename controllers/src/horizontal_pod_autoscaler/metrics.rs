//! Where usage figures come from: the `metrics.k8s.io/v1beta1` PodMetrics
//! of the pods a selector picks, listed through the API as upstream's
//! resource metrics client does. Behind [`ResourceMetrics`] so tests can
//! feed figures; [`pod_usage`] turns a list into per-pod usage of one
//! resource.

use crate::controller_utils::api_message;
use futures::future::BoxFuture;
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::ApiResource;
use serde::Deserialize;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use skiff_common::duration::parse_go_duration;
use skiff_common::quantity::milli_value;

use super::replicas::{PodMetric, PodMetrics};

/// One pod's usage as the metrics API reports it.
#[derive(Debug, Clone, Deserialize)]
pub struct PodUsage {
    /// Object metadata (the pod's name and namespace).
    pub metadata: kube::api::ObjectMeta,
    /// The end of the measurement window.
    pub timestamp: Time,
    /// The window's length, as a Go duration (`30s`).
    #[serde(default)]
    pub window: String,
    /// Usage per container.
    #[serde(default)]
    pub containers: Vec<ContainerUsage>,
}

/// One container's usage per resource name.
#[derive(Debug, Clone, Deserialize)]
pub struct ContainerUsage {
    /// The container's name.
    pub name: String,
    /// `cpu`, `memory`, ... as quantities.
    #[serde(default)]
    pub usage: BTreeMap<String, Quantity>,
}

/// Why figures could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The list request failed (the metrics API not served, refused, ...).
    #[error("{0}")]
    Api(String),
    /// An item was not a PodMetrics.
    #[error("reading PodMetrics {name}: {source}")]
    Decode {
        /// The item's name.
        name: String,
        #[source]
        /// Why it did not decode.
        source: serde_json::Error,
    },
}

/// What [`ResourceMetrics::pod_metrics`] hands back: boxed, so the trait
/// stays usable as `dyn ResourceMetrics`.
pub type PodUsageFuture<'a> = BoxFuture<'a, Result<Vec<PodUsage>, MetricsError>>;

/// A source of pod usage figures.
pub trait ResourceMetrics: Send + Sync {
    /// The PodMetrics of the pods in `namespace` matching `selector` (a
    /// label selector in query syntax).
    fn pod_metrics<'a>(&'a self, namespace: &'a str, selector: &'a str) -> PodUsageFuture<'a>;
}

/// The metrics API (`metrics.k8s.io/v1beta1` `pods`), read with the
/// controller's own client.
pub struct ApiMetrics {
    client: kube::Client,
}

impl ApiMetrics {
    /// Reads through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

fn pod_metrics_resource() -> ApiResource {
    ApiResource {
        group: "metrics.k8s.io".into(),
        version: "v1beta1".into(),
        api_version: "metrics.k8s.io/v1beta1".into(),
        kind: "PodMetrics".into(),
        plural: "pods".into(),
    }
}

impl ResourceMetrics for ApiMetrics {
    fn pod_metrics<'a>(&'a self, namespace: &'a str, selector: &'a str) -> PodUsageFuture<'a> {
        Box::pin(async move {
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), namespace, &pod_metrics_resource());
            let list = api
                .list(&ListParams::default().labels(selector))
                .await
                .map_err(|e| MetricsError::Api(api_message(&e)))?;
            list.items
                .into_iter()
                .map(|item| {
                    let name = item.metadata.name.clone().unwrap_or_default();
                    let mut value = item.data;
                    if let Some(map) = value.as_object_mut() {
                        map.insert(
                            "metadata".into(),
                            serde_json::to_value(&item.metadata).unwrap_or_default(),
                        );
                    }
                    serde_json::from_value(value)
                        .map_err(|source| MetricsError::Decode { name, source })
                })
                .collect()
        })
    }
}

/// Each pod's usage of `resource`: summed over its containers, or of
/// `container` alone when named. A pod missing the resource in one of its
/// containers has no figure (upstream's rule); with `container`, a pod
/// without that container is an error.
pub fn pod_usage(
    items: &[PodUsage],
    resource: &str,
    container: Option<&str>,
) -> Result<PodMetrics, String> {
    let mut usage = PodMetrics::new();
    for item in items {
        let name = item.metadata.name.clone().unwrap_or_default();
        let metric = |value| PodMetric {
            timestamp: item.timestamp.0,
            window: parse_go_duration(&item.window).unwrap_or_default(),
            value,
        };
        match container {
            Some(wanted) => {
                let Some(c) = item.containers.iter().find(|c| c.name == wanted) else {
                    return Err(format!(
                        "container {wanted} not present in metrics for pod {}/{}",
                        item.metadata.namespace.as_deref().unwrap_or_default(),
                        name
                    ));
                };
                if let Some(value) = c.usage.get(resource).and_then(milli_value) {
                    usage.insert(name, metric(value));
                }
            }
            None => {
                let values: Option<Vec<i64>> = item
                    .containers
                    .iter()
                    .map(|c| c.usage.get(resource).and_then(milli_value))
                    .collect();
                if let Some(values) = values.filter(|v| !v.is_empty()) {
                    usage.insert(name, metric(values.iter().sum()));
                }
            }
        }
    }
    Ok(usage)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn item(name: &str, containers: serde_json::Value) -> PodUsage {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "timestamp": "2026-01-01T00:00:00Z", "window": "1m0.5s",
            "containers": containers,
        }))
        .unwrap()
    }

    #[test]
    fn sums_containers_and_skips_pods_missing_the_resource() {
        let items = [
            item(
                "a",
                json!([{"name": "x", "usage": {"cpu": "250m", "memory": "1Mi"}},
                       {"name": "y", "usage": {"cpu": "1", "memory": "1Mi"}}]),
            ),
            item("b", json!([{"name": "x", "usage": {"memory": "2Mi"}}])),
            item("c", json!([])),
        ];
        let cpu = pod_usage(&items, "cpu", None).unwrap();
        assert_eq!(cpu.keys().collect::<Vec<_>>(), ["a"]);
        assert_eq!(cpu["a"].value, 1250);
        assert_eq!(cpu["a"].window, std::time::Duration::from_millis(60_500));
        let memory = pod_usage(&items, "memory", None).unwrap();
        assert_eq!(memory["b"].value, 2 * 1024 * 1024 * 1000);
        let x = pod_usage(&items[..1], "cpu", Some("y")).unwrap();
        assert_eq!(x["a"].value, 1000);
        assert_eq!(
            pod_usage(&items, "cpu", Some("y")).unwrap_err(),
            "container y not present in metrics for pod ns/b"
        );
    }
}
