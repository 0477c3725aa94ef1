//! Authentication: who is calling. Identities come from client certificates
//! signed by the cluster CA (CN is the user, O fields the groups), from bearer
//! tokens listed in a token file, from service-account tokens this server
//! signed ([`crate::tokens`]), from bootstrap tokens and the server token
//! ([`crate::bootstrap_tokens`]), from OpenID Connect issuers' JWTs
//! ([`crate::oidc`]), or — for in-process clients — from a
//! [`UserInfo`] the process itself attaches, which no network request can set.
//! A request with none of these is `system:anonymous` when [`AnonymousAuth`]
//! lets it be, and refused (401) when not.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use http::{HeaderMap, StatusCode, header};

/// The authenticated caller, carried as a request extension.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name, e.g. `system:serviceaccount:default:builder`.
    pub name: String,
    /// A unique id for the user; empty when the authenticator has none.
    pub uid: String,
    /// The groups the user is in; authorization matches bindings on them.
    pub groups: Vec<String>,
    /// Further facts an authenticator vouched for (upstream's user "extra",
    /// e.g. the pod a service-account token is bound to); authorizers may
    /// read them, and impersonation may set them.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// An authenticated user; `system:authenticated` is added to its groups as
    /// upstream does.
    pub fn new(name: impl Into<String>, groups: impl IntoIterator<Item = String>) -> Self {
        let mut groups: Vec<String> = groups.into_iter().collect();
        if !groups.iter().any(|g| g == AUTHENTICATED_GROUP) {
            groups.push(AUTHENTICATED_GROUP.to_string());
        }
        Self {
            name: name.into(),
            uid: String::new(),
            groups,
            extra: BTreeMap::new(),
        }
    }

    /// A service account's identity (`system:serviceaccount:<ns>:<name>`
    /// in the service-account groups), as its token authenticates.
    pub fn service_account(namespace: &str, name: &str) -> Self {
        Self::new(
            crate::tokens::user_name(namespace, name),
            crate::tokens::groups(namespace),
        )
    }

    /// The identity of a request that presented no credentials.
    pub fn anonymous() -> Self {
        Self {
            name: "system:anonymous".to_string(),
            uid: String::new(),
            groups: vec!["system:unauthenticated".to_string()],
            extra: BTreeMap::new(),
        }
    }

    /// Whether this is the anonymous user (no credentials presented).
    pub fn is_anonymous(&self) -> bool {
        self.name == "system:anonymous"
    }
}

/// The group every authenticated user belongs to.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";

/// Why a token file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum AuthnError {
    /// The token file could not be read or written.
    #[error("cannot {action} token file {path}: {source}")]
    TokenFile {
        /// What was being done (`read`, `write`, …).
        action: &'static str,
        /// The token file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A line of the token file is malformed.
    #[error("token file {path} line {line}: {problem}")]
    TokenLine {
        /// The token file.
        path: PathBuf,
        /// The line's number, from 1.
        line: usize,
        /// What is wrong with the line.
        problem: &'static str,
    },
}

/// Which requests that present no credentials go on as `system:anonymous`
/// (for authorization to judge) rather than being refused outright:
/// kube-apiserver's `--anonymous-auth`, or the `anonymous` section of its
/// authentication configuration file.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub enum AnonymousAuth {
    /// All of them (upstream's default; the default policy opens health and
    /// version checks to them, nothing else).
    #[default]
    Enabled,
    /// Only requests for exactly these paths (the file's `conditions`).
    Paths(BTreeSet<String>),
    /// None: a request without credentials is 401 whatever it asks for.
    Disabled,
}

/// Paths a request without credentials always reaches, whatever
/// [`AnonymousAuth`] says: k3s serves them from its supervisor, outside the
/// API server's anonymous setting, because a joining agent has no
/// credentials yet when it fetches the cluster CA to check its token against.
const ALWAYS_ANONYMOUS: &[&str] = &["/cacerts"];

