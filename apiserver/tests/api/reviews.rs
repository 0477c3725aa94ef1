//! The review APIs: access reviews answered by the authorizer chain, token
//! and self reviews by the authenticators; none of them stores anything.

use std::sync::Arc;

use http::{Method, StatusCode};
use serde_json::{Value, json};
use skiff_apiserver::authn::{Authenticator, UserInfo};

use crate::harness::{
    Client, Expect, TestServer, find_by, find_in, forbidden, message_of, refused,
};

const SAR: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
const SSAR: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
const SSRR: &str = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews";
const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
const WHOAMI: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";

fn lsar_path(namespace: &str) -> String {
    format!("/apis/authorization.k8s.io/v1/namespaces/{namespace}/localsubjectaccessreviews")
}

fn sar(kind: &str, spec: Value) -> Value {
    json!({"apiVersion": "authorization.k8s.io/v1", "kind": kind, "spec": spec})
}

fn list_secrets(namespace: &str) -> Value {
    json!({"verb": "list", "resource": "secrets", "namespace": namespace})
}

#[tokio::test]
async fn subject_access_review_answers_for_the_user_in_the_spec_and_stores_nothing() {
    let s = TestServer::new().await;
    let before = s.keys().await;
    let spec = json!({"user": "root-ish", "groups": ["system:masters"],
        "resourceAttributes": list_secrets("default")});
    let body = s
        .created(SAR, sar("SubjectAccessReview", spec.clone()))
        .await;
    assert_eq!(body["kind"], "SubjectAccessReview");
    // The spec comes back as sent, with the answer in status.
    assert_eq!(body["spec"], spec);
    assert_eq!(body["status"]["allowed"], true, "{body}");
    assert!(body["status"].get("denied").is_none(), "{body}");
    assert_eq!(s.keys().await, before, "a review must not be stored");

    // A review is only ever created.
    s.get(SAR).await.expect_failure(405, "MethodNotAllowed");
    s.get_not_found(&format!("{SAR}/x")).await;
    s.get(&format!("{SAR}?watch=1"))
        .await
        .expect_failure(405, "MethodNotAllowed");
}

#[tokio::test]
async fn subject_access_reviews_are_validated_as_upstream() {
    let s = TestServer::new().await;
    refused(
        s.post(
            SAR,
            sar(
                "SubjectAccessReview",
                json!({"resourceAttributes": list_secrets("a")}),
            ),
        )
        .await,
        422,
        "Invalid",
        "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.user: Invalid value: \"\": at least one of user or group must be specified",
    );
    let body = s
        .post(SAR, sar("SubjectAccessReview", json!({"user": "alice"})))
        .await
        .expect_failure(422, "Invalid");
    assert_eq!(
        body["details"]["causes"][0]["field"], "spec.resourceAttributes",
        "{body}"
    );
    let mut named = sar(
        "SubjectAccessReview",
        json!({"user": "alice", "resourceAttributes": list_secrets("a")}),
    );
    named["metadata"] = json!({"name": "keep-me"});
    let body = s.post(SAR, named).await.expect_failure(422, "Invalid");
    assert_eq!(body["details"]["causes"][0]["field"], "metadata", "{body}");
    // No spec at all is an empty one, with both complaints.
    let body = s
        .post(
            SAR,
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview"}),
        )
        .await
        .expect_failure(422, "Invalid");
    assert_eq!(body["details"]["causes"].as_array().unwrap().len(), 2);
    let body = s
        .post(SAR, sar("SubjectAccessReview", json!("nope")))
        .await
        .expect_failure(400, "BadRequest");
    assert!(
        message_of(&body).starts_with("SubjectAccessReview in version \"v1\" cannot be handled"),
        "{body}"
    );
}

