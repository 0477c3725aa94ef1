//! ReplicaSet and ReplicationController controllers over the real API server.

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use super::support::{TestCluster, eventually, merge_patch, scale};
use super::workload_helpers::{
    WAIT, all_pods, create_workload, event_about, make_ready, pods_owned_by, set_pod_status,
    template, wait_for_events,
};

async fn create_rs(client: &Client, name: &str, replicas: i32, min_ready: i32) -> ReplicaSet {
    let api: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "minReadySeconds": min_ready,
            "selector": {"matchLabels": {"app": name}},
            "template": template(json!({"app": name, "tier": "web"}), "nginx:1.27"),
        }
    }))
    .unwrap();
    api.create(&PostParams::default(), &rs).await.unwrap()
}

/// A cluster running the ReplicaSet controller with the ReplicaSet `name`
/// of `replicas` created, where most tests begin: the cluster, a client and
/// the ReplicaSet's uid.
async fn start_with_rs(name: &str, replicas: i32) -> (TestCluster, Client, String) {
    let (cluster, client) = TestCluster::start_with_client(&["replicaset"]).await;
    let uid = create_rs(&client, name, replicas, 0).await.uid().unwrap();
    (cluster, client, uid)
}

async fn rs_status(client: &Client, name: &str) -> ReplicaSet {
    Api::<ReplicaSet>::namespaced(client.clone(), "default")
        .get(name)
        .await
        .unwrap()
}

/// Waits (as `what`) until the status of the ReplicaSet `name` satisfies
/// `ready`: most checks here are on the counts the controller reports.
async fn status_when(
    client: &Client,
    name: &str,
    what: &str,
    ready: impl Fn(&ReplicaSetStatus) -> bool,
) {
    eventually(WAIT, what, || async {
        let status = rs_status(client, name).await.status?;
        ready(&status).then_some(())
    })
    .await;
}

