//! Server-side apply and managedFields: ownership per manager, removal of
//! fields by omission, conflicts, force, dry runs.

use std::time::Duration;

use http::StatusCode;
use serde_json::{Value, json};

use crate::harness::{
    Client, Expect, TestServer, assert_same_version, eventually, find_by, refused,
};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data})
}

async fn apply(s: &TestServer, query: &str, body: Value) -> (StatusCode, Value) {
    apply_at(s, &format!("{CMS}/c?{query}"), body).await
}

/// Server-side applies `body` (sent as YAML) to `path`.
async fn apply_at(s: &TestServer, path: &str, body: Value) -> (StatusCode, Value) {
    s.apply_yaml(path, &serde_yaml::to_string(&body).unwrap())
        .await
}

/// Applies `data` to the existing ConfigMap `c` with `query`, which must
/// be answered 200 (an update, not a create): the object answered.
async fn applied(s: &TestServer, query: &str, data: Value) -> Value {
    apply(s, query, cm(data)).await.expect_code(StatusCode::OK)
}

/// Applies `data` as manager `a`, which must be refused with a 409 whose
/// cause names `owner` as upstream does (`"b"` for an applier, `"editor"
/// using v1` for an updater): how each test shows who holds a field.
async fn conflicts_as_a(s: &TestServer, data: Value, owner: &str) -> Value {
    let status = apply(s, "fieldManager=a", cm(data))
        .await
        .expect_failure(409, "Conflict");
    assert_eq!(
        status["details"]["causes"][0]["message"],
        format!("conflict with {owner}")
    );
    status
}

