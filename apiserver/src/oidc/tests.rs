//! Tokens as an attacker would forge them, and the one that holds.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use jsonwebtoken::{EncodingKey, Header};
use serde_json::{Value, json};

use super::*;

const ISSUER: &str = "https://issuer.example";

/// A P-256 signing key, and its public half as a JWK named `kid`.
fn signer(kid: &str) -> (EncodingKey, Value) {
    let (pem, jwk) = skiff_testkit::pki::jwt_signing_key(kid);
    (EncodingKey::from_ec_pem(pem.as_bytes()).unwrap(), jwk)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn config() -> IssuerConfig {
    IssuerConfig {
        url: ISSUER.into(),
        discovery_url: format!("{ISSUER}/.well-known/openid-configuration"),
        certificate_authority: None,
        audiences: vec!["skiff".into()],
        claim_rules: vec![ClaimRule::Equals {
            claim: "hd".into(),
            value: "example.com".into(),
        }],
        username: Mapping::Claim {
            claim: "sub".into(),
            prefix: "oidc:".into(),
        },
        groups: Some(Mapping::Claim {
            claim: "groups".into(),
            prefix: "oidc:".into(),
        }),
        uid: Some(Mapping::Claim {
            claim: "sub".into(),
            prefix: String::new(),
        }),
        extra: Vec::new(),
        user_rules: Vec::new(),
        algorithms: Vec::new(),
    }
}

/// An authenticator of [`config`] whose keys are `jwks` (as if fetched).
fn authenticator(config: IssuerConfig, jwks: &[Value]) -> OidcAuthenticator {
    let keys = Arc::new(IssuerKeys::new());
    keys.set(serde_json::from_value(json!({"keys": jwks})).unwrap());
    OidcAuthenticator {
        issuers: vec![(config, keys)],
    }
}

fn claims() -> Value {
    json!({"iss": ISSUER, "aud": ["skiff"], "sub": "alice", "hd": "example.com",
        "groups": ["dev", "dev", "ops"], "exp": now() + 600, "iat": now()})
}

fn token(key: &EncodingKey, kid: &str, claims: &Value) -> String {
    let mut header = Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(&header, claims, key).unwrap()
}

fn refused(verdict: Verdict) -> String {
    match verdict {
        Verdict::Refused(why) => why,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_token_of_the_issuer_names_the_mapped_user() {
    let (key, jwk) = signer("k1");
    let oidc = authenticator(config(), &[jwk]);
    let Verdict::User(user) = oidc.verify(&token(&key, "k1", &claims())) else {
        panic!("the issuer's own token must authenticate");
    };
    assert_eq!(user.name, "oidc:alice");
    assert_eq!(user.uid, "alice");
    assert_eq!(
        user.groups,
        ["oidc:dev", "oidc:ops", "system:authenticated"],
        "groups prefixed, once each"
    );
}

#[test]
fn forged_expired_and_misdirected_tokens_are_refused() {
    let (key, jwk) = signer("k1");
    let (other_key, _) = signer("k1");
    let oidc = authenticator(config(), &[jwk]);
    // Signed by a key the issuer never published, under its key id.
    assert!(refused(oidc.verify(&token(&other_key, "k1", &claims()))).contains("InvalidSignature"));
    // Expired.
    let mut expired = claims();
    expired["exp"] = json!(now() - 5);
    assert!(refused(oidc.verify(&token(&key, "k1", &expired))).contains("ExpiredSignature"));
    // Not valid yet.
    let mut early = claims();
    early["nbf"] = json!(now() + 300);
    assert!(refused(oidc.verify(&token(&key, "k1", &early))).contains("ImmatureSignature"));
    // No expiry at all.
    let mut forever = claims();
    forever.as_object_mut().unwrap().remove("exp");
    refused(oidc.verify(&token(&key, "k1", &forever)));
    // For another audience.
    let mut elsewhere = claims();
    elsewhere["aud"] = json!("someone-else");
    assert!(refused(oidc.verify(&token(&key, "k1", &elsewhere))).contains("InvalidAudience"));
    // Missing a required claim.
    let mut outsider = claims();
    outsider["hd"] = json!("evil.example");
    assert!(refused(oidc.verify(&token(&key, "k1", &outsider))).contains("required claim hd"));
    // A key id the issuer does not publish.
    assert!(refused(oidc.verify(&token(&key, "k9", &claims()))).contains("does not publish"));
    // Groups that are not strings.
    let mut odd = claims();
    odd["groups"] = json!([1]);
    refused(oidc.verify(&token(&key, "k1", &odd)));
}

#[test]
fn unsigned_and_hmac_tokens_are_refused() {
    let (_, jwk) = signer("k1");
    let oidc = authenticator(config(), std::slice::from_ref(&jwk));
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let unsigned = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "typ": "JWT"})),
        b64(&claims())
    );
    refused(oidc.verify(&unsigned));
    // HS256 keyed with the issuer's public key, the classic confusion.
    let secret = EncodingKey::from_secret(jwk.to_string().as_bytes());
    let mut header = Header::new(jsonwebtoken::Algorithm::HS256);
    header.kid = Some("k1".into());
    let hmac = jsonwebtoken::encode(&header, &claims(), &secret).unwrap();
    assert!(refused(oidc.verify(&hmac)).contains("unsupported signing algorithm"));
}

