//! What a node (`system:node:<name>` in `system:nodes`) may do: the Node
//! authorizer's reads and NodeRestriction's writes, tried from the side of
//! a node that reaches for what is not its own.

use http::{Method, StatusCode};
use serde_json::{Value, json};
use skiff_apiserver::authn::UserInfo;

use crate::harness::{Client, Expect, TestServer, forbidden};

fn node(name: &str) -> UserInfo {
    UserInfo::new(format!("system:node:{name}"), ["system:nodes".to_string()])
}

fn node_object(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}})
}

/// Where nodes keep their heartbeat leases.
const NODE_LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";

/// The heartbeat Lease node `name` holds: both the write and the read
/// tests of leases make one.
fn lease(name: &str) -> Value {
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name}, "spec": {"holderIdentity": name}})
}

/// A pod bound to `node_name`, created by the admin.
async fn pod_on(s: &TestServer, name: &str, node_name: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["nodeName"] = json!(node_name);
    if spec["containers"].is_null() {
        spec["containers"] = json!([{"name": "c", "image": "busybox"}]);
    }

    s.created(
        "/api/v1/namespaces/default/pods",
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}),
    )
    .await
}

#[tokio::test]
async fn a_node_registers_and_edits_only_itself_and_never_its_restricted_labels() {
    let s = TestServer::new().await;
    let n1 = s.as_user(node("n1"));
    forbidden(
        n1.call(
            Method::POST,
            "/api/v1/nodes",
            Some(node_object("n2", json!({}))),
        )
        .await,
        "nodes \"n2\" is forbidden: node \"n1\" is not allowed to modify node \"n2\"",
    );
    forbidden(
        n1.call(
            Method::POST,
            "/api/v1/nodes",
            Some(node_object(
                "n1",
                json!({"node-restriction.kubernetes.io/trusted": "yes"}),
            )),
        )
        .await,
        "nodes \"n1\" is forbidden: node \"n1\" is not allowed to set the following labels: node-restriction.kubernetes.io/trusted",
    );
    let _body = n1
        .call(
            Method::POST,
            "/api/v1/nodes",
            Some(node_object(
                "n1",
                json!({"kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux"}),
            )),
        )
        .await
        .expect_code(StatusCode::CREATED);

    // Its own labels, later: the restricted ones stay out of reach.
    let labels = |labels: Value| json!({"metadata": {"labels": labels}});
    forbidden(
        n1.merge_patch(
            "/api/v1/nodes/n1",
            labels(json!({"node-restriction.kubernetes.io/x": "1"})),
        )
        .await,
        "nodes \"n1\" is forbidden: is not allowed to modify labels: node-restriction.kubernetes.io/x",
    );
    n1.merge_patch(
        "/api/v1/nodes/n1",
        labels(json!({"node.kubernetes.io/pool": "a"})),
    )
    .await
    .expect_code(StatusCode::OK);

    // Another node's object is out of reach whatever the verb.
    s.created("/api/v1/nodes", node_object("n2", json!({})))
        .await;
    let (_, mut n2) = s.get("/api/v1/nodes/n2").await;
    n2["spec"]["unschedulable"] = json!(true);
    forbidden(
        n1.call(Method::PUT, "/api/v1/nodes/n2", Some(n2)).await,
        "nodes \"n2\" is forbidden: node \"n1\" is not allowed to modify node \"n2\"",
    );
    n1.call(Method::DELETE, "/api/v1/nodes/n2", None)
        .await
        .expect_code(StatusCode::FORBIDDEN);
    let (code, _) = s.get("/api/v1/nodes/n2").await;
    assert_eq!(code, StatusCode::OK, "n2 still there");
}