impl AnonymousAuth {
    /// Whether a request for `path` without credentials may go on.
    pub fn allows(&self, path: &str) -> bool {
        if ALWAYS_ANONYMOUS.contains(&path) {
            return true;
        }
        match self {
            Self::Enabled => true,
            Self::Paths(paths) => paths.contains(path),
            Self::Disabled => false,
        }
    }
}

/// Decides the identity of network requests.
#[derive(Debug, Default, Clone)]
pub struct Authenticator {
    tokens: HashMap<String, UserInfo>,
    service_accounts: Option<crate::tokens::ServiceAccountTokens>,
    bootstrap: Option<crate::bootstrap_tokens::BootstrapTokens>,
    oidc: Option<std::sync::Arc<crate::oidc::OidcAuthenticator>>,
    anonymous: AnonymousAuth,
}

/// The outcome of authenticating one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authenticated {
    /// Credentials or a client certificate named this user.
    User(UserInfo),
    /// No credentials were presented, and anonymous requests are let in
    /// for the path asked for.
    Anonymous,
    /// Credentials were presented and are wrong, or none were and anonymous
    /// requests are not let in: always 401.
    Rejected,
}

impl Authenticator {
    /// Reads a static token file in kube-apiserver's format:
    /// `token,user,uid,"group1,group2"` per line (groups optional).
    pub fn from_token_file(path: &Path) -> Result<Self, AuthnError> {
        let text = fs::read_to_string(path).map_err(|source| AuthnError::TokenFile {
            action: "read",
            path: path.to_path_buf(),
            source,
        })?;
        let mut tokens = HashMap::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |problem| AuthnError::TokenLine {
                path: path.to_path_buf(),
                line: index + 1,
                problem,
            };
            let fields = split_csv(line);
            if fields.len() < 3 {
                return Err(bad("expected token,user,uid[,\"groups\"]"));
            }
            if fields[0].is_empty() || fields[1].is_empty() {
                return Err(bad("token and user must not be empty"));
            }
            let groups = fields
                .get(3)
                .map(|g| {
                    g.split(',')
                        .map(str::trim)
                        .filter(|g| !g.is_empty())
                        .map(String::from)
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            let mut user = UserInfo::new(fields[1].clone(), groups);
            user.uid = fields[2].clone();
            tokens.insert(fields[0].clone(), user);
        }
        Ok(Self {
            tokens,
            service_accounts: None,
            bootstrap: None,
            oidc: None,
            anonymous: AnonymousAuth::default(),
        })
    }

    /// Also accepts the service-account tokens `tokens` vouches for.
    pub fn with_service_account_tokens(
        mut self,
        tokens: crate::tokens::ServiceAccountTokens,
    ) -> Self {
        self.service_accounts = Some(tokens);
        self
    }

    /// Also accepts bootstrap tokens and the server token (`tokens`).
    pub fn with_bootstrap_tokens(
        mut self,
        tokens: crate::bootstrap_tokens::BootstrapTokens,
    ) -> Self {
        self.bootstrap = Some(tokens);
        self
    }

    /// Also accepts the JWTs of the issuers `oidc` is configured with.
    pub fn with_oidc(mut self, oidc: std::sync::Arc<crate::oidc::OidcAuthenticator>) -> Self {
        self.oidc = Some(oidc);
        self
    }

    /// Lets requests without credentials in as `anonymous` says (all of them
    /// unless this is called).
    pub fn with_anonymous(mut self, anonymous: AnonymousAuth) -> Self {
        self.anonymous = anonymous;
        self
    }

    /// Creates the token file with one admin token when it does not exist yet,
    /// and returns the authenticator it describes.
    pub fn load_or_create_token_file(path: &Path) -> Result<Self, AuthnError> {
        if !path.exists() {
            use rand::Rng;
            let token: String = rand::rng()
                .sample_iter(&rand::distr::Alphanumeric)
                .take(40)
                .map(char::from)
                .collect();
            let line = format!("{token},admin,admin,\"system:masters\"\n");
            skiff_common::files::write_private(path, line.as_bytes()).map_err(|e| {
                AuthnError::TokenFile {
                    action: e.action,
                    path: e.path,
                    source: e.source,
                }
            })?;
        }
        Self::from_token_file(path)
    }

    /// Authenticates a request for `path` from its headers and the identity
    /// its TLS connection proved, if any. A bearer token, when present,
    /// decides alone.
    pub fn authenticate(
        &self,
        headers: &HeaderMap,
        path: &str,
        peer: Option<&UserInfo>,
    ) -> Authenticated {
        if let Some(value) = headers.get(header::AUTHORIZATION) {
            let token = value
                .to_str()
                .ok()
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim);
            let Some(token) = token else {
                return Authenticated::Rejected;
            };
            let own = [crate::tokens::ISSUER.to_string()];
            return match self.authenticate_token(token, &own) {
                Some((user, _)) => Authenticated::User(user),
                None => Authenticated::Rejected,
            };
        }
        match peer {
            Some(user) => Authenticated::User(user.clone()),
            None if self.anonymous.allows(path) => Authenticated::Anonymous,
            None => Authenticated::Rejected,
        }
    }

