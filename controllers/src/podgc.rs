//! Pod garbage collection, periodically:
//! - pods bound to a Node that no longer exists (confirmed by a live GET
//!   after a quarantine, as the Node may just not be in the cache yet) are
//!   marked Failed with a `DisruptionTarget` condition and force-deleted;
//! - terminating pods that were never scheduled are force-deleted;
//! - finished pods (Succeeded/Failed) beyond a threshold are force-deleted,
//!   oldest first.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::DeleteParams;
use kube::{Api, ResourceExt};

use skiff_informer::wait_synced;

use crate::controller_utils::{RequestFailed, patch_pod_status};
use crate::manager::{Context, Stop, stopped};

/// Settings of the pod garbage collector.
#[derive(Clone, Debug)]
pub struct PodGcConfig {
    /// Finished pods kept before the oldest are deleted (upstream's
    /// `--terminated-pod-gc-threshold`).
    pub terminated_pod_threshold: usize,
    /// How often a pass runs.
    pub period: Duration,
    /// How long a Node must have been missing before its pods go.
    pub quarantine: Duration,
}

impl Default for PodGcConfig {
    fn default() -> Self {
        Self {
            terminated_pod_threshold: 12_500,
            period: Duration::from_secs(20),
            quarantine: Duration::from_secs(40),
        }
    }
}

/// Errors of one pod GC pass: a request about one pod or node failed.
pub type PodGcError = RequestFailed;

/// Runs the pod garbage collector with default settings.
pub async fn run(ctx: Context, stop: Stop) {
    run_with(ctx, stop, PodGcConfig::default()).await;
}

/// Runs the pod garbage collector with `config` until `stop`.
pub async fn run_with(ctx: Context, stop: Stop, config: PodGcConfig) {
    let pods = ctx.factory.informer::<Pod>();
    let nodes = ctx.factory.informer::<Node>();
    if !wait_synced(&[&pods, &nodes], stopped(stop.clone())).await {
        return;
    }
    let mut missing_since: HashMap<String, Instant> = HashMap::new();
    loop {
        let all_pods = pods.cache().list();
        if let Err(error) = collect_terminated(&ctx.client, &all_pods, &config).await {
            tracing::warn!(%error, "pod GC: finished pods");
        }
        if let Err(error) = collect_unscheduled_terminating(&ctx.client, &all_pods).await {
            tracing::warn!(%error, "pod GC: unscheduled terminating pods");
        }
        let result = collect_orphans(
            &ctx.client,
            &all_pods,
            nodes.cache(),
            &mut missing_since,
            config.quarantine,
        )
        .await;
        if let Err(error) = result {
            tracing::warn!(%error, "pod GC: pods of deleted nodes");
        }
        tokio::select! {
            _ = stopped(stop.clone()) => return,
            _ = tokio::time::sleep(config.period) => {}
        }
    }
}

fn is_finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// The finished pods to delete to get back to `threshold`, oldest first.
pub fn terminated_over_threshold(pods: &[Arc<Pod>], threshold: usize) -> Vec<Arc<Pod>> {
    let mut finished: Vec<Arc<Pod>> = pods
        .iter()
        .filter(|p| is_finished(p) && p.metadata.deletion_timestamp.is_none())
        .cloned()
        .collect();
    if finished.len() <= threshold {
        return Vec::new();
    }
    finished.sort_by_key(|p| {
        (
            p.metadata.creation_timestamp.as_ref().map(|t| t.0),
            p.namespace(),
            p.name_any(),
        )
    });
    let excess = finished.len() - threshold;
    finished.truncate(excess);
    finished
}

async fn force_delete(client: &kube::Client, pod: &Pod) -> Result<(), PodGcError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
    let mut params = DeleteParams::default().grace_period(0);
    params.preconditions = pod.uid().map(|uid| kube::api::Preconditions {
        uid: Some(uid),
        resource_version: None,
    });
    match api.delete(&pod.name_any(), &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(source) => Err(RequestFailed::of(
            "deleting pod",
            format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()),
        )(source)),
    }
}

