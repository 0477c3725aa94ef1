//! Namespace deletion: content is deleted, conditions report what remains,
//! and the namespace goes away once empty, also while other controllers
//! keep publishing into it.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use super::support::{TestCluster, eventually, eventually_gone, list_all, merge_patch};

const WAIT: Duration = Duration::from_secs(20);

async fn create_namespace(client: &kube::Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    api.create(&PostParams::default(), &ns).await.unwrap();
}

/// Deletes the namespace `name` and waits until the controller has emptied
/// it and it is gone.
async fn delete_namespace(client: &kube::Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
    eventually_gone(WAIT, &namespaces, name).await;
}

async fn fill(client: &kube::Client, ns: &str) {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    for i in 0..3 {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": format!("cm-{i}")}, "data": {"k": "v"}
        }))
        .unwrap();
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "s"}, "stringData": {"password": "x"}
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_namespace_empties_it_and_it_goes_away() {
    let (cluster, client) = TestCluster::start_with_client(&["namespace"]).await;
    create_namespace(&client, "doomed").await;
    create_namespace(&client, "kept").await;
    fill(&client, "doomed").await;
    fill(&client, "kept").await;

    delete_namespace(&client, "doomed").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "doomed");
    assert!(list_all(&cms).await.is_empty());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "doomed");
    assert!(list_all(&pods).await.is_empty());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "doomed");
    assert!(list_all(&secrets).await.is_empty());

    // The other namespace is untouched.
    let kept: Api<ConfigMap> = Api::namespaced(client.clone(), "kept");
    assert_eq!(list_all(&kept).await.len(), 3);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    assert!(namespaces.get_opt("kept").await.unwrap().is_some());
    cluster.shutdown().await;
}

/// The namespace's condition `type_` once it reads `message`.
async fn condition_reads(
    namespaces: &Api<Namespace>,
    name: &str,
    type_: &str,
    message: &str,
) -> Namespace {
    eventually(WAIT, &format!("{type_}: {message}"), || async {
        let ns = namespaces.get(name).await.unwrap();
        let conditions = ns.status.as_ref()?.conditions.clone()?;
        let found = conditions.iter().find(|c| c.type_ == type_)?;
        (found.message.as_deref() == Some(message)).then_some(ns)
    })
    .await
}

async fn release<K>(api: &Api<K>, name: &str)
where
    K: Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    merge_patch(api, name, json!({"metadata": {"finalizers": null}})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_with_finalizers_holds_the_namespace_and_conditions_say_why() {
    let (cluster, client) = TestCluster::start_with_client(&["namespace"]).await;
    create_namespace(&client, "held").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "held");
    for name in ["sticky-1", "sticky-2"] {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name, "finalizers": ["example.com/hold"]}
        }))
        .unwrap();
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "held");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "worker", "finalizers": ["batch.kubernetes.io/job-tracking"]},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();

    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete("held", &DeleteParams::default())
        .await
        .unwrap();
    // Upstream's wording: resource.group (a bare dot for the core group),
    // sorted; finalizers with the number of objects carrying each.
    let ns = condition_reads(
        &namespaces,
        "held",
        "NamespaceContentRemaining",
        "Some resources are remaining: configmaps. has 2 resource instances, pods. has 1 resource instances",
    )
    .await;
    let status = ns.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Terminating"));
    let conditions = status.conditions.unwrap();
    let find = |t: &str| conditions.iter().find(|c| c.type_ == t).unwrap().clone();
    let content = find("NamespaceContentRemaining");
    assert_eq!(content.status, "True");
    assert_eq!(content.reason.as_deref(), Some("SomeResourcesRemain"));
    let finalizers = find("NamespaceFinalizersRemaining");
    assert_eq!(
        (finalizers.status.as_str(), finalizers.reason.as_deref()),
        ("True", Some("SomeFinalizersRemain"))
    );
    assert_eq!(
        finalizers.message.as_deref(),
        Some(
            "Some content in the namespace has finalizers remaining: batch.kubernetes.io/job-tracking in 1 resource instances, example.com/hold in 2 resource instances"
        )
    );
    let discovery = find("NamespaceDeletionDiscoveryFailure");
    assert_eq!(
        (discovery.status.as_str(), discovery.reason.as_deref()),
        ("False", Some("ResourcesDiscovered"))
    );
    let parsing = find("NamespaceDeletionGroupVersionParsingFailure");
    assert_eq!(
        (parsing.status.as_str(), parsing.reason.as_deref()),
        ("False", Some("ParsedGroupVersions"))
    );
    let deletion = find("NamespaceDeletionContentFailure");
    assert_eq!(
        (deletion.status.as_str(), deletion.reason.as_deref()),
        ("False", Some("ContentDeleted"))
    );
    let spec_finalizers = ns.spec.unwrap().finalizers.unwrap();
    assert_eq!(spec_finalizers, ["kubernetes"]);

    // The conditions follow the progress: the pod released, only the
    // configmaps are left.
    release(&pods, "worker").await;
    condition_reads(
        &namespaces,
        "held",
        "NamespaceFinalizersRemaining",
        "Some content in the namespace has finalizers remaining: example.com/hold in 2 resource instances",
    )
    .await;
    condition_reads(
        &namespaces,
        "held",
        "NamespaceContentRemaining",
        "Some resources are remaining: configmaps. has 2 resource instances",
    )
    .await;

    // Releasing the rest lets the namespace go.
    release(&cms, "sticky-1").await;
    release(&cms, "sticky-2").await;
    eventually_gone(WAIT, &namespaces, "held").await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_finishes_while_other_controllers_publish_into_the_namespace() {
    let cluster = TestCluster::start(Some(&[
        "namespace",
        "garbage-collector",
        "serviceaccount",
        "root-ca-cert-publisher",
        "endpoint",
        "endpointslice",
    ]))
    .await;
    let client = cluster.client.clone();
    create_namespace(&client, "busy").await;
    fill(&client, "busy").await;
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(client.clone(), "busy");
    let svc = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}
    }))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), "busy");
    eventually(WAIT, "the default service account", || async {
        accounts.get_opt("default").await.unwrap()
    })
    .await;

    delete_namespace(&client, "busy").await;
    cluster.shutdown().await;
}