#[tokio::test]
async fn local_subject_access_review_must_ask_about_its_own_namespace() {
    let s = TestServer::new().await;
    let spec = |ns: &str| json!({"user": "m", "groups": ["system:masters"], "resourceAttributes": list_secrets(ns)});
    let body = s
        .created(
            &lsar_path("default"),
            sar("LocalSubjectAccessReview", spec("default")),
        )
        .await;
    assert_eq!(body["metadata"]["namespace"], "default");
    assert_eq!(body["status"]["allowed"], true);

    refused(
        s.post(
            &lsar_path("default"),
            sar("LocalSubjectAccessReview", spec("kube-system")),
        )
        .await,
        422,
        "Invalid",
        "LocalSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes.namespace: Invalid value: \"kube-system\": must match metadata.namespace",
    );

    let mut elsewhere = sar("LocalSubjectAccessReview", spec("default"));
    elsewhere["metadata"] = json!({"namespace": "kube-system"});
    s.post(&lsar_path("default"), elsewhere)
        .await
        .expect_failure(400, "BadRequest");

    s.post(
        &lsar_path("default"),
        sar(
            "LocalSubjectAccessReview",
            json!({"user": "m", "nonResourceAttributes": {"path": "/healthz", "verb": "get"}}),
        ),
    )
    .await
    .expect_failure(422, "Invalid");
    // There is no cluster-wide collection of local reviews.
    s.post(
        "/apis/authorization.k8s.io/v1/localsubjectaccessreviews",
        sar("LocalSubjectAccessReview", spec("default")),
    )
    .await
    .expect_code(StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn self_reviews_answer_for_the_caller() {
    let s = TestServer::new().await;
    let body = s.created(
            SSAR,
            sar(
                "SelfSubjectAccessReview",
                json!({"resourceAttributes": {"verb": "create", "resource": "pods", "namespace": "default"}}),
            ),
        ).await;
    assert_eq!(body["status"]["allowed"], true, "{body}");
    s.post(SSAR, sar("SelfSubjectAccessReview", json!({})))
        .await
        .expect_failure(422, "Invalid");

    let body = s
        .created(
            SSRR,
            sar("SelfSubjectRulesReview", json!({"namespace": "default"})),
        )
        .await;
    assert_eq!(body["spec"]["namespace"], "default");
    // A master may do anything, through the bootstrap cluster-admin
    // binding alone: upstream's system:masters authorizer lists no rules of
    // its own, so each of these is listed once (kubectl prints one row).
    let count = |rules: &str, field: &str| {
        let rules = body["status"][rules].as_array().expect("rules");
        rules
            .iter()
            .filter(|r| r["verbs"] == json!(["*"]) && r[field] == json!(["*"]))
            .count()
    };
    assert_eq!(count("resourceRules", "resources"), 1, "{body}");
    assert_eq!(count("nonResourceRules", "nonResourceURLs"), 1, "{body}");
    refused(
        s.post(SSRR, sar("SelfSubjectRulesReview", json!({}))).await,
        400,
        "BadRequest",
        "no namespace on request",
    );

    let alice = UserInfo {
        uid: "a-1".into(),
        extra: [("scopes".to_string(), vec!["x".to_string()])].into(),
        ..UserInfo::new("alice", ["dev".to_string()])
    };
    let body = s
        .post_as(
            &alice,
            WHOAMI,
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
        )
        .await
        .expect_code(StatusCode::CREATED);
    let info = &body["status"]["userInfo"];
    assert_eq!(info["username"], "alice");
    assert_eq!(info["uid"], "a-1");
    assert_eq!(info["groups"], json!(["dev", "system:authenticated"]));
    assert_eq!(info["extra"]["scopes"], json!(["x"]));
    assert!(body["metadata"]["creationTimestamp"].is_string(), "{body}");
}

fn token_review(token: &str, audiences: Option<Value>) -> Value {
    let mut spec = json!({"token": token});
    if let Some(a) = audiences {
        spec["audiences"] = a;
    }
    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec})
}

