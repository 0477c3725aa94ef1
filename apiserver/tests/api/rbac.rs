//! RBAC through the router as different users: what the default policy
//! grants and refuses, bindings taking effect, escalation and bind checks,
//! and the default policy surviving (and being repaired by) a restart.

use http::{Method, StatusCode};
use serde_json::{Value, json};
use skiff_apiserver::authn::UserInfo;
use skiff_testkit::json::str_array;

use crate::harness::{Client, Expect, KeptStore, TestServer, forbidden, pod};

const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

fn account(namespace: &str, name: &str) -> UserInfo {
    UserInfo::service_account(namespace, name)
}

fn role_binding(name: &str, kind: &str, role: &str, subject: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
        "subjects": [subject]})
}

/// Binds `subject` in `ns` to the Role `role`.
async fn bind_role(s: &TestServer, ns: &str, name: &str, role: &str, subject: Value) {
    bind(s, ns, name, "Role", role, subject).await;
}

/// Binds `subject` in `ns` to the ClusterRole `role`.
async fn bind_cluster_role(s: &TestServer, ns: &str, name: &str, role: &str, subject: Value) {
    bind(s, ns, name, "ClusterRole", role, subject).await;
}

/// Binds `subject` in `ns` to `role`, a Role or ClusterRole as `kind` says.
async fn bind(s: &TestServer, ns: &str, name: &str, kind: &str, role: &str, subject: Value) {
    let bindings = format!("{RBAC}/namespaces/{ns}/rolebindings");
    create(s, &bindings, role_binding(name, kind, role, subject)).await;
}

/// A binding's subject: the user `name`.
fn user(name: &str) -> Value {
    json!({"kind": "User", "name": name})
}

/// A binding's subject: the service account `name` in `ns`.
fn service_account(ns: &str, name: &str) -> Value {
    json!({"kind": "ServiceAccount", "name": name, "namespace": ns})
}

fn role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": name}, "rules": rules})
}

async fn create(s: &TestServer, path: &str, body: Value) {
    s.created(path, body).await;
}

fn message(body: &Value) -> &str {
    body["message"].as_str().unwrap_or("")
}

#[tokio::test]
async fn a_service_account_without_grants_is_refused_in_upstreams_words() {
    let s = TestServer::new().await;
    s.namespace("a").await;
    let probe = account("a", "probe");
    let body = forbidden(
        s.get_as(&probe, "/api/v1/secrets").await,
        "secrets is forbidden: User \"system:serviceaccount:a:probe\" cannot list resource \"secrets\" in API group \"\" at the cluster scope",
    );
    // Upstream's details leave the (absent) name out.
    assert_eq!(body["details"], json!({"kind": "secrets"}));
    // Its own namespace is no different without a binding.
    s.get_as(&probe, "/api/v1/namespaces/a/pods")
        .await
        .expect_code(StatusCode::FORBIDDEN);
    // What every authenticated user may do: discovery and basic reviews.
    for path in ["/api", "/apis", "/version", "/api/v1"] {
        let (code, body) = s.get_as(&probe, path).await;
        assert_eq!(code, StatusCode::OK, "{path}: {body}");
    }
}

