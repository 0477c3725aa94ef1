//! The StatefulSet controller over the real API server; the test plays the
//! node by marking pods Running and Ready.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::support::{TestCluster, eventually, list_all, scale};
use super::workload_helpers::{
    WAIT, create_workload, get_workload, make_all_ready, make_ready, pods_owned_by, template,
};

async fn create(client: &Client, name: &str, replicas: i32, extra: Value) -> StatefulSet {
    let spec = json!({
        "replicas": replicas,
        "serviceName": name,
        "selector": {"matchLabels": {"app": name}},
        "template": template(json!({"app": name}), "postgres:16"),
    });
    create_workload(client, name, spec, extra).await
}

/// The StatefulSet `name` in `default`, as the API has it now.
async fn get(client: &Client, name: &str) -> StatefulSet {
    get_workload(client, name).await
}

async fn names(client: &Client, uid: &str) -> Vec<String> {
    pods_owned_by(client, "default", uid)
        .await
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| p.name_any())
        .collect()
}

async fn pod(client: &Client, name: &str) -> Pod {
    Api::<Pod>::namespaced(client.clone(), "default")
        .get(name)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_ready_creates_pods_one_at_a_time_with_claims() {
    let (cluster, client) = TestCluster::start_with_client(&["statefulset"]).await;
    let claims = json!({"volumeClaimTemplates": [{
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }]});
    let set = create(&client, "db", 3, claims).await;
    let uid = set.uid().unwrap();
    for ordinal in 0..3 {
        let expected: Vec<String> = (0..=ordinal).map(|i| format!("db-{i}")).collect();
        eventually(WAIT, &format!("pods up to db-{ordinal}"), || async {
            (names(&client, &uid).await == expected).then_some(())
        })
        .await;
        // Nothing more appears while the newest pod is not ready.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert_eq!(names(&client, &uid).await, expected, "waited for readiness");
        let p = pod(&client, &format!("db-{ordinal}")).await;
        let spec = p.spec.clone().unwrap();
        assert_eq!(
            spec.hostname.as_deref(),
            Some(format!("db-{ordinal}").as_str())
        );
        assert_eq!(spec.subdomain.as_deref(), Some("db"));
        let volume = spec
            .volumes
            .unwrap()
            .into_iter()
            .find(|v| v.name == "data")
            .unwrap();
        assert_eq!(
            volume.persistent_volume_claim.unwrap().claim_name,
            format!("data-db-{ordinal}")
        );
        assert_eq!(
            p.labels()["statefulset.kubernetes.io/pod-name"],
            format!("db-{ordinal}")
        );
        assert_eq!(
            p.labels()["apps.kubernetes.io/pod-index"],
            ordinal.to_string()
        );
        make_ready(&client, "default", &format!("db-{ordinal}")).await;
    }
    let pvcs: Vec<String> = list_all(&Api::<PersistentVolumeClaim>::namespaced(
        client.clone(),
        "default",
    ))
    .await
    .iter()
    .map(|c| c.name_any())
    .collect();
    assert_eq!(pvcs.len(), 3);
    for i in 0..3 {
        assert!(pvcs.contains(&format!("data-db-{i}")), "{pvcs:?}");
    }
    let set = eventually(WAIT, "status ready 3", || async {
        let s = get(&client, "db").await;
        let st = s.status.clone()?;
        (st.ready_replicas == Some(3) && st.replicas == 3 && st.current_replicas == Some(3))
            .then_some(s)
    })
    .await;
    let st = set.status.unwrap();
    assert_eq!(st.current_revision, st.update_revision);
    let revision = st.update_revision.unwrap();
    assert!(revision.starts_with("db-"));
    assert_eq!(
        pod(&client, "db-1").await.labels()["controller-revision-hash"],
        revision
    );

    // Scale down: highest ordinal first.
    scale(
        &Api::<StatefulSet>::namespaced(client.clone(), "default"),
        "db",
        1,
    )
    .await;
    eventually(WAIT, "scaled down to db-0", || async {
        (names(&client, &uid).await == ["db-0"]).then_some(())
    })
    .await;
    // The deletions happened highest ordinal first.
    let notes = eventually(WAIT, "delete events", || async {
        let mut events: Vec<Event> = Api::<Event>::namespaced(client.clone(), "default")
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("SuccessfulDelete"))
            .collect();
        events.sort_by_key(|e| e.event_time.clone().map(|t| t.0));
        let notes: Vec<String> = events.into_iter().filter_map(|e| e.note).collect();
        (notes.len() == 2).then_some(notes)
    })
    .await;
    assert_eq!(
        notes,
        [
            "delete Pod db-2 in StatefulSet db successful",
            "delete Pod db-1 in StatefulSet db successful"
        ]
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_update_goes_from_the_highest_ordinal_down_to_the_partition() {
    let (cluster, client) = TestCluster::start_with_client(&["statefulset"]).await;
    let set = create(
        &client,
        "web",
        3,
        json!({"podManagementPolicy": "Parallel",
               "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}}),
    )
    .await;
    let uid = set.uid().unwrap();
    eventually(WAIT, "3 pods at once", || async {
        (names(&client, &uid).await.len() == 3).then_some(())
    })
    .await;
    for i in 0..3 {
        make_ready(&client, "default", &format!("web-{i}")).await;
    }
    let old = eventually(WAIT, "first revision", || async {
        let st = get(&client, "web").await.status?;
        (st.ready_replicas == Some(3)).then_some(st.update_revision?)
    })
    .await;
    Api::<StatefulSet>::namespaced(client.clone(), "default")
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "postgres:17"}]}}}})),
        )
        .await
        .unwrap();
    // Play the node until web-2 and web-1 run the new revision.
    let new = eventually(WAIT, "ordinals >= partition updated", || async {
        make_all_ready(&client, &pods_owned_by(&client, "default", &uid).await).await;
        let st = get(&client, "web").await.status?;
        let new = st.update_revision.clone()?;
        (new != old && st.updated_replicas == Some(2) && st.ready_replicas == Some(3))
            .then_some(new)
    })
    .await;
    let rev = |p: Pod| p.labels()["controller-revision-hash"].clone();
    assert_eq!(rev(pod(&client, "web-2").await), new);
    assert_eq!(rev(pod(&client, "web-1").await), new);
    assert_eq!(
        rev(pod(&client, "web-0").await),
        old,
        "below the partition stays"
    );
    let st = get(&client, "web").await.status.unwrap();
    assert_eq!(st.current_revision.as_deref(), Some(old.as_str()));
    assert_eq!(st.current_replicas, Some(1));
    let image = pod(&client, "web-2").await.spec.unwrap().containers[0]
        .image
        .clone();
    assert_eq!(image.as_deref(), Some("postgres:17"));
    cluster.shutdown().await;
}