async fn collect_terminated(
    client: &kube::Client,
    pods: &[Arc<Pod>],
    config: &PodGcConfig,
) -> Result<(), PodGcError> {
    let doomed = terminated_over_threshold(pods, config.terminated_pod_threshold);
    if !doomed.is_empty() {
        tracing::info!(
            count = doomed.len(),
            "pod GC: deleting finished pods over the threshold"
        );
    }
    for pod in doomed {
        force_delete(client, &pod).await?;
    }
    Ok(())
}

async fn collect_unscheduled_terminating(
    client: &kube::Client,
    pods: &[Arc<Pod>],
) -> Result<(), PodGcError> {
    for pod in pods {
        if node_of(pod).is_none() && pod.metadata.deletion_timestamp.is_some() {
            force_delete(client, pod).await?;
        }
    }
    Ok(())
}

async fn collect_orphans(
    client: &kube::Client,
    pods: &[Arc<Pod>],
    nodes: &skiff_informer::Cache<Node>,
    missing_since: &mut HashMap<String, Instant>,
    quarantine: Duration,
) -> Result<(), PodGcError> {
    let now = Instant::now();
    let mut absent: Vec<String> = pods
        .iter()
        .filter_map(|p| node_of(p))
        .filter(|n| nodes.get("", n).is_none())
        .map(str::to_owned)
        .collect();
    absent.sort();
    absent.dedup();
    missing_since.retain(|n, _| absent.contains(n));
    let node_api: Api<Node> = Api::all(client.clone());
    for node in absent {
        let since = *missing_since.entry(node.clone()).or_insert(now);
        if now.duration_since(since) < quarantine {
            continue;
        }
        match node_api.get_opt(&node).await {
            Ok(Some(_)) => continue,
            Ok(None) => {}
            Err(source) => {
                return Err(RequestFailed::of("looking up node", node)(source));
            }
        }
        for pod in pods.iter().filter(|p| node_of(p) == Some(node.as_str())) {
            tracing::info!(pod = %pod.name_any(), %node, "pod GC: deleting pod of a deleted node");
            mark_failed(client, pod).await?;
            force_delete(client, pod).await?;
        }
        missing_since.remove(&node);
    }
    Ok(())
}

/// Records why the pod goes, as upstream does before deleting it.
async fn mark_failed(client: &kube::Client, pod: &Pod) -> Result<(), PodGcError> {
    if is_finished(pod) {
        return Ok(());
    }
    let mut conditions = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    conditions.retain(|c| c.type_ != "DisruptionTarget");
    conditions.push(k8s_openapi::api::core::v1::PodCondition {
        type_: "DisruptionTarget".into(),
        status: "True".into(),
        reason: Some("DeletionByPodGC".into()),
        message: Some("PodGC: node no longer exists".into()),
        last_transition_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            Timestamp::now(),
        )),
        ..Default::default()
    });
    let patch = serde_json::json!({ "status": { "phase": "Failed", "conditions": conditions } });
    patch_pod_status(client, pod, &patch, "marking pod failed").await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, phase: &str, created: &str) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns", "creationTimestamp": created},
                "status": {"phase": phase}
            }))
            .unwrap(),
        )
    }

    #[test]
    fn the_oldest_finished_pods_over_the_threshold_go() {
        let pods = vec![
            pod("new", "Succeeded", "2026-01-03T00:00:00Z"),
            pod("running", "Running", "2026-01-01T00:00:00Z"),
            pod("old", "Failed", "2026-01-01T00:00:00Z"),
            pod("mid", "Succeeded", "2026-01-02T00:00:00Z"),
        ];
        let names = |v: Vec<Arc<Pod>>| v.iter().map(|p| p.name_any()).collect::<Vec<_>>();
        assert_eq!(names(terminated_over_threshold(&pods, 1)), ["old", "mid"]);
        assert_eq!(names(terminated_over_threshold(&pods, 2)), ["old"]);
        assert!(terminated_over_threshold(&pods, 3).is_empty());
    }
}