/// The fieldsV1 of `manager`'s entry with `operation` (Null when absent).
fn owned(object: &Value, manager: &str, operation: &str) -> Value {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["manager"] == manager && e["operation"] == operation)
        .map(|e| e["fieldsV1"].clone())
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn apply_creates_then_updates_and_removes_omitted_fields() {
    let s = TestServer::new().await;
    let created = apply(&s, "fieldManager=a", cm(json!({"x": "1", "y": "2"})))
        .await
        .expect_code(StatusCode::CREATED);
    let entry = &created["metadata"]["managedFields"][0];
    assert_eq!(entry["manager"], "a");
    assert_eq!(entry["operation"], "Apply");
    assert_eq!(entry["apiVersion"], "v1");
    assert_eq!(entry["fieldsType"], "FieldsV1");
    assert!(
        entry["time"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{entry}"
    );
    assert_eq!(entry["fieldsV1"], json!({"f:data": {"f:x": {}, "f:y": {}}}));

    applied(&s, "fieldManager=a", json!({"x": "9"})).await;
    let (_, stored) = s.get(&format!("{CMS}/c")).await;
    assert_eq!(
        stored["data"],
        json!({"x": "9"}),
        "y went when a stopped applying it"
    );
    assert_eq!(owned(&stored, "a", "Apply"), json!({"f:data": {"f:x": {}}}));
    assert_eq!(
        stored["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn conflicts_name_the_owner_and_force_takes_over() {
    let s = TestServer::new().await;
    apply(&s, "fieldManager=a", cm(json!({"k": "1", "other": "o"}))).await;
    let status = refused(
        apply(&s, "fieldManager=b", cm(json!({"k": "2"}))).await,
        409,
        "Conflict",
        "Apply failed with 1 conflict: conflict with \"a\": .data.k",
    );
    assert_eq!(
        status["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"a\"", "field": ".data.k"}])
    );
    let (_, stored) = s.get(&format!("{CMS}/c")).await;
    assert_eq!(stored["data"]["k"], "1", "a refused apply stores nothing");

    let forced = applied(&s, "fieldManager=b&force=true", json!({"k": "2"})).await;
    assert_eq!(forced["data"], json!({"k": "2", "other": "o"}));
    assert_eq!(
        owned(&forced, "a", "Apply"),
        json!({"f:data": {"f:other": {}}})
    );
    assert_eq!(owned(&forced, "b", "Apply"), json!({"f:data": {"f:k": {}}}));
    // a applies again without k: b owns it, so it stays.
    let again = applied(&s, "fieldManager=a", json!({"other": "o"})).await;
    assert_eq!(again["data"]["k"], "2");
}

#[tokio::test]
async fn managers_agreeing_on_a_value_share_it() {
    let s = TestServer::new().await;
    apply(&s, "fieldManager=a", cm(json!({"k": "1"}))).await;
    let shared = applied(&s, "fieldManager=b", json!({"k": "1"})).await;
    assert_eq!(owned(&shared, "a", "Apply"), json!({"f:data": {"f:k": {}}}));
    assert_eq!(owned(&shared, "b", "Apply"), json!({"f:data": {"f:k": {}}}));
    // Neither can now change it alone.
    conflicts_as_a(&s, json!({"k": "2"}), "\"b\"").await;
}

#[tokio::test]
async fn dry_run_apply_returns_entries_and_stores_nothing() {
    let s = TestServer::new().await;
    let before = s.keys().await;
    let body = apply(&s, "fieldManager=a&dryRun=All", cm(json!({"k": "1"})))
        .await
        .expect_code(StatusCode::CREATED);
    assert_eq!(body["metadata"]["managedFields"][0]["manager"], "a");
    assert_eq!(s.keys().await, before);

    apply(&s, "fieldManager=a", cm(json!({"k": "1"}))).await;
    let body = applied(
        &s,
        "fieldManager=b&dryRun=All&force=true",
        json!({"k": "2"}),
    )
    .await;
    assert_eq!(owned(&body, "b", "Apply"), json!({"f:data": {"f:k": {}}}));
    let (_, stored) = s.get(&format!("{CMS}/c")).await;
    assert_eq!(stored["data"]["k"], "1");
    assert_eq!(owned(&stored, "b", "Apply"), Value::Null);
}

#[tokio::test]
async fn updates_take_the_fields_they_change() {
    let s = TestServer::new().await;
    let created = s.created(CMS, json!({"metadata": {"name": "c", "labels": {"app": "x"}}, "data": {"k": "1", "j": "1"}})).await;
    assert_eq!(
        owned(&created, "skiff-tests", "Update"),
        json!({"f:data": {".": {}, "f:j": {}, "f:k": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
    );
    let patched = s
        .merge_patch_ok(
            &format!("{CMS}/c?fieldManager=editor"),
            json!({"data": {"k": "2"}}),
        )
        .await;
    assert_eq!(
        owned(&patched, "editor", "Update"),
        json!({"f:data": {"f:k": {}}})
    );
    assert_eq!(
        owned(&patched, "skiff-tests", "Update"),
        json!({"f:data": {".": {}, "f:j": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
    );
    // An applier changing what the editor set conflicts with it.
    let status = conflicts_as_a(&s, json!({"k": "3"}), "\"editor\" using v1").await;
    assert_eq!(status["details"]["causes"][0]["field"], ".data.k");
    // A write that changes nothing keeps entries and resourceVersion.
    let (_, same) = s
        .merge_patch(
            &format!("{CMS}/c?fieldManager=idle"),
            json!({"data": {"k": "2"}}),
        )
        .await;
    assert_same_version(&same, &patched);
    assert_eq!(owned(&same, "idle", "Update"), Value::Null);
}

#[tokio::test]
async fn put_keeps_entries_unless_it_sends_its_own() {
    let s = TestServer::new().await;
    apply(&s, "fieldManager=a", cm(json!({"k": "1"}))).await;
    let replaced = s
        .put_ok(
            &format!("{CMS}/c?fieldManager=replacer"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "1", "n": "2"}}),
        ).await;
    assert_eq!(
        owned(&replaced, "a", "Apply"),
        json!({"f:data": {"f:k": {}}})
    );
    assert_eq!(
        owned(&replaced, "replacer", "Update"),
        json!({"f:data": {"f:n": {}}})
    );
    // `[{}]` clears the entries, as upstream documents.
    let cleared = s
        .merge_patch_ok(
            &format!("{CMS}/c"),
            json!({"metadata": {"managedFields": [{}]}}),
        )
        .await;
    assert!(
        cleared["metadata"].get("managedFields").is_none(),
        "{cleared}"
    );
    // The next apply finds the old fields owned by before-first-apply.
    conflicts_as_a(&s, json!({"k": "2"}), "\"before-first-apply\" using v1").await;
}

#[tokio::test]
async fn deployments_merge_containers_by_name_and_ports_by_port_and_protocol() {
    let s = TestServer::new().await;
    let deploy = |containers: Value| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
               "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}},
                                     "spec": {"containers": containers}}}})
    };
    let path = "/apis/apps/v1/namespaces/default/deployments/web?fieldManager=ci";
    let body = deploy(json!([
        {"name": "app", "image": "nginx:1", "ports": [{"containerPort": 80}]},
        {"name": "sidecar", "image": "busybox"}
    ]));
    let created = apply_at(&s, path, body)
        .await
        .expect_code(StatusCode::CREATED);
    let fields = owned(&created, "ci", "Apply");
    let app = &fields["f:spec"]["f:template"]["f:spec"]["f:containers"][r#"k:{"name":"app"}"#];
    assert_eq!(
        app["f:ports"],
        json!({r#"k:{"containerPort":80,"protocol":"TCP"}"#: {".": {}, "f:containerPort": {}}})
    );
    assert_eq!(
        fields["f:spec"]["f:selector"],
        json!({}),
        "label selectors are atomic"
    );
    assert!(
        fields["f:spec"].get("f:revisionHistoryLimit").is_none(),
        "defaults are not the applier's"
    );
    let body =
        deploy(json!([{"name": "app", "image": "nginx:2", "ports": [{"containerPort": 80}]}]));
    let updated = apply_at(&s, path, body).await.expect_code(StatusCode::OK);
    let containers = updated["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    assert_eq!(containers.len(), 1, "the sidecar went with its omission");
    assert_eq!(containers[0]["image"], "nginx:2");
    assert_eq!(
        containers[0]["ports"],
        json!([{"containerPort": 80, "protocol": "TCP"}]),
        "the protocol defaulted, as upstream's container ports"
    );
    assert_eq!(updated["metadata"]["generation"], 2);
}

#[tokio::test]
async fn apply_options_are_checked() {
    let s = TestServer::new().await;
    let status = apply(&s, "", cm(json!({"k": "1"})))
        .await
        .expect_failure(422, "Invalid");
    assert_eq!(status["details"]["causes"][0]["field"], "fieldManager");
    s.configmap("default", "c", json!({})).await;
    let status = s
        .merge_patch(&format!("{CMS}/c?force=true"), json!({"data": {"k": "1"}}))
        .await
        .expect_failure(422, "Invalid");
    assert_eq!(status["details"]["causes"][0]["field"], "force");
    let missing_key = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                             "spec": {"containers": [{"image": "x"}]}});
    apply_at(
        &s,
        "/api/v1/namespaces/default/pods/p?fieldManager=a",
        missing_key,
    )
    .await
    .expect_mentions(400, "BadRequest", &["omits key field \"name\""]);
}

#[tokio::test]
async fn status_applies_own_only_status_under_their_subresource() {
    let s = TestServer::new().await;
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "app", "image": "nginx"}]}}},
        "status": {"replicas": 5}});
    let path = "/apis/apps/v1/namespaces/default/deployments/web";
    let created = apply_at(&s, &format!("{path}?fieldManager=ci"), deploy)
        .await
        .expect_code(StatusCode::CREATED);
    assert!(
        owned(&created, "ci", "Apply").get("f:status").is_none(),
        "the main resource does not own status: {created}"
    );
    let status = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                        "status": {"replicas": 2, "readyReplicas": 1}});
    let updated = apply_at(&s, &format!("{path}/status?fieldManager=ctrl"), status)
        .await
        .expect_code(StatusCode::OK);
    assert_eq!(updated["status"]["readyReplicas"], 1);
    let entry = find_by(&updated["metadata"]["managedFields"], "manager", "ctrl");
    assert_eq!(entry["subresource"], "status");
    assert_eq!(
        entry["fieldsV1"],
        json!({"f:status": {"f:readyReplicas": {}, "f:replicas": {}}})
    );
}

