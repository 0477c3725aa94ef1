//! The Deployment controller (with the ReplicaSet controller under it) over
//! the real API server; the test plays the node by marking pods ready.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::support::{TestCluster, eventually, list_all, merge_patch, scale};
use super::workload_helpers::{
    WAIT, all_pods, condition, create_workload, get_workload, is_ready, make_all_ready, make_ready,
    template, wait_for_condition, wait_for_events,
};

const REVISION: &str = "deployment.kubernetes.io/revision";

/// Creates Deployment `name` of `replicas` nginx:1 pods, its spec extended
/// by `extra`. The strategy is upstream's default (a rolling update with
/// the default surge and unavailability) unless `extra` names another.
async fn create(client: &Client, name: &str, replicas: i32, extra: Value) -> Deployment {
    let spec = json!({
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": template(json!({"app": name}), "nginx:1"),
        "strategy": {"type": "RollingUpdate"},
    });
    create_workload(client, name, spec, extra).await
}

/// The Deployment `name` in `default`, as the API has it now.
async fn get(client: &Client, name: &str) -> Deployment {
    get_workload(client, name).await
}

async fn replica_sets(client: &Client) -> Vec<ReplicaSet> {
    let mut rss = list_all(&Api::<ReplicaSet>::namespaced(client.clone(), "default")).await;
    rss.sort_by_key(|rs| rs.metadata.creation_timestamp.clone().map(|t| t.0));
    rss
}

fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
}

fn image_of(rs: &ReplicaSet) -> String {
    rs.spec
        .as_ref()
        .unwrap()
        .template
        .as_ref()
        .unwrap()
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .image
        .clone()
        .unwrap()
}

/// Marks every not-yet-ready pod ready; returns how many it marked.
async fn ready_all(client: &Client) -> usize {
    make_all_ready(client, &all_pods(client, "default").await).await
}

/// Waits until the rollout is complete as `kubectl rollout status` sees it,
/// marking pods ready along the way.
async fn wait_rolled_out(client: &Client, name: &str) -> Deployment {
    eventually(WAIT, "rollout complete", || async {
        ready_all(client).await;
        let d = get(client, name).await;
        let s = d.status.clone()?;
        let want = d.spec.as_ref()?.replicas?;
        let done = s.observed_generation >= d.metadata.generation
            && s.updated_replicas == Some(want)
            && s.replicas == Some(want)
            && s.available_replicas == Some(want)
            && condition(&d, "Progressing").is_some_and(|(_, r)| r == "NewReplicaSetAvailable");
        done.then_some(d)
    })
    .await
}

/// A cluster running the Deployment and ReplicaSet controllers with
/// Deployment `name` (as [`create`] makes it) rolled out, where most tests
/// begin: the cluster, a client and the Deployment as it then is.
async fn start_rolled_out(
    name: &str,
    replicas: i32,
    extra: Value,
) -> (TestCluster, Client, Deployment) {
    let (cluster, client) = TestCluster::start_with_client(CONTROLLERS).await;
    create(&client, name, replicas, extra).await;
    let d = wait_rolled_out(&client, name).await;
    (cluster, client, d)
}

async fn set_image(client: &Client, name: &str, image: &str) {
    Api::<Deployment>::namespaced(client.clone(), "default")
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": image}]}}}})),
        )
        .await
        .unwrap();
}

