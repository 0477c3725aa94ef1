//! JWT bearer tokens from OpenID Connect issuers (`--authentication-config`,
//! upstream's structured authentication): a token whose `iss` names a
//! configured issuer is that issuer's to judge and no one else's. It
//! authenticates only when signed by one of the issuer's published keys
//! with an asymmetric algorithm, unexpired, for one of the configured
//! audiences, and passing every claim rule; its claims then name the user,
//! uid, groups and extra as the configuration maps them (by claim, or by CEL
//! expression on the server's engine, [`crate::cel`]), the user passes the
//! user rules, and joins `system:authenticated`. Anything else is refused (401), never passed on
//! to a weaker authenticator.
//!
//! Must never: accept `none` or HMAC-signed tokens (an issuer's public key
//! would do as an HMAC secret), or trust a key it did not fetch from the
//! issuer over verified HTTPS.

pub mod config;
mod keys;

use std::collections::HashSet;
use std::sync::Arc;

use base64::Engine;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;

use crate::authn::UserInfo;
pub use config::{AuthenticationConfig, IssuerConfig, OidcConfigError, OidcFlags};
use config::{ClaimRule, Expression, Mapping};
use keys::IssuerKeys;

/// The algorithms an issuer may sign with: asymmetric ones only.
const ALGORITHMS: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// The configured issuers and their keys.
pub struct OidcAuthenticator {
    issuers: Vec<(IssuerConfig, Arc<IssuerKeys>)>,
}

impl std::fmt::Debug for OidcAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls: Vec<&str> = self.issuers.iter().map(|(c, _)| c.url.as_str()).collect();
        f.debug_struct("OidcAuthenticator")
            .field("issuers", &urls)
            .finish()
    }
}

/// What became of a token.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// No configured issuer made it: another authenticator may know it.
    NotOurs,
    /// An issuer's token that does not hold (bad signature, expired, …).
    Refused(String),
    /// The user it names.
    User(UserInfo),
}

impl OidcAuthenticator {
    /// The authenticator of `issuers`, fetching each one's keys in the
    /// background from now on (call within a tokio runtime).
    pub fn start(issuers: Vec<IssuerConfig>) -> Arc<Self> {
        let issuers: Vec<(IssuerConfig, Arc<IssuerKeys>)> = issuers
            .into_iter()
            .map(|config| (config, Arc::new(IssuerKeys::new())))
            .collect();
        for (config, keys) in &issuers {
            tokio::spawn(keys.clone().keep_fetched(config.clone()));
        }
        Arc::new(Self { issuers })
    }

    /// Whether every issuer's keys have been fetched (tokens of an issuer
    /// whose keys are not are refused meanwhile).
    pub fn ready(&self) -> bool {
        self.issuers
            .iter()
            .all(|(_, keys)| keys.current().is_some())
    }

    /// Judges `token`.
    pub(crate) fn verify(&self, token: &str) -> Verdict {
        let Some(iss) = unverified_issuer(token) else {
            return Verdict::NotOurs;
        };
        let Some((config, keys)) = self.issuers.iter().find(|(c, _)| c.url == iss) else {
            return Verdict::NotOurs;
        };
        match verified_claims(config, keys, token).and_then(|claims| user(config, &claims)) {
            Ok(user) => Verdict::User(user),
            Err(why) => {
                tracing::debug!(issuer = %config.url, %why, "token refused");
                Verdict::Refused(why)
            }
        }
    }
}

/// The `iss` claim of a JWT, read without checking anything.
fn unverified_issuer(token: &str) -> Option<String> {
    let mut parts = token.split('.');
    let (_, payload, _) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: Value = serde_json::from_slice(&bytes).ok()?;
    claims["iss"].as_str().map(str::to_owned)
}

/// The claims of `token`, once its signature, issuer, audience and times
/// hold.
fn verified_claims(config: &IssuerConfig, keys: &IssuerKeys, token: &str) -> Result<Value, String> {
    let header = jsonwebtoken::decode_header(token).map_err(|e| format!("malformed token: {e}"))?;
    let named = format!("{:?}", header.alg);
    if !ALGORITHMS.contains(&header.alg)
        || !(config.algorithms.is_empty() || config.algorithms.contains(&named))
    {
        return Err(format!("oidc: unsupported signing algorithm {named}"));
    }
    let set = keys
        .current()
        .ok_or("oidc: the issuer's keys have not been fetched yet")?;
    let candidates: Vec<_> = set
        .keys
        .iter()
        .filter(|k| header.kid.is_none() || k.common.key_id == header.kid)
        .collect();
    if candidates.is_empty() {
        keys.ask_again();
        return Err("oidc: the token names a key the issuer does not publish".into());
    }
    let mut validation = Validation::new(header.alg);
    validation.leeway = 0;
    // A token made for later is not good yet (go-oidc checks `nbf` too).
    validation.validate_nbf = true;
    validation.set_issuer(&[&config.url]);
    validation.set_audience(&config.audiences);
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    let mut last = String::from("oidc: no key verifies the token");
    for jwk in candidates {
        let Ok(key) = DecodingKey::from_jwk(jwk) else {
            continue;
        };
        match jsonwebtoken::decode::<Value>(token, &key, &validation) {
            Ok(data) => return Ok(data.claims),
            Err(e) => last = format!("oidc: verify token: {e}"),
        }
    }
    Err(last)
}

