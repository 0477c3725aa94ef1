//! OpenAPI v3 and v2 documents as kubectl reads them: the v3 index with
//! hashed URLs, per group-version documents with upstream's schema names and
//! extensions, HTTP caching, and the v2 document.

use http::StatusCode;
use serde_json::Value;

use super::harness::{Client, TestServer, fetch, message_of, strings};

async fn fetch_json(ts: &TestServer, path: &str) -> Value {
    let (status, _, body) = fetch(ts, path, &[]).await;
    assert_eq!(status, StatusCode::OK, "{path}");
    serde_json::from_slice(&body).unwrap()
}

#[tokio::test]
async fn v3_index_points_at_hashed_group_version_documents() {
    let ts = TestServer::new().await;
    let index = fetch_json(&ts, "/openapi/v3").await;
    for gv in [
        "api/v1",
        "apis/apps/v1",
        "apis/batch/v1",
        "apis/rbac.authorization.k8s.io/v1",
    ] {
        let url = index["paths"][gv]["serverRelativeURL"]
            .as_str()
            .unwrap_or_else(|| panic!("{gv} missing from {index}"));
        assert!(url.starts_with(&format!("/openapi/v3/{gv}?hash=")), "{url}");
        let (status, headers, body) = fetch(&ts, url, &[]).await;
        assert_eq!(status, StatusCode::OK, "{url}");
        assert_eq!(headers["cache-control"], "public, immutable");
        assert_eq!(headers["content-type"], "application/json");
        let doc: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(doc["openapi"], "3.0.0");
        // The same document without the hash, revalidated by ETag.
        let plain = format!("/openapi/v3/{gv}");
        let (status, headers, _) = fetch(&ts, &plain, &[]).await;
        assert_eq!(status, StatusCode::OK);
        let etag = headers["etag"].to_str().unwrap().to_string();
        let (status, _, body) = fetch(&ts, &plain, &[("if-none-match", &etag)]).await;
        assert_eq!(status, StatusCode::NOT_MODIFIED);
        assert!(body.is_empty());
    }
    // A stale hash redirects to the current one.
    let (status, headers, _) = fetch(&ts, "/openapi/v3/api/v1?hash=0000", &[]).await;
    assert_eq!(status, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(
        headers["location"].to_str().unwrap(),
        index["paths"]["api/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap()
    );
    let (status, _, _) = fetch(&ts, "/openapi/v3/apis/nothing.example.com/v1", &[]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn v3_core_document_describes_pods_as_kubectl_needs() {
    let ts = TestServer::new().await;
    let doc = fetch_json(&ts, "/openapi/v3/api/v1").await;
    let schemas = &doc["components"]["schemas"];
    let pod = &schemas["io.k8s.api.core.v1.Pod"];
    assert_eq!(
        pod["x-kubernetes-group-version-kind"],
        serde_json::json!([{"group": "", "kind": "Pod", "version": "v1"}])
    );
    assert!(
        schemas["io.k8s.api.core.v1.Container"]["properties"]["image"]["description"]
            .as_str()
            .is_some_and(|d| d.contains("Container image name"))
    );
    assert_eq!(
        schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]["x-kubernetes-patch-merge-key"],
        "name"
    );
    assert!(schemas["io.k8s.api.core.v1.PodList"].is_object());

    let item = &doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"];
    let patch = &item["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"],
        serde_json::json!({"group": "", "kind": "Pod", "version": "v1"})
    );
    assert_eq!(patch["x-kubernetes-action"], "patch");
    let params: Vec<&str> = patch["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["in"] == "query")
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(params.contains(&"fieldValidation"), "{params:?}");
    assert!(params.contains(&"fieldManager"), "{params:?}");
    let content = &patch["requestBody"]["content"];
    assert!(content["application/strategic-merge-patch+json"].is_object());
    assert!(content["application/apply-patch+yaml"].is_object());
    for method in ["get", "put", "delete"] {
        assert!(item[method].is_object(), "{method}");
    }
    let collection = &doc["paths"]["/api/v1/namespaces/{namespace}/pods"];
    assert_eq!(collection["get"]["x-kubernetes-action"], "list");
    assert_eq!(collection["get"]["operationId"], "listCoreV1NamespacedPod");
    assert_eq!(
        collection["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/io.k8s.api.core.v1.Pod"
    );
    assert!(doc["paths"]["/api/v1/pods"]["get"].is_object());
    assert!(doc["paths"]["/api/v1/nodes/{name}/status"]["patch"].is_object());
    assert_eq!(
        doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/binding"]["post"]["x-kubernetes-group-version-kind"]
            ["kind"],
        "Binding"
    );
    // Every reference resolves within the document.
    let text = serde_json::to_string(&doc).unwrap();
    for piece in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = piece.split('"').next().unwrap();
        assert!(schemas[name].is_object(), "dangling reference {name}");
    }
}

#[tokio::test]
async fn v3_scale_subresource_speaks_autoscaling_scale() {
    let ts = TestServer::new().await;
    let doc = fetch_json(&ts, "/openapi/v3/apis/apps/v1").await;
    let scale = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"];
    assert_eq!(
        scale["put"]["x-kubernetes-group-version-kind"],
        serde_json::json!({"group": "autoscaling", "kind": "Scale", "version": "v1"})
    );
    assert!(doc["components"]["schemas"]["io.k8s.api.autoscaling.v1.Scale"].is_object());
    assert!(doc["components"]["schemas"]["io.k8s.api.core.v1.Pod"].is_null());
    assert!(doc["components"]["schemas"]["io.k8s.api.core.v1.PodTemplateSpec"].is_object());
}

#[tokio::test]
async fn v2_document_lists_every_group() {
    let ts = TestServer::new().await;
    let doc = fetch_json(&ts, "/openapi/v2").await;
    assert_eq!(doc["swagger"], "2.0");
    let defs = &doc["definitions"];
    assert_eq!(
        defs["io.k8s.api.apps.v1.Deployment"]["x-kubernetes-group-version-kind"][0]["kind"],
        "Deployment"
    );
    assert_eq!(
        defs["io.k8s.api.core.v1.Pod"]["properties"]["spec"]["$ref"],
        "#/definitions/io.k8s.api.core.v1.PodSpec"
    );
    let patch = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
    assert!(
        patch["consumes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "application/strategic-merge-patch+json")
    );
    assert!(strings(&patch["parameters"], "name").contains(&"fieldValidation"));
    let proto = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
    let (status, headers, body) = fetch(&ts, "/openapi/v2", &[("accept", proto)]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        headers["content-type"],
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    );
    // Protobuf: field 1 (swagger) comes first, as the string "2.0".
    assert_eq!(&body[..5], b"\x0a\x032.0");
    assert!(body.windows(23).any(|w| w == b"io.k8s.api.core.v1.Pod\x12"));
}

/// kubectl validates create-only kinds (the reviews) against these
/// schemas on the client, so what they require is what a user must write.
#[tokio::test]
async fn schemas_require_what_upstream_requires_and_never_metadata() {
    let ts = TestServer::new().await;
    let v2 = fetch_json(&ts, "/openapi/v2").await;
    let v3 = fetch_json(&ts, "/openapi/v3/apis/authorization.k8s.io/v1").await;
    let ssar = "io.k8s.api.authorization.v1.SelfSubjectAccessReview";
    for defs in [&v2["definitions"], &v3["components"]["schemas"]] {
        assert_eq!(defs[ssar]["required"], serde_json::json!(["spec"]));
    }
    let defs = &v2["definitions"];
    assert_eq!(defs["io.k8s.api.core.v1.Pod"].get("required"), None);
    assert_eq!(
        defs["io.k8s.api.core.v1.Binding"]["required"],
        serde_json::json!(["target"])
    );
    let requiring: Vec<&String> = defs
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, d)| {
            d["required"]
                .as_array()
                .is_some_and(|r| r.contains(&serde_json::json!("metadata")))
        })
        .map(|(name, _)| name)
        .collect();
    assert!(requiring.is_empty(), "require metadata: {requiring:?}");
}

#[tokio::test]
async fn custom_resources_appear_once_their_crd_is_served() {
    let ts = TestServer::new().await;
    let crd = serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.org"},
        "spec": {
            "group": "example.org",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]
        }
    });
    let (status, body) = ts
        .post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            crd,
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // The CRD's group version is listed once it is served.
    let index = ts
        .get_until("/openapi/v3", |index| {
            index["paths"]["apis/example.org/v1"]["serverRelativeURL"].is_string()
        })
        .await;
    let url = index["paths"]["apis/example.org/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let doc = fetch_json(&ts, &url).await;
    let schema = &doc["components"]["schemas"]["org.example.v1.Gadget"];
    assert_eq!(
        schema["x-kubernetes-group-version-kind"][0]["kind"],
        "Gadget"
    );
    let patch =
        &doc["paths"]["/apis/example.org/v1/namespaces/{namespace}/gadgets/{name}"]["patch"];
    assert!(strings(&patch["parameters"], "name").contains(&"fieldValidation"));
    let content = &patch["requestBody"]["content"];
    assert!(content["application/merge-patch+json"].is_object());
    assert!(content["application/strategic-merge-patch+json"].is_null());

    // Strict validation reports what the schema prunes.
    let (status, body) = ts
        .post(
            "/apis/example.org/v1/namespaces/default/gadgets?fieldValidation=Strict",
            serde_json::json!({"apiVersion": "example.org/v1", "kind": "Gadget",
                "metadata": {"name": "g"}, "spec": {"size": 1, "bogus": true}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        message_of(&body).ends_with("strict decoding error: unknown field \"spec.bogus\""),
        "{body}"
    );
}
