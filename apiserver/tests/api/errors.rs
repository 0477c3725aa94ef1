use http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::harness::{Client, Expect, TABLE, TestServer, created_answer, message_of, refused};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn not_found_names_the_resource() {
    let s = TestServer::new().await;
    let body = refused(
        s.get(&format!("{CMS}/x")).await,
        404,
        "NotFound",
        "configmaps \"x\" not found",
    );
    assert_eq!(body["details"], json!({"name": "x", "kind": "configmaps"}));
    let body = refused(
        s.get("/apis/apps/v1/namespaces/default/deployments/d")
            .await,
        404,
        "NotFound",
        "deployments.apps \"d\" not found",
    );
    assert_eq!(body["details"]["group"], "apps");
    s.get_not_found("/apis/nothing.example/v1/widgets").await;
}

#[tokio::test]
async fn already_exists_is_409() {
    let s = TestServer::new().await;
    s.configmap("default", "dup", json!({})).await;
    refused(
        s.post(CMS, json!({"metadata": {"name": "dup"}})).await,
        409,
        "AlreadyExists",
        "configmaps \"dup\" already exists",
    );
}

#[tokio::test]
async fn malformed_bodies_are_400_and_store_nothing() {
    let s = TestServer::new().await;
    let before = s.keys().await;
    let path = "/api/v1/namespaces/default/configmaps";
    // In the words of Go's decoder, which upstream answers with.
    for (body, why) in [
        (
            &b"{not json"[..],
            "invalid character 'n' looking for beginning of object key string",
        ),
        (
            &b"{\"metadata\": {\"name\": \"a\"}"[..],
            "unexpected end of JSON input",
        ),
        (
            &b"[{}]"[..],
            "json: cannot unmarshal array into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }",
        ),
    ] {
        refused(
            s.raw(Method::POST, path, "application/json", body.to_vec())
                .await,
            400,
            "BadRequest",
            &format!("couldn't get version/kind; json parse error: {why}"),
        );
    }
    s.raw(
        Method::POST,
        path,
        "application/yaml",
        b"a: [unclosed".to_vec(),
    )
    .await
    .expect_failure(400, "BadRequest");
    refused(
        s.post(
            path,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "a"}}),
        )
        .await,
        400,
        "BadRequest",
        "the kind in the data (Secret) does not match the expected kind (ConfigMap)",
    );
    s.post(
        path,
        json!({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "a"}}),
    )
    .await
    .expect_failure(400, "BadRequest");
    let body = s
        .post(path, json!({"metadata": {"name": "a"}, "data": {"k": 5}}))
        .await
        .expect_failure(400, "BadRequest");
    assert!(
        message_of(&body)
            .starts_with("ConfigMap in version \"v1\" cannot be handled as a ConfigMap")
    );
    // A field of the wrong type that a validation rule would also fail is
    // still a body that does not decode (upstream decodes first), on create
    // and on replace alike.
    let pods = "/api/v1/namespaces/default/pods";
    let pod = |port: Value| {
        json!({"metadata": {"name": "typed"}, "spec": {"containers": [
            {"name": "c", "image": "i", "ports": [{"containerPort": port}]}]}})
    };
    let body = s
        .post(pods, pod(json!("80")))
        .await
        .expect_failure(400, "BadRequest");
    assert!(
        message_of(&body).starts_with("Pod in version \"v1\" cannot be handled as a Pod"),
        "{body}"
    );
    let created = s.created(pods, pod(json!(80))).await;
    let mut replaced = pod(json!("80"));
    replaced["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"].clone();
    s.put(&format!("{pods}/typed"), replaced)
        .await
        .expect_failure(400, "BadRequest");
    s.delete_ok(&format!("{pods}/typed")).await;
    assert_eq!(
        s.keys().await,
        before,
        "rejected writes leave nothing behind"
    );
}

