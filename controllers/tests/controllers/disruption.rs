//! The disruption controller over the real API server: a budget's status
//! counts the healthy pods it selects against what it must keep, as the
//! eviction API then reads it.

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::support::{TestCluster, eventually};
use super::workload_helpers::{WAIT, make_ready, wait_for_events};

/// Creates pod `name` labelled `app=web`, with no controller.
async fn web_pod(pods: &Api<Pod>, name: &str) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
}

/// The label of the pods with no controller ([`web_pod`]).
const WEB: (&str, &str) = ("app", "web");
/// The label of the pods the test makes for the ReplicaSet `api`.
const API: (&str, &str) = ("tier", "api");

/// Creates budget `name` with `limit` (its `minAvailable` or
/// `maxUnavailable`) over the pods labelled `key`=`value`.
async fn budget(
    api: &Api<PodDisruptionBudget>,
    name: &str,
    limit: serde_json::Value,
    (key, value): (&str, &str),
) {
    let mut spec = limit;
    spec["selector"] = json!({"matchLabels": {key: value}});
    let pdb: PodDisruptionBudget =
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
    api.create(&PostParams::default(), &pdb).await.unwrap();
}

/// Waits until budget `name`'s status has the counts wanted:
/// (expected, desired healthy, current healthy, allowed).
async fn counts_become(
    api: &Api<PodDisruptionBudget>,
    name: &str,
    want: (i32, i32, i32, i32),
) -> PodDisruptionBudgetStatus {
    let what = format!("budget {name} at {want:?}");
    eventually(WAIT, &what, || async {
        let status = api.get(name).await.ok()?.status?;
        let seen = (
            status.expected_pods,
            status.desired_healthy,
            status.current_healthy,
            status.disruptions_allowed,
        );
        (seen == want).then_some(status)
    })
    .await
}

fn allowed_condition(status: &PodDisruptionBudgetStatus) -> (String, String) {
    let c = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionAllowed")
        .expect("a DisruptionAllowed condition");
    (c.status.clone(), c.reason.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_counts_healthy_pods_against_what_it_must_keep() {
    let (cluster, client) = TestCluster::start_with_client(&["disruption"]).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");

    // minAvailable as a number: the selected pods are the expected ones.
    budget(&pdbs, "keep-one", json!({"minAvailable": 1}), WEB).await;
    let status = counts_become(&pdbs, "keep-one", (0, 1, 0, 0)).await;
    assert_eq!(
        allowed_condition(&status),
        ("False".into(), "InsufficientPods".into())
    );
    assert_eq!(status.observed_generation, Some(1));
    wait_for_events(&client, "keep-one", &["NoPods"]).await;
    web_pod(&pods, "a").await;
    web_pod(&pods, "b").await;
    // Not Ready yet: nothing healthy, nothing to spare.
    counts_become(&pdbs, "keep-one", (2, 1, 0, 0)).await;
    make_ready(&client, "default", "a").await;
    make_ready(&client, "default", "b").await;
    let status = counts_become(&pdbs, "keep-one", (2, 1, 2, 1)).await;
    assert_eq!(
        allowed_condition(&status),
        ("True".into(), "SufficientPods".into())
    );

    // maxUnavailable with pods whose controller gives the scale (3, one
    // pod missing): two of three must stay, both present ones are needed.
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "api"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "api"}},
            "template": {"metadata": {"labels": {"app": "api"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
    }))
    .unwrap();
    let rs = Api::<ReplicaSet>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &rs)
        .await
        .unwrap();
    budget(&pdbs, "spare-one", json!({"maxUnavailable": 1}), API).await;
    for name in ["api-1", "api-2"] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"tier": "api"}, "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "api",
                    "uid": rs.uid().unwrap(), "controller": true}]},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        make_ready(&client, "default", name).await;
    }
    counts_become(&pdbs, "spare-one", (3, 2, 2, 0)).await;
    // A percentage of the same scale rounds up: 50% of 3 is 2.
    budget(&pdbs, "half", json!({"minAvailable": "50%"}), API).await;
    counts_become(&pdbs, "half", (3, 2, 2, 0)).await;

    // A pod without a controller cannot be counted towards a scale: it is
    // reported and left out.
    web_pod(&pods, "stray").await;
    budget(&pdbs, "by-scale", json!({"maxUnavailable": "10%"}), WEB).await;
    counts_become(&pdbs, "by-scale", (0, 0, 2, 0)).await;
    wait_for_events(&client, "by-scale", &["UnmanagedPods"]).await;
    cluster.shutdown().await;
}