#[tokio::test]
async fn a_view_binding_reads_its_own_namespace_and_nothing_more() {
    let s = TestServer::new().await;
    s.namespace("a").await;
    s.namespace("b").await;
    s.configmap("a", "visible", json!({})).await;
    bind_cluster_role(&s, "a", "probe-view", "view", service_account("a", "probe")).await;
    let probe = account("a", "probe");
    s.get_as(&probe, "/api/v1/namespaces/a/pods")
        .await
        .expect_code(StatusCode::OK);
    s.get_as(&probe, "/api/v1/namespaces/a/configmaps/visible")
        .await
        .expect_code(StatusCode::OK);

    let refusals = [
        (
            Method::GET,
            "/api/v1/namespaces/a/secrets",
            "secrets is forbidden: User \"system:serviceaccount:a:probe\" cannot list resource \"secrets\" in API group \"\" in the namespace \"a\"",
        ),
        (
            Method::GET,
            "/api/v1/namespaces/b/pods",
            "pods is forbidden: User \"system:serviceaccount:a:probe\" cannot list resource \"pods\" in API group \"\" in the namespace \"b\"",
        ),
        (
            Method::GET,
            "/api/v1/pods",
            "pods is forbidden: User \"system:serviceaccount:a:probe\" cannot list resource \"pods\" in API group \"\" at the cluster scope",
        ),
        (
            Method::DELETE,
            "/api/v1/namespaces/a/configmaps/visible",
            "configmaps \"visible\" is forbidden: User \"system:serviceaccount:a:probe\" cannot delete resource \"configmaps\" in API group \"\" in the namespace \"a\"",
        ),
    ];
    for (method, path, want) in refusals {
        forbidden(s.call_as(&probe, method, path, None).await, want);
    }
    s.post_as(
        &probe,
        "/api/v1/namespaces/a/configmaps",
        json!({"metadata": {"name": "mine"}}),
    )
    .await
    .expect_code(StatusCode::FORBIDDEN);
    assert_eq!(
        s.get("/api/v1/namespaces/a/configmaps/visible").await.0,
        StatusCode::OK
    );

    // Removing the binding takes the rights away again.
    s.delete_ok(&format!("{RBAC}/namespaces/a/rolebindings/probe-view"))
        .await;
    s.get_as(&probe, "/api/v1/namespaces/a/pods")
        .await
        .expect_code(StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_binding_to_a_missing_role_says_so() {
    let s = TestServer::new().await;
    s.namespace("a").await;
    bind_role(&s, "a", "dangling", "nowhere", user("carol")).await;
    let carol = UserInfo::new("carol", Vec::new());
    forbidden(
        s.get_as(&carol, "/api/v1/namespaces/a/pods").await,
        "pods is forbidden: User \"carol\" cannot list resource \"pods\" in API group \"\" in the namespace \"a\": RBAC: role.rbac.authorization.k8s.io \"nowhere\" not found",
    );
}

#[tokio::test]
async fn a_namespace_admin_cannot_grant_what_it_does_not_hold() {
    let s = TestServer::new().await;
    s.namespace("team").await;
    s.namespace("other").await;
    bind_cluster_role(&s, "team", "alice-admin", "admin", user("alice")).await;
    let alice = UserInfo::new("alice", Vec::new());
    let roles = format!("{RBAC}/namespaces/team/roles");

    // A role within what admin holds.
    let readers = role(
        "pod-reader",
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]),
    );
    s.post_as(&alice, &roles, readers.clone())
        .await
        .expect_code(StatusCode::CREATED);

    // A role granting everything.
    let everything = role(
        "too-much",
        json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
    );
    let body = forbidden(
        s.post_as(&alice, &roles, everything.clone()).await,
        "roles.rbac.authorization.k8s.io \"too-much\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}",
    );
    assert_eq!(body["details"]["group"], "rbac.authorization.k8s.io");
    assert_eq!(body["details"]["kind"], "roles");
    assert_eq!(
        s.get(&format!("{roles}/too-much")).await.0,
        StatusCode::NOT_FOUND
    );

    // Widening her role by update is the same escalation; the missing
    // permissions are listed one group/resource per line.
    let mut widened = s.get(&format!("{roles}/pod-reader")).await.1;
    widened["rules"] = json!([
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["get", "list"]},
    ]);
    let body = s
        .call_as(
            &alice,
            Method::PUT,
            &format!("{roles}/pod-reader"),
            Some(widened.clone()),
        )
        .await
        .expect_code(StatusCode::FORBIDDEN);
    assert!(
        message(&body).ends_with(
            "not currently held:\n{APIGroups:[\"\"], Resources:[\"nodes\"], Verbs:[\"get\" \"list\"]}"
        ),
        "{body}"
    );
    // Relabelling a role she holds is fine.
    let mut labelled = s.get(&format!("{roles}/pod-reader")).await.1;
    labelled["metadata"]["labels"] = json!({"team": "yes"});
    s.call_as(
        &alice,
        Method::PUT,
        &format!("{roles}/pod-reader"),
        Some(labelled),
    )
    .await
    .expect_code(StatusCode::OK);

    // Her rights stop at her namespace, and at cluster roles.
    let body = s
        .post_as(
            &alice,
            &format!("{RBAC}/namespaces/other/roles"),
            readers.clone(),
        )
        .await
        .expect_code(StatusCode::FORBIDDEN);
    assert!(
        message(&body).contains("cannot create resource \"roles\""),
        "{body}"
    );

    // Bindings: to a role she holds all of, yes; to cluster-admin, no.
    let bindings = format!("{RBAC}/namespaces/team/rolebindings");
    let bob_edit = role_binding(
        "bob-edit",
        "ClusterRole",
        "edit",
        json!({"kind": "User", "name": "bob"}),
    );
    s.post_as(&alice, &bindings, bob_edit)
        .await
        .expect_code(StatusCode::CREATED);
    let bob_root = role_binding(
        "bob-root",
        "ClusterRole",
        "cluster-admin",
        json!({"kind": "User", "name": "bob"}),
    );
    let body = s
        .post_as(&alice, &bindings, bob_root.clone())
        .await
        .expect_failure(403, "Forbidden");
    assert!(
        message(&body).starts_with(
            "rolebindings.rbac.authorization.k8s.io \"bob-root\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n"
        ),
        "{body}"
    );
    assert!(
        message(&body).contains("{NonResourceURLs:[\"*\"], Verbs:[\"*\"]}"),
        "{body}"
    );
    let bob = UserInfo::new("bob", Vec::new());
    let (code, _) = s
        .call_as(&bob, Method::DELETE, "/api/v1/namespaces/team/pods/x", None)
        .await;
    assert_eq!(code, StatusCode::NOT_FOUND, "bob's edit binding works");

    // `escalate` on roles and `bind` on cluster-admin lift the checks.
    create(
        &s,
        &roles,
        role(
            "delegation",
            json!([
                {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["escalate"]},
                {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["cluster-admin"]},
            ]),
        ),
    )
    .await;
    create(
        &s,
        &bindings,
        role_binding(
            "alice-delegation",
            "Role",
            "delegation",
            json!({"kind": "User", "name": "alice"}),
        ),
    )
    .await;
    s.post_as(&alice, &roles, everything)
        .await
        .expect_code(StatusCode::CREATED);
    s.post_as(&alice, &bindings, bob_root)
        .await
        .expect_code(StatusCode::CREATED);
}