async fn wait_for_pods(client: &Client, uid: &str, count: usize) -> Vec<Pod> {
    eventually(WAIT, &format!("{count} pods"), || async {
        let pods = pods_owned_by(client, "default", uid).await;
        (pods.len() == count).then_some(pods)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_pods_from_the_template_and_reports_status() {
    let (cluster, client, uid) = start_with_rs("web", 3).await;
    let pods = wait_for_pods(&client, &uid, 3).await;
    for pod in &pods {
        assert!(pod.name_any().starts_with("web-"), "{}", pod.name_any());
        assert_eq!(pod.labels()["tier"], "web");
        let owner = &pod.owner_references()[0];
        assert_eq!(
            (
                owner.kind.as_str(),
                owner.name.as_str(),
                owner.block_owner_deletion
            ),
            ("ReplicaSet", "web", Some(true))
        );
    }
    status_when(&client, "web", "status replicas 3", |s| {
        s.replicas == 3 && s.fully_labeled_replicas == Some(3) && s.observed_generation == Some(1)
    })
    .await;
    make_ready(&client, "default", &pods[0].name_any()).await;
    make_ready(&client, "default", &pods[1].name_any()).await;
    status_when(&client, "web", "2 ready and available", |s| {
        s.ready_replicas == Some(2) && s.available_replicas == Some(2)
    })
    .await;
    wait_for_events(&client, "web", &["SuccessfulCreate"]).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_down_deletes_the_least_useful_pods_first() {
    let (cluster, client, uid) = start_with_rs("rank", 3).await;
    let pods = wait_for_pods(&client, &uid, 3).await;
    let (keeper, unready, pending) = (pods[0].name_any(), pods[1].name_any(), pods[2].name_any());
    make_ready(&client, "default", &keeper).await;
    set_pod_status(&client, "default", &unready, "Running", false).await;
    status_when(&client, "rank", "ready pod counted", |s| {
        s.ready_replicas == Some(1)
    })
    .await;
    // Scale through the scale subresource, as `kubectl scale` does.
    let api: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    scale(&api, "rank", 1).await;
    let left = wait_for_pods(&client, &uid, 1).await;
    assert_eq!(
        left[0].name_any(),
        keeper,
        "pending {pending} / unready {unready} go first"
    );
    status_when(&client, "rank", "status replicas 1", |s| {
        s.replicas == 1 && s.observed_generation == Some(2)
    })
    .await;
    wait_for_events(&client, "rank", &["SuccessfulDelete"]).await;
    // Scaling up again replaces them.
    scale(&api, "rank", 4).await;
    wait_for_pods(&client, &uid, 4).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_events_never_creates_extra_pods() {
    let (cluster, client, uid) = start_with_rs("burst", 20).await;
    let api: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    // Every annotation change wakes the controller while creations are in flight.
    for i in 0..30 {
        merge_patch(
            &api,
            "burst",
            json!({"metadata": {"annotations": {"poke": i.to_string()}}}),
        )
        .await;
        let pods = pods_owned_by(&client, "default", &uid).await;
        assert!(pods.len() <= 20, "over-created: {} pods", pods.len());
    }
    wait_for_pods(&client, &uid, 20).await;
    // Mark each pod ready (pod events keep arriving) and check no extras appear.
    for pod in pods_owned_by(&client, "default", &uid).await {
        make_ready(&client, "default", &pod.name_any()).await;
    }
    status_when(&client, "burst", "20 ready", |s| {
        s.ready_replicas == Some(20)
    })
    .await;
    assert_eq!(all_pods(&client, "default").await.len(), 20);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopts_matching_orphans_and_releases_pods_that_stop_matching() {
    let (cluster, client) = TestCluster::start_with_client(&["replicaset"]).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let orphan: Pod = serde_json::from_value(json!({
        "metadata": {"name": "orphan", "labels": {"app": "adopt"}},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &orphan).await.unwrap();
    let rs = create_rs(&client, "adopt", 2, 0).await;
    let uid = rs.uid().unwrap();
    let owned = wait_for_pods(&client, &uid, 2).await;
    assert!(
        owned.iter().any(|p| p.name_any() == "orphan"),
        "orphan adopted"
    );
    assert_eq!(
        all_pods(&client, "default").await.len(),
        2,
        "only one pod created"
    );
    let adopted = owned.iter().find(|p| p.name_any() == "orphan").unwrap();
    assert_eq!(adopted.owner_references()[0].controller, Some(true));

    // Relabel it: it is released and replaced.
    merge_patch(
        &pods,
        "orphan",
        json!({"metadata": {"labels": {"app": "other"}}}),
    )
    .await;
    let owned = eventually(WAIT, "release and replacement", || async {
        let owned = pods_owned_by(&client, "default", &uid).await;
        (owned.len() == 2 && owned.iter().all(|p| p.name_any() != "orphan")).then_some(owned)
    })
    .await;
    assert_eq!(owned.len(), 2);
    let released = pods.get("orphan").await.unwrap();
    assert!(
        released.owner_references().is_empty(),
        "released pod has no owner"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_ready_seconds_delays_availability() {
    let (cluster, client) = TestCluster::start_with_client(&["replicaset"]).await;
    let rs = create_rs(&client, "slow", 1, 2).await;
    let pods = wait_for_pods(&client, &rs.uid().unwrap(), 1).await;
    make_ready(&client, "default", &pods[0].name_any()).await;
    status_when(&client, "slow", "ready but not yet available", |s| {
        s.ready_replicas == Some(1)
    })
    .await;
    let s = rs_status(&client, "slow").await.status.unwrap();
    assert_eq!(s.available_replicas.unwrap_or(0), 0);
    status_when(&client, "slow", "available after minReadySeconds", |s| {
        s.available_replicas == Some(1)
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_controllers_keep_their_replicas() {
    let (cluster, client) = TestCluster::start_with_client(&["replicationcontroller"]).await;
    let spec = json!({
        "replicas": 2,
        "selector": {"app": "legacy"},
        "template": template(json!({"app": "legacy"}), "nginx"),
    });
    let rc: ReplicationController = create_workload(&client, "legacy", spec, json!({})).await;
    let api: Api<ReplicationController> = Api::namespaced(client.clone(), "default");
    let uid = rc.uid().unwrap();
    let pods = wait_for_pods(&client, &uid, 2).await;
    assert_eq!(pods[0].owner_references()[0].kind, "ReplicationController");
    // A deleted pod is replaced.
    Api::<Pod>::namespaced(client.clone(), "default")
        .delete(&pods[0].name_any(), &Default::default())
        .await
        .unwrap();
    eventually(WAIT, "replacement", || async {
        let now = pods_owned_by(&client, "default", &uid).await;
        (now.len() == 2 && now.iter().all(|p| p.name_any() != pods[0].name_any())).then_some(())
    })
    .await;
    eventually(WAIT, "rc status", || async {
        let s = api.get("legacy").await.ok()?.status?;
        (s.replicas == 2).then_some(())
    })
    .await;
    cluster.shutdown().await;
}

/// Pods a quota refuses: the FailedCreate event and the ReplicaFailure
/// condition carry the API server's own words, as upstream's
/// (`Error creating: pods "…" is forbidden: exceeded quota: …`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_pod_is_reported_in_the_servers_words() {
    let (cluster, client) = TestCluster::start_with_client(&["replicaset", "resourcequota"]).await;
    let quotas: Api<k8s_openapi::api::core::v1::ResourceQuota> =
        Api::namespaced(client.clone(), "default");
    let quota = serde_json::from_value(json!({
        "metadata": {"name": "two"}, "spec": {"hard": {"pods": "2"}}}))
    .unwrap();
    quotas.create(&PostParams::default(), &quota).await.unwrap();
    eventually(WAIT, "the quota counted", || async {
        let status = quotas.get("two").await.ok()?.status?;
        status.hard.is_some().then_some(())
    })
    .await;
    create_rs(&client, "big", 3, 0).await;
    let condition = eventually(WAIT, "a ReplicaFailure condition", || async {
        let status = rs_status(&client, "big").await.status?;
        status
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "ReplicaFailure")
    })
    .await;
    assert_eq!(condition.reason.as_deref(), Some("FailedCreate"));
    let message = condition.message.unwrap_or_default();
    assert!(
        message.starts_with("pods \"big-") && message.contains("is forbidden: exceeded quota: two"),
        "{message}"
    );
    let event = event_about(&client, "big", "FailedCreate").await;
    let note = event.note.unwrap_or_default();
    assert!(
        note.starts_with("Error creating: pods \"big-") && !note.contains("ApiError"),
        "{note}"
    );
    cluster.shutdown().await;
}
