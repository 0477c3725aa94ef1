//! Namespace deletion: content is deleted, conditions report what remains,
//! and the namespace goes away once empty, also while other controllers
//! keep publishing into it.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::support::{TestCluster, eventually, eventually_gone};

const WAIT: Duration = Duration::from_secs(20);

async fn create_namespace(client: &kube::Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    api.create(&PostParams::default(), &ns).await.unwrap();
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
    let cluster = TestCluster::start(Some(&["namespace"])).await;
    let client = cluster.client.clone();
    create_namespace(&client, "doomed").await;
    create_namespace(&client, "kept").await;
    fill(&client, "doomed").await;
    fill(&client, "kept").await;

    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    eventually_gone(WAIT, &namespaces, "doomed").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "doomed");
    assert!(
        cms.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "doomed");
    assert!(
        pods.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "doomed");
    assert!(
        secrets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // The other namespace is untouched.
    let kept: Api<ConfigMap> = Api::namespaced(client.clone(), "kept");
    assert_eq!(
        kept.list(&ListParams::default()).await.unwrap().items.len(),
        3
    );
    assert!(namespaces.get_opt("kept").await.unwrap().is_some());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_with_finalizers_holds_the_namespace_and_conditions_say_why() {
    let cluster = TestCluster::start(Some(&["namespace"])).await;
    let client = cluster.client.clone();
    create_namespace(&client, "held").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "held");
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "sticky", "finalizers": ["example.com/hold"]}
    }))
    .unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();

    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete("held", &DeleteParams::default())
        .await
        .unwrap();
    let ns = eventually(WAIT, "conditions reporting the held content", || async {
        let ns = namespaces.get("held").await.unwrap();
        let conditions = ns.status.as_ref()?.conditions.clone()?;
        let remaining = conditions
            .iter()
            .find(|c| c.type_ == "NamespaceFinalizersRemaining")?;
        (remaining.status == "True").then_some(ns)
    })
    .await;
    let status = ns.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Terminating"));
    let conditions = status.conditions.unwrap();
    let find = |t: &str| conditions.iter().find(|c| c.type_ == t).unwrap().clone();
    let content = find("NamespaceContentRemaining");
    assert_eq!(content.status, "True");
    assert_eq!(content.reason.as_deref(), Some("SomeResourcesRemain"));
    assert_eq!(
        content.message.as_deref(),
        Some("Some resources are remaining: configmaps has 1 resource instances")
    );
    assert_eq!(
        find("NamespaceFinalizersRemaining").message.as_deref(),
        Some(
            "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
        )
    );
    assert_eq!(find("NamespaceDeletionDiscoveryFailure").status, "False");
    assert_eq!(find("NamespaceDeletionContentFailure").status, "False");
    let spec_finalizers = ns.spec.unwrap().finalizers.unwrap();
    assert_eq!(spec_finalizers, ["kubernetes"]);

    // Releasing the object lets the namespace go.
    cms.patch(
        "sticky",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
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

    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete("busy", &DeleteParams::default())
        .await
        .unwrap();
    eventually_gone(WAIT, &namespaces, "busy").await;
    cluster.shutdown().await;
}