#[tokio::test]
async fn token_review_authenticates_the_servers_own_tokens_only() {
    let s = TestServer::new().await;
    s.created(
        "/api/v1/namespaces/default/serviceaccounts",
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}}),
    )
    .await;
    let body = s
        .created(
            "/api/v1/namespaces/default/serviceaccounts/robot/token",
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}),
        )
        .await;
    let jwt = body["status"]["token"].as_str().unwrap().to_string();

    let before = s.keys().await;
    let body = s.created(TOKEN_REVIEWS, token_review(&jwt, None)).await;
    let status = &body["status"];
    assert_eq!(status["authenticated"], true, "{body}");
    assert_eq!(
        status["user"]["username"],
        "system:serviceaccount:default:robot"
    );
    assert_eq!(
        status["user"]["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ])
    );
    assert!(status.get("audiences").is_none(), "{body}");
    assert_eq!(s.keys().await, before);

    // A token for another audience is refused when the server's is asked
    // for, and the matching audience is reported when asked for.
    let (_, body) = s
        .post(
            TOKEN_REVIEWS,
            token_review(&jwt, Some(json!(["https://elsewhere"]))),
        )
        .await;
    assert_eq!(body["status"]["authenticated"], false, "{body}");

    let mut forged = jwt.clone();
    forged.pop();
    forged.push(if jwt.ends_with('A') { 'B' } else { 'A' });
    for bad in [forged.as_str(), "not-a-token"] {
        let body = s.created(TOKEN_REVIEWS, token_review(bad, None)).await;
        assert_eq!(body["status"]["authenticated"], false, "{body}");
        assert!(body["status"].get("user").is_none(), "{body}");
        assert_eq!(body["status"]["error"], "invalid bearer token");
    }
    s.post(TOKEN_REVIEWS, token_review("", None))
        .await
        .expect_failure(400, "BadRequest");
}

#[tokio::test]
async fn token_review_uses_the_listeners_authenticator_once_set() {
    let s = TestServer::new().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens.csv");
    std::fs::write(&path, "sekret,carol,c-1,\"ops\"\n").unwrap();
    let (_, body) = s.post(TOKEN_REVIEWS, token_review("sekret", None)).await;
    assert_eq!(body["status"]["authenticated"], false, "{body}");

    let authn = Authenticator::from_token_file(&path)
        .unwrap()
        .with_service_account_tokens(s.server.service_account_tokens());
    s.server.set_authenticator(Arc::new(authn));
    let (_, body) = s
        .post(
            TOKEN_REVIEWS,
            token_review(
                "sekret",
                Some(json!(["https://kubernetes.default.svc.cluster.local"])),
            ),
        )
        .await;
    let status = &body["status"];
    assert_eq!(status["authenticated"], true, "{body}");
    assert_eq!(status["user"]["username"], "carol");
    assert_eq!(status["user"]["uid"], "c-1");
    assert_eq!(
        status["audiences"],
        json!(["https://kubernetes.default.svc.cluster.local"])
    );
    // File tokens are for this API server only.
    let (_, body) = s
        .post(
            TOKEN_REVIEWS,
            token_review("sekret", Some(json!(["https://elsewhere"]))),
        )
        .await;
    assert_eq!(body["status"]["authenticated"], false, "{body}");
}

