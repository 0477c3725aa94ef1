//! The resource quota controller, run as its own service account with the
//! role the default policy gives it, keeps `status.hard` equal to
//! `spec.hard` and `status.used` equal to what the namespace holds,
//! following creates, deletes, pods finishing and edits of the quota; that
//! account can write quota status and nothing else.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, ResourceQuota, Secret};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use skiff_apiserver::authn::UserInfo;
use skiff_controllers::resource_quota;

use super::support::{
    OwnController, TestCluster, create_object, eventually, merge_patch, merge_patch_status, object,
};

const WAIT: Duration = Duration::from_secs(20);

/// Waits until the quota's status reads `hard` and `used` exactly.
async fn until_status(quotas: &Api<ResourceQuota>, what: &str, hard: Value, used: Value) {
    eventually(WAIT, what, || async {
        let quota = quotas.get("q").await.unwrap();
        let status = serde_json::to_value(quota.status?).unwrap();
        (status["hard"] == hard && status["used"] == used).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_used_follows_creates_deletes_and_finished_pods() {
    let cluster = TestCluster::start(Some(&[])).await;
    let account = UserInfo::service_account("kube-system", "resourcequota-controller");
    let account_client = cluster.client_as(account);
    let controller = OwnController::start(
        account_client.clone(),
        "resourcequota",
        "resourcequota-controller",
        resource_quota::run,
    );
    let client = cluster.client.clone();
    create_object(
        &Api::<Namespace>::all(client.clone()),
        json!({"metadata": {"name": "team"}}),
    )
    .await;
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), "team");
    let hard =
        json!({"configmaps": "3", "pods": "2", "requests.cpu": "1", "requests.memory": "1Gi"});
    create_object(
        &quotas,
        json!({"metadata": {"name": "q"}, "spec": {"hard": hard}}),
    )
    .await;
    // While the limits are the ones first set, only the counts change.
    let until_used = |what, used| until_status(&quotas, what, hard.clone(), used);
    until_used(
        "the first count",
        json!({"configmaps": "0", "pods": "0", "requests.cpu": "0", "requests.memory": "0"}),
    )
    .await;

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    for name in ["a", "b"] {
        create_object(&cms, json!({"metadata": {"name": name}})).await;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "team");
    for name in ["p1", "p2"] {
        create_object(
            &pods,
            json!({"metadata": {"name": name}, "spec": {"containers": [
                {"name": "c", "image": "i",
                 "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}}]}}),
        )
        .await;
    }
    until_used(
        "the creates to be counted",
        json!({"configmaps": "2", "pods": "2", "requests.cpu": "500m", "requests.memory": "1Gi"}),
    )
    .await;

    cms.delete("a", &DeleteParams::default()).await.unwrap();
    merge_patch_status(&pods, "p1", json!({"status": {"phase": "Failed"}})).await;
    until_used(
        "the delete and the finished pod to be released",
        json!({"configmaps": "1", "pods": "1", "requests.cpu": "250m", "requests.memory": "512Mi"}),
    )
    .await;

    // A changed spec is reported, counting what it now names.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "team");
    create_object(&secrets, json!({"metadata": {"name": "s"}})).await;
    merge_patch(
        &quotas,
        "q",
        json!({"spec": {"hard": {"count/secrets": "5", "requests.memory": null}}}),
    )
    .await;
    until_status(
        &quotas,
        "the new hard limits",
        json!({"configmaps": "3", "count/secrets": "5", "pods": "2", "requests.cpu": "1"}),
        json!({"configmaps": "1", "count/secrets": "1", "pods": "1", "requests.cpu": "250m"}),
    )
    .await;

    // The account reports; it cannot change limits or make objects.
    let as_controller: Api<ResourceQuota> = Api::namespaced(account_client.clone(), "team");
    let refused = as_controller
        .patch(
            "q",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"hard": {"pods": "100"}}})),
        )
        .await;
    assert!(matches!(refused, Err(kube::Error::Api(s)) if s.code == 403));
    let refused = Api::<ConfigMap>::namespaced(account_client, "team")
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": "sneaky"}})),
        )
        .await;
    assert!(matches!(refused, Err(kube::Error::Api(s)) if s.code == 403));

    controller.stop().await;
    cluster.shutdown().await;
}