#[tokio::test]
async fn custom_resources_apply_with_atomic_lists() {
    let s = TestServer::new().await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer"},
                        "items": {"type": "array", "items": {"type": "object", "properties": {
                            "name": {"type": "string"}}}}}}}}}}]}
    });
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    s.created(crds, crd).await;
    let path = "/apis/example.com/v1/namespaces/default/gadgets/g";
    let gadget = |spec: Value| {
        json!({"apiVersion": "example.com/v1", "kind": "Gadget",
               "metadata": {"name": "g"}, "spec": spec})
    };
    let first = gadget(json!({"size": 1, "items": [{"name": "x"}, {"name": "y"}]}));
    let created = eventually(
        Duration::from_secs(5),
        Duration::from_millis(50),
        || async {
            match apply_at(&s, &format!("{path}?fieldManager=a"), first.clone()).await {
                (StatusCode::CREATED, body) => Ok(body),
                (code, body) => Err(format!(
                    "the custom resource is served within 5 s: {code}: {body}"
                )),
            }
        },
    )
    .await;
    assert_eq!(
        owned(&created, "a", "Apply"),
        json!({"f:spec": {"f:items": {}, "f:size": {}}}),
        "lists of custom resources are atomic"
    );
    let updated = apply_at(
        &s,
        &format!("{path}?fieldManager=a"),
        gadget(json!({"items": [{"name": "z"}]})),
    )
    .await
    .expect_code(StatusCode::OK);
    assert_eq!(updated["spec"], json!({"items": [{"name": "z"}]}));
    let status = apply_at(
        &s,
        &format!("{path}?fieldManager=b"),
        gadget(json!({"items": []})),
    )
    .await
    .expect_failure(409, "Conflict");
    assert_eq!(status["details"]["causes"][0]["field"], ".spec.items");
}