#[tokio::test]
async fn reviews_are_discoverable_as_create_only() {
    let s = TestServer::new().await;
    let doc = s.get_ok("/apis/authorization.k8s.io/v1").await;
    for (name, namespaced) in [
        ("subjectaccessreviews", false),
        ("localsubjectaccessreviews", true),
        ("selfsubjectaccessreviews", false),
        ("selfsubjectrulesreviews", false),
    ] {
        let r = find_by(&doc["resources"], "name", name);
        assert_eq!(r["verbs"], json!(["create"]), "{name}");
        assert_eq!(r["namespaced"], namespaced, "{name}");
    }
    let (_, doc) = s.get("/apis/authentication.k8s.io/v1").await;
    assert_eq!(
        find_by(&doc["resources"], "name", "tokenreviews")["verbs"],
        json!(["create"])
    );
    assert_eq!(
        find_by(&doc["resources"], "name", "selfsubjectreviews")["kind"],
        "SelfSubjectReview"
    );

    let (_, aggregated) = s
        .call_with_headers(
            &UserInfo::new("m", ["system:masters".to_string()]),
            Method::GET,
            "/apis",
            None,
            &[(
                "accept",
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            )],
        )
        .await;
    let group = find_in(
        &aggregated["items"],
        |g| g["metadata"]["name"] == "authorization.k8s.io",
        "authorization group",
    );
    let r = find_by(
        &group["versions"][0]["resources"],
        "resource",
        "subjectaccessreviews",
    );
    assert_eq!(r["verbs"], json!(["create"]));
    assert_eq!(r["scope"], "Cluster");

    let doc = s.get_ok("/openapi/v3/apis/authorization.k8s.io/v1").await;
    let paths = doc["paths"].as_object().unwrap();
    let sar = &paths["/apis/authorization.k8s.io/v1/subjectaccessreviews"];
    assert!(sar["post"].is_object() && sar.get("get").is_none(), "{sar}");
    assert!(paths.contains_key(
        "/apis/authorization.k8s.io/v1/namespaces/{namespace}/localsubjectaccessreviews"
    ));
    assert!(
        !paths.keys().any(|p| p.ends_with("{name}")
            || p.ends_with("/localsubjectaccessreviews") && !p.contains("{namespace}")),
        "{paths:?}"
    );
}

fn whoami_body() -> Value {
    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
}

/// Asks who `user` is, with `headers` (impersonation) on the request.
async fn whoami(s: &TestServer, user: &UserInfo, headers: &[(&str, &str)]) -> (StatusCode, Value) {
    s.call_with_headers(user, Method::POST, WHOAMI, Some(whoami_body()), headers)
        .await
}

#[tokio::test]
async fn a_master_may_act_as_a_service_account_and_handlers_see_only_that() {
    let s = TestServer::new().await;
    let master = UserInfo::new("boss", ["system:masters".to_string()]);
    let body = whoami(
        &s,
        &master,
        &[
            ("Impersonate-User", "system:serviceaccount:default:x"),
            ("Impersonate-Extra-Reason", "debugging"),
        ],
    )
    .await
    .expect_code(StatusCode::CREATED);
    let info = &body["status"]["userInfo"];
    assert_eq!(info["username"], "system:serviceaccount:default:x");
    assert_eq!(
        info["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ])
    );
    assert_eq!(info["extra"]["reason"], json!(["debugging"]));

    // The request itself is authorized as the acting user and groups.
    s.call_with_headers(
        &master,
        Method::POST,
        "/api/v1/namespaces/default/configmaps",
        Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "by-bob"}})),
        &[
            ("Impersonate-User", "bob"),
            ("Impersonate-Group", "system:masters"),
        ],
    )
    .await
    .expect_code(StatusCode::CREATED);

    // Groups without a user are refused before anything runs.
    whoami(&s, &master, &[("Impersonate-Group", "system:masters")])
        .await
        .expect_failure(500, "InternalError");
}

/// Tests that need RBAC behind the chain (a plain user is refused).
mod with_rbac {
    use super::*;

    fn bob() -> UserInfo {
        UserInfo::new("bob", Vec::new())
    }

