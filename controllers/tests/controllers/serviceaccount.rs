//! Every namespace has a `default` ServiceAccount and the `kube-root-ca.crt`
//! ConfigMap, recreated when deleted or changed.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use super::support::{TEST_CA_PEM, TestCluster, eventually, merge_patch};

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_account_and_root_ca_exist_everywhere_and_come_back() {
    let (cluster, client) =
        TestCluster::start_with_client(&["serviceaccount", "root-ca-cert-publisher"]).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "team-a"}})).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();

    for namespace in ["default", "kube-system", "team-a"] {
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
        eventually(WAIT, "the default service account", || async {
            accounts.get_opt("default").await.unwrap()
        })
        .await;
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        let cm = eventually(WAIT, "the root CA configmap", || async {
            cms.get_opt("kube-root-ca.crt").await.unwrap()
        })
        .await;
        assert_eq!(
            cm.data.unwrap().get("ca.crt").map(String::as_str),
            Some(TEST_CA_PEM)
        );
    }

    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "team-a");
    let before = accounts.get("default").await.unwrap().metadata.uid;
    accounts
        .delete("default", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        WAIT,
        "the default service account to be recreated",
        || async {
            let sa = accounts.get_opt("default").await.unwrap()?;
            (sa.metadata.uid != before).then_some(())
        },
    )
    .await;

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "team-a");
    cms.delete("kube-root-ca.crt", &DeleteParams::default())
        .await
        .unwrap();
    eventually(WAIT, "the root CA configmap to be recreated", || async {
        cms.get_opt("kube-root-ca.crt").await.unwrap().map(|_| ())
    })
    .await;
    merge_patch(
        &cms,
        "kube-root-ca.crt",
        json!({"data": {"ca.crt": "tampered"}}),
    )
    .await;
    eventually(WAIT, "the root CA data to be restored", || async {
        let cm = cms.get("kube-root-ca.crt").await.unwrap();
        (cm.data?.get("ca.crt")? == TEST_CA_PEM).then_some(())
    })
    .await;
    cluster.shutdown().await;
}