    /// Authenticates a bearer token on its own, as a TokenReview asks:
    /// the user, and which of `audiences` the token is good for. Tokens of
    /// the token file are good for this API server's audience only (they
    /// name none of their own), as upstream treats audience-less tokens.
    pub fn authenticate_token(
        &self,
        token: &str,
        audiences: &[String],
    ) -> Option<(UserInfo, Vec<String>)> {
        // Of `audiences`, the ones a token naming none is good for.
        let own_audience = || -> Vec<String> {
            audiences
                .iter()
                .filter(|a| *a == crate::tokens::ISSUER)
                .cloned()
                .collect()
        };
        if let Some(user) = self.tokens.get(token) {
            let matched = own_audience();
            return (!matched.is_empty()).then(|| (user.clone(), matched));
        }
        if let Some(bootstrap) = &self.bootstrap
            && crate::bootstrap_tokens::BootstrapTokens::claims(token)
        {
            // Like the token file's, good for this API server only.
            let matched = own_audience();
            if matched.is_empty() {
                return None;
            }
            return bootstrap.authenticate(token).map(|user| (user, matched));
        }
        if let Some(oidc) = &self.oidc {
            match oidc.verify(token) {
                crate::oidc::Verdict::NotOurs => {}
                // An issuer's token is that issuer's to judge alone.
                crate::oidc::Verdict::Refused(_) => return None,
                crate::oidc::Verdict::User(user) => {
                    // Like the token file's, good for this API server only.
                    let matched = own_audience();
                    return (!matched.is_empty()).then_some((user, matched));
                }
            }
        }
        match &self.service_accounts {
            Some(accounts) if crate::tokens::ServiceAccountTokens::looks_like_jwt(token) => {
                accounts.authenticate_for(token, audiences)
            }
            _ => None,
        }
    }
}

/// Reads the identity out of a client certificate that the TLS layer already
/// verified against the cluster CA.
pub fn user_from_certificate(der: &[u8]) -> Option<UserInfo> {
    let (name, groups) = skiff_common::serving::certificate_user(der)?;
    Some(UserInfo::new(name, groups))
}

/// The body and code upstream answers an unauthenticated request with.
pub fn unauthorized_status() -> (StatusCode, String) {
    (
        StatusCode::UNAUTHORIZED,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#
            .to_string(),
    )
}