    #[tokio::test]
    async fn a_review_answers_no_for_a_plain_user_and_only_admins_may_ask_about_others() {
        let s = TestServer::new().await;
        let spec = json!({"user": "nobody", "groups": ["system:authenticated"],
            "resourceAttributes": list_secrets("default")});
        let body = s
            .created(SAR, sar("SubjectAccessReview", spec.clone()))
            .await;
        assert_eq!(body["status"]["allowed"], false, "{body}");
        // RBAC has no opinion rather than an explicit deny.
        assert!(body["status"].get("denied").is_none(), "{body}");

        // Asking about someone else is a privilege of its own...
        forbidden(
            s.post_as(&bob(), SAR, sar("SubjectAccessReview", spec))
                .await,
            "subjectaccessreviews.authorization.k8s.io is forbidden: User \"bob\" cannot create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope",
        );
        // ...asking about oneself is not.
        let body = s
            .post_as(
                &bob(),
                SSAR,
                sar(
                    "SelfSubjectAccessReview",
                    json!({"resourceAttributes": {"verb": "get", "resource": "secrets", "namespace": "default"}}),
                ),
            )
            .await
            .expect_code(StatusCode::CREATED);
        assert_eq!(body["status"]["allowed"], false, "{body}");
        let body = s
            .post_as(
                &bob(),
                SSRR,
                sar("SelfSubjectRulesReview", json!({"namespace": "default"})),
            )
            .await
            .expect_code(StatusCode::CREATED);
        let rules = body["status"]["resourceRules"].as_array().unwrap();
        assert!(
            rules.iter().any(|r| r["resources"]
                .as_array()
                .is_some_and(|rs| rs.contains(&json!("selfsubjectaccessreviews")))),
            "system:basic-user's rules: {body}"
        );
        assert!(
            !rules.iter().any(|r| r["verbs"] == json!(["*"])),
            "no wildcard for bob: {body}"
        );
    }

    #[tokio::test]
    async fn impersonation_needs_the_impersonate_grant_for_each_claim() {
        let s = TestServer::new().await;
        let as_alice = [("Impersonate-User", "alice")];
        forbidden(
            s.call_with_headers(&bob(), Method::POST, WHOAMI, Some(whoami_body()), &as_alice)
                .await,
            "users \"alice\" is forbidden: User \"bob\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope",
        );

        s.created(
                "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                    "metadata": {"name": "impersonate-alice"},
                    "rules": [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": ["alice"]}]}),
            ).await;
        s.grant("bob", "impersonate-alice").await;

        let body = s
            .call_with_headers(&bob(), Method::POST, WHOAMI, Some(whoami_body()), &as_alice)
            .await
            .expect_code(StatusCode::CREATED);
        assert_eq!(body["status"]["userInfo"]["username"], "alice");
        // The grant names alice only, and no group.
        whoami(&s, &bob(), &[("Impersonate-User", "carol")])
            .await
            .expect_failure(403, "Forbidden");
        let body = s
            .call_with_headers(
                &bob(),
                Method::GET,
                "/api/v1/secrets",
                None,
                &[
                    ("Impersonate-User", "alice"),
                    ("Impersonate-Group", "system:masters"),
                ],
            )
            .await
            .expect_failure(403, "Forbidden");
        assert!(
            body["message"].as_str().unwrap().starts_with(
                "groups \"system:masters\" is forbidden: User \"bob\" cannot impersonate"
            ),
            "{body}"
        );
        // Once switched, the request is alice's, who may not list secrets.
        s.call_with_headers(&bob(), Method::GET, "/api/v1/secrets", None, &as_alice)
            .await
            .expect_mentions(403, "Forbidden", &["User \"alice\" cannot list"]);
    }

    /// A caller without credentials is asked to authenticate (401), but an
    /// admin acting as `system:anonymous` (`kubectl --as=system:anonymous`)
    /// is told what anonymous may not do, as upstream answers.
    #[tokio::test]
    async fn acting_as_anonymous_is_forbidden_not_unauthenticated() {
        let s = TestServer::new().await;
        let master = UserInfo::new("boss", ["system:masters".to_string()]);
        const PODS: &str = "/api/v1/namespaces/default/pods";
        forbidden(
            s.call_with_headers(
                &master,
                Method::GET,
                PODS,
                None,
                &[("Impersonate-User", "system:anonymous")],
            )
            .await,
            "pods is forbidden: User \"system:anonymous\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\"",
        );
        s.call_with_headers(&UserInfo::anonymous(), Method::GET, PODS, None, &[])
            .await
            .expect_failure(401, "Unauthorized");
    }
}
