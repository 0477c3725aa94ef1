//! Every controller's service account is bound by the API server's default
//! RBAC policy to a role that exists (cluster-wide, or in kube-system for
//! those upstream confines there, as the token cleaner), so no controller
//! starts without rights when it acts as its own account.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use skiff_controllers::{ACCOUNTS_NAMESPACE, Context, ControllerManager};

use super::support::{TestCluster, list_all};

/// The names of every object `api` lists.
async fn names<K>(api: Api<K>) -> Vec<String>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    list_all(&api)
        .await
        .into_iter()
        .filter_map(|object| object.meta().name.clone())
        .collect()
}

#[tokio::test]
async fn every_controller_account_has_a_bound_role() {
    let cluster = TestCluster::start(Some(&[])).await;
    let manager = ControllerManager::with_defaults(
        Context::new(cluster.client.clone(), cluster.factory.clone()),
        &[],
    );
    let bindings = list_all(&Api::<ClusterRoleBinding>::all(cluster.client.clone())).await;
    let roles = names(Api::<ClusterRole>::all(cluster.client.clone())).await;
    let local_bindings = list_all(&Api::<RoleBinding>::namespaced(
        cluster.client.clone(),
        ACCOUNTS_NAMESPACE,
    ))
    .await;
    let local_roles = names(Api::<Role>::namespaced(
        cluster.client.clone(),
        ACCOUNTS_NAMESPACE,
    ))
    .await;
    let names_account = |subjects: &Option<Vec<k8s_openapi::api::rbac::v1::Subject>>,
                         account: &str| {
        subjects.iter().flatten().any(|s| {
            s.kind == "ServiceAccount"
                && s.name == account
                && s.namespace.as_deref() == Some(ACCOUNTS_NAMESPACE)
        })
    };
    for account in manager.accounts() {
        if let Some(binding) = bindings
            .iter()
            .find(|b| names_account(&b.subjects, account))
        {
            assert!(
                roles.contains(&binding.role_ref.name),
                "{account} is bound to the missing role {}",
                binding.role_ref.name
            );
            continue;
        }
        let Some(binding) = local_bindings
            .iter()
            .find(|b| names_account(&b.subjects, account))
        else {
            panic!(
                "no ClusterRoleBinding or kube-system RoleBinding names {ACCOUNTS_NAMESPACE}/{account}"
            );
        };
        let exists = match binding.role_ref.kind.as_str() {
            "Role" => local_roles.contains(&binding.role_ref.name),
            _ => roles.contains(&binding.role_ref.name),
        };
        assert!(
            exists,
            "{account} is bound to the missing role {}",
            binding.role_ref.name
        );
    }
    cluster.shutdown().await;
}
