//! skiff's local-path provisioner, acting as its own service account: it
//! makes the default `local-path` class, and a claim of that class placed
//! on a node (the scheduler's selected-node annotation) gets a volume in
//! the directory the node published, pinned to that node and bound to the
//! claim. Claims not placed yet, or of another provisioner's class, wait.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use serde_json::json;
use skiff_controllers::local_path_provisioner;
use skiff_testkit::UserInfo;

use super::support::{OwnController, TestCluster, create_object, eventually, merge_patch};
use super::workload_helpers::{assert_event, event_about, event_reasons};

const WAIT: Duration = Duration::from_secs(20);
const SELECTED: &str = "volume.kubernetes.io/selected-node";

async fn claim(api: &Api<PersistentVolumeClaim>, name: &str, class: &str, node: Option<&str>) {
    let annotations = node.map(|n| json!({SELECTED: n})).unwrap_or(json!({}));
    create_object(
        api,
        json!({"metadata": {"name": name, "annotations": annotations},
            "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "2Gi"}}}}),
    )
    .await;
}

async fn volume_of(api: &Api<PersistentVolumeClaim>, name: &str) -> Option<String> {
    api.get(name)
        .await
        .ok()?
        .spec?
        .volume_name
        .filter(|v| !v.is_empty())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_placed_on_a_node_gets_a_volume_in_the_nodes_directory() {
    let cluster = TestCluster::start(Some(&[])).await;
    let account = UserInfo::service_account("kube-system", local_path_provisioner::ACCOUNT);
    let provisioner = OwnController::start(
        cluster.client_as(account),
        "local-path-provisioner",
        local_path_provisioner::ACCOUNT,
        local_path_provisioner::run,
    );
    let client = cluster.client.clone();
    let classes: Api<StorageClass> = Api::all(client.clone());
    let class = eventually(WAIT, "the local-path class", || async {
        classes.get_opt("local-path").await.ok().flatten()
    })
    .await;
    assert_eq!(class.provisioner, "skiff.io/local-path");
    assert_eq!(
        class.volume_binding_mode.as_deref(),
        Some("WaitForFirstConsumer")
    );
    assert_eq!(
        class
            .metadata
            .annotations
            .unwrap_or_default()
            .get("storageclass.kubernetes.io/is-default-class")
            .map(String::as_str),
        Some("true")
    );
    create_object(
        &classes,
        json!({"metadata": {"name": "other"}, "provisioner": "example.com/p",
            "volumeBindingMode": "WaitForFirstConsumer"}),
    )
    .await;

    let nodes: Api<Node> = Api::all(client.clone());
    create_object(&nodes, json!({"metadata": {"name": "n1"}})).await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    claim(&claims, "data", "local-path", Some("n1")).await;
    claim(&claims, "unplaced", "local-path", None).await;
    claim(&claims, "theirs", "other", Some("n1")).await;

    // Until the node says where its volumes go, the claim waits, told why.
    let waiting = event_about(&client, "data", "WaitForNode").await;
    assert_event(
        &waiting,
        "Normal",
        "waiting for node n1 to publish its local-path storage directory",
    );
    assert_eq!(volume_of(&claims, "data").await, None);

    merge_patch(
        &nodes,
        "n1",
        json!({"metadata": {"annotations": {"skiff.io/local-path-dir": "/srv/n1/storage"}}}),
    )
    .await;
    let volume_name = eventually(WAIT, "the claim bound", || volume_of(&claims, "data")).await;
    let data = claims.get("data").await.unwrap();
    let uid = data.metadata.uid.clone().unwrap();
    assert_eq!(volume_name, format!("pvc-{uid}"));
    let status = data.status.clone().unwrap_or_default();
    assert_eq!(status.phase.as_deref(), Some("Bound"));
    assert_eq!(
        status
            .capacity
            .unwrap_or_default()
            .get("storage")
            .map(|q| q.0.as_str()),
        Some("2Gi")
    );
    let volume = Api::<PersistentVolume>::all(client.clone())
        .get(&volume_name)
        .await
        .unwrap();
    let spec = volume.spec.clone().unwrap();
    assert_eq!(
        spec.host_path.map(|h| h.path),
        Some(format!("/srv/n1/storage/pvc-{uid}_default_data"))
    );
    assert_eq!(
        skiff_common::local_path::pinned_node(&volume),
        Some("n1"),
        "{volume:?}"
    );
    assert_eq!(spec.claim_ref.and_then(|r| r.uid), Some(uid));
    assert_eq!(spec.storage_class_name.as_deref(), Some("local-path"));
    assert_eq!(
        volume.status.and_then(|s| s.phase).as_deref(),
        Some("Bound")
    );
    let succeeded = event_about(&client, "data", "ProvisioningSucceeded").await;
    assert_event(
        &succeeded,
        "Normal",
        &format!("Successfully provisioned volume {volume_name}"),
    );

    // Not placed yet, or another provisioner's: left alone.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(volume_of(&claims, "unplaced").await, None);
    assert_eq!(volume_of(&claims, "theirs").await, None);
    for name in ["unplaced", "theirs"] {
        assert!(
            !event_reasons(&client, "default", name)
                .await
                .iter()
                .any(|r| r.starts_with("Provisioning")),
            "{name}"
        );
    }
    provisioner.stop().await;
    cluster.shutdown().await;
}
