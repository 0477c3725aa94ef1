//! `/stats/summary`, `/metrics/resource` and `/metrics/cadvisor`: the
//! node's, its pods' and their containers' CPU and memory, collected on
//! each request (the authorization middleware has already allowed `get
//! nodes/stats` or `get nodes/metrics`).

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use k8s_openapi::api::core::v1::Pod;
use skiff_informer::Cache;

use super::NodeState;
use super::status::failure;
use crate::agent::node::{cadvisor, stats};

/// The kubelet's Summary API document.
pub(crate) async fn summary(State(state): State<NodeState>) -> Response {
    match state.stats.summary().await {
        Ok(summary) => (
            [(http::header::CONTENT_TYPE, "application/json")],
            stats::summary_json(&summary).to_string(),
        )
            .into_response(),
        Err(error) => unavailable(error),
    }
}

/// The kubelet's resource metrics in the Prometheus text format.
pub(crate) async fn metrics(State(state): State<NodeState>) -> Response {
    match state.stats.summary().await {
        Ok(summary) => (
            [(
                http::header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            stats::resource_metrics(&summary),
        )
            .into_response(),
        Err(error) => unavailable(error),
    }
}

/// The container metrics cAdvisor gives the kubelet, in its names.
pub(crate) async fn cadvisor_metrics(State(state): State<NodeState>) -> Response {
    match state.stats.summary().await {
        Ok(summary) => (
            [(
                http::header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            cadvisor::render(&summary, &PodImages(&state.pods)),
        )
            .into_response(),
        Err(error) => unavailable(error),
    }
}

/// Container images as this node's pods report them (the runtime's name
/// for the image, as cAdvisor labels it), else as their specs ask.
struct PodImages<'a>(&'a Cache<Pod>);

impl cadvisor::Images for PodImages<'_> {
    fn image(&self, namespace: &str, pod: &str, container: &str) -> Option<String> {
        let pod = self.0.get(namespace, pod)?;
        let status = pod.status.as_ref();
        let reported = (status.into_iter())
            .flat_map(|s| {
                (s.container_statuses.iter().flatten())
                    .chain(s.init_container_statuses.iter().flatten())
                    .chain(s.ephemeral_container_statuses.iter().flatten())
            })
            .find(|s| s.name == container)
            .map(|s| s.image.clone())
            .filter(|image| !image.is_empty());
        reported.or_else(|| {
            let spec = pod.spec.as_ref()?;
            (spec.containers.iter())
                .chain(spec.init_containers.iter().flatten())
                .find(|c| c.name == container)
                .and_then(|c| c.image.clone())
        })
    }
}

fn unavailable(error: stats::StatsError) -> Response {
    tracing::warn!(%error, "collecting resource usage");
    failure(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("failed to get resource usage: {error}"),
    )
}