#[test]
fn an_issuer_limited_to_some_algorithms_refuses_the_others() {
    let (key, jwk) = signer("k1");
    let mut rsa_only = config();
    rsa_only.algorithms = vec!["RS256".into()];
    let oidc = authenticator(rsa_only, &[jwk]);
    assert!(refused(oidc.verify(&token(&key, "k1", &claims()))).contains("ES256"));
}

#[test]
fn only_tokens_naming_a_configured_issuer_are_judged() {
    let (key, jwk) = signer("k1");
    let oidc = authenticator(config(), &[jwk]);
    let mut foreign = claims();
    foreign["iss"] = json!("https://elsewhere.example");
    assert_eq!(oidc.verify(&token(&key, "k1", &foreign)), Verdict::NotOurs);
    assert_eq!(oidc.verify("not-a-jwt"), Verdict::NotOurs);
}

#[test]
fn no_token_holds_before_the_keys_are_fetched() {
    let (key, _) = signer("k1");
    let oidc = OidcAuthenticator {
        issuers: vec![(config(), Arc::new(IssuerKeys::new()))],
    };
    assert!(!oidc.ready());
    assert!(refused(oidc.verify(&token(&key, "k1", &claims()))).contains("not been fetched"));
}

#[test]
fn an_email_name_must_be_verified_when_the_issuer_says() {
    let (key, jwk) = signer("k1");
    let mut by_email = config();
    by_email.username = Mapping::Claim {
        claim: "email".into(),
        prefix: String::new(),
    };
    let oidc = authenticator(by_email, &[jwk]);
    let mut unverified = claims();
    unverified["email"] = json!("alice@example.com");
    unverified["email_verified"] = json!(false);
    assert!(refused(oidc.verify(&token(&key, "k1", &unverified))).contains("not verified"));
    unverified["email_verified"] = json!(true);
    let Verdict::User(user) = oidc.verify(&token(&key, "k1", &unverified)) else {
        panic!("a verified email names the user");
    };
    assert_eq!(user.name, "alice@example.com");
}

#[test]
fn expressions_map_the_user_and_rules_refuse_with_their_message() {
    let parsed = config::parse(
        "apiVersion: apiserver.config.k8s.io/v1beta1
kind: AuthenticationConfiguration
jwt:
- issuer: {url: 'https://issuer.example', audiences: [skiff]}
  claimValidationRules:
  - {expression: 'claims.email_verified == true', message: 'the email is not verified'}
  claimMappings:
    username: {expression: \"'oidc:' + claims.email\"}
    groups: {expression: \"claims.roles.map(r, 'role:' + r)\"}
    uid: {expression: 'claims.sub'}
    extra:
    - {key: 'example.org/team', valueExpression: 'claims.team'}
  userValidationRules:
  - {expression: \"!user.username.startsWith('oidc:root')\", message: 'root may not log in'}
",
        &[],
    )
    .unwrap();
    let (key, jwk) = signer("k1");
    let oidc = authenticator(parsed.issuers[0].clone(), &[jwk]);
    let mut claims = json!({"iss": ISSUER, "aud": "skiff", "sub": "u-1", "email": "alice@example.com",
        "email_verified": true, "roles": ["dev", "ops"], "team": "blue", "exp": now() + 600});
    let Verdict::User(user) = oidc.verify(&token(&key, "k1", &claims)) else {
        panic!("the expressions map the user");
    };
    assert_eq!(user.name, "oidc:alice@example.com");
    assert_eq!(user.uid, "u-1");
    assert_eq!(
        user.groups,
        ["role:dev", "role:ops", "system:authenticated"]
    );
    assert_eq!(user.extra["example.org/team"], ["blue"]);
    claims["email_verified"] = json!(false);
    assert!(
        refused(oidc.verify(&token(&key, "k1", &claims))).contains("the email is not verified")
    );
    claims["email_verified"] = json!(true);
    claims["email"] = json!("root@example.com");
    assert!(refused(oidc.verify(&token(&key, "k1", &claims))).contains("root may not log in"));
}