#[tokio::test]
async fn a_node_reports_status_of_and_deletes_only_its_own_pods() {
    let s = TestServer::new().await;
    let n1 = s.as_user(node("n1"));
    pod_on(&s, "mine", "n1", json!({})).await;
    pod_on(&s, "theirs", "n2", json!({})).await;

    let (_, mut theirs) = s.get("/api/v1/namespaces/default/pods/theirs").await;
    theirs["status"]["phase"] = json!("Failed");
    forbidden(
        n1.call(
            Method::PUT,
            "/api/v1/namespaces/default/pods/theirs/status",
            Some(theirs),
        )
        .await,
        "pods \"theirs\" is forbidden: node \"n1\" can only update pod status for pods with spec.nodeName set to itself",
    );
    let (_, after) = s.get("/api/v1/namespaces/default/pods/theirs").await;
    assert_ne!(after["status"]["phase"], "Failed");

    let (_, mut mine) = s.get("/api/v1/namespaces/default/pods/mine").await;
    mine["status"]["phase"] = json!("Running");
    n1.call(
        Method::PUT,
        "/api/v1/namespaces/default/pods/mine/status",
        Some(mine.clone()),
    )
    .await
    .expect_code(StatusCode::OK);
    let (_, mut relabel) = s.get("/api/v1/namespaces/default/pods/mine").await;
    relabel["metadata"]["labels"] = json!({"role": "admin"});
    let (code, body) = n1
        .call(
            Method::PUT,
            "/api/v1/namespaces/default/pods/mine/status",
            Some(relabel),
        )
        .await;
    // A status update keeps the stored labels, so there is nothing to refuse
    // here; the labels simply do not change.
    assert_eq!(code, StatusCode::OK, "{body}");
    assert!(body["metadata"]["labels"]["role"].is_null(), "{body}");

    // Not even on its own pod may a node add a container to run.
    let (code, _) = n1
        .call(
            Method::PATCH,
            "/api/v1/namespaces/default/pods/mine/ephemeralcontainers",
            Some(json!({"spec": {"ephemeralContainers": [{"name": "x", "image": "evil"}]}})),
        )
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    // Nor give its own pod more CPU and memory than it was admitted with.
    let (code, _) = n1
        .call(
            Method::PATCH,
            "/api/v1/namespaces/default/pods/mine/resize",
            Some(json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "64"}}}]}})),
        )
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN);

    let eviction =
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "theirs"}});
    forbidden(
        n1.call(
            Method::POST,
            "/api/v1/namespaces/default/pods/theirs/eviction",
            Some(eviction),
        )
        .await,
        "pods \"theirs\" is forbidden: node n1 can only evict pods with spec.nodeName set to itself",
    );
    forbidden(
        n1.call(
            Method::DELETE,
            "/api/v1/namespaces/default/pods/theirs",
            None,
        )
        .await,
        "pods \"theirs\" is forbidden: node \"n1\" can only delete pods with spec.nodeName set to itself",
    );
    let (code, _) = s.get("/api/v1/namespaces/default/pods/theirs").await;
    assert_eq!(code, StatusCode::OK, "the other node's pod is untouched");
    n1.call(Method::DELETE, "/api/v1/namespaces/default/pods/mine", None)
        .await
        .expect_code(StatusCode::OK);
}

#[tokio::test]
async fn a_node_creates_only_bare_mirror_pods_of_its_own() {
    let s = TestServer::new().await;
    let n1 = s.as_user(node("n1"));
    let (_, created) = n1
        .call(
            Method::POST,
            "/api/v1/nodes",
            Some(node_object("n1", json!({}))),
        )
        .await;
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    let mirror = |node_name: &str, spec: Value| {
        let mut spec = spec;
        spec["nodeName"] = json!(node_name);
        spec["containers"] = json!([{"name": "c", "image": "busybox"}]);
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("static-{node_name}"),
                "annotations": {"kubernetes.io/config.mirror": "hash"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": uid, "controller": true}]},
            "spec": spec})
    };
    let pods = "/api/v1/namespaces/default/pods";
    let mut plain = mirror("n1", json!({}));
    plain["metadata"]["annotations"] = json!({});
    forbidden(
        n1.call(Method::POST, pods, Some(plain)).await,
        "pods \"static-n1\" is forbidden: pod does not have \"kubernetes.io/config.mirror\" annotation, node \"n1\" can only create mirror pods",
    );
    forbidden(
        n1.call(Method::POST, pods, Some(mirror("n2", json!({}))))
            .await,
        "pods \"static-n2\" is forbidden: node \"n1\" can only create pods with spec.nodeName set to itself",
    );
    let with_secret = mirror(
        "n1",
        json!({"volumes": [{"name": "s", "secret": {"secretName": "admin-token"}}]}),
    );
    forbidden(
        n1.call(Method::POST, pods, Some(with_secret)).await,
        "pods \"static-n1\" is forbidden: node \"n1\" can not create pods that reference secrets",
    );
    let mut stolen_owner = mirror("n1", json!({}));
    stolen_owner["metadata"]["ownerReferences"][0]["uid"] = json!("not-the-node");
    n1.call(Method::POST, pods, Some(stolen_owner))
        .await
        .expect_failure(403, "Forbidden");

    let body = n1
        .call(Method::POST, pods, Some(mirror("n1", json!({}))))
        .await
        .expect_code(StatusCode::CREATED);
    // A mirror pod runs without API credentials.
    assert!(body["spec"]["serviceAccountName"].is_null(), "{body}");
    assert!(body["spec"]["volumes"].is_null(), "{body}");
}

#[tokio::test]
async fn a_node_holds_only_its_own_lease() {
    let s = TestServer::new().await;
    let n1 = s.as_user(node("n1"));
    forbidden(
        n1.call(Method::POST, NODE_LEASES, Some(lease("n2"))).await,
        "leases.coordination.k8s.io \"n2\" is forbidden: can only access node lease with the same name as the requesting node",
    );
    n1.call(Method::POST, NODE_LEASES, Some(lease("n1")))
        .await
        .expect_code(StatusCode::CREATED);
    n1.call(
        Method::POST,
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        Some(lease("n1")),
    )
    .await
    .expect_failure(403, "Forbidden");
}

