//! persistentvolume-binder's part in skiff: claims that name no class and
//! were created before any StorageClass was marked default get the default
//! class once one is; claims that ask for no class (`""`), that name one, or
//! that are bound keep what they have.

use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use serde_json::json;

use super::support::{TestCluster, create_object, eventually, merge_patch};
use super::workload_helpers::{assert_event, event_about, event_reasons};

const WAIT: Duration = Duration::from_secs(20);

async fn create_claim(api: &Api<PersistentVolumeClaim>, name: &str, spec: serde_json::Value) {
    let mut spec = spec;
    spec["accessModes"] = json!(["ReadWriteOnce"]);
    spec["resources"] = json!({"requests": {"storage": "1Gi"}});
    create_object(api, json!({"metadata": {"name": name}, "spec": spec})).await;
}

async fn class_of(api: &Api<PersistentVolumeClaim>, name: &str) -> Option<String> {
    api.get(name)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.storage_class_name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_made_before_a_default_class_get_it_once_one_is_marked() {
    let cluster = TestCluster::start(Some(&["persistentvolume-binder"])).await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(cluster.client.clone(), "default");
    let classes: Api<StorageClass> = Api::all(cluster.client.clone());
    create_claim(&claims, "waiting", json!({})).await;
    create_claim(&claims, "no-class", json!({"storageClassName": ""})).await;
    create_claim(&claims, "bound", json!({"volumeName": "pv-1"})).await;

    // A class that is not marked default changes nothing.
    create_object(
        &classes,
        json!({"metadata": {"name": "slow"}, "provisioner": "example.com/p"}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(class_of(&claims, "waiting").await, None);

    // Marking it default completes the waiting claim.
    merge_patch(
        &classes,
        "slow",
        json!({"metadata": {"annotations": {
            "storageclass.kubernetes.io/is-default-class": "true"}}}),
    )
    .await;
    eventually(WAIT, "the waiting claim gets the default class", || async {
        (class_of(&claims, "waiting").await.as_deref() == Some("slow")).then_some(())
    })
    .await;
    assert_eq!(class_of(&claims, "no-class").await.as_deref(), Some(""));
    assert_eq!(class_of(&claims, "bound").await, None);
    cluster.shutdown().await;
}

/// A claim of a `WaitForFirstConsumer` class says why it is Pending, as
/// upstream's controller does; one whose first pod is placed says it waits
/// for the class's provisioner instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_claim_is_told_it_waits_for_its_first_consumer() {
    let cluster = TestCluster::start(Some(&["persistentvolume-binder"])).await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(cluster.client.clone(), "default");
    let classes: Api<StorageClass> = Api::all(cluster.client.clone());
    create_object(
        &classes,
        json!({"metadata": {"name": "local"}, "provisioner": "example.com/p",
            "volumeBindingMode": "WaitForFirstConsumer"}),
    )
    .await;
    create_claim(&claims, "delayed", json!({"storageClassName": "local"})).await;
    let event = event_about(&cluster.client, "delayed", "WaitForFirstConsumer").await;
    assert_event(
        &event,
        "Normal",
        "waiting for first consumer to be created before binding",
    );
    assert_eq!(
        event.reporting_controller.as_deref(),
        Some("persistentvolume-controller")
    );

    let placed = create_object(
        &claims,
        json!({"metadata": {"name": "placed",
                "annotations": {"volume.kubernetes.io/selected-node": "n1"}},
            "spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}),
    )
    .await;
    let event = event_about(&cluster.client, "placed", "ExternalProvisioning").await;
    assert_event(
        &event,
        "Normal",
        "Waiting for a volume to be created either by the external provisioner 'example.com/p' \
         or manually by the system administrator. If volume creation is delayed, please verify \
         that the provisioner is running and correctly registered.",
    );
    let reasons = event_reasons(&cluster.client, "default", "placed").await;
    assert!(
        !reasons.iter().any(|r| r == "WaitForFirstConsumer"),
        "{reasons:?} about {:?}",
        placed.metadata.name
    );
    cluster.shutdown().await;
}
