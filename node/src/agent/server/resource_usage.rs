//! `/stats/summary` and `/metrics/resource`: the node's, its pods' and
//! their containers' CPU and memory, collected on each request (the
//! authorization middleware has already allowed `get nodes/stats` or
//! `get nodes/metrics`).

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use super::NodeState;
use super::status::failure;
use crate::agent::node::stats;

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

fn unavailable(error: stats::StatsError) -> Response {
    tracing::warn!(%error, "collecting resource usage");
    failure(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("failed to get resource usage: {error}"),
    )
}