const CONTROLLERS: &[&str] = &["deployment", "replicaset"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_deployment_rolls_out_with_revision_and_conditions() {
    let (cluster, client, d) = start_rolled_out("web", 3, json!({})).await;
    let rss = replica_sets(&client).await;
    assert_eq!(rss.len(), 1);
    let rs = &rss[0];
    let hash = rs.labels()["pod-template-hash"].clone();
    assert_eq!(rs.name_any(), format!("web-{hash}"));
    assert_eq!(rs.annotations()[REVISION], "1");
    assert_eq!(
        rs.annotations()["deployment.kubernetes.io/desired-replicas"],
        "3"
    );
    assert_eq!(
        rs.annotations()["deployment.kubernetes.io/max-replicas"],
        "4"
    );
    assert_eq!(rs.owner_references()[0].kind, "Deployment");
    assert_eq!(d.annotations()[REVISION], "1");
    for pod in all_pods(&client, "default").await {
        assert_eq!(pod.labels()["pod-template-hash"], hash);
    }
    let s = d.status.clone().unwrap();
    assert_eq!(
        (s.ready_replicas, s.unavailable_replicas),
        (Some(3), Some(0))
    );
    assert_eq!(
        condition(&d, "Available"),
        Some(("True".into(), "MinimumReplicasAvailable".into()))
    );
    wait_for_events(&client, "web", &["ScalingReplicaSet"]).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_update_stays_within_surge_and_unavailability() {
    let strategy =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}});
    let (cluster, client, _) = start_rolled_out("roll", 4, json!({"strategy": strategy})).await;
    set_image(&client, "roll", "nginx:2").await;
    // Step through the rollout one readiness at a time, checking the bounds.
    let steps = std::sync::atomic::AtomicUsize::new(0);
    eventually(WAIT, "rollout to nginx:2", || async {
        let rss = replica_sets(&client).await;
        let total: i32 = rss.iter().map(spec_replicas).sum();
        assert!(total <= 4 + 1, "surge exceeded: {total} replicas");
        let pods = all_pods(&client, "default").await;
        let ready = pods.iter().filter(|p| is_ready(p)).count();
        assert!(ready >= 4 - 1, "too many unavailable: {ready} ready");
        assert!(pods.len() <= 5, "{} pods", pods.len());
        // Play the node: one pod becomes ready per step.
        if let Some(p) = pods.iter().find(|p| !is_ready(p)) {
            make_ready(&client, "default", &p.name_any()).await;
            steps.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let new = rss.iter().find(|rs| image_of(rs) == "nginx:2")?;
        let d = get(&client, "roll").await;
        let s = d.status?;
        (spec_replicas(new) == 4
            && s.updated_replicas == Some(4)
            && s.available_replicas == Some(4)
            && s.replicas == Some(4))
        .then_some(())
    })
    .await;
    assert!(steps.into_inner() >= 4, "pods were replaced step by step");
    let rss = replica_sets(&client).await;
    assert_eq!(rss.len(), 2);
    let old = rss.iter().find(|rs| image_of(rs) == "nginx:1").unwrap();
    let new = rss.iter().find(|rs| image_of(rs) == "nginx:2").unwrap();
    assert_eq!(spec_replicas(old), 0);
    assert_eq!(old.annotations()[REVISION], "1");
    assert_eq!(new.annotations()[REVISION], "2");
    assert_eq!(get(&client, "roll").await.annotations()[REVISION], "2");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreate_removes_old_pods_before_creating_new_ones() {
    let (cluster, client, _) =
        start_rolled_out("rec", 2, json!({"strategy": {"type": "Recreate"}})).await;
    set_image(&client, "rec", "nginx:2").await;
    eventually(WAIT, "recreated", || async {
        let rss = replica_sets(&client).await;
        let active = rss.iter().filter(|rs| spec_replicas(rs) > 0).count();
        assert!(active <= 1, "old and new replica sets active together");
        let pods = all_pods(&client, "default").await;
        let images: std::collections::BTreeSet<String> = pods
            .iter()
            .map(|p| {
                p.spec.as_ref().unwrap().containers[0]
                    .image
                    .clone()
                    .unwrap()
            })
            .collect();
        assert!(images.len() <= 1, "old and new pods together: {images:?}");
        ready_all(&client).await;
        let d = get(&client, "rec").await;
        let s = d.status?;
        (images.contains("nginx:2")
            && s.available_replicas == Some(2)
            && s.updated_replicas == Some(2))
        .then_some(())
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_by_template_reuses_the_old_replica_set_with_a_new_revision() {
    let (cluster, client, _) = start_rolled_out("undo", 2, json!({})).await;
    let first = replica_sets(&client).await[0].name_any();
    set_image(&client, "undo", "nginx:2").await;
    wait_rolled_out(&client, "undo").await;
    // What `kubectl rollout undo` does: put the old template back.
    set_image(&client, "undo", "nginx:1").await;
    let d = eventually(WAIT, "rolled back", || async {
        ready_all(&client).await;
        let d = wait_rolled_out(&client, "undo").await;
        (d.annotations().get(REVISION).map(String::as_str) == Some("3")).then_some(d)
    })
    .await;
    let rss = replica_sets(&client).await;
    assert_eq!(rss.len(), 2, "no third replica set");
    let back = rss.iter().find(|rs| rs.name_any() == first).unwrap();
    assert_eq!(back.annotations()[REVISION], "3");
    assert_eq!(
        back.annotations()["deployment.kubernetes.io/revision-history"],
        "1"
    );
    assert_eq!(spec_replicas(back), 2);
    assert_eq!(d.status.unwrap().updated_replicas, Some(2));
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_deployments_do_not_roll_out_until_resumed() {
    let (cluster, client, _) = start_rolled_out("hold", 2, json!({})).await;
    let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
    merge_patch(&api, "hold", json!({"spec": {"paused": true}})).await;
    set_image(&client, "hold", "nginx:2").await;
    wait_for_condition::<Deployment>(
        &client,
        "hold",
        "Progressing",
        ("Unknown", "DeploymentPaused"),
    )
    .await;
    // Scaling still works while paused.
    scale(&api, "hold", 3).await;
    eventually(WAIT, "scaled while paused", || async {
        let rss = replica_sets(&client).await;
        (rss.len() == 1 && spec_replicas(&rss[0]) == 3).then_some(())
    })
    .await;
    assert_eq!(
        replica_sets(&client).await.len(),
        1,
        "no rollout while paused"
    );
    merge_patch(&api, "hold", json!({"spec": {"paused": false}})).await;
    eventually(WAIT, "rolled out after resume", || async {
        ready_all(&client).await;
        let rss = replica_sets(&client).await;
        let new = rss.iter().find(|rs| image_of(rs) == "nginx:2")?;
        let d = get(&client, "hold").await;
        (spec_replicas(new) == 3 && d.status?.available_replicas == Some(3)).then_some(())
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_replica_sets_beyond_the_history_limit_are_deleted() {
    let (cluster, client, _) =
        start_rolled_out("hist", 1, json!({"revisionHistoryLimit": 1})).await;
    for image in ["nginx:2", "nginx:3", "nginx:4"] {
        set_image(&client, "hist", image).await;
        eventually(WAIT, "new revision", || async {
            let d = wait_rolled_out(&client, "hist").await;
            let rss = replica_sets(&client).await;
            (rss.iter()
                .any(|rs| image_of(rs) == image && spec_replicas(rs) == 1)
                && d.status?.replicas == Some(1))
            .then_some(())
        })
        .await;
    }
    let rss = eventually(WAIT, "history trimmed", || async {
        let rss = replica_sets(&client).await;
        (rss.len() == 2).then_some(rss)
    })
    .await;
    let revisions: BTreeMap<String, String> = rss
        .iter()
        .map(|rs| (image_of(rs), rs.annotations()[REVISION].clone()))
        .collect();
    assert_eq!(revisions["nginx:4"], "4");
    assert_eq!(revisions["nginx:3"], "3");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_rollout_reports_progress_deadline_exceeded() {
    let (cluster, client) = TestCluster::start_with_client(CONTROLLERS).await;
    create(&client, "stuck", 2, json!({"progressDeadlineSeconds": 1})).await;
    // No pod ever becomes ready.
    let d: Deployment = wait_for_condition(
        &client,
        "stuck",
        "Progressing",
        ("False", "ProgressDeadlineExceeded"),
    )
    .await;
    assert_eq!(
        condition(&d, "Available"),
        Some(("False".into(), "MinimumReplicasUnavailable".into()))
    );
    let s = d.status.unwrap();
    assert_eq!((s.replicas, s.unavailable_replicas), (Some(2), Some(2)));
    cluster.shutdown().await;
}
