//! Bootstrap tokens, as upstream's bootstrap authenticator, and the server
//! token (k3s's `DATA_DIR/token`): the credentials an agent joins with
//! before it has a certificate of its own.
//!
//! A bootstrap token `<id>.<secret>` is a Secret `kube-system/bootstrap-token-<id>`
//! of type `bootstrap.kubernetes.io/token` (`token-id`, `token-secret`,
//! `expiration`, `usage-bootstrap-authentication`, `auth-extra-groups`);
//! it authenticates as `system:bootstrap:<id>` in `system:bootstrappers`
//! (plus its extra groups) while it is unexpired and allowed for
//! authentication. The server token's secret authenticates as
//! [`SERVER_TOKEN_USER`] in the same group. The Secrets are read from the
//! API server's own watch cache on each request (no store read), so a
//! deleted or expired token stops working at once.
//!
//! What a bootstrap identity may do is RBAC's: by default, create
//! CertificateSigningRequests for node client certificates (see
//! `authz/bootstrap`).

use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use skiff_common::join_token::{self, JoinToken};

use crate::authn::UserInfo;
use crate::server::Inner;

/// The Secret type of bootstrap tokens.
pub const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
/// Bootstrap token Secrets are named this plus the token id.
pub const SECRET_PREFIX: &str = "bootstrap-token-";
/// Where bootstrap token Secrets live.
pub const NAMESPACE: &str = "kube-system";
/// Bootstrap identities are named this plus the token id.
pub const USER_PREFIX: &str = "system:bootstrap:";
/// The group of every bootstrap identity.
pub const BOOTSTRAPPERS_GROUP: &str = "system:bootstrappers";
/// The identity of the server token (not a 6-character id, so no bootstrap
/// token can ever share it).
pub const SERVER_TOKEN_USER: &str = "system:bootstrap:skiff-server-token";
/// The usages a token may be created with (upstream's).
pub const USAGES: &[&str] = &["authentication", "signing"];

/// Why a token is not accepted (for the log and tests; the client only
/// ever sees 401).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// No `bootstrap-token-<id>` Secret.
    #[error("no such bootstrap token")]
    Unknown,
    /// The Secret has the name but not the type of a bootstrap token.
    #[error("the Secret is not of type {SECRET_TYPE}")]
    WrongType,
    /// The token's secret half is wrong.
    #[error("the secret does not match")]
    WrongSecret,
    /// Past the Secret's `expiration`.
    #[error("the token expired")]
    Expired,
    /// The Secret lacks `usage-bootstrap-authentication: "true"`.
    #[error("the token is not allowed for authentication")]
    NotForAuthentication,
    /// `auth-extra-groups` names a group outside `system:bootstrappers:`.
    #[error("an extra group does not start with system:bootstrappers:")]
    BadExtraGroup,
}

/// Authenticates bootstrap tokens from the API server's Secrets cache, and
/// the server token.
#[derive(Clone)]
pub struct BootstrapTokens {
    inner: Arc<Inner>,
    server_secret: Option<String>,
}

impl std::fmt::Debug for BootstrapTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BootstrapTokens").finish_non_exhaustive()
    }
}

impl BootstrapTokens {
    pub(crate) fn new(inner: Arc<Inner>, server_secret: Option<String>) -> Self {
        Self {
            inner,
            server_secret,
        }
    }

    /// Whether `token` has one of the shapes this authenticator judges.
    pub fn claims(token: &str) -> bool {
        join_token::bootstrap_parts(token).is_some() || join_token::server_secret(token).is_some()
    }

    /// The identity `token` proves, if any.
    pub fn authenticate(&self, token: &str) -> Option<UserInfo> {
        if let Some(secret) = join_token::server_secret(token) {
            let expected = self.server_secret.as_deref()?;
            return constant_time_eq(secret.as_bytes(), expected.as_bytes())
                .then(|| UserInfo::new(SERVER_TOKEN_USER, [BOOTSTRAPPERS_GROUP.to_string()]));
        }
        let (id, secret) = join_token::bootstrap_parts(token)?;
        let object = crate::tokens::read_core(
            &self.inner,
            "secrets",
            NAMESPACE,
            &format!("{SECRET_PREFIX}{id}"),
        )
        .ok()
        .flatten();
        match check(object.as_ref(), id, secret, Timestamp::now()) {
            Ok(user) => Some(user),
            Err(why) => {
                tracing::debug!(token_id = id, %why, "bootstrap token refused");
                None
            }
        }
    }
}

