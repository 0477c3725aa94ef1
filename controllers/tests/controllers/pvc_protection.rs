//! A claim a pod uses is kept while the pod runs (pvc-protection): deleted,
//! it stays Terminating with its finalizer until no scheduled, unfinished
//! pod names it; a claim that lost the finalizer gets it back. Its volume
//! is then marked Released (persistentvolume-binder), keeping its
//! `claimRef`; a volume reserved for a claim by name alone is not touched.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::Api;
use kube::api::DeleteParams;
use serde_json::json;

use super::support::{
    TestCluster, create_object, eventually, eventually_gone, merge_patch, merge_patch_status,
    present_after_a_moment,
};

const WAIT: Duration = Duration::from_secs(20);
const FINALIZER: &str = "kubernetes.io/pvc-protection";

fn finalizers(claim: &PersistentVolumeClaim) -> Vec<String> {
    claim.metadata.finalizers.clone().unwrap_or_default()
}

async fn phase(volumes: &Api<PersistentVolume>, name: &str) -> Option<String> {
    volumes
        .get(name)
        .await
        .unwrap()
        .status
        .and_then(|s| s.phase)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_in_use_outlives_its_deletion_and_its_volume_is_then_released() {
    let cluster = TestCluster::start(Some(&["pvc-protection", "persistentvolume-binder"])).await;
    let client = cluster.client.clone();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let spec = json!({"accessModes": ["ReadWriteOnce"], "storageClassName": "",
        "resources": {"requests": {"storage": "1Gi"}}});

    // Every new claim is protected.
    let claim: PersistentVolumeClaim = create_object(
        &claims,
        json!({"metadata": {"name": "data"}, "spec": spec.clone()}),
    )
    .await;
    assert_eq!(finalizers(&claim), [FINALIZER]);
    let uid = claim.metadata.uid.clone().unwrap();
    for (name, claim_uid) in [("pv-data", Some(uid.as_str())), ("pv-by-name", None)] {
        create_object(
            &volumes,
            json!({"metadata": {"name": name}, "spec": {
                "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": format!("/tmp/{name}")},
                "claimRef": {"namespace": "default", "name": "data", "uid": claim_uid}}}),
        )
        .await;
        merge_patch_status(&volumes, name, json!({"status": {"phase": "Bound"}})).await;
    }

    // A running pod holds it: deleted, the claim stays, Terminating.
    create_object(
        &pods,
        json!({"metadata": {"name": "user"}, "spec": {"nodeName": "n1",
            "containers": [{"name": "c", "image": "i"}],
            "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}}),
    )
    .await;
    merge_patch_status(&pods, "user", json!({"status": {"phase": "Running"}})).await;
    claims
        .delete("data", &DeleteParams::default())
        .await
        .unwrap();
    assert!(present_after_a_moment(&claims, "data").await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held = claims.get("data").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(finalizers(&held), [FINALIZER]);
    assert_eq!(phase(&volumes, "pv-data").await.as_deref(), Some("Bound"));

    // Once the pod has finished, the claim goes and its volume is Released.
    merge_patch_status(&pods, "user", json!({"status": {"phase": "Succeeded"}})).await;
    eventually_gone(WAIT, &claims, "data").await;
    eventually(WAIT, "pv-data Released", || async {
        (phase(&volumes, "pv-data").await.as_deref() == Some("Released")).then_some(())
    })
    .await;
    let released = volumes.get("pv-data").await.unwrap();
    let claim_ref = released.spec.and_then(|s| s.claim_ref).unwrap();
    assert_eq!(claim_ref.uid.as_deref(), Some(uid.as_str()));
    assert_eq!(
        phase(&volumes, "pv-by-name").await.as_deref(),
        Some("Bound")
    );

    // A claim of the same name is another claim: the volume stays Released.
    let again: PersistentVolumeClaim =
        create_object(&claims, json!({"metadata": {"name": "data"}, "spec": spec})).await;
    assert_ne!(again.metadata.uid.as_deref(), Some(uid.as_str()));
    // A protected claim that lost its finalizer gets it back.
    merge_patch(&claims, "data", json!({"metadata": {"finalizers": null}})).await;
    eventually(WAIT, "the finalizer restored", || async {
        let now = claims.get("data").await.ok()?;
        (finalizers(&now) == [FINALIZER]).then_some(())
    })
    .await;
    assert_eq!(
        phase(&volumes, "pv-data").await.as_deref(),
        Some("Released")
    );
    cluster.shutdown().await;
}
