//! Every controller's service account is bound by the API server's default
//! RBAC policy to a role that exists, so no controller starts without
//! rights when it acts as its own account.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::ListParams;
use skiff_controllers::{ACCOUNTS_NAMESPACE, Context, ControllerManager};

use super::support::TestCluster;

#[tokio::test]
async fn every_controller_account_has_a_bound_role() {
    let cluster = TestCluster::start(Some(&[])).await;
    let manager = ControllerManager::with_defaults(
        Context::new(cluster.client.clone(), cluster.factory.clone()),
        &[],
    );
    let bindings = Api::<ClusterRoleBinding>::all(cluster.client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let roles: Vec<String> = Api::<ClusterRole>::all(cluster.client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|r| r.metadata.name)
        .collect();
    for account in manager.accounts() {
        let bound = bindings.iter().find(|b| {
            b.subjects.iter().flatten().any(|s| {
                s.kind == "ServiceAccount"
                    && s.name == account
                    && s.namespace.as_deref() == Some(ACCOUNTS_NAMESPACE)
            })
        });
        let Some(binding) = bound else {
            panic!("no ClusterRoleBinding names {ACCOUNTS_NAMESPACE}/{account}");
        };
        assert!(
            roles.contains(&binding.role_ref.name),
            "{account} is bound to the missing role {}",
            binding.role_ref.name
        );
    }
    cluster.shutdown().await;
}
