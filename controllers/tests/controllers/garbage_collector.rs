//! Garbage collection through ownerReferences: background, foreground and
//! orphan deletion, and dangling references found after a restart.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{DeleteParams, PostParams, PropagationPolicy};
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio::sync::watch;

use super::support::{TestCluster, eventually, merge_patch, present_after_a_moment};
use skiff_controllers::{Context, garbage_collector};

const WAIT: Duration = Duration::from_secs(20);
const NS: &str = "default";

async fn owner(client: &kube::Client, name: &str) -> ConfigMap {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap()
}

fn owner_ref(owner: &ConfigMap, block: bool) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap", "name": owner.name_any(),
        "uid": owner.uid().unwrap(), "blockOwnerDeletion": block, "controller": true
    })
}

async fn dependent_cm(
    client: &kube::Client,
    name: &str,
    owner: &ConfigMap,
    block: bool,
    finalizers: &[&str],
) -> ConfigMap {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": name, "ownerReferences": [owner_ref(owner, block)],
                     "finalizers": finalizers}
    }))
    .unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap()
}

async fn dependent_pod(client: &kube::Client, name: &str, owner: &ConfigMap) -> Pod {
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "ownerReferences": [owner_ref(owner, true)]},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    }))
    .unwrap();
    api.create(&PostParams::default(), &pod).await.unwrap()
}

async fn gone<K>(api: &Api<K>, name: &str, what: &str)
where
    K: kube::Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(WAIT, what, || async {
        api.get_opt(name).await.unwrap().is_none().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_deletion_collects_dependents_after_the_owner() {
    let (cluster, client) = TestCluster::start_with_client(&["garbage-collector"]).await;
    let rs = owner(&client, "rs-like").await;
    dependent_cm(&client, "child-cm", &rs, false, &[]).await;
    dependent_pod(&client, "child-pod", &rs).await;
    let unrelated = owner(&client, "unrelated").await;

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    // Give the collector time to see the graph; nothing must be collected.
    assert!(present_after_a_moment(&cms, "child-cm").await);
    assert!(pods.get_opt("child-pod").await.unwrap().is_some());

    cms.delete("rs-like", &DeleteParams::background())
        .await
        .unwrap();
    gone(&cms, "child-cm", "the dependent configmap to be collected").await;
    gone(&pods, "child-pod", "the dependent pod to be collected").await;
    assert!(cms.get_opt(&unrelated.name_any()).await.unwrap().is_some());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_deletion_waits_for_blocking_dependents() {
    let (cluster, client) = TestCluster::start_with_client(&["garbage-collector"]).await;
    let rs = owner(&client, "fg-owner").await;
    // A blocking dependent held by its own finalizer keeps the owner waiting.
    dependent_cm(&client, "fg-held", &rs, true, &["example.com/hold"]).await;
    dependent_pod(&client, "fg-pod", &rs).await;

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    cms.delete("fg-owner", &DeleteParams::foreground())
        .await
        .unwrap();

    gone(&pods, "fg-pod", "the pod to be deleted first").await;
    let held = eventually(WAIT, "the held dependent to be marked deleted", || async {
        let cm = cms.get("fg-held").await.unwrap();
        cm.metadata.deletion_timestamp.is_some().then_some(cm)
    })
    .await;
    assert_eq!(held.finalizers(), ["example.com/hold"]);
    let waiting = cms.get("fg-owner").await.unwrap();
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert_eq!(waiting.finalizers(), ["foregroundDeletion"]);

    merge_patch(&cms, "fg-held", json!({"metadata": {"finalizers": null}})).await;
    gone(&cms, "fg-held", "the held dependent to go").await;
    gone(&cms, "fg-owner", "the owner to go after its dependents").await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_deletion_keeps_dependents_without_the_reference() {
    let (cluster, client) = TestCluster::start_with_client(&["garbage-collector"]).await;
    let rs = owner(&client, "orphaner").await;
    let other = owner(&client, "second-owner").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "orphan-child",
                     "ownerReferences": [owner_ref(&rs, true), owner_ref(&other, false)]}
    }))
    .unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    dependent_pod(&client, "orphan-pod", &rs).await;

    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        ..Default::default()
    };
    api.delete("orphaner", &params).await.unwrap();
    gone(&api, "orphaner", "the owner to go once orphaning is done").await;

    let child = api.get("orphan-child").await.unwrap();
    let refs = child.metadata.owner_references.unwrap_or_default();
    assert_eq!(refs.len(), 1, "only the other owner stays: {refs:?}");
    assert_eq!(refs[0].uid, other.uid().unwrap());
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pod = pods.get("orphan-pod").await.unwrap();
    assert!(pod.metadata.owner_references.unwrap_or_default().is_empty());
    // Nothing collects the orphans later.
    assert!(present_after_a_moment(&pods, "orphan-pod").await);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dangling_references_found_at_start_are_collected() {
    // No collector yet: the owner goes while nobody watches.
    let (cluster, client) = TestCluster::start_with_client(&[]).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let rs = owner(&client, "vanished").await;
    dependent_cm(&client, "left-behind", &rs, false, &[]).await;
    let solid = owner(&client, "solid").await;
    dependent_cm(&client, "still-owned", &solid, false, &[]).await;
    cms.delete("vanished", &DeleteParams::default())
        .await
        .unwrap();
    // A namesake with a new uid is not the owner.
    owner(&client, "vanished").await;

    let (stop_tx, stop) = watch::channel(false);
    let ctx = Context::new(client.clone(), cluster.factory.clone());
    let gc = tokio::spawn(garbage_collector::run(ctx, stop));
    gone(
        &cms,
        "left-behind",
        "the dangling dependent to be collected",
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(cms.get_opt("still-owned").await.unwrap().is_some());
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), gc).await;
    cluster.shutdown().await;
}