#[tokio::test]
async fn a_node_gets_tokens_only_for_its_own_pods() {
    let s = TestServer::new().await;
    let n1 = s.as_user(node("n1"));
    s.created(
        "/api/v1/namespaces/default/serviceaccounts",
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "app"}}),
    )
    .await;
    let mine = pod_on(&s, "mine", "n1", json!({"serviceAccountName": "app"})).await;
    let theirs = pod_on(&s, "theirs", "n2", json!({"serviceAccountName": "app"})).await;
    let request = |pod: Option<&Value>| {
        let mut spec = json!({"audiences": ["https://kubernetes.default.svc.cluster.local"]});
        if let Some(pod) = pod {
            spec["boundObjectRef"] = json!({"apiVersion": "v1", "kind": "Pod",
                "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]});
        }
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
    };
    let path = "/api/v1/namespaces/default/serviceaccounts/app/token";
    forbidden(
        n1.call(Method::POST, path, Some(request(None))).await,
        "serviceaccounts \"app\" is forbidden: node requested token not bound to a pod",
    );
    // Nor may it bind a token to a Node, its own included.
    let mut node_bound = request(None);
    node_bound["spec"]["boundObjectRef"] =
        json!({"apiVersion": "v1", "kind": "Node", "name": "n1"});
    forbidden(
        n1.call(Method::POST, path, Some(node_bound)).await,
        "serviceaccounts \"app\" is forbidden: node requested token not bound to a pod",
    );
    forbidden(
        n1.call(Method::POST, path, Some(request(Some(&theirs))))
            .await,
        "serviceaccounts \"app\" is forbidden: node requested token bound to a pod scheduled on a different node",
    );
    let body = n1
        .call(Method::POST, path, Some(request(Some(&mine))))
        .await
        .expect_code(StatusCode::CREATED);
    assert!(body["status"]["token"].is_string());
}

/// The Node authorizer's reads (RBAC behind it grants nodes nothing).
mod reads {
    use super::*;

    #[tokio::test]
    async fn a_node_reads_the_secrets_of_its_own_pods_only() {
        let s = TestServer::new().await;
        let n1 = s.as_user(node("n1"));
        for name in ["mine-secret", "their-secret"] {
            s.created(
                "/api/v1/namespaces/default/secrets",
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                        "stringData": {"k": "v"}}),
            )
            .await;
        }
        let volume =
            |secret: &str| json!({"volumes": [{"name": "s", "secret": {"secretName": secret}}]});
        pod_on(&s, "mine", "n1", volume("mine-secret")).await;
        pod_on(&s, "theirs", "n2", volume("their-secret")).await;

        // The same read, before and after its pod goes.
        let read_mine = || {
            n1.call(
                Method::GET,
                "/api/v1/namespaces/default/secrets/mine-secret",
                None,
            )
        };
        read_mine().await.expect_code(StatusCode::OK);
        forbidden(
            n1.call(
                Method::GET,
                "/api/v1/namespaces/default/secrets/their-secret",
                None,
            )
            .await,
            "secrets \"their-secret\" is forbidden: User \"system:node:n1\" cannot get resource \"secrets\" in API group \"\" in the namespace \"default\": no relationship found between node 'n1' and this object",
        );
        n1.call(Method::GET, "/api/v1/namespaces/default/secrets", None)
            .await
            .expect_failure(403, "Forbidden");
        // Once the pod is gone, so is the node's access.
        s.delete_ok("/api/v1/namespaces/default/pods/mine?gracePeriodSeconds=0")
            .await;
        read_mine().await.expect_code(StatusCode::FORBIDDEN);
    }

    #[tokio::test]
    async fn a_node_reads_and_renews_its_own_lease_only() {
        let s = TestServer::new().await;
        let n1 = s.as_user(node("n1"));
        for name in ["n1", "n2"] {
            s.as_user(node(name))
                .call(Method::POST, NODE_LEASES, Some(lease(name)))
                .await
                .expect_code(StatusCode::CREATED);
        }
        n1.call(Method::GET, &format!("{NODE_LEASES}/n1"), None)
            .await
            .expect_code(StatusCode::OK);
        forbidden(
            n1.call(Method::GET, &format!("{NODE_LEASES}/n2"), None)
                .await,
            "leases.coordination.k8s.io \"n2\" is forbidden: User \"system:node:n1\" cannot get resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"kube-node-lease\": can only access node lease with the same name as the requesting node",
        );
        n1.call(Method::DELETE, &format!("{NODE_LEASES}/n2"), None)
            .await
            .expect_code(StatusCode::FORBIDDEN);
    }
}