#[tokio::test]
async fn aggregation_rules_need_every_permission() {
    let s = TestServer::new().await;
    // A user who may create cluster roles (without `escalate`) and holds
    // what her role grants, but not everything.
    let clusterroles = format!("{RBAC}/clusterroles");
    create(
        &s,
        &clusterroles,
        json!({"metadata": {"name": "role-maker"}, "rules": [
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["create", "get"]},
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}]}),
    )
    .await;
    s.grant("dora", "role-maker").await;
    let dora = UserInfo::new("dora", Vec::new());
    let gatherer = json!({"metadata": {"name": "gatherer"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}});
    forbidden(
        s.post_as(&dora, &clusterroles, gatherer).await,
        "clusterroles.rbac.authorization.k8s.io \"gatherer\" is forbidden: must have cluster-admin privileges to use the aggregationRule",
    );
    s.post_as(
        &dora,
        &clusterroles,
        json!({"metadata": {"name": "plain"}, "rules": [
                {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}]}),
    )
    .await
    .expect_code(StatusCode::CREATED);
}

#[tokio::test]
async fn anonymous_requests_reach_public_information_only() {
    let s = TestServer::new().await;
    let anonymous = UserInfo::anonymous();
    for path in ["/version", "/healthz", "/livez", "/readyz"] {
        let (code, body) = s.get_as(&anonymous, path).await;
        assert_eq!(code, StatusCode::OK, "{path}: {body}");
    }
    // Everything else asks the caller to authenticate, without saying what
    // exists.
    for path in [
        "/api",
        "/apis",
        "/openapi/v2",
        "/api/v1/namespaces",
        "/api/v1/namespaces/default/secrets",
        "/api/v1/namespaces/default/secrets/missing",
        // A single check tells its reason, so it is for monitoring only.
        "/readyz/etcd",
        "/livez/ping",
    ] {
        s.get_as(&anonymous, path)
            .await
            .expect_failure(401, "Unauthorized");
    }
    s.post_as(&anonymous, "/version", json!({}))
        .await
        .expect_code(StatusCode::UNAUTHORIZED);
    // The refusal wording for a path, as an authenticated user sees it.
    let nobody = UserInfo::new("nobody-in-particular", Vec::new());
    let body = forbidden(
        s.get_as(&nobody, "/metrics").await,
        "forbidden: User \"nobody-in-particular\" cannot get path \"/metrics\"",
    );
    assert_eq!(body["details"], json!({}));
}