#[tokio::test]
async fn invalid_objects_are_422_with_causes() {
    let s = TestServer::new().await;
    let before = s.keys().await;
    let body = s
        .post(CMS, json!({"metadata": {"name": "Bad_Name"}}))
        .await
        .expect_failure(422, "Invalid");
    assert!(body["message"].as_str().unwrap().starts_with("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"));
    assert_eq!(body["details"]["kind"], "ConfigMap");
    assert_eq!(body["details"]["causes"][0]["field"], "metadata.name");
    assert_eq!(body["details"]["causes"][0]["reason"], "FieldValueInvalid");

    let body = s
        .post(CMS, json!({"metadata": {}}))
        .await
        .expect_failure(422, "Invalid");
    assert_eq!(
        body["details"]["causes"][0]["message"],
        "Required value: name or generateName is required"
    );

    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}});
    refused(
        s.post("/api/v1/namespaces/default/pods", pod).await,
        422,
        "Invalid",
        "Pod \"p\" is invalid: spec.containers[0].image: Required value",
    );

    let pod = json!({"metadata": {"name": "p"}, "spec": {}});
    let body = s
        .post("/api/v1/namespaces/default/pods", pod)
        .await
        .expect_failure(422, "Invalid");
    assert_eq!(body["details"]["causes"][0]["field"], "spec.containers");

    let ns = json!({"metadata": {"name": "a.b"}});
    s.post("/api/v1/namespaces", ns)
        .await
        .expect_mentions(422, "Invalid", &["RFC 1123 label"]);

    let svc = json!({"metadata": {"name": "1svc"}, "spec": {"ports": [{"port": 80}]}});
    s.post("/api/v1/namespaces/default/services", svc)
        .await
        .expect_mentions(422, "Invalid", &["DNS-1035 label"]);

    let labels = json!({"metadata": {"name": "ok", "labels": {"bad key!": "v"}}});
    s.post(CMS, labels).await.expect_failure(422, "Invalid");
    assert_eq!(s.keys().await, before);
}

#[tokio::test]
async fn name_mismatch_on_update_is_400() {
    let s = TestServer::new().await;
    s.configmap("default", "a", json!({})).await;
    refused(
        s.put(&format!("{CMS}/a"), json!({"metadata": {"name": "b"}}))
            .await,
        400,
        "BadRequest",
        "the name of the object (b) does not match the name on the URL (a)",
    );
}

#[tokio::test]
async fn method_not_allowed_is_405() {
    let s = TestServer::new().await;
    s.post(&format!("{CMS}/x"), json!({}))
        .await
        .expect_failure(405, "MethodNotAllowed");
    s.call(Method::PUT, CMS, Some(json!({})))
        .await
        .expect_failure(405, "MethodNotAllowed");
}

