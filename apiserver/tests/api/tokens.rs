//! Service-account tokens: TokenRequest, the API access volume admission
//! adds to pods, and authentication with the issued tokens.

use http::StatusCode;
use serde_json::{Value, json};
use skiff_apiserver::authn::{Authenticated, Authenticator};

use crate::harness::{Client, Expect, TestServer, bearer};

const MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

fn pod(name: &str, account: &str, automount: Option<bool>) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"serviceAccountName": account,
                 "initContainers": [{"name": "init", "image": "busybox"}],
                 "containers": [{"name": "main", "image": "busybox"}]}});
    if let Some(a) = automount {
        pod["spec"]["automountServiceAccountToken"] = json!(a);
    }
    pod
}

async fn service_account(server: &TestServer, name: &str, automount: Option<bool>) {
    let mut sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}});
    if let Some(a) = automount {
        sa["automountServiceAccountToken"] = json!(a);
    }
    server
        .created("/api/v1/namespaces/default/serviceaccounts", sa)
        .await;
}

/// A TokenRequest spec bound to the `kind` object `name` (to its `uid`
/// when given): a token that stops working once the object is gone.
fn bound_to(kind: &str, name: &str, uid: Option<&str>) -> Value {
    let mut object = json!({"kind": kind, "apiVersion": "v1", "name": name});
    if let Some(uid) = uid {
        object["uid"] = json!(uid);
    }
    json!({"boundObjectRef": object})
}

async fn request_token(server: &TestServer, account: &str, spec: Value) -> (StatusCode, Value) {
    server
        .post(
            &format!("/api/v1/namespaces/default/serviceaccounts/{account}/token"),
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}),
        )
        .await
}

