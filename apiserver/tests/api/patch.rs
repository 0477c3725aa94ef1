use http::StatusCode;
use serde_json::json;

use crate::harness::{Client, Expect, TestServer, strings};

const CM: &str = "/api/v1/namespaces/default/configmaps/p";

/// Asserts the stored ConfigMap `p` holds `want` under `k`: how the tests
/// check what their patches (refused ones too) left behind.
async fn assert_stored_k(s: &TestServer, want: &str) {
    assert_eq!(s.get_ok(CM).await["data"]["k"], want);
}

#[tokio::test]
async fn json_merge_and_strategic_patches_on_configmaps() {
    let s = TestServer::new().await;
    s.configmap("default", "p", json!({"a": "1"})).await;
    let body = s
        .patch(
            CM,
            "application/json-patch+json",
            json!([{"op": "add", "path": "/data/n", "value": "x"}]),
        )
        .await
        .expect_code(StatusCode::OK);
    assert_eq!(body["data"], json!({"k": "v", "n": "x"}));
    let (_, body) = s.merge_patch(CM, json!({"data": {"k": null}})).await;
    assert_eq!(body["data"], json!({"n": "x"}));
    let (_, body) = s
        .patch(
            CM,
            "application/strategic-merge-patch+json",
            json!({"metadata": {"labels": {"b": "2"}}}),
        )
        .await;
    assert_eq!(body["metadata"]["labels"], json!({"a": "1", "b": "2"}));
}

#[tokio::test]
async fn strategic_patch_merges_containers_by_name() {
    let s = TestServer::new().await;
    let d = json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "d"}},
        "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [
            {"name": "a", "image": "one", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "image": "two"}]}}}});
    s.created("/apis/apps/v1/namespaces/default/deployments", d)
        .await;
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "b", "image": "three"}, {"name": "a", "env": [{"name": "Y", "value": "2"}]}]}}}});
    let body = s
        .patch(
            "/apis/apps/v1/namespaces/default/deployments/d",
            "application/strategic-merge-patch+json",
            patch,
        )
        .await
        .expect_code(StatusCode::OK);
    let containers = &body["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers[0]["image"], "one");
    assert_eq!(
        containers[0]["env"],
        json!([{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}])
    );
    assert_eq!(containers[1]["image"], "three");
    assert_eq!(body["metadata"]["generation"], 2);
}