/// Whether `secret` (the Secret of token `id`, if one exists) accepts
/// `token_secret` at `now`; the identity it proves.
pub fn check(
    secret: Option<&Value>,
    id: &str,
    token_secret: &str,
    now: Timestamp,
) -> Result<UserInfo, Refused> {
    let secret = secret.ok_or(Refused::Unknown)?;
    if secret["type"].as_str() != Some(SECRET_TYPE) {
        return Err(Refused::WrongType);
    }
    let data = |key: &str| -> Option<String> {
        let text = secret["data"][key].as_str()?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .ok()?;
        String::from_utf8(bytes).ok()
    };
    // The Secret must name the same id (upstream checks it too), and its
    // secret must match byte for byte, in constant time.
    if data("token-id").as_deref() != Some(id) {
        return Err(Refused::Unknown);
    }
    let stored = data("token-secret").unwrap_or_default();
    if !constant_time_eq(stored.as_bytes(), token_secret.as_bytes()) {
        return Err(Refused::WrongSecret);
    }
    if secret["metadata"]["deletionTimestamp"].is_string() {
        return Err(Refused::Unknown);
    }
    if let Some(expiration) = data("expiration") {
        // An expiration that does not parse is treated as past, as upstream.
        match expiration.parse::<Timestamp>() {
            Ok(at) if at > now => {}
            _ => return Err(Refused::Expired),
        }
    }
    if data("usage-bootstrap-authentication").as_deref() != Some("true") {
        return Err(Refused::NotForAuthentication);
    }
    let mut groups = vec![BOOTSTRAPPERS_GROUP.to_string()];
    if let Some(extra) = data("auth-extra-groups") {
        for group in extra.split(',').map(str::trim).filter(|g| !g.is_empty()) {
            if !group.starts_with("system:bootstrappers:") {
                return Err(Refused::BadExtraGroup);
            }
            if !groups.iter().any(|g| g == group) {
                groups.push(group.to_string());
            }
        }
    }
    Ok(UserInfo::new(format!("{USER_PREFIX}{id}"), groups))
}

/// Whether a bootstrap token Secret has expired at `now` (what the token
/// cleaner deletes).
pub fn expired(secret: &Value, now: Timestamp) -> bool {
    let Some(text) = secret["data"]["expiration"].as_str() else {
        return false;
    };
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|t| t.parse::<Timestamp>().ok())
        .is_none_or(|at| at <= now)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn random_text(len: usize) -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut rng = rand::rng();
    (0..len)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

/// A new random bootstrap token `(id, secret)`.
pub fn generate() -> (String, String) {
    (random_text(6), random_text(16))
}

/// What `skiff token create` asks for.
#[derive(Debug, Clone, Default)]
pub struct NewToken {
    /// The token id (6 of `[a-z0-9]`).
    pub id: String,
    /// The token secret (16 of `[a-z0-9]`).
    pub secret: String,
    /// When it stops working; none: never.
    pub expiration: Option<Timestamp>,
    /// Of [`USAGES`].
    pub usages: Vec<String>,
    /// Free text.
    pub description: Option<String>,
    /// Extra groups, each `system:bootstrappers:…`.
    pub groups: Vec<String>,
}

/// The Secret that holds `token` (stringData, so the API server encodes it).
pub fn secret_object(token: &NewToken) -> Value {
    let mut data = serde_json::Map::new();
    data.insert("token-id".into(), json!(token.id));
    data.insert("token-secret".into(), json!(token.secret));
    if let Some(at) = token.expiration {
        data.insert("expiration".into(), json!(at.to_string()));
    }
    for usage in &token.usages {
        data.insert(format!("usage-bootstrap-{usage}"), json!("true"));
    }
    if let Some(description) = &token.description {
        data.insert("description".into(), json!(description));
    }
    if !token.groups.is_empty() {
        data.insert("auth-extra-groups".into(), json!(token.groups.join(",")));
    }
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": format!("{SECRET_PREFIX}{}", token.id), "namespace": NAMESPACE},
        "type": SECRET_TYPE,
        "stringData": data,
    })
}

/// Why the server token could not be kept.
#[derive(Debug, thiserror::Error)]
pub enum ServerTokenError {
    /// The token file exists but cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The token file.
        path: String,
        /// Why reading failed.
        source: std::io::Error,
    },
    /// The token file does not hold a K10 token.
    #[error("{path}: {source}")]
    Parse {
        /// The token file.
        path: String,
        /// What is wrong with its contents.
        source: join_token::TokenError,
    },
    /// The token file holds a bootstrap token, not the server's.
    #[error("{path} holds no server:<secret> credential")]
    NotServer {
        /// The token file.
        path: String,
    },
    /// A new token file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The token file.
        path: String,
        /// Why writing failed.
        source: skiff_common::files::FileError,
    },
}