/// Splits one CSV line, honouring double quotes around fields.
fn split_csv(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(std::mem::take(&mut current).trim().to_string()),
            c => current.push(c),
        }
    }
    fields.push(current.trim().to_string());
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(auth: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(a) = auth {
            h.insert(header::AUTHORIZATION, a.parse().expect("header"));
        }
        h
    }

    /// The authenticator of a token file holding `text`.
    fn from_token_text(text: &str) -> Result<Authenticator, AuthnError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tokens.csv");
        fs::write(&path, text).expect("write");
        Authenticator::from_token_file(&path)
    }

    #[test]
    fn token_file_lines_give_users_and_groups() {
        let authn =
            from_token_text("# comment\nabc,alice,u1,\"dev,ops\"\nxyz,bob,u2\n").expect("parse");
        let Authenticated::User(alice) =
            authn.authenticate(&headers(Some("Bearer abc")), "/api", None)
        else {
            panic!("alice not authenticated");
        };
        assert_eq!(alice.name, "alice");
        assert_eq!(alice.uid, "u1");
        assert_eq!(alice.groups, vec!["dev", "ops", "system:authenticated"]);
        assert_eq!(
            authn.authenticate(&headers(Some("Bearer nope")), "/api", None),
            Authenticated::Rejected
        );
        assert_eq!(
            authn.authenticate(&headers(None), "/api", None),
            Authenticated::Anonymous
        );
    }

    #[test]
    fn anonymous_requests_are_let_in_only_where_configured() {
        let request =
            |authn: &Authenticator, path: &str| authn.authenticate(&headers(None), path, None);
        let open = Authenticator::default();
        assert_eq!(request(&open, "/api/v1/pods"), Authenticated::Anonymous);
        let closed = Authenticator::default().with_anonymous(AnonymousAuth::Disabled);
        assert_eq!(request(&closed, "/healthz"), Authenticated::Rejected);
        assert_eq!(request(&closed, "/cacerts/"), Authenticated::Rejected);
        // A joining agent still fetches the cluster CA.
        assert_eq!(request(&closed, "/cacerts"), Authenticated::Anonymous);
        let paths = BTreeSet::from(["/livez".to_string(), "/readyz".to_string()]);
        let some = Authenticator::default().with_anonymous(AnonymousAuth::Paths(paths));
        assert_eq!(request(&some, "/livez"), Authenticated::Anonymous);
        assert_eq!(request(&some, "/readyz"), Authenticated::Anonymous);
        // Exact paths: neither a sub-path nor a prefix matches.
        assert_eq!(request(&some, "/livez/ping"), Authenticated::Rejected);
        assert_eq!(request(&some, "/live"), Authenticated::Rejected);
        assert_eq!(request(&some, "/healthz"), Authenticated::Rejected);
        // Credentials are judged as ever: a certificate or a good token is
        // its user wherever anonymous requests are refused.
        let cert_user = UserInfo::new("admin", vec!["system:masters".to_string()]);
        assert_eq!(
            closed.authenticate(&headers(None), "/api", Some(&cert_user)),
            Authenticated::User(cert_user)
        );
    }

    #[test]
    fn malformed_token_line_is_an_error_naming_the_line() {
        let err = from_token_text("ok,user,uid\nonlytoken\n").expect_err("must fail");
        assert!(err.to_string().contains("line 2"), "{err}");
    }

    #[test]
    fn a_bad_token_wins_over_a_good_certificate() {
        let authn = Authenticator::default();
        let cert_user = UserInfo::new("admin", vec!["system:masters".to_string()]);
        assert_eq!(
            authn.authenticate(&headers(Some("Bearer wrong")), "/api", Some(&cert_user)),
            Authenticated::Rejected
        );
        assert_eq!(
            authn.authenticate(&headers(None), "/api", Some(&cert_user)),
            Authenticated::User(cert_user)
        );
    }

    #[test]
    fn certificate_subject_becomes_the_user() {
        let dir = tempfile::tempdir().expect("tempdir");
        let certs = crate::tls::ClusterCerts::load_or_create(dir.path(), &["localhost".into()])
            .expect("certs");
        let der = rustls_pemfile::certs(&mut certs.admin_cert_pem.as_bytes())
            .next()
            .expect("one cert")
            .expect("pem");
        let user = user_from_certificate(&der).expect("user");
        assert_eq!(user.name, crate::tls::ADMIN_USER);
        assert!(user.groups.contains(&"system:masters".to_string()));
    }
}