/// The user `claims` name, as the issuer's rules and mappings say.
fn user(config: &IssuerConfig, claims: &Value) -> Result<UserInfo, String> {
    let mut cel = Cel::new(claims);
    for rule in &config.claim_rules {
        match rule {
            ClaimRule::Equals { claim, value } => {
                if claims[claim].as_str() != Some(value.as_str()) {
                    return Err(format!(
                        "oidc: required claim {claim} not found or not {value:?}"
                    ));
                }
            }
            ClaimRule::Holds {
                expression,
                message,
            } => {
                if !cel.holds(expression)? {
                    return Err(format!(
                        "oidc: error evaluating claim validation expression: {message}"
                    ));
                }
            }
        }
    }
    let name = match &config.username {
        Mapping::Claim { claim, prefix } => {
            let name = claims[claim]
                .as_str()
                .filter(|n| !n.is_empty())
                .ok_or_else(|| format!("oidc: claim {claim:?} not present or not a string"))?;
            if claim == "email" {
                match claims.get("email_verified") {
                    None | Some(Value::Bool(true)) => {}
                    Some(Value::Bool(false)) => return Err("oidc: email not verified".into()),
                    Some(_) => return Err("oidc: email_verified is not a boolean".into()),
                }
            }
            format!("{prefix}{name}")
        }
        Mapping::Expression(expression) => cel.string(expression)?,
    };
    if name.is_empty() {
        return Err("oidc: the username is empty".into());
    }
    let groups = match &config.groups {
        None => Vec::new(),
        Some(Mapping::Claim { claim, prefix }) => strings(&claims[claim], claim)?
            .into_iter()
            .map(|g| format!("{prefix}{g}"))
            .collect(),
        Some(Mapping::Expression(expression)) => cel.strings(expression)?,
    };
    let mut seen = HashSet::new();
    let groups: Vec<String> = groups
        .into_iter()
        .filter(|g| seen.insert(g.clone()))
        .collect();
    let mut user = UserInfo::new(name, groups);
    user.uid = match &config.uid {
        None => String::new(),
        Some(Mapping::Claim { claim, .. }) => claims[claim]
            .as_str()
            .ok_or_else(|| format!("oidc: claim {claim:?} not present or not a string"))?
            .to_owned(),
        Some(Mapping::Expression(expression)) => cel.string(expression)?,
    };
    for (key, expression) in &config.extra {
        let values = cel.strings(expression)?;
        if !values.is_empty() {
            user.extra.insert(key.clone(), values);
        }
    }
    if !config.user_rules.is_empty() {
        let view = serde_json::json!({"username": user.name, "uid": user.uid,
            "groups": user.groups, "extra": user.extra});
        let bound = crate::cel::from_json(&view);
        for (expression, message) in &config.user_rules {
            let value =
                crate::cel::evaluate(&expression.program, &[("user", bound.clone())], &cel.budget)
                    .map_err(|e| {
                        format!("oidc: error evaluating user validation expression: {e}")
                    })?;
            if !crate::cel::as_bool(&value).map_err(|e| e.to_string())? {
                return Err(format!(
                    "oidc: error evaluating user validation expression: {message}"
                ));
            }
        }
    }
    Ok(user)
}

/// A claim that holds a string or a list of strings, as a list.
fn strings(value: &Value, claim: &str) -> Result<Vec<String>, String> {
    match value {
        Value::Null => Ok(Vec::new()),
        Value::String(one) => Ok(vec![one.clone()]),
        Value::Array(list) => list
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("oidc: claim {claim:?} holds a non-string value"))
            })
            .collect(),
        _ => Err(format!(
            "oidc: claim {claim:?} is not a string or a list of strings"
        )),
    }
}

/// The claims as CEL sees them, made once per token when an expression
/// asks, and the budget all of the token's expressions share.
struct Cel<'a> {
    claims: &'a Value,
    bound: Option<crate::cel::Value>,
    budget: Arc<crate::cel::Budget>,
}

impl<'a> Cel<'a> {
    fn new(claims: &'a Value) -> Self {
        Self {
            claims,
            bound: None,
            budget: crate::cel::Budget::standard(),
        }
    }

    fn run(&mut self, expression: &Expression) -> Result<crate::cel::Value, String> {
        let claims = self
            .bound
            .get_or_insert_with(|| crate::cel::from_json(self.claims))
            .clone();
        crate::cel::evaluate(&expression.program, &[("claims", claims)], &self.budget)
            .map_err(|e| format!("oidc: error evaluating {:?}: {e}", expression.source))
    }

    fn holds(&mut self, expression: &Expression) -> Result<bool, String> {
        let value = self.run(expression)?;
        crate::cel::as_bool(&value).map_err(|e| e.to_string())
    }

    fn string(&mut self, expression: &Expression) -> Result<String, String> {
        let value = self.run(expression)?;
        crate::cel::as_string(&value).map_err(|e| e.to_string())
    }

    /// A string or a list of strings, as a list.
    fn strings(&mut self, expression: &Expression) -> Result<Vec<String>, String> {
        let value = self.run(expression)?;
        let json = crate::cel::to_json(&value).ok_or_else(|| {
            format!(
                "oidc: {:?} gave a value that is not JSON",
                expression.source
            )
        })?;
        strings(&json, &expression.source)
    }
}

#[cfg(test)]
mod tests;