/// The server token in `path` (`K10<CA hash>::server:<secret>`, 0600):
/// created with a random secret the first time, its secret kept across
/// restarts, and rewritten when the CA it names is no longer `ca_pem`.
/// Returns the secret.
pub fn load_or_create_server_token(path: &Path, ca_pem: &str) -> Result<String, ServerTokenError> {
    let shown = path.display().to_string();
    let secret = match std::fs::read_to_string(path) {
        Ok(text) => {
            let token = JoinToken::parse(&text).map_err(|source| ServerTokenError::Parse {
                path: shown.clone(),
                source,
            })?;
            let secret = join_token::server_secret(&token.credential)
                .ok_or_else(|| ServerTokenError::NotServer {
                    path: shown.clone(),
                })?
                .to_string();
            if token.matches_ca(ca_pem.as_bytes()) {
                return Ok(secret);
            }
            secret
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => random_text(32),
        Err(source) => {
            return Err(ServerTokenError::Read {
                path: shown,
                source,
            });
        }
    };
    let text = JoinToken::format(ca_pem.as_bytes(), &join_token::server_credential(&secret));
    skiff_common::files::write_private(path, format!("{text}\n").as_bytes()).map_err(|source| {
        ServerTokenError::Write {
            path: shown,
            source,
        }
    })?;
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(data: &[(&str, &str)]) -> Value {
        let data: serde_json::Map<String, Value> = data
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    json!(base64::engine::general_purpose::STANDARD.encode(v)),
                )
            })
            .collect();
        json!({"type": SECRET_TYPE, "metadata": {"name": "bootstrap-token-abcdef"}, "data": data})
    }

    const VALID: &[(&str, &str)] = &[
        ("token-id", "abcdef"),
        ("token-secret", "0123456789abcdef"),
        ("usage-bootstrap-authentication", "true"),
        ("expiration", "2099-01-01T00:00:00Z"),
        ("auth-extra-groups", "system:bootstrappers:edge"),
    ];

    #[test]
    fn a_valid_token_is_its_bootstrap_identity() {
        let user = check(
            Some(&secret(VALID)),
            "abcdef",
            "0123456789abcdef",
            Timestamp::now(),
        )
        .unwrap();
        assert_eq!(user.name, "system:bootstrap:abcdef");
        assert_eq!(
            user.groups,
            [
                "system:bootstrappers",
                "system:bootstrappers:edge",
                "system:authenticated"
            ]
        );
    }

    #[test]
    fn bad_tokens_are_refused() {
        let now = Timestamp::now();
        let without = |key: &str| -> Vec<(&str, &str)> {
            VALID.iter().copied().filter(|(k, _)| *k != key).collect()
        };
        let with = |key: &'static str, value: &'static str| -> Vec<(&str, &str)> {
            let mut v = without(key);
            v.push((key, value));
            v
        };
        let cases: Vec<(Value, Refused)> = vec![
            (
                secret(&with("expiration", "2001-01-01T00:00:00Z")),
                Refused::Expired,
            ),
            (secret(&with("expiration", "not a time")), Refused::Expired),
            (
                secret(&without("usage-bootstrap-authentication")),
                Refused::NotForAuthentication,
            ),
            (
                secret(&with("usage-bootstrap-authentication", "false")),
                Refused::NotForAuthentication,
            ),
            (
                secret(&with("auth-extra-groups", "system:masters")),
                Refused::BadExtraGroup,
            ),
            (secret(&with("token-id", "zzzzzz")), Refused::Unknown),
        ];
        for (object, why) in cases {
            assert_eq!(
                check(Some(&object), "abcdef", "0123456789abcdef", now),
                Err(why)
            );
        }
        assert_eq!(
            check(Some(&secret(VALID)), "abcdef", "0123456789abcdeX", now),
            Err(Refused::WrongSecret)
        );
        let mut opaque = secret(VALID);
        opaque["type"] = json!("Opaque");
        assert_eq!(
            check(Some(&opaque), "abcdef", "0123456789abcdef", now),
            Err(Refused::WrongType)
        );
        assert_eq!(
            check(None, "abcdef", "0123456789abcdef", now),
            Err(Refused::Unknown)
        );
    }

    #[test]
    fn the_server_token_keeps_its_secret_and_follows_the_ca() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        let secret = load_or_create_server_token(&path, "CA 1").unwrap();
        assert_eq!(secret.len(), 32);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text.trim(),
            JoinToken::format(b"CA 1", &format!("server:{secret}"))
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(load_or_create_server_token(&path, "CA 1").unwrap(), secret);
        // A new CA: same secret, new hash.
        assert_eq!(load_or_create_server_token(&path, "CA 2").unwrap(), secret);
        let token = JoinToken::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(token.matches_ca(b"CA 2"));
    }

    #[test]
    fn generated_tokens_have_upstreams_form() {
        let (id, secret) = generate();
        let token = format!("{id}.{secret}");
        assert!(join_token::bootstrap_parts(&token).is_some(), "{token}");
    }
}
