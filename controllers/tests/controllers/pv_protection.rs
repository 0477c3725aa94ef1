//! A volume a claim is bound to is kept (pv-protection): deleted, it stays
//! Terminating, still Bound, until its claim goes and the binder marks it
//! Released; then it is gone. A volume that lost the finalizer gets it back,
//! and one never bound goes at once.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use kube::api::DeleteParams;
use serde_json::json;

use super::support::{
    TestCluster, create_object, eventually, eventually_gone, merge_patch, merge_patch_status,
    present_after_a_moment,
};

const WAIT: Duration = Duration::from_secs(20);
const FINALIZER: &str = "kubernetes.io/pv-protection";

fn finalizers(volume: &PersistentVolume) -> Vec<String> {
    volume.metadata.finalizers.clone().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_volume_outlives_its_deletion_until_its_claim_is_gone() {
    let cluster = TestCluster::start(Some(&[
        "pv-protection",
        "pvc-protection",
        "persistentvolume-binder",
    ]))
    .await;
    let client = cluster.client.clone();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let claim: PersistentVolumeClaim = create_object(
        &claims,
        json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "storageClassName": "", "volumeName": "pv-data",
            "resources": {"requests": {"storage": "1Gi"}}}}),
    )
    .await;
    let uid = claim.metadata.uid.clone().unwrap();
    let spec = |claim_uid: Option<&str>| {
        json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/tmp/pv-data"},
            "claimRef": {"namespace": "default", "name": "data", "uid": claim_uid}})
    };

    // Every new volume is protected.
    let volume: PersistentVolume = create_object(
        &volumes,
        json!({"metadata": {"name": "pv-data"}, "spec": spec(Some(&uid))}),
    )
    .await;
    assert_eq!(finalizers(&volume), [FINALIZER]);
    merge_patch_status(&volumes, "pv-data", json!({"status": {"phase": "Bound"}})).await;

    // A protected volume that lost its finalizer gets it back.
    merge_patch(
        &volumes,
        "pv-data",
        json!({"metadata": {"finalizers": null}}),
    )
    .await;
    eventually(WAIT, "the finalizer restored", || async {
        let now = volumes.get("pv-data").await.ok()?;
        (finalizers(&now) == [FINALIZER]).then_some(())
    })
    .await;

    // Deleted while Bound, it stays: Terminating, Bound, its finalizer on.
    volumes
        .delete("pv-data", &DeleteParams::default())
        .await
        .unwrap();
    assert!(present_after_a_moment(&volumes, "pv-data").await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held = volumes.get("pv-data").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(finalizers(&held), [FINALIZER]);
    let phase = held.status.and_then(|s| s.phase);
    assert_eq!(phase.as_deref(), Some("Bound"));

    // Its claim goes: the binder marks it Released and it is let go.
    claims
        .delete("data", &DeleteParams::default())
        .await
        .unwrap();
    eventually_gone(WAIT, &claims, "data").await;
    eventually_gone(WAIT, &volumes, "pv-data").await;

    // A volume never bound goes at once.
    create_object::<PersistentVolume>(
        &volumes,
        json!({"metadata": {"name": "pv-free"}, "spec": spec(None)}),
    )
    .await;
    volumes
        .delete("pv-free", &DeleteParams::default())
        .await
        .unwrap();
    eventually_gone(WAIT, &volumes, "pv-free").await;
    cluster.shutdown().await;
}