/// The owners of claim `name` (their kinds), or None once it is gone.
async fn claim_owners(client: &Client, name: &str) -> Option<Vec<String>> {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let claim = claims.get_opt(name).await.unwrap()?;
    Some(
        claim
            .metadata
            .owner_references
            .unwrap_or_default()
            .into_iter()
            .map(|r| format!("{}/{}", r.kind, r.name))
            .collect(),
    )
}

/// Waits until claim `name` is gone (`what` says why it should be). Three
/// controllers act in turn (the set's hands the claim to its pod or leaves
/// it to the set, the garbage collector deletes it, claim protection lets
/// it go), so this waits three times as long as one controller's step.
async fn claim_gone(client: &Client, name: &str, what: &str) {
    eventually(WAIT * 3, what, || async {
        claim_owners(client, name).await.is_none().then_some(())
    })
    .await;
}

/// `persistentVolumeClaimRetentionPolicy` Delete/Delete: the claims are
/// the set's; a scaled-down pod's claim becomes the pod's and goes with
/// it; the rest go with the set. Retain (the default) leaves them alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_go_with_the_set_or_the_scaled_down_pod_as_the_policy_says() {
    let (cluster, client) =
        TestCluster::start_with_client(&["statefulset", "garbage-collector", "pvc-protection"])
            .await;
    let extra = |name: &str, policy: Value| {
        json!({"podManagementPolicy": "Parallel",
            "persistentVolumeClaimRetentionPolicy": policy,
            "volumeClaimTemplates": [{"metadata": {"name": name},
                "spec": {"accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}}}}]})
    };
    create(
        &client,
        "db",
        2,
        extra(
            "data",
            json!({"whenDeleted": "Delete", "whenScaled": "Delete"}),
        ),
    )
    .await;
    create(&client, "kept", 1, extra("keep", json!({}))).await;
    for claim in ["data-db-0", "data-db-1"] {
        eventually(WAIT, &format!("{claim} owned by the set"), || async {
            (claim_owners(&client, claim).await? == ["StatefulSet/db"]).then_some(())
        })
        .await;
    }
    eventually(WAIT, "keep-kept-0 made", || async {
        claim_owners(&client, "keep-kept-0").await
    })
    .await;

    scale::<StatefulSet>(&Api::namespaced(client.clone(), "default"), "db", 1).await;
    claim_gone(&client, "data-db-1", "data-db-1 gone with its pod").await;
    assert_eq!(
        claim_owners(&client, "data-db-0").await.as_deref(),
        Some(&["StatefulSet/db".to_string()][..])
    );

    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    for name in ["db", "kept"] {
        sets.delete(name, &Default::default()).await.unwrap();
    }
    claim_gone(&client, "data-db-0", "data-db-0 gone with the set").await;
    assert_eq!(
        claim_owners(&client, "keep-kept-0").await,
        Some(vec![]),
        "Retain keeps the claim, owned by nothing"
    );
    cluster.shutdown().await;
}