#[tokio::test]
async fn pods_get_an_api_access_volume_unless_they_or_their_account_opt_out() {
    let server = TestServer::new().await;
    // Without its account a pod gets no credentials.
    let (_, orphan) = server
        .post(
            "/api/v1/namespaces/default/pods",
            pod("p0", "default", None),
        )
        .await;
    assert!(orphan["spec"]["volumes"].is_null(), "{orphan}");
    service_account(&server, "default", None).await;
    service_account(&server, "quiet", Some(false)).await;
    let created = server
        .created(
            "/api/v1/namespaces/default/pods",
            pod("p1", "default", None),
        )
        .await;
    let volumes = created["spec"]["volumes"].as_array().expect("volumes");
    assert_eq!(volumes.len(), 1, "{created}");
    let volume = &volumes[0];
    let name = volume["name"].as_str().unwrap();
    assert!(name.starts_with("kube-api-access-"), "{name}");
    let sources = volume["projected"]["sources"].as_array().unwrap();
    assert_eq!(sources[0]["serviceAccountToken"]["path"], "token");
    assert_eq!(sources[1]["configMap"]["name"], "kube-root-ca.crt");
    assert_eq!(
        sources[2]["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
    for list in ["initContainers", "containers"] {
        let mount = &created["spec"][list][0]["volumeMounts"][0];
        assert_eq!(mount["name"], name);
        assert_eq!(mount["mountPath"], MOUNT_PATH);
        assert_eq!(mount["readOnly"], true);
    }

    let (_, opted_out) = server
        .post(
            "/api/v1/namespaces/default/pods",
            pod("p2", "default", Some(false)),
        )
        .await;
    assert!(opted_out["spec"]["volumes"].is_null(), "{opted_out}");
    let (_, quiet) = server
        .post("/api/v1/namespaces/default/pods", pod("p3", "quiet", None))
        .await;
    assert!(quiet["spec"]["volumes"].is_null(), "{quiet}");
    // The pod's own choice wins over its account's.
    let (_, forced) = server
        .post(
            "/api/v1/namespaces/default/pods",
            pod("p4", "quiet", Some(true)),
        )
        .await;
    assert_eq!(forced["spec"]["volumes"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn bound_tokens_authenticate_as_the_account_until_the_pod_is_gone() {
    let server = TestServer::new().await;
    service_account(&server, "builder", None).await;
    let (_, created) = server
        .post(
            "/api/v1/namespaces/default/pods",
            pod("worker", "builder", None),
        )
        .await;
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    let issued = request_token(&server, "builder", bound_to("Pod", "worker", Some(&uid)))
        .await
        .expect_code(StatusCode::CREATED);
    assert_eq!(issued["kind"], "TokenRequest");
    assert_eq!(issued["spec"]["expirationSeconds"], 3600);
    assert!(issued["status"]["expirationTimestamp"].is_string());
    let token = issued["status"]["token"].as_str().unwrap().to_string();

    let authn = Authenticator::default()
        .with_service_account_tokens(server.server.service_account_tokens());
    let Authenticated::User(user) = authn.authenticate(&bearer(&token), "/api", None) else {
        panic!("the token does not authenticate");
    };
    assert_eq!(user.name, "system:serviceaccount:default:builder");
    for group in [
        "system:serviceaccounts",
        "system:serviceaccounts:default",
        "system:authenticated",
    ] {
        assert!(user.groups.iter().any(|g| g == group), "{group}: {user:?}");
    }
    // Tampering breaks the signature.
    let middle = token.len() - 20;
    let swapped = if &token[middle..=middle] == "A" {
        "B"
    } else {
        "A"
    };
    let forged = format!("{}{swapped}{}", &token[..middle], &token[middle + 1..]);
    assert_eq!(
        authn.authenticate(&bearer(&forged), "/api", None),
        Authenticated::Rejected
    );

    let (code, body) = server
        .delete("/api/v1/namespaces/default/pods/worker?gracePeriodSeconds=0")
        .await;
    assert!(code.is_success(), "{body}");
    assert_eq!(
        authn.authenticate(&bearer(&token), "/api", None),
        Authenticated::Rejected,
        "a token bound to a deleted pod must stop working"
    );
}

/// As upstream (1.32+): a pod-bound token names the node its pod runs on
/// (as user extras once it authenticates), and a token may be bound to a
/// Node, which it stops working without.
#[tokio::test]
async fn tokens_carry_the_node_and_may_be_bound_to_one() {
    let server = TestServer::new().await;
    service_account(&server, "builder", None).await;
    let node = server
        .created("/api/v1/nodes", json!({"metadata": {"name": "n1"}}))
        .await;
    let node_uid = node["metadata"]["uid"].as_str().unwrap().to_string();
    let mut placed = pod("placed", "builder", None);
    placed["spec"]["nodeName"] = json!("n1");
    server
        .created("/api/v1/namespaces/default/pods", placed)
        .await;
    let authn = Authenticator::default()
        .with_service_account_tokens(server.server.service_account_tokens());
    let user_of = |token: &str| match authn.authenticate(&bearer(token), "/api", None) {
        Authenticated::User(user) => Some(user),
        _ => None,
    };
    let token_of = |issued: &Value| issued["status"]["token"].as_str().unwrap().to_string();

    let issued = request_token(&server, "builder", bound_to("Pod", "placed", None))
        .await
        .expect_code(StatusCode::CREATED);
    let user = user_of(&token_of(&issued)).expect("the pod-bound token authenticates");
    assert_eq!(
        user.extra.get("authentication.kubernetes.io/node-name"),
        Some(&vec!["n1".to_string()])
    );
    assert_eq!(
        user.extra.get("authentication.kubernetes.io/node-uid"),
        Some(&vec![node_uid.clone()])
    );
    assert_eq!(
        user.extra.get("authentication.kubernetes.io/pod-name"),
        Some(&vec!["placed".to_string()])
    );

    let issued = request_token(&server, "builder", bound_to("Node", "n1", Some(&node_uid)))
        .await
        .expect_code(StatusCode::CREATED);
    let node_token = token_of(&issued);
    let user = user_of(&node_token).expect("the node-bound token authenticates");
    assert!(
        !user
            .extra
            .contains_key("authentication.kubernetes.io/pod-name")
    );
    assert_eq!(
        user.extra.get("authentication.kubernetes.io/node-name"),
        Some(&vec!["n1".to_string()])
    );
    request_token(
        &server,
        "builder",
        bound_to("Node", "n1", Some("not-its-uid")),
    )
    .await
    .expect_failure(409, "Conflict");
    let (code, body) = server.delete("/api/v1/nodes/n1").await;
    assert!(code.is_success(), "{body}");
    assert!(
        user_of(&node_token).is_none(),
        "a token bound to a deleted node must stop working"
    );
}

#[tokio::test]
async fn token_requests_are_checked() {
    let server = TestServer::new().await;
    service_account(&server, "builder", None).await;
    let refusals = [
        ("builder", json!({"expirationSeconds": 60}), 422, "Invalid"),
        ("nobody", json!({}), 404, "NotFound"),
        ("builder", bound_to("Pod", "ghost", None), 404, "NotFound"),
        ("builder", bound_to("ConfigMap", "x", None), 422, "Invalid"),
    ];
    for (account, spec, code, reason) in refusals {
        request_token(&server, account, spec)
            .await
            .expect_failure(code, reason);
    }

    // A token for another audience is not accepted by the API server.
    let issued = request_token(
        &server,
        "builder",
        json!({"audiences": ["vault"], "expirationSeconds": 600}),
    )
    .await
    .expect_code(StatusCode::CREATED);
    assert_eq!(issued["spec"]["audiences"], json!(["vault"]));
    let authn = Authenticator::default()
        .with_service_account_tokens(server.server.service_account_tokens());
    let token = issued["status"]["token"].as_str().unwrap();
    assert_eq!(
        authn.authenticate(&bearer(token), "/api", None),
        Authenticated::Rejected
    );
    // Deleting the account revokes its tokens.
    let (_, issued) = request_token(&server, "builder", json!({})).await;
    let token = issued["status"]["token"].as_str().unwrap().to_string();
    assert!(matches!(
        authn.authenticate(&bearer(&token), "/api", None),
        Authenticated::User(_)
    ));
    server
        .delete("/api/v1/namespaces/default/serviceaccounts/builder")
        .await;
    assert_eq!(
        authn.authenticate(&bearer(&token), "/api", None),
        Authenticated::Rejected
    );
}

#[tokio::test]
async fn relying_parties_verify_tokens_with_the_published_key() {
    use skiff_apiserver::authn::UserInfo;
    let s = TestServer::new().await;
    service_account(&s, "bot", None).await;
    let (code, answer) = request_token(&s, "bot", json!({"audiences": ["vault"]})).await;
    assert_eq!(code, StatusCode::CREATED, "{answer}");
    let token = answer["status"]["token"].as_str().unwrap().to_string();

    // Any service account may read the discovery documents.
    let account = UserInfo::new(
        "system:serviceaccount:default:other",
        vec![
            "system:serviceaccounts".to_string(),
            "system:serviceaccounts:default".to_string(),
            "system:authenticated".to_string(),
        ],
    );
    let (code, config) = s
        .get_as(&account, "/.well-known/openid-configuration")
        .await;
    assert_eq!(code, StatusCode::OK, "{config}");
    assert_eq!(
        config["issuer"],
        "https://kubernetes.default.svc.cluster.local"
    );
    assert!(
        config["jwks_uri"]
            .as_str()
            .unwrap()
            .ends_with("/openid/v1/jwks"),
        "{config}"
    );
    let (code, keys) = s.get_as(&account, "/openid/v1/jwks").await;
    assert_eq!(code, StatusCode::OK, "{keys}");

    // The published key verifies the token, with the issuer and audience
    // it was asked for, as a relying party outside the cluster checks it.
    let key = &keys["keys"][0];
    assert_eq!(
        (key["kty"].as_str(), key["alg"].as_str()),
        (Some("EC"), Some("ES256"))
    );
    let decoding = jsonwebtoken::DecodingKey::from_ec_components(
        key["x"].as_str().unwrap(),
        key["y"].as_str().unwrap(),
    )
    .unwrap();
    let header = jsonwebtoken::decode_header(&token).unwrap();
    assert_eq!(header.kid.as_deref(), key["kid"].as_str());
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    validation.set_issuer(&[config["issuer"].as_str().unwrap()]);
    validation.set_audience(&["vault"]);
    let claims = jsonwebtoken::decode::<Value>(&token, &decoding, &validation)
        .unwrap()
        .claims;
    assert_eq!(claims["sub"], "system:serviceaccount:default:bot");
    // A token with its signature altered does not verify.
    let mut forged = token.clone();
    forged.pop();
    forged.push(if token.ends_with('A') { 'B' } else { 'A' });
    assert!(jsonwebtoken::decode::<Value>(&forged, &decoding, &validation).is_err());

    // Anonymous callers are not told, unless an admin binds them.
    for path in ["/.well-known/openid-configuration", "/openid/v1/jwks"] {
        let (code, _) = s.get_as(&UserInfo::anonymous(), path).await;
        assert_eq!(code, StatusCode::UNAUTHORIZED, "{path}");
    }
}
