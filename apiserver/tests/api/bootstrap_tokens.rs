//! Bootstrap tokens and the server token from the attacker's side: a valid
//! token authenticates as its bootstrap identity, which may ask for node
//! client certificates and little else; an expired token, a wrong secret,
//! a token not allowed for authentication, a deleted one and a wrong server
//! secret are all refused. `/cacerts` is public and byte-exact.

use http::{Method, StatusCode};
use serde_json::{Value, json};
use skiff_apiserver::authn::{Authenticated, Authenticator, UserInfo};
use skiff_apiserver::bootstrap_tokens::{self, NewToken};

use crate::harness::{Client, Expect, TestServer, bearer};

async fn create_token(server: &TestServer, token: &NewToken) {
    server
        .created(
            "/api/v1/namespaces/kube-system/secrets",
            bootstrap_tokens::secret_object(token),
        )
        .await;
}

fn token(id: &str, secret: &str, usages: &[&str], expiration: Option<&str>) -> NewToken {
    NewToken {
        id: id.into(),
        secret: secret.into(),
        expiration: expiration.map(|e| e.parse().unwrap()),
        usages: usages.iter().map(|u| u.to_string()).collect(),
        description: Some("test".into()),
        groups: Vec::new(),
    }
}

fn user_of(authn: &Authenticator, token: &str) -> Option<UserInfo> {
    match authn.authenticate(&bearer(token), "/api", None) {
        Authenticated::User(user) => Some(user),
        Authenticated::Rejected => None,
        Authenticated::Anonymous => panic!("a bearer token cannot be anonymous"),
    }
}

#[tokio::test]
async fn bootstrap_tokens_authenticate_until_they_expire_or_go() {
    let server = TestServer::new().await;
    let authn = Authenticator::default()
        .with_bootstrap_tokens(server.server.bootstrap_tokens(Some("s3rv3rs3cr3t".into())));
    create_token(
        &server,
        &token(
            "abcdef",
            "0123456789abcdef",
            &["authentication", "signing"],
            Some("2099-01-01T00:00:00Z"),
        ),
    )
    .await;
    create_token(
        &server,
        &token(
            "expird",
            "0123456789abcdef",
            &["authentication"],
            Some("2001-01-01T00:00:00Z"),
        ),
    )
    .await;
    create_token(
        &server,
        &token("signon", "0123456789abcdef", &["signing"], None),
    )
    .await;

    let user = user_of(&authn, "abcdef.0123456789abcdef").expect("a valid token");
    assert_eq!(user.name, "system:bootstrap:abcdef");
    assert_eq!(
        user.groups,
        ["system:bootstrappers", "system:authenticated"]
    );
    for (what, bad) in [
        ("wrong secret", "abcdef.0123456789abcdeX"),
        ("expired", "expird.0123456789abcdef"),
        ("usage missing", "signon.0123456789abcdef"),
        ("unknown id", "zzzzzz.0123456789abcdef"),
        ("wrong server secret", "server:guess"),
    ] {
        assert!(user_of(&authn, bad).is_none(), "{what} was accepted");
    }
    let server_user = user_of(&authn, "server:s3rv3rs3cr3t").expect("the server token");
    assert_eq!(server_user.name, bootstrap_tokens::SERVER_TOKEN_USER);
    assert!(
        server_user
            .groups
            .iter()
            .any(|g| g == "system:bootstrappers")
    );

    // What a bootstrap identity may do: ask for certificates, not read the
    // cluster.
    server
        .get_as(&user, "/api/v1/namespaces/kube-system/secrets")
        .await
        .expect_code(StatusCode::FORBIDDEN);
    server
        .get_as(&user, "/api/v1/pods")
        .await
        .expect_code(StatusCode::FORBIDDEN);
    server
        .get_as(
            &user,
            "/apis/certificates.k8s.io/v1/certificatesigningrequests",
        )
        .await
        .expect_code(StatusCode::OK);
    let review = json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user.name, "groups": user.groups, "resourceAttributes": {
            "group": "certificates.k8s.io", "resource": "certificatesigningrequests",
            "subresource": "nodeclient", "verb": "create"}}
    });
    let (_, answer) = server
        .post("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
        .await;
    assert_eq!(answer["status"]["allowed"], json!(true), "{answer}");

    // Deleting the Secret ends the token at once.
    let (code, body) = server
        .delete("/api/v1/namespaces/kube-system/secrets/bootstrap-token-abcdef")
        .await;
    assert!(code.is_success(), "{body}");
    assert!(user_of(&authn, "abcdef.0123456789abcdef").is_none());
}

#[tokio::test]
async fn extra_groups_must_stay_under_bootstrappers() {
    let server = TestServer::new().await;
    let authn =
        Authenticator::default().with_bootstrap_tokens(server.server.bootstrap_tokens(None));
    let mut good = token("grp001", "0123456789abcdef", &["authentication"], None);
    good.groups = vec!["system:bootstrappers:edge".into()];
    create_token(&server, &good).await;
    let mut bad = token("grp002", "0123456789abcdef", &["authentication"], None);
    bad.groups = vec!["system:masters".into()];
    create_token(&server, &bad).await;
    let user = user_of(&authn, "grp001.0123456789abcdef").unwrap();
    assert!(user.groups.iter().any(|g| g == "system:bootstrappers:edge"));
    assert!(user_of(&authn, "grp002.0123456789abcdef").is_none());
    // Without a server secret, no server token is accepted.
    assert!(user_of(&authn, "server:anything").is_none());
}

#[tokio::test]
async fn cacerts_is_public_and_exact() {
    let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    let server = TestServer::configured(|c| c.cacerts_pem = Some(pem.into())).await;
    let body = server
        .call_as(&UserInfo::anonymous(), Method::GET, "/cacerts", None)
        .await
        .expect_code(StatusCode::OK);
    assert_eq!(body, Value::String(pem.into()));
    let without = TestServer::new().await;
    without
        .call_as(&UserInfo::anonymous(), Method::GET, "/cacerts", None)
        .await
        .expect_code(StatusCode::NOT_FOUND);
}
