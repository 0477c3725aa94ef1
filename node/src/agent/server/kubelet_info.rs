//! The kubelet's small informational endpoints: `/healthz` ("ok" while the
//! server answers) and `/pods` (the pods bound to this node, as the agent
//! holds them, as a PodList). Both are `get nodes/proxy` to the
//! authorizer, as the kubelet's.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::NodeState;

/// `/healthz`: the server is up.
pub(crate) async fn healthz() -> Response {
    (
        [(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "ok",
    )
        .into_response()
}

/// `/pods`: this node's pods, sorted by namespace and name.
pub(crate) async fn pods(State(state): State<NodeState>) -> Response {
    let mut pods = state.pods.list();
    pods.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    let items: Vec<serde_json::Value> = pods
        .iter()
        .filter_map(|pod| {
            let mut item = serde_json::to_value(pod.as_ref()).ok()?;
            if let Some(object) = item.as_object_mut() {
                object.insert("kind".into(), json!("Pod"));
                object.insert("apiVersion".into(), json!("v1"));
            }
            Some(item)
        })
        .collect();
    let list = json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items});
    (
        [(http::header::CONTENT_TYPE, "application/json")],
        list.to_string(),
    )
        .into_response()
}
