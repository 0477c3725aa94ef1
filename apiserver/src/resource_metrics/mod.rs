//! The resource metrics API (`metrics.k8s.io/v1beta1` NodeMetrics and
//! PodMetrics), which upstream's metrics-server serves behind the
//! aggregator and skiff serves itself: [`scrape`] fetches each Ready
//! node's `/metrics/resource` periodically and keeps the last two samples;
//! the handlers here answer get and list (label and field selectors, one
//! namespace or all) for the Nodes and Pods in the watch caches that have
//! figures, as metrics-server does (its objects carry the Node's or Pod's
//! labels; CPU is a rate over the window between the two samples, memory
//! the working set at its end).
//!
//! These are virtual registry entries ([`crate::registry::ResourceInfo::metrics`]):
//! in discovery with verbs get and list, authorized like any resource
//! (`get`/`list` on `nodes.metrics.k8s.io`, `pods.metrics.k8s.io`), never
//! stored or watched.

pub(crate) mod scrape;

use axum::response::Response;
use http::{Method, StatusCode};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::handlers::{Ctx, respond};
use crate::status::ApiError;
use scrape::{Measured, Usage};

pub(crate) use scrape::MetricsStore;

/// metrics-server's default resolution: how often the nodes are scraped.
pub(crate) const DEFAULT_RESOLUTION: std::time::Duration = std::time::Duration::from_secs(15);

/// Which resource metrics a registry entry serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsResource {
    /// NodeMetrics, one per Node.
    Nodes,
    /// PodMetrics, one per Pod.
    Pods,
}

impl MetricsResource {
    /// The core resource whose objects the metrics describe.
    fn source(self) -> &'static str {
        match self {
            Self::Nodes => "nodes",
            Self::Pods => "pods",
        }
    }

    /// The resource metrics-server names in its NotFound errors.
    fn not_found(self, name: String) -> ApiError {
        let resource = match self {
            Self::Nodes => "nodemetrics.metrics.k8s.io",
            Self::Pods => "podmetrics.metrics.k8s.io",
        };
        ApiError::NotFound {
            resource: resource.to_string(),
            group: "metrics.k8s.io".to_string(),
            name,
        }
    }
}

/// Answers a get or list of NodeMetrics or PodMetrics.
pub(crate) async fn serve(
    ctx: Ctx,
    which: MetricsResource,
    method: Method,
) -> Result<Response, ApiError> {
    ctx.only_get(&method)?;
    let (labels, fields) = ctx.selectors(&[])?;
    let source = ctx
        .inner
        .registry
        .get("", "v1", which.source())
        .ok_or_else(|| ApiError::Internal(format!("{} are not served", which.source())))?;
    let snapshot = ctx.inner.cache(&source)?.snapshot();
    let store = &ctx.inner.resource_metrics;
    let pods = match which {
        MetricsResource::Pods => store.pods(),
        MetricsResource::Nodes => Default::default(),
    };
    let metrics_of = |object: &Value| -> Option<Value> {
        let name = object["metadata"]["name"].as_str()?;
        match which {
            MetricsResource::Nodes => Some(node_metrics(object, &store.node(name)?)),
            MetricsResource::Pods => {
                let namespace = object["metadata"]["namespace"].as_str()?;
                let measured = pods.get(&(namespace.to_string(), name.to_string()))?;
                Some(pod_metrics(object, measured))
            }
        }
    };
    let info = ctx.info().clone();
    if let Some(name) = &ctx.target.name {
        let shown = match ctx.namespace() {
            Some(ns) if info.namespaced => format!("{ns}/{name}"),
            _ => name.clone(),
        };
        let metrics = snapshot
            .objects
            .get(&source.key(ctx.namespace(), name))
            .and_then(|object| metrics_of(&object.value()))
            .ok_or_else(|| which.not_found(shown))?;
        if let Some(table) = ctx.table(&info, std::slice::from_ref(&metrics), json!({})) {
            return respond(StatusCode::OK, &table?);
        }
        return respond(StatusCode::OK, &metrics);
    }
    let prefix = source.collection_prefix(ctx.namespace());
    let mut items = Vec::new();
    for (_, object) in snapshot.under(&prefix) {
        let object = object.value();
        if !(labels.matches(&object) && fields.matches(&object)) {
            continue;
        }
        if let Some(metrics) = metrics_of(&object) {
            items.push(metrics);
        }
    }
    if let Some(table) = ctx.table(&info, &items, json!({})) {
        return respond(StatusCode::OK, &table?);
    }
    respond(
        StatusCode::OK,
        &json!({
            "kind": info.list_kind(),
            "apiVersion": info.api_version(),
            "metadata": {},
            "items": items,
        }),
    )
}

/// The metadata metrics-server gives a metrics object: the described
/// object's name, namespace and labels, created now.
fn metadata(object: &Value) -> Value {
    let mut out = json!({
        "name": object["metadata"]["name"],
        "creationTimestamp": Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    });
    if let Some(ns) = object["metadata"]["namespace"].as_str() {
        out["namespace"] = json!(ns);
    }
    if let Some(labels) = object["metadata"]["labels"].as_object() {
        out["labels"] = Value::Object(labels.clone());
    }
    out
}