#[tokio::test]
async fn patch_preconditions_and_missing_objects() {
    let s = TestServer::new().await;
    s.merge_patch(CM, json!({"data": {}}))
        .await
        .expect_failure(404, "NotFound");
    let created = s.configmap("default", "p", json!({})).await;
    s.merge_patch(CM, json!({"data": {"k": "new"}})).await;
    let stale = json!({"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}, "data": {"k": "z"}});
    s.merge_patch(CM, stale)
        .await
        .expect_failure(409, "Conflict");
    s.patch(CM, "application/json-patch+json", json!({"not": "a list"}))
        .await
        .expect_failure(400, "BadRequest");
    s.patch(
        CM,
        "application/json-patch+json",
        json!([{"op": "test", "path": "/data/k", "value": "other"}]),
    )
    .await
    .expect_failure(422, "Invalid");
    assert_stored_k(&s, "new").await;
}

#[tokio::test]
async fn json_patches_apply_as_upstreams_library_applies_them() {
    let s = TestServer::new().await;
    s.configmap("default", "p", json!({"k": "v"})).await;
    // Looser than RFC 6902, as clients rely on: `replace` of a member that
    // is not there sets it.
    let patched = s
        .patch(
            CM,
            "application/json-patch+json",
            json!([{"op": "replace", "path": "/data/new", "value": "x"}]),
        )
        .await
        .expect_code(StatusCode::OK);
    assert_eq!(patched["data"], json!({"k": "v", "new": "x"}), "{patched}");
    // What does not apply is refused in the library's words.
    let refused = s
        .patch(
            CM,
            "application/json-patch+json",
            json!([{"op": "remove", "path": "/data/zz"}]),
        )
        .await
        .expect_failure(422, "Invalid");
    assert_eq!(
        refused["details"]["causes"][0]["message"],
        "error in remove for path: '/data/zz': Unable to remove nonexistent key: zz: missing value",
        "{refused}"
    );
    let refused = s
        .patch(
            CM,
            "application/json-patch+json",
            json!({"op": "remove", "path": "/data/k"}),
        )
        .await
        .expect_failure(400, "BadRequest");
    assert_eq!(
        refused["message"],
        "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
    );
}

#[tokio::test]
async fn patch_dry_run_changes_nothing() {
    let s = TestServer::new().await;
    s.configmap("default", "p", json!({})).await;
    let body = s
        .merge_patch_ok(&format!("{CM}?dryRun=All"), json!({"data": {"k": "dry"}}))
        .await;
    assert_eq!(body["data"]["k"], "dry");
    assert_stored_k(&s, "v").await;
}

#[tokio::test]
async fn field_manager_is_recorded() {
    let s = TestServer::new().await;
    s.configmap("default", "p", json!({})).await;
    let (_, body) = s
        .merge_patch(
            &format!("{CM}?fieldManager=tester"),
            json!({"data": {"k": "m"}}),
        )
        .await;
    let managers: Vec<&str> = strings(&body["metadata"]["managedFields"], "manager");
    assert_eq!(managers, vec!["skiff-tests", "tester"]);
    assert_eq!(body["metadata"]["managedFields"][1]["operation"], "Update");
}

#[tokio::test]
async fn apply_patches_create_then_merge() {
    let s = TestServer::new().await;
    let path = "/api/v1/namespaces/default/configmaps/applied";
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  a: \"1\"\n";
    s.apply_yaml(path, yaml)
        .await
        .expect_failure(422, "Invalid");
    let with_manager = format!("{path}?fieldManager=me");
    let body = s
        .apply_yaml(&with_manager, yaml)
        .await
        .expect_code(StatusCode::CREATED);
    assert_eq!(body["metadata"]["managedFields"][0]["operation"], "Apply");
    let second = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  b: \"2\"\n";
    let body = s
        .apply_yaml(&with_manager, second)
        .await
        .expect_code(StatusCode::OK);
    assert_eq!(body["data"]["b"], "2");
}

#[tokio::test]
async fn json_patches_see_the_resource_version_and_can_test_it() {
    let s = TestServer::new().await;
    let created = s.configmap("default", "p", json!({})).await;
    let first = created["metadata"]["resourceVersion"].clone();
    let guarded = |rv: &serde_json::Value, value: &str| {
        json!([{"op": "test", "path": "/metadata/resourceVersion", "value": rv},
            {"op": "replace", "path": "/data/k", "value": value}])
    };
    let body = s
        .patch(CM, "application/json-patch+json", guarded(&first, "second"))
        .await
        .expect_code(StatusCode::OK);
    assert_eq!(body["data"]["k"], "second");
    assert_ne!(body["metadata"]["resourceVersion"], first);

    // The same guard again is stale now: upstream's generic 422, the failed
    // operation its one cause, nothing written.
    let mut body = s
        .patch(CM, "application/json-patch+json", guarded(&first, "third"))
        .await
        .expect_failure(422, "Invalid");
    let causes = body["details"]["causes"].take();
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "the server rejected our request due to an error in our request",
            "reason": "Invalid", "details": {"causes": null}, "code": 422})
    );
    assert_eq!(causes[0]["reason"], "UnexpectedServerResponse");
    let why = causes[0]["message"].as_str().unwrap_or_default();
    assert!(why.contains("/metadata/resourceVersion"), "{causes}");
    assert_stored_k(&s, "second").await;

    // Setting a stale resourceVersion is a precondition that fails with 409.
    s.patch(
        CM,
        "application/json-patch+json",
        json!([{"op": "replace", "path": "/metadata/resourceVersion", "value": first},
                {"op": "replace", "path": "/data/k", "value": "fourth"}]),
    )
    .await
    .expect_failure(409, "Conflict");
    assert_stored_k(&s, "second").await;
}