/// Upstream serves no collection delete of namespaces: discovery and the
/// OpenAPI document leave the verb out, and a DELETE of the collection is a
/// 405 that removes nothing.
#[tokio::test]
async fn namespaces_are_not_deleted_as_a_collection() {
    let s = TestServer::new().await;
    s.namespace("keep-me").await;
    s.delete("/api/v1/namespaces")
        .await
        .expect_failure(405, "MethodNotAllowed");
    s.get_ok("/api/v1/namespaces/keep-me").await;
    let discovery = s.get_ok("/api/v1").await;
    let verbs = |name: &str| {
        discovery["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["name"] == name)
            .map(|r| r["verbs"].clone())
    };
    assert_eq!(
        verbs("namespaces"),
        Some(json!([
            "create", "delete", "get", "list", "patch", "update", "watch"
        ]))
    );
    assert!(verbs("configmaps").is_some_and(|v| v.to_string().contains("deletecollection")));
    let openapi = s.get_ok("/openapi/v2").await;
    assert!(
        openapi["paths"]["/api/v1/namespaces"]
            .get("delete")
            .is_none()
    );
    assert!(
        openapi["paths"]["/api/v1/namespaces/{namespace}/configmaps"]
            .get("delete")
            .is_some()
    );
}

#[tokio::test]
async fn oversized_bodies_are_413() {
    let s = TestServer::new().await;
    let big = "x".repeat(3 * 1024 * 1024 + 10);
    let body = json!({"metadata": {"name": "big"}, "data": {"k": big}});
    s.post(CMS, body)
        .await
        .expect_failure(413, "RequestEntityTooLarge");
    s.get_not_found(&format!("{CMS}/big")).await;
}

#[tokio::test]
async fn unsupported_media_types_are_415() {
    let s = TestServer::new().await;
    s.raw(Method::POST, CMS, "text/plain", b"{}".to_vec())
        .await
        .expect_failure(415, "UnsupportedMediaType");
    s.configmap("default", "p", json!({})).await;
    s.patch(&format!("{CMS}/p"), "application/json", json!({}))
        .await
        .expect_mentions(
            415,
            "UnsupportedMediaType",
            &["application/strategic-merge-patch+json"],
        );
}

/// Upstream's list-option rules: an unusable combination is a 422 on
/// `ListOptions`, for a list, a watch and a collection delete alike.
#[tokio::test]
async fn list_options_that_do_not_go_together_are_422() {
    let s = TestServer::new().await;
    s.configmap("default", "keep", json!({})).await;
    let invalid = |detail: &str| format!("ListOptions.meta.k8s.io \"\" is invalid: {detail}");
    refused(
        s.get(&format!("{CMS}?watch=1&sendInitialEvents=true"))
            .await,
        422,
        "Invalid",
        &invalid(
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ),
    );
    refused(
        s.get(&format!("{CMS}?resourceVersionMatch=Exact")).await,
        422,
        "Invalid",
        &invalid(
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
    );
    refused(
        s.get(&format!("{CMS}?sendInitialEvents=true")).await,
        422,
        "Invalid",
        &invalid("sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"),
    );
    refused(
        s.delete(&format!("{CMS}?resourceVersionMatch=NotOlderThan"))
            .await,
        422,
        "Invalid",
        &invalid(
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
    );
    // The refused collection delete removed nothing.
    s.get_ok(&format!("{CMS}/keep")).await;
}

#[tokio::test]
async fn bad_selectors_and_parameters_are_400() {
    let s = TestServer::new().await;
    refused(
        s.get("/api/v1/pods?fieldSelector=spec.nope%3Dx").await,
        400,
        "BadRequest",
        "field label not supported: spec.nope",
    );
    s.get("/api/v1/pods?labelSelector=a%20in%20b")
        .await
        .expect_failure(400, "BadRequest");
    // Upstream's words for an unclosed set, and for a bare `=` in a field
    // selector's value (its character code).
    let (_, status) = s.get("/api/v1/pods?labelSelector=a%20in%20(b").await;
    assert_eq!(
        status["message"],
        "unable to parse requirement: found '', expected: ',' or ')'"
    );
    let (_, status) = s
        .get("/api/v1/pods?fieldSelector=spec.nodeName%3Da%3Db")
        .await;
    assert_eq!(
        status["message"],
        "invalid field selector: unescaped character in value: 61"
    );
    s.get("/api/v1/pods?limit=abc")
        .await
        .expect_failure(400, "BadRequest");
    s.post(
        &format!("{CMS}?dryRun=Yes"),
        json!({"metadata": {"name": "a"}}),
    )
    .await
    .expect_failure(400, "BadRequest");
}

#[tokio::test]
async fn patches_that_replace_the_object_with_an_array_are_400() {
    let s = TestServer::new().await;
    s.configmap("default", "p", json!({"k": "v"})).await;
    // A scalar does not replace the whole document: upstream's library
    // leaves the document as it was (its error there wraps nothing).
    let scalar = json!([{"op": "replace", "path": "", "value": "x"}]);
    let kept = s
        .patch(&format!("{CMS}/p"), "application/json-patch+json", scalar)
        .await
        .expect_code(StatusCode::OK);
    assert_eq!(kept["data"], json!({"k": "v"}), "{kept}");
    let root = json!([{"op": "replace", "path": "", "value": ["x"]}]);
    s.patch(
        &format!("{CMS}/p"),
        "application/json-patch+json",
        root.clone(),
    )
    .await
    .expect_failure(400, "BadRequest");
    let d = json!({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    s.post("/apis/apps/v1/namespaces/default/deployments", d)
        .await;
    s.patch(
        "/apis/apps/v1/namespaces/default/deployments/d/scale",
        "application/json-patch+json",
        root,
    )
    .await
    .expect_failure(400, "BadRequest");
}

#[tokio::test]
async fn namespaced_collections_cannot_be_deleted_across_namespaces() {
    let s = TestServer::new().await;
    s.configmap("default", "keep", json!({})).await;
    s.delete("/api/v1/configmaps")
        .await
        .expect_failure(405, "MethodNotAllowed");
    s.get_ok(&format!("{CMS}/keep")).await;
}

#[tokio::test]
async fn status_bodies_are_written_in_upstreams_key_order() {
    let s = TestServer::new().await;
    let body = s
        .bytes(Method::GET, &format!("{CMS}/missing"), None)
        .await
        .expect_code(StatusCode::NOT_FOUND);
    assert_eq!(
        body,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \"missing\" not found","reason":"NotFound","details":{"name":"missing","kind":"configmaps"},"code":404}"#
    );

    // Details with causes: name, group, kind, causes; each cause reason,
    // message, field.
    let bad = json!({"metadata": {"name": "Bad_Name"}});
    let body = s
        .bytes(
            Method::POST,
            "/apis/apps/v1/namespaces/default/deployments",
            Some(bad),
        )
        .await
        .expect_code(StatusCode::UNPROCESSABLE_ENTITY);
    let order = |keys: &[&str]| {
        let at: Vec<usize> = keys
            .iter()
            .map(|k| {
                body.find(&format!("\"{k}\":"))
                    .unwrap_or_else(|| panic!("{k} in {body}"))
            })
            .collect();
        assert!(
            at.windows(2).all(|w| w[0] < w[1]),
            "{keys:?} out of order in {body}"
        );
    };
    order(&[
        "kind",
        "apiVersion",
        "metadata",
        "status",
        "message",
        "reason",
        "details",
        "code",
    ]);
    order(&["name", "group", "causes"]);
    assert!(
        body.contains(r#"{"reason":"FieldValueInvalid","message":"#),
        "{body}"
    );
}

#[tokio::test]
async fn objects_lists_and_watch_events_start_with_type_metadata_spec_status() {
    let s = TestServer::new().await;
    let svc = json!({"metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"ports": [{"port": 80}]}});
    let created = s
        .bytes(
            Method::POST,
            "/api/v1/namespaces/default/services",
            Some(svc),
        )
        .await
        .expect_code(StatusCode::CREATED);
    let (_, read) = s
        .bytes(Method::GET, "/api/v1/namespaces/default/services/web", None)
        .await;
    for body in [&created, &read] {
        assert!(
            body.starts_with(r#"{"kind":"Service","apiVersion":"v1","metadata":{"name":"web","namespace":"default","uid":"#),
            "{body}"
        );
        let spec = body.find(r#""spec":"#).unwrap();
        let status = body.find(r#""status":"#).unwrap();
        assert!(spec < status, "{body}");
    }
    let (_, list) = s
        .bytes(Method::GET, "/api/v1/namespaces/default/services", None)
        .await;
    assert!(
        list.starts_with(r#"{"kind":"ServiceList","apiVersion":"v1","metadata":{"#),
        "{list}"
    );
    assert!(
        list.contains(r#""items":[{"metadata":{"name":"web","namespace":"default","#),
        "{list}"
    );
}

#[tokio::test]
async fn a_paged_lists_metadata_is_written_in_list_meta_order() {
    let s = TestServer::new().await;
    for name in ["a1", "a2", "a3"] {
        s.configmap("default", name, json!({})).await;
    }
    let path = "/api/v1/namespaces/default/configmaps?limit=1";
    let list = s
        .bytes(Method::GET, path, None)
        .await
        .expect_code(StatusCode::OK);
    // Upstream's ListMeta: resourceVersion, continue, remainingItemCount,
    // and the whole metadata before items.
    assert!(
        list.starts_with(
            r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":""#
        ),
        "{list}"
    );
    let at = |key: &str| list.find(key).unwrap_or_else(|| panic!("{key} in {list}"));
    assert!(
        at(r#""continue":"#) < at(r#""remainingItemCount":2}"#),
        "{list}"
    );
    assert!(at(r#""remainingItemCount":2},"items":[{"#) > 0, "{list}");

    // The same list as a Table (kubectl get) keeps the order.
    let table = s
        .bytes_accepting(Method::GET, path, TABLE, None)
        .await
        .expect_code(StatusCode::OK);
    assert!(
        table.starts_with(
            r#"{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":""#
        ),
        "{table}"
    );
    assert!(
        table.find(r#""continue":"#) < table.find(r#""remainingItemCount":2"#),
        "{table}"
    );
}

/// A container's own restartPolicy is upstream's sidecar switch: only an
/// init container may have one, only `Always`, and only such an init
/// container may have probes or lifecycle hooks. A sidecar is accepted.
#[tokio::test]
async fn container_restart_policies_are_judged_as_upstream_judges_them() {
    let s = TestServer::new().await;
    let pods = "/api/v1/namespaces/default/pods";
    let container = |extra: serde_json::Value| {
        let mut c = json!({"name": "c", "image": "busybox"});
        for (k, v) in extra.as_object().into_iter().flatten() {
            c[k] = v.clone();
        }
        c
    };
    let probe = json!({"exec": {"command": ["true"]}});
    for (spec, message) in [
        (
            json!({"containers": [container(json!({"restartPolicy": "Always"}))]}),
            "Pod \"p\" is invalid: spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers",
        ),
        (
            json!({"initContainers": [container(json!({"restartPolicy": "Never"}))],
                   "containers": [container(json!({"name": "main"}))]}),
            "Pod \"p\" is invalid: spec.initContainers[0].restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
        ),
        (
            json!({"initContainers": [container(json!({"readinessProbe": probe}))],
                   "containers": [container(json!({"name": "main"}))]}),
            "Pod \"p\" is invalid: spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always",
        ),
    ] {
        let pod = json!({"metadata": {"name": "p"}, "spec": spec});
        refused(s.post(pods, pod).await, 422, "Invalid", message);
    }
    let sidecar = json!({"metadata": {"name": "p"}, "spec": {
        "initContainers": [container(json!({"restartPolicy": "Always", "readinessProbe": probe}))],
        "containers": [container(json!({"name": "main"}))]}});
    s.post(pods, sidecar).await.expect_code(StatusCode::CREATED);
}

/// A probe or lifecycle hook names exactly one handler, as upstream checks.
#[tokio::test]
async fn probes_and_hooks_name_one_handler() {
    let s = TestServer::new().await;
    let pods = "/api/v1/namespaces/default/pods";
    for (container, message) in [
        (
            json!({"name": "c", "image": "busybox", "readinessProbe": {"periodSeconds": 1}}),
            "Pod \"p\" is invalid: spec.containers[0].readinessProbe: Required value: must specify a handler type",
        ),
        (
            json!({"name": "c", "image": "busybox", "livenessProbe": {
                "exec": {"command": ["true"]}, "httpGet": {"port": 80}}}),
            "Pod \"p\" is invalid: spec.containers[0].livenessProbe.httpGet: Forbidden: may not specify more than 1 handler type",
        ),
        (
            json!({"name": "c", "image": "busybox", "lifecycle": {"preStop": {}}}),
            "Pod \"p\" is invalid: spec.containers[0].lifecycle.preStop: Required value: must specify a handler type",
        ),
    ] {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [container]}});
        refused(s.post(pods, pod).await, 422, "Invalid", message);
    }
    let fine = json!({"metadata": {"name": "p"}, "spec": {"containers": [{
        "name": "c", "image": "busybox",
        "readinessProbe": {"grpc": {"port": 9090}},
        "lifecycle": {"preStop": {"sleep": {"seconds": 1}}}}]}});
    s.post(pods, fine).await.expect_code(StatusCode::CREATED);
}

/// Volume mounts name a volume of the pod, each at a path of its own, a
/// part of a volume that stays inside it, and propagate mounts back to the
/// host only from a privileged container, as upstream checks; in a pod and
/// in a workload's template alike.
#[tokio::test]
async fn volume_mounts_stay_inside_declared_volumes() {
    let s = TestServer::new().await;
    let pod = |mounts: serde_json::Value| {
        json!({"metadata": {"name": "p"}, "spec": {
            "volumes": [{"name": "data", "emptyDir": {}}],
            "containers": [{"name": "c", "image": "busybox", "volumeMounts": mounts}]}})
    };
    for (mounts, message) in [
        (
            json!([{"name": "data", "mountPath": "/d", "subPath": "../../../etc"}]),
            "Pod \"p\" is invalid: spec.containers[0].volumeMounts.subPath: Invalid value: \"../../../etc\": must not contain '..'",
        ),
        (
            json!([{"name": "data", "mountPath": "/d", "subPath": "/etc"}]),
            "Pod \"p\" is invalid: spec.containers[0].volumeMounts.subPath: Invalid value: \"/etc\": must be a relative path",
        ),
        (
            json!([{"name": "host", "mountPath": "/d"}]),
            "Pod \"p\" is invalid: spec.containers[0].volumeMounts[0].name: Not found: \"host\"",
        ),
        (
            json!([{"name": "data", "mountPath": "/d"}, {"name": "data", "mountPath": "/d"}]),
            "Pod \"p\" is invalid: spec.containers[0].volumeMounts[1].mountPath: Invalid value: \"/d\": must be unique",
        ),
        (
            json!([{"name": "data", "mountPath": "/d", "mountPropagation": "Bidirectional"}]),
            "Pod \"p\" is invalid: spec.containers[0].volumeMounts.mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers",
        ),
    ] {
        refused(
            s.post("/api/v1/namespaces/default/pods", pod(mounts)).await,
            422,
            "Invalid",
            message,
        );
    }
    let deployment = json!({"metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"app": "d"}},
        "template": {"metadata": {"labels": {"app": "d"}}, "spec": {
            "volumes": [{"name": "data", "emptyDir": {}}],
            "containers": [{"name": "c", "image": "busybox", "volumeMounts": [
                {"name": "data", "mountPath": "/d", "subPathExpr": "$(POD)/../.."}]}]}}}});
    refused(
        s.post("/apis/apps/v1/namespaces/default/deployments", deployment)
            .await,
        422,
        "Invalid",
        "Deployment.apps \"d\" is invalid: spec.template.spec.containers[0].volumeMounts.subPathExpr: Invalid value: \"$(POD)/../..\": must not contain '..'",
    );
    let fine = pod(json!([
        {"name": "data", "mountPath": "/d", "subPath": "a/b"},
        {"name": "data", "mountPath": "/e", "subPathExpr": "$(POD_NAME)"}
    ]));
    s.post("/api/v1/namespaces/default/pods", fine)
        .await
        .expect_code(StatusCode::CREATED);
}

/// Seccomp and AppArmor profiles: a known type, a local name exactly for
/// `Localhost`, and a seccomp file that cannot climb out of the node's
/// profile directory.
#[tokio::test]
async fn security_profiles_are_checked_as_upstream_checks_them() {
    let s = TestServer::new().await;
    let pods = "/api/v1/namespaces/default/pods";
    let with = |context: Value| {
        json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "image": "busybox", "securityContext": context}]}})
    };
    let at = "spec.containers[0].securityContext";
    for (context, message) in [
        (
            json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "../../etc/shadow"}}),
            format!(
                "Pod \"p\" is invalid: {at}.seccompProfile.localhostProfile: Invalid value: \"../../etc/shadow\": must not contain '..'"
            ),
        ),
        (
            json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "/etc/x.json"}}),
            format!(
                "Pod \"p\" is invalid: {at}.seccompProfile.localhostProfile: Invalid value: \"/etc/x.json\": must be a relative path"
            ),
        ),
        (
            json!({"seccompProfile": {"type": "Localhost"}}),
            format!(
                "Pod \"p\" is invalid: {at}.seccompProfile.localhostProfile: Required value: must be set when seccomp type is Localhost"
            ),
        ),
        (
            json!({"appArmorProfile": {"type": "Strict"}}),
            format!(
                "Pod \"p\" is invalid: {at}.appArmorProfile.type: Unsupported value: \"Strict\": supported values: \"Localhost\", \"RuntimeDefault\", \"Unconfined\""
            ),
        ),
    ] {
        refused(s.post(pods, with(context)).await, 422, "Invalid", &message);
    }
    let fine = with(json!({
        "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/audit.json"},
        "appArmorProfile": {"type": "RuntimeDefault"}}));
    s.post(pods, fine).await.expect_code(StatusCode::CREATED);
}