fn timestamp(ms: i64) -> Value {
    match Timestamp::from_millisecond(ms) {
        Ok(t) => json!(t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
        Err(_) => Value::Null,
    }
}

fn usage(usage: &Usage) -> Value {
    json!({"cpu": cpu_quantity(usage.cpu_nano_cores), "memory": memory_quantity(usage.memory_bytes)})
}

fn node_metrics(node: &Value, measured: &Measured<Usage>) -> Value {
    json!({
        "kind": "NodeMetrics",
        "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": metadata(node),
        "timestamp": timestamp(measured.time_ms),
        "window": window_duration(measured.window_ms),
        "usage": usage(&measured.usage),
    })
}

fn pod_metrics(pod: &Value, measured: &Measured<Vec<(String, Usage)>>) -> Value {
    let containers: Vec<Value> = measured
        .usage
        .iter()
        .map(|(name, u)| json!({"name": name, "usage": usage(u)}))
        .collect();
    json!({
        "kind": "PodMetrics",
        "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": metadata(pod),
        "timestamp": timestamp(measured.time_ms),
        "window": window_duration(measured.window_ms),
        "containers": containers,
    })
}

/// CPU in nanocores as a canonical decimal quantity (`250m`, `1500u`,
/// `123456n`, `2`), as a quantity scaled by 10⁻⁹ prints.
pub(crate) fn cpu_quantity(nano: u64) -> String {
    if nano == 0 {
        return "0".to_string();
    }
    for (divisor, suffix) in [(1_000_000_000, ""), (1_000_000, "m"), (1_000, "u")] {
        if nano.is_multiple_of(divisor) {
            return format!("{}{suffix}", nano / divisor);
        }
    }
    format!("{nano}n")
}

/// Bytes as a canonical binary quantity (`2Ki`, `1536Ki`, `1000`).
pub(crate) fn memory_quantity(bytes: u64) -> String {
    let mut value = bytes;
    let mut suffix = 0;
    const SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    while value != 0 && value.is_multiple_of(1024) && suffix < SUFFIXES.len() - 1 {
        value /= 1024;
        suffix += 1;
    }
    format!("{value}{}", SUFFIXES[suffix])
}

/// A window of `ms` milliseconds as Go's `time.Duration` prints it
/// (`15.012s`, `1m0.5s`, `500ms`), which is how `metav1.Duration` is
/// written.
pub(crate) fn window_duration(ms: i64) -> String {
    crate::go_format::go_duration(ms.saturating_mul(1_000_000))
}

/// A PodMetrics' total CPU and memory over its containers, for its Table
/// row.
pub(crate) fn pod_totals(metrics: &Value) -> (String, String) {
    let mut cpu = 0u64;
    let mut memory = 0u64;
    for container in metrics["containers"].as_array().into_iter().flatten() {
        if let Some(c) = container["usage"]["cpu"]
            .as_str()
            .and_then(|q| skiff_common::quantity::parse_scaled(q, 1_000_000_000))
        {
            cpu = cpu.saturating_add(u64::try_from(c).unwrap_or(0));
        }
        if let Some(m) = container["usage"]["memory"]
            .as_str()
            .and_then(|q| skiff_common::quantity::parse_scaled(q, 1))
        {
            memory = memory.saturating_add(u64::try_from(m).unwrap_or(0));
        }
    }
    (cpu_quantity(cpu), memory_quantity(memory))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_print_canonically() {
        for (nanocores, printed) in [
            (0, "0"),
            (250_000_000, "250m"),
            (2_000_000_000, "2"),
            (1_500_000, "1500u"),
            (123_456_789, "123456789n"),
        ] {
            assert_eq!(cpu_quantity(nanocores), printed, "{nanocores} nanocores");
        }
        for (bytes, printed) in [
            (0, "0"),
            (2048, "2Ki"),
            (1_572_864, "1536Ki"),
            (1_048_576, "1Mi"),
            (1000, "1000"),
        ] {
            assert_eq!(memory_quantity(bytes), printed, "{bytes} bytes");
        }
    }

    #[test]
    fn windows_print_as_go_durations() {
        for (millis, printed) in [
            (15_000, "15s"),
            (15_012, "15.012s"),
            (15_500, "15.5s"),
            (60_500, "1m0.5s"),
            (500, "500ms"),
            (3_600_000, "1h0m0s"),
        ] {
            assert_eq!(window_duration(millis), printed, "{millis} ms");
        }
    }

    #[test]
    fn pod_rows_sum_their_containers() {
        let metrics = json!({"containers": [
            {"name": "a", "usage": {"cpu": "250m", "memory": "1Mi"}},
            {"name": "b", "usage": {"cpu": "1500u", "memory": "512Ki"}}]});
        assert_eq!(
            pod_totals(&metrics),
            ("251500u".to_string(), "1536Ki".to_string())
        );
    }
}
