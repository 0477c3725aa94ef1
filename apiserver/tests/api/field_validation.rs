//! `fieldValidation` on create, update and patch: unknown and duplicate
//! fields fail a Strict request with every path listed, become Warning
//! headers otherwise (Warn is the default), or pass silently (Ignore).

use axum::body::Body;
use http::{HeaderMap, Method, Request, StatusCode};
use serde_json::{Value, json};

use super::harness::{Client, TestServer, assert_same_version, exchange};

async fn send(
    ts: &TestServer,
    method: Method,
    path: &str,
    content_type: &str,
    body: &str,
) -> (StatusCode, HeaderMap, Value) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(Body::from(body.to_string()))
        .unwrap();
    exchange(ts.router.clone(), request).await
}

/// POSTs the JSON text `body` as it is (duplicates and all).
async fn post_text(ts: &TestServer, path: &str, body: &str) -> (StatusCode, HeaderMap, Value) {
    send(ts, Method::POST, path, "application/json", body).await
}

/// PUTs the JSON text `body` as it is.
async fn put_text(ts: &TestServer, path: &str, body: &str) -> (StatusCode, HeaderMap, Value) {
    send(ts, Method::PUT, path, "application/json", body).await
}

/// PATCHes with the text `body` as `content_type`.
async fn patch_text(
    ts: &TestServer,
    path: &str,
    content_type: &str,
    body: &str,
) -> (StatusCode, HeaderMap, Value) {
    send(ts, Method::PATCH, path, content_type, body).await
}

fn warnings(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect()
}

const POD_WITH_UNKNOWN: &str = r#"{"apiVersion":"v1","kind":"Pod",
  "metadata":{"name":"p","name":"p"},
  "spec":{"foo":1,"containers":[{"name":"c","image":"busybox","bar":true}]}}"#;

#[tokio::test]
async fn strict_create_lists_every_offending_field_and_stores_nothing() {
    let ts = TestServer::new().await;
    let (status, _, body) = post_text(
        &ts,
        "/api/v1/namespaces/default/pods?fieldValidation=Strict",
        POD_WITH_UNKNOWN,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["reason"], "BadRequest");
    assert_eq!(
        body["message"],
        "Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: \
         unknown field \"spec.containers[0].bar\", unknown field \"spec.foo\", duplicate field \"metadata.name\""
    );
    assert!(!ts.keys().await.iter().any(|k| k.contains("/pods/")));
}

#[tokio::test]
async fn warn_is_the_default_and_drops_the_fields() {
    let ts = TestServer::new().await;
    let (status, headers, body) =
        post_text(&ts, "/api/v1/namespaces/default/pods", POD_WITH_UNKNOWN).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        warnings(&headers),
        vec![
            r#"299 - "unknown field \"spec.containers[0].bar\"""#,
            r#"299 - "unknown field \"spec.foo\"""#,
            r#"299 - "duplicate field \"metadata.name\"""#,
        ]
    );
    assert!(body["spec"].get("foo").is_none());

    let (status, headers, _) = post_text(
        &ts,
        "/api/v1/namespaces/default/configmaps?fieldValidation=Ignore",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"extra":1}"#,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert!(warnings(&headers).is_empty());

    let (status, _, body) = post_text(
        &ts,
        "/api/v1/namespaces/default/configmaps?fieldValidation=Loose",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"d"}}"#,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

#[tokio::test]
async fn update_and_patches_are_checked_too() {
    let ts = TestServer::new().await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
    let (status, _) = ts.post("/api/v1/namespaces/default/configmaps", cm).await;
    assert_eq!(status, StatusCode::CREATED);
    let path = "/api/v1/namespaces/default/configmaps/c";

    let coloured = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","colour":"red"},"data":{"a":"2"}}"#;
    let (status, _, body) =
        put_text(&ts, &format!("{path}?fieldValidation=Strict"), coloured).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"metadata.colour\""
    );

    for content_type in [
        "application/strategic-merge-patch+json",
        "application/merge-patch+json",
    ] {
        let (status, _, body) = patch_text(
            &ts,
            &format!("{path}?fieldValidation=Strict"),
            content_type,
            r#"{"data":{"a":"3"},"spec":{"x":1}}"#,
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{content_type}");
        assert_eq!(
            body["message"],
            "strict decoding error: unknown field \"spec\""
        );
    }
    let (status, _, body) = patch_text(
        &ts,
        &format!("{path}?fieldValidation=Strict"),
        "application/json-patch+json",
        r#"[{"op":"add","path":"/metadata/colour","value":"red"}]"#,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["message"],
        "strict decoding error: unknown field \"metadata.colour\""
    );

    let (status, headers, body) = patch_text(
        &ts,
        path,
        "application/merge-patch+json",
        r#"{"data":{"a":"4"},"spec":{"x":1}}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["data"]["a"], "4");
    assert_eq!(
        warnings(&headers),
        vec![r#"299 - "unknown field \"spec\"""#]
    );

    // A clean Strict patch goes through.
    let (status, headers, _) = patch_text(
        &ts,
        &format!("{path}?fieldValidation=Strict"),
        "application/strategic-merge-patch+json",
        r#"{"data":{"a":"5"}}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(warnings(&headers).is_empty());
}

#[tokio::test]
async fn dropped_fields_are_no_change() {
    let ts = TestServer::new().await;
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
    let (status, created) = ts
        .post("/apis/apps/v1/namespaces/default/deployments", deployment)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let mut again = created.clone();
    again["spec"]["bogus"] = json!(true);
    let (status, headers, body) = put_text(
        &ts,
        "/apis/apps/v1/namespaces/default/deployments/d",
        &again.to_string(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        warnings(&headers),
        vec![r#"299 - "unknown field \"spec.bogus\"""#]
    );
    assert_eq!(body["metadata"]["generation"], 1);
    assert_same_version(&body, &created);
}