#[tokio::test]
async fn the_default_policy_is_served_and_aggregated_from_the_start() {
    let s = TestServer::new().await;
    let view = s.get_ok(&format!("{RBAC}/clusterroles/view")).await;
    assert_eq!(
        view["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"],
        "true"
    );
    let resources: Vec<&str> = view["rules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| str_array(&r["resources"]))
        .collect();
    assert!(resources.contains(&"pods"), "{view}");
    assert!(!resources.contains(&"secrets"), "{view}");
    let admin = s.get_ok(&format!("{RBAC}/clusterroles/admin")).await;
    assert!(admin["rules"].as_array().unwrap().len() > view["rules"].as_array().unwrap().len());
    let binding = s
        .get_ok(&format!(
            "{RBAC}/clusterrolebindings/system:controller:replicaset-controller"
        ))
        .await;
    assert_eq!(binding["subjects"][0]["name"], "replicaset-controller");
    assert_eq!(binding["subjects"][0]["namespace"], "kube-system");
    // The scheduler's identity is what upstream grants it: it binds pods
    // and reads nodes, but cannot read secrets.
    let scheduler = UserInfo::new("system:kube-scheduler", Vec::new());
    assert_eq!(
        s.get_as(&scheduler, "/api/v1/nodes").await.0,
        StatusCode::OK
    );
    assert_eq!(
        s.get_as(&scheduler, "/api/v1/secrets").await.0,
        StatusCode::FORBIDDEN
    );
    // The DNS reads what it answers from and writes its own Service, but
    // cannot write pods.
    let dns = UserInfo::service_account("kube-system", "kube-dns");
    assert_eq!(s.get_as(&dns, "/api/v1/services").await.0, StatusCode::OK);
    let pod = pod("p", None);
    assert_eq!(
        s.post_as(&dns, "/api/v1/namespaces/default/pods", pod.clone())
            .await
            .0,
        StatusCode::FORBIDDEN
    );
    // The service proxy watches Services and EndpointSlices, and can change
    // neither them nor pods, nor read secrets.
    let proxy = UserInfo::new("system:kube-proxy", Vec::new());
    assert_eq!(
        s.get_as(&proxy, "/apis/discovery.k8s.io/v1/endpointslices")
            .await
            .0,
        StatusCode::OK
    );
    for (method, path, body) in [
        (Method::GET, "/api/v1/secrets", None),
        (Method::POST, "/api/v1/namespaces/default/pods", Some(pod)),
        (
            Method::DELETE,
            "/api/v1/namespaces/default/services/kubernetes",
            None,
        ),
    ] {
        assert_eq!(
            s.call_as(&proxy, method.clone(), path, body).await.0,
            StatusCode::FORBIDDEN,
            "{method} {path}"
        );
    }
}

/// The persistent volume controller's account sets a waiting claim's class
/// and reads StorageClasses, and nothing more: it cannot delete claims,
/// write volumes or classes, or read secrets.
#[tokio::test]
async fn the_volume_binder_account_only_updates_claims() {
    let s = TestServer::new().await;
    let claims = "/api/v1/namespaces/default/persistentvolumeclaims";
    let claim = s
        .created(
            claims,
            json!({"metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}),
        )
        .await;
    let binder = account("kube-system", "persistent-volume-binder");
    assert_eq!(
        s.get_as(&binder, "/apis/storage.k8s.io/v1/storageclasses")
            .await
            .0,
        StatusCode::OK
    );
    let mut with_class = claim.clone();
    with_class["spec"]["storageClassName"] = json!("fast");
    let path = format!("{claims}/c");
    assert_eq!(
        s.call_as(&binder, Method::PUT, &path, Some(with_class))
            .await
            .0,
        StatusCode::OK
    );
    let class = json!({"metadata": {"name": "fast"}, "provisioner": "example.com/p"});
    let volume = json!({"metadata": {"name": "pv"}, "spec": {"capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/pv"}}});
    for (method, path, body) in [
        (Method::DELETE, path.as_str(), None),
        (
            Method::POST,
            "/apis/storage.k8s.io/v1/storageclasses",
            Some(class),
        ),
        (Method::POST, "/api/v1/persistentvolumes", Some(volume)),
        (Method::GET, "/api/v1/secrets", None),
    ] {
        assert_eq!(
            s.call_as(&binder, method.clone(), path, body).await.0,
            StatusCode::FORBIDDEN,
            "{method} {path}"
        );
    }
}

/// The pv-protection controller's account updates volumes (their
/// finalizers) and nothing else: it cannot delete or create volumes, touch
/// claims or read secrets.
#[tokio::test]
async fn the_pv_protection_account_only_updates_volumes() {
    let s = TestServer::new().await;
    let volumes = "/api/v1/persistentvolumes";
    let volume = s
        .created(
            volumes,
            json!({"metadata": {"name": "pv"}, "spec": {"capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/pv"}}}),
        )
        .await;
    let protector = account("kube-system", "pv-protection-controller");
    let path = format!("{volumes}/pv");
    assert_eq!(s.get_as(&protector, &path).await.0, StatusCode::OK);
    let mut released = volume.clone();
    released["metadata"]["finalizers"] = json!([]);
    assert_eq!(
        s.call_as(&protector, Method::PUT, &path, Some(released))
            .await
            .0,
        StatusCode::OK
    );
    let another = json!({"metadata": {"name": "pv2"}, "spec": {"capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/"}}});
    for (method, path, body) in [
        (Method::DELETE, path.as_str(), None),
        (Method::POST, volumes, Some(another)),
        (
            Method::GET,
            "/api/v1/namespaces/default/persistentvolumeclaims",
            None,
        ),
        (Method::GET, "/api/v1/secrets", None),
    ] {
        assert_eq!(
            s.call_as(&protector, method.clone(), path, body).await.0,
            StatusCode::FORBIDDEN,
            "{method} {path}"
        );
    }
}

