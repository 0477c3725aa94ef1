//! OpenID Connect users with a real `skiff server --authentication-config`
//! and real kubectl, against an issuer this test serves over HTTPS (its
//! discovery document and signing keys, trusted through the configured
//! CA): the issuer's token makes kubectl the mapped user, whom RBAC then
//! judges like any other; tokens the issuer did not sign, or signed for
//! another audience, or that expired, are 401.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use skiff_testkit::pki::TestCa;

use super::support::{Server, assert_contains, eventually};

/// A P-256 key and its public half as a JWK named `kid`.
fn signing_key(kid: &str) -> (EncodingKey, Value) {
    let (pem, jwk) = skiff_testkit::pki::jwt_signing_key(kid);
    (EncodingKey::from_ec_pem(pem.as_bytes()).unwrap(), jwk)
}

/// Serves the issuer's discovery document and `jwk` as its key set;
/// returns its CA and URL.
fn start_issuer(jwk: Value) -> (TestCa, String) {
    let ca = TestCa::new();
    let url: Arc<OnceLock<String>> = Arc::new(OnceLock::new());
    let keys = json!({"keys": [jwk]}).to_string();
    let port = skiff_testkit::https::serve(&ca, &["127.0.0.1"], {
        let url = url.clone();
        move |path, _| {
            let url = url.get().cloned().unwrap_or_default();
            let keys = keys.clone();
            Box::pin(async move {
                match path.as_str() {
                    "/.well-known/openid-configuration" => (
                        200,
                        json!({"issuer": url, "jwks_uri": format!("{url}/keys")}).to_string(),
                    ),
                    "/keys" => (200, keys),
                    _ => (404, "{}".to_owned()),
                }
            })
        }
    });
    let issuer = format!("https://127.0.0.1:{port}");
    url.set(issuer.clone()).unwrap();
    (ca, issuer)
}

fn token(key: &EncodingKey, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some("k1".into());
    jsonwebtoken::encode(&header, claims, key).unwrap()
}

#[test]
fn kubectl_with_an_issuers_token_is_the_mapped_user_and_forgeries_are_refused() {
    let (key, jwk) = signing_key("k1");
    let (ca, issuer) = start_issuer(jwk);
    let files = tempfile::tempdir().unwrap();
    let config = files.path().join("authentication.yaml");
    let ca_lines: Vec<String> = ca.pem.lines().map(|l| format!("      {l}")).collect();
    std::fs::write(
        &config,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1beta1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: {issuer}
    audiences: [skiff]
    certificateAuthority: |
{}
  claimMappings:
    username: {{claim: sub, prefix: 'oidc:'}}
    groups: {{claim: groups, prefix: 'oidc:'}}
",
            ca_lines.join("\n")
        ),
    )
    .unwrap();
    let server = Server::start_with(&[
        "--disable-agent",
        "--authentication-config",
        config.to_str().unwrap(),
    ]);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = json!({"iss": issuer, "aud": "skiff", "sub": "alice", "groups": ["dev"],
        "iat": now, "exp": now + 600});
    let alice = token(&key, &claims);
    let as_alice = |args: &[&str]| {
        let mut all = vec!["--token", alice.as_str()];
        all.extend_from_slice(args);
        server.kubectl(&all)
    };
    // The keys are fetched in the background once the server is up.
    let whoami = eventually(Duration::from_secs(30), "the issuer's token works", || {
        let out = as_alice(&["auth", "whoami", "-o", "json"]);
        out.status
            .success()
            .then(|| serde_json::from_slice::<Value>(&out.stdout).unwrap())
    });
    assert_eq!(whoami["status"]["userInfo"]["username"], "oidc:alice");
    assert_eq!(
        whoami["status"]["userInfo"]["groups"],
        json!(["oidc:dev", "system:authenticated"])
    );
    // RBAC judges the mapped user and groups like any other.
    let refused = as_alice(&["get", "pods"]);
    assert!(!refused.status.success());
    assert_contains(
        &String::from_utf8_lossy(&refused.stderr),
        "User \"oidc:alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\"",
    );
    server.kubectl_ok(&[
        "create",
        "rolebinding",
        "dev-view",
        "--clusterrole=view",
        "--group=oidc:dev",
    ]);
    eventually(Duration::from_secs(10), "the binding applies", || {
        as_alice(&["get", "pods"]).status.success().then_some(())
    });

    // What the issuer did not sign, or signed for someone else, or long ago.
    let (forger, _) = signing_key("k1");
    let mut elsewhere = claims.clone();
    elsewhere["aud"] = json!("another-cluster");
    let mut expired = claims.clone();
    expired["exp"] = json!(now - 60);
    let mut unknown_issuer = claims.clone();
    unknown_issuer["iss"] = json!("https://127.0.0.1:1");
    for (what, bad) in [
        ("signed by another key", token(&forger, &claims)),
        ("for another audience", token(&key, &elsewhere)),
        ("expired", token(&key, &expired)),
        (
            "from an issuer not configured",
            token(&key, &unknown_issuer),
        ),
    ] {
        let out = server.kubectl_err(&["--token", &bad, "get", "pods"]);
        assert_contains(&out, "Unauthorized");
        assert!(!out.contains("oidc:alice"), "{what}: {out}");
    }
}

/// The older `--oidc-*` flags, as kube-apiserver (and k3s through
/// `--kube-apiserver-arg`) take them: a user named by the `sub` claim gets
/// the issuer URL as prefix unless told otherwise.
#[test]
fn the_older_oidc_flags_configure_one_issuer() {
    let (key, jwk) = signing_key("k1");
    let (ca, issuer) = start_issuer(jwk);
    let files = tempfile::tempdir().unwrap();
    let ca_file = files.path().join("issuer-ca.pem");
    std::fs::write(&ca_file, &ca.pem).unwrap();
    let server = Server::start_with(&[
        "--disable-agent",
        "--oidc-issuer-url",
        &issuer,
        "--oidc-client-id",
        "skiff",
        "--oidc-ca-file",
        ca_file.to_str().unwrap(),
        "--oidc-groups-claim",
        "groups",
        "--oidc-signing-algs",
        "ES256",
    ]);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = json!({"iss": issuer, "aud": "skiff", "sub": "bob", "groups": ["ops"],
        "exp": now + 600});
    let bob = token(&key, &claims);
    let whoami = eventually(Duration::from_secs(30), "the issuer's token works", || {
        let out = server.kubectl(&["--token", &bob, "auth", "whoami", "-o", "json"]);
        out.status
            .success()
            .then(|| serde_json::from_slice::<Value>(&out.stdout).unwrap())
    });
    assert_eq!(
        whoami["status"]["userInfo"]["username"],
        format!("{issuer}#bob")
    );
    assert_eq!(
        whoami["status"]["userInfo"]["groups"],
        json!(["ops", "system:authenticated"])
    );
}
