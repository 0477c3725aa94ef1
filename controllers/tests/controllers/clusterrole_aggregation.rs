//! ClusterRole aggregation, run as the controller's own service account
//! with the role the default policy gives it: a new role labelled for
//! `view` reaches `view`, `edit` and `admin`, and leaves them when deleted.

use std::time::Duration;

use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;
use skiff_apiserver::authn::UserInfo;
use skiff_controllers::clusterrole_aggregation;

use super::support::{OwnController, TestCluster, eventually};

const WAIT: Duration = Duration::from_secs(20);

async fn grants_widgets(api: &Api<ClusterRole>, name: &str) -> bool {
    api.get(name)
        .await
        .unwrap()
        .rules
        .unwrap_or_default()
        .iter()
        .any(|r| r.resources.iter().flatten().any(|x| x == "widgets"))
}

#[tokio::test]
async fn aggregated_roles_follow_their_labelled_parts() {
    let cluster = TestCluster::start(Some(&[])).await;
    let account = UserInfo::service_account("kube-system", "clusterrole-aggregation-controller");
    let client = cluster.client_as(account);
    let controller = OwnController::start(
        client,
        "clusterrole-aggregation",
        "clusterrole-aggregation-controller",
        clusterrole_aggregation::run,
    );

    let roles: Api<ClusterRole> = Api::all(cluster.client.clone());
    let part: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "widgets-view",
            "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get"]}]
    }))
    .unwrap();
    roles.create(&PostParams::default(), &part).await.unwrap();
    for name in ["view", "edit", "admin"] {
        eventually(WAIT, &format!("{name} gathers widgets"), || {
            let roles = roles.clone();
            async move { grants_widgets(&roles, name).await.then_some(()) }
        })
        .await;
    }
    roles
        .delete("widgets-view", &DeleteParams::default())
        .await
        .unwrap();
    for name in ["view", "edit", "admin"] {
        eventually(WAIT, &format!("{name} drops widgets"), || {
            let roles = roles.clone();
            async move { (!grants_widgets(&roles, name).await).then_some(()) }
        })
        .await;
    }
    controller.stop().await;
    cluster.shutdown().await;
}