/// The local-path provisioner's account makes volumes and binds claims; it
/// deletes no volume (the node holding a volume's directory does), and
/// reads no secrets and starts no pods.
#[tokio::test]
async fn the_local_path_provisioner_account_makes_volumes_and_deletes_none() {
    let s = TestServer::new().await;
    let provisioner = account("kube-system", "local-path-provisioner-service-account");
    let volume = json!({"metadata": {"name": "pvc-1"}, "spec": {"capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/pvc-1"}}});
    assert_eq!(
        s.call_as(
            &provisioner,
            Method::POST,
            "/api/v1/persistentvolumes",
            Some(volume)
        )
        .await
        .0,
        StatusCode::CREATED
    );
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "busybox"}]}});
    for (method, path, body) in [
        (Method::DELETE, "/api/v1/persistentvolumes/pvc-1", None),
        (Method::GET, "/api/v1/namespaces/kube-system/secrets", None),
        (Method::POST, "/api/v1/namespaces/default/pods", Some(pod)),
    ] {
        assert_eq!(
            s.call_as(&provisioner, method.clone(), path, body).await.0,
            StatusCode::FORBIDDEN,
            "{method} {path}"
        );
    }
}

#[tokio::test]
async fn a_restart_repairs_the_defaults_but_respects_autoupdate_false() {
    let disk = KeptStore::new();
    {
        let s = disk.start().await;
        // basic-user loses a rule and gains one of the admin's own.
        let path = format!("{RBAC}/clusterroles/system:basic-user");
        let mut basic = s.get(&path).await.1;
        basic["rules"] = json!([
            {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectrulesreviews"], "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
        ]);
        assert_eq!(s.put(&path, basic).await.0, StatusCode::OK);
        // discovery is emptied and protected.
        let path = format!("{RBAC}/clusterroles/system:discovery");
        let mut discovery = s.get(&path).await.1;
        discovery["rules"] = json!([]);
        discovery["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] =
            json!("false");
        assert_eq!(s.put(&path, discovery).await.0, StatusCode::OK);
        // public-info-viewer's binding is gone.
        s.delete_ok(&format!(
            "{RBAC}/clusterrolebindings/system:public-info-viewer"
        ))
        .await;
        s.stop().await;
    }
    let s = disk.start().await;
    let basic = s
        .get(&format!("{RBAC}/clusterroles/system:basic-user"))
        .await
        .1;
    let rules = basic["rules"].as_array().unwrap();
    let has = |resource: &str| {
        rules.iter().any(|r| {
            r["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x == resource)
        })
    };
    assert!(has("selfsubjectaccessreviews"), "restored: {basic}");
    assert!(has("selfsubjectreviews"), "restored: {basic}");
    assert!(has("configmaps"), "the admin's addition stays: {basic}");
    let discovery = s
        .get(&format!("{RBAC}/clusterroles/system:discovery"))
        .await
        .1;
    assert_eq!(discovery["rules"], json!([]), "left alone: {discovery}");
    let (code, _) = s
        .get(&format!(
            "{RBAC}/clusterrolebindings/system:public-info-viewer"
        ))
        .await;
    assert_eq!(code, StatusCode::OK, "recreated");
    let anonymous = UserInfo::anonymous();
    assert_eq!(s.get_as(&anonymous, "/healthz").await.0, StatusCode::OK);
    // With discovery emptied, an authenticated user no longer reads /apis.
    let nobody = UserInfo::new("nobody", Vec::new());
    assert_eq!(s.get_as(&nobody, "/apis").await.0, StatusCode::FORBIDDEN);
}