/// A pod's AppArmor profile in both spellings, as upstream keeps them since
/// v1.30: the annotation fills a missing field (with a deprecation
/// warning), a field fills a missing annotation, and where both are given
/// they must agree.
#[tokio::test]
async fn apparmor_annotations_and_fields_are_kept_in_step() {
    let s = TestServer::new().await;
    let pods = "/api/v1/namespaces/default/pods";
    let key = "container.apparmor.security.beta.kubernetes.io/c";
    let old_client = json!({"metadata": {"name": "old", "annotations": {key: "localhost/k8s-deny"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let created = created_answer(&s, pods, old_client).await;
    assert_eq!(
        created.body["spec"]["containers"][0]["securityContext"]["appArmorProfile"],
        json!({"type": "Localhost", "localhostProfile": "k8s-deny"})
    );
    assert_eq!(
        created.warnings,
        [format!(
            "metadata.annotations[{key}]: deprecated since v1.30; use the \"appArmorProfile\" field instead"
        )]
    );

    let new_client = json!({"metadata": {"name": "new"}, "spec": {
        "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "c", "image": "busybox"}]}});
    let created = created_answer(&s, pods, new_client).await;
    assert_eq!(
        created.body["metadata"]["annotations"][key],
        "runtime/default"
    );
    assert!(created.warnings.is_empty(), "{:?}", created.warnings);

    let disagreeing = json!({"metadata": {"name": "both", "annotations": {key: "unconfined"}},
        "spec": {"containers": [{"name": "c", "image": "busybox",
            "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}}]}});
    refused(
        s.post(pods, disagreeing).await,
        422,
        "Invalid",
        "Pod \"both\" is invalid: spec.containers[0].securityContext.appArmorProfile.type: Forbidden: apparmor type in annotation and field must match",
    );
}

/// A quantity upstream cannot parse makes the whole body undecodable: a 400
/// in upstream's words, whichever kind holds it and however deep, on create
/// and replace, and nothing is stored.
#[tokio::test]
async fn quantities_that_do_not_parse_are_400_as_upstream_decodes_them() {
    let s = TestServer::new().await;
    let before = s.keys().await;
    let pods = "/api/v1/namespaces/default/pods";
    let pod = |cpu: Value| {
        json!({"metadata": {"name": "sized"}, "spec": {"containers": [
            {"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]}})
    };
    refused(
        s.post(pods, pod(json!("abc"))).await,
        400,
        "BadRequest",
        "Pod in version \"v1\" cannot be handled as a Pod: quantities must match the \
         regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    );
    let deployment = json!({
        "metadata": {"name": "sized"},
        "spec": {
            "selector": {"matchLabels": {"app": "a"}},
            "template": {
                "metadata": {"labels": {"app": "a"}},
                "spec": {"containers": [{"name": "c", "image": "i",
                    "resources": {"limits": {"memory": "32MMi"}}}]}
            }
        }
    });
    refused(
        s.post("/apis/apps/v1/namespaces/default/deployments", deployment)
            .await,
        400,
        "BadRequest",
        "Deployment in version \"v1\" cannot be handled as a Deployment: \
         unable to parse quantity's suffix",
    );
    let quotas = "/api/v1/namespaces/default/resourcequotas";
    let quota = |pods: Value| json!({"metadata": {"name": "q"}, "spec": {"hard": {"pods": pods}}});
    s.post(quotas, quota(json!("ten")))
        .await
        .expect_failure(400, "BadRequest");
    assert_eq!(s.keys().await, before, "refused writes store nothing");

    // Numbers and every notation upstream reads are quantities.
    // ...and are stored in upstream's canonical form.
    for (written, stored) in [
        (json!(1), "1"),
        (json!("1.5e3"), "1500"),
        (json!(0.5), "500m"),
        (json!("0.25"), "250m"),
    ] {
        let created = s.created(pods, pod(written.clone())).await;
        assert_eq!(
            created["spec"]["containers"][0]["resources"]["requests"]["cpu"], stored,
            "{written}"
        );
        s.delete_ok(&format!("{pods}/sized")).await;
    }
    let created = s.created(quotas, quota(json!(10))).await;
    // The same amount written otherwise is no change at all: not stored
    // again, and no new generation of a Deployment's spec.
    let mut same = quota(json!("10.000"));
    same["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"].clone();
    let unchanged = s.put_ok(&format!("{quotas}/q"), same).await;
    assert_eq!(
        unchanged["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"],
        "{unchanged}"
    );
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    let mut sized = json!({"metadata": {"name": "sized"}, "spec": {
        "selector": {"matchLabels": {"app": "s"}},
        "template": {"metadata": {"labels": {"app": "s"}}, "spec": {"containers": [
            {"name": "c", "image": "i", "resources": {"requests": {"cpu": "0.5"}}}]}}}});
    let first = s.created(deployments, sized.clone()).await;
    sized["metadata"]["resourceVersion"] = first["metadata"]["resourceVersion"].clone();
    let again = s.put_ok(&format!("{deployments}/sized"), sized).await;
    for field in ["resourceVersion", "generation"] {
        assert_eq!(
            again["metadata"][field], first["metadata"][field],
            "{field}"
        );
    }
    let mut replaced = quota(json!("1 0"));
    replaced["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"].clone();
    let body = s
        .put(&format!("{quotas}/q"), replaced)
        .await
        .expect_failure(400, "BadRequest");
    assert!(
        message_of(&body).ends_with(
            "quantities must match the regular expression \
             '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        ),
        "{body}"
    );
    // A patch whose result does not decode is upstream's 422 on `patch`,
    // showing the patched object (merge) or the patch as Go prints it
    // (strategic merge).
    let refusal = "quantities must match the regular expression \
                   '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
    let patch = json!({"spec": {"hard": {"pods": "ten"}}});
    let body = s
        .merge_patch(&format!("{quotas}/q"), patch.clone())
        .await
        .expect_failure(422, "Invalid");
    let message = message_of(&body);
    assert!(
        message.starts_with(" \"\" is invalid: patch: Invalid value: \"{")
            && message.contains(r#"\"hard\":{\"pods\":\"ten\"}"#)
            && message.ends_with(refusal),
        "{body}"
    );
    assert_eq!(body["details"]["causes"][0]["field"], "patch", "{body}");
    refused(
        s.patch(
            &format!("{quotas}/q"),
            "application/strategic-merge-patch+json",
            patch,
        )
        .await,
        422,
        "Invalid",
        &format!(
            " \"\" is invalid: patch: Invalid value: \"map[spec:map[hard:map[pods:ten]]]\": {refusal}"
        ),
    );
    let stored = s.get_ok(&format!("{quotas}/q")).await;
    assert_eq!(
        stored["spec"]["hard"]["pods"], "10",
        "the refused writes lost nothing"
    );
}

/// A value of the wrong JSON type is refused in the words of upstream's Go
/// decoder, naming the struct, the field path and the Go type (what users
/// search for when `enabled: true` in a ConfigMap is refused), on create,
/// replace and patch; bad base64 names the byte where decoding stopped.
#[tokio::test]
async fn values_of_the_wrong_type_are_refused_in_go_decoder_words() {
    let s = TestServer::new().await;
    let before = s.keys().await;
    let configmaps = "/api/v1/namespaces/default/configmaps";
    refused(
        s.post(
            configmaps,
            json!({"metadata": {"name": "c"}, "data": {"enabled": true}}),
        )
        .await,
        400,
        "BadRequest",
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot \
         unmarshal bool into Go struct field ConfigMap.data of type string",
    );
    let deployment = json!({
        "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"app": "a"}},
            "template": {
                "metadata": {"labels": {"app": "a"}},
                "spec": {"containers": [{"name": "c", "image": "i",
                    "ports": [{"containerPort": "8080"}]}]}
            }
        }
    });
    refused(
        s.post("/apis/apps/v1/namespaces/default/deployments", deployment)
            .await,
        400,
        "BadRequest",
        "Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot \
         unmarshal string into Go struct field \
         ContainerPort.spec.template.spec.containers.ports.containerPort of type int32",
    );
    refused(
        s.post(
            "/api/v1/namespaces/default/pods",
            json!({"metadata": {"name": "p"}, "spec": {"containers": {"name": "c"}}}),
        )
        .await,
        400,
        "BadRequest",
        "Pod in version \"v1\" cannot be handled as a Pod: json: cannot unmarshal \
         object into Go struct field PodSpec.spec.containers of type []v1.Container",
    );
    refused(
        s.post(
            "/api/v1/namespaces/default/secrets",
            json!({"metadata": {"name": "s"}, "data": {"key": "!!!notbase64"}}),
        )
        .await,
        400,
        "BadRequest",
        "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at \
         input byte 0",
    );
    assert_eq!(s.keys().await, before, "refused writes store nothing");

    // Replace and patch say the same of the object they would make.
    let created = s
        .created(
            configmaps,
            json!({"metadata": {"name": "c"}, "data": {"a": "b"}}),
        )
        .await;
    let mut replaced = created.clone();
    replaced["data"]["port"] = json!(8080);
    refused(
        s.put(&format!("{configmaps}/c"), replaced).await,
        400,
        "BadRequest",
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot \
         unmarshal number into Go struct field ConfigMap.data of type string",
    );
    refused(
        s.patch(
            &format!("{configmaps}/c"),
            "application/strategic-merge-patch+json",
            json!({"data": {"on": false}}),
        )
        .await,
        422,
        "Invalid",
        " \"\" is invalid: patch: Invalid value: \"map[data:map[on:false]]\": json: cannot \
         unmarshal bool into Go struct field ConfigMap.data of type string",
    );
    assert_eq!(
        s.get_ok(&format!("{configmaps}/c")).await["data"],
        json!({"a": "b"}),
        "the refused writes lost nothing"
    );
}
