//! The `AuthenticationConfiguration` file (`--authentication-config`), as
//! upstream's API server reads it: a list of JWT issuers, each with the
//! audiences its tokens must name, the rules its claims must pass and how
//! they become a user. A value comes from a claim by name (with a prefix)
//! or from a CEL expression over `claims`, compiled when the file is read
//! so a bad one stops the start rather than a login; user validation rules
//! are expressions over `user`. Its `anonymous` section says which
//! requests without credentials are let in ([`AnonymousAuth`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use crate::authn::AnonymousAuth;
use crate::cel::{self, Declarations, Program};

/// The API versions upstream has served this file under.
const API_VERSIONS: &[&str] = &[
    "apiserver.config.k8s.io/v1alpha1",
    "apiserver.config.k8s.io/v1beta1",
    "apiserver.config.k8s.io/v1",
];

/// Why the file cannot be used; the server does not start with it.
#[derive(Debug, thiserror::Error)]
pub enum OidcConfigError {
    /// The file could not be read.
    #[error("reading the authentication configuration {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not an AuthenticationConfiguration.
    #[error("decoding the authentication configuration {path}: {message}")]
    Decode {
        /// The file.
        path: PathBuf,
        /// What the decoder said.
        message: String,
    },
    /// The `--oidc-*` flags do not describe an issuer.
    #[error("{message}")]
    Flags {
        /// What is wrong.
        message: String,
    },
    /// The configuration breaks upstream's rules (every problem, joined).
    #[error("invalid authentication configuration {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Every field error, upstream's way.
        message: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct File {
    api_version: String,
    kind: String,
    #[serde(default)]
    jwt: Vec<JwtEntry>,
    anonymous: Option<AnonymousEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AnonymousEntry {
    #[serde(default)]
    enabled: bool,
    #[serde(default)]
    conditions: Vec<ConditionEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ConditionEntry {
    path: String,
}

/// What an authentication configuration file sets up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthenticationConfig {
    /// The JWT issuers whose tokens authenticate users.
    pub issuers: Vec<IssuerConfig>,
    /// Which requests without credentials are let in, when the file says
    /// (else `--anonymous-auth` does).
    pub anonymous: Option<AnonymousAuth>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct JwtEntry {
    issuer: IssuerEntry,
    #[serde(default)]
    claim_validation_rules: Vec<RuleEntry>,
    claim_mappings: MappingsEntry,
    #[serde(default)]
    user_validation_rules: Vec<RuleEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IssuerEntry {
    #[serde(default)]
    url: String,
    #[serde(default, rename = "discoveryURL")]
    discovery_url: Option<String>,
    #[serde(default)]
    certificate_authority: Option<String>,
    #[serde(default)]
    audiences: Vec<String>,
    #[serde(default)]
    audience_match_policy: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RuleEntry {
    #[serde(default)]
    claim: Option<String>,
    #[serde(default)]
    required_value: Option<String>,
    #[serde(default)]
    expression: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MappingsEntry {
    #[serde(default)]
    username: Option<ClaimEntry>,
    #[serde(default)]
    groups: Option<ClaimEntry>,
    #[serde(default)]
    uid: Option<ClaimEntry>,
    #[serde(default)]
    extra: Vec<ExtraEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ExtraEntry {
    #[serde(default)]
    key: String,
    #[serde(default)]
    value_expression: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ClaimEntry {
    #[serde(default)]
    claim: Option<String>,
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    expression: Option<String>,
}

/// A CEL expression of the configuration, compiled.
#[derive(Debug, Clone)]
pub struct Expression {
    pub(crate) source: String,
    pub(crate) program: Arc<Program>,
}

impl PartialEq for Expression {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for Expression {}

/// How one value of the user is read from a token's claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mapping {
    /// A claim by name, each value with `prefix` put before it.
    Claim {
        /// The claim.
        claim: String,
        /// Put before the value.
        prefix: String,
    },
    /// A CEL expression over `claims`.
    Expression(Expression),
}

/// A rule every token's claims must pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimRule {
    /// The claim holds exactly this string.
    Equals {
        /// The claim.
        claim: String,
        /// Its required value.
        value: String,
    },
    /// The expression over `claims` is true; otherwise `message` says why.
    Holds {
        /// The rule.
        expression: Expression,
        /// Why a token fails it.
        message: String,
    },
}

/// One issuer whose tokens authenticate users.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerConfig {
    /// The issuer URL; a token's `iss` must be exactly this.
    pub url: String,
    /// Where its discovery document is (default `<url>/.well-known/openid-configuration`).
    pub discovery_url: String,
    /// PEM certificates the issuer's HTTPS server must chain to (the
    /// system roots when absent).
    pub certificate_authority: Option<String>,
    /// A token's `aud` must name at least one of these.
    pub audiences: Vec<String>,
    /// Rules the claims must pass.
    pub claim_rules: Vec<ClaimRule>,
    /// The user's name.
    pub username: Mapping,
    /// The user's groups.
    pub groups: Option<Mapping>,
    /// The user's uid.
    pub uid: Option<Mapping>,
    /// Further facts about the user: keys and the expressions giving them.
    pub extra: Vec<(String, Expression)>,
    /// Rules over the resulting `user`, each with why a user fails it.
    pub user_rules: Vec<(Expression, String)>,
    /// The signing algorithms accepted (`RS256`, `ES256`, …); empty for
    /// every asymmetric one.
    pub algorithms: Vec<String>,
}

/// kube-apiserver's older `--oidc-*` flags, one issuer.
#[derive(Debug, Clone, Default)]
pub struct OidcFlags {
    /// `--oidc-issuer-url`.
    pub issuer_url: String,
    /// `--oidc-client-id`: the audience tokens must name.
    pub client_id: String,
    /// `--oidc-username-claim` (`sub` when empty).
    pub username_claim: String,
    /// `--oidc-username-prefix`: `-` for none; unset, the issuer URL and
    /// `#` unless the claim is `email`.
    pub username_prefix: Option<String>,
    /// `--oidc-groups-claim`.
    pub groups_claim: Option<String>,
    /// `--oidc-groups-prefix`.
    pub groups_prefix: String,
    /// `--oidc-ca-file`: the PEM file the issuer's HTTPS must chain to.
    pub ca_file: Option<PathBuf>,
    /// `--oidc-required-claim key=value`, repeated.
    pub required_claims: Vec<String>,
    /// `--oidc-signing-algs` (`RS256` when empty, as upstream).
    pub signing_algs: Vec<String>,
}

/// The issuer the `--oidc-*` flags describe, by upstream's defaults.
pub fn from_flags(flags: OidcFlags) -> Result<IssuerConfig, OidcConfigError> {
    let invalid = |message: String| OidcConfigError::Flags { message };
    if flags.issuer_url.is_empty() || flags.client_id.is_empty() {
        return Err(invalid(
            "--oidc-issuer-url and --oidc-client-id must be given together".into(),
        ));
    }
    if !flags.issuer_url.starts_with("https://") {
        return Err(invalid(format!(
            "--oidc-issuer-url {:?} must use the https scheme",
            flags.issuer_url
        )));
    }
    if flags.issuer_url == crate::tokens::ISSUER {
        return Err(invalid(format!(
            "--oidc-issuer-url {:?} is this server's service-account issuer",
            flags.issuer_url
        )));
    }
    let claim = if flags.username_claim.is_empty() {
        "sub".to_owned()
    } else {
        flags.username_claim
    };
    let prefix = match flags.username_prefix.as_deref() {
        Some("-") => String::new(),
        Some(prefix) => prefix.to_owned(),
        None if claim == "email" => String::new(),
        None => format!("{}#", flags.issuer_url),
    };
    let certificate_authority = match &flags.ca_file {
        Some(path) => {
            Some(
                std::fs::read_to_string(path).map_err(|source| OidcConfigError::Read {
                    path: path.clone(),
                    source,
                })?,
            )
        }
        None => None,
    };
    let mut required_claims = Vec::new();
    for pair in &flags.required_claims {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| invalid(format!("--oidc-required-claim {pair:?} is not key=value")))?;
        required_claims.push((key.to_owned(), value.to_owned()));
    }
    Ok(IssuerConfig {
        discovery_url: format!(
            "{}/.well-known/openid-configuration",
            flags.issuer_url.trim_end_matches('/')
        ),
        url: flags.issuer_url,
        certificate_authority,
        audiences: vec![flags.client_id],
        claim_rules: required_claims
            .into_iter()
            .map(|(claim, value)| ClaimRule::Equals { claim, value })
            .collect(),
        username: Mapping::Claim { claim, prefix },
        groups: flags
            .groups_claim
            .filter(|c| !c.is_empty())
            .map(|claim| Mapping::Claim {
                claim,
                prefix: flags.groups_prefix,
            }),
        uid: None,
        extra: Vec::new(),
        user_rules: Vec::new(),
        algorithms: if flags.signing_algs.is_empty() {
            vec!["RS256".to_owned()]
        } else {
            flags.signing_algs
        },
    })
}

/// Reads and checks the file at `path`.
pub fn load(path: &Path) -> Result<AuthenticationConfig, OidcConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| OidcConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, &[crate::tokens::ISSUER]).map_err(|e| match e {
        Parsed::Decode(message) => OidcConfigError::Decode {
            path: path.to_path_buf(),
            message,
        },
        Parsed::Invalid(message) => OidcConfigError::Invalid {
            path: path.to_path_buf(),
            message,
        },
    })
}

/// Why [`parse`] failed, before a path is attached.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Parsed {
    Decode(String),
    Invalid(String),
}

/// What `text` configures; `taken` are issuers this server itself signs
/// for (its service accounts'), which no entry may claim.
pub(crate) fn parse(text: &str, taken: &[&str]) -> Result<AuthenticationConfig, Parsed> {
    let file: File = serde_yaml::from_str(text).map_err(|e| Parsed::Decode(e.to_string()))?;
    let mut errors = Vec::new();
    if file.kind != "AuthenticationConfiguration"
        || !API_VERSIONS.contains(&file.api_version.as_str())
    {
        errors.push(format!(
            "kind: Invalid value: \"{}/{}\": must be an AuthenticationConfiguration of {}",
            file.api_version,
            file.kind,
            API_VERSIONS.join(", ")
        ));
    }
    let mut issuers = Vec::new();
    for (i, entry) in file.jwt.into_iter().enumerate() {
        let at = format!("jwt[{i}]");
        if let Some(issuer) = entry_config(entry, &at, taken, &issuers, &mut errors) {
            issuers.push(issuer);
        }
    }
    let anonymous = file
        .anonymous
        .map(|entry| anonymous_auth(entry, &mut errors));
    if errors.is_empty() {
        Ok(AuthenticationConfig { issuers, anonymous })
    } else {
        Err(Parsed::Invalid(format!("[{}]", errors.join(", "))))
    }
}

/// The `anonymous` section: all requests without credentials, none, or
/// only those for the listed paths (exact, as upstream matches them).
fn anonymous_auth(entry: AnonymousEntry, errors: &mut Vec<String>) -> AnonymousAuth {
    if !entry.enabled {
        if !entry.conditions.is_empty() {
            // Upstream shows the value as Go's `%#v` of the list.
            let listed: Vec<String> = entry
                .conditions
                .iter()
                .map(|c| format!("apiserver.AnonymousAuthCondition{{Path:{:?}}}", c.path))
                .collect();
            errors.push(format!(
                "anonymous.conditions: Invalid value: []apiserver.AnonymousAuthCondition{{{}}}: \
                 enabled should be set to true when conditions are defined",
                listed.join(", ")
            ));
        }
        return AnonymousAuth::Disabled;
    }
    if entry.conditions.is_empty() {
        return AnonymousAuth::Enabled;
    }
    AnonymousAuth::Paths(entry.conditions.into_iter().map(|c| c.path).collect())
}

fn entry_config(
    entry: JwtEntry,
    at: &str,
    taken: &[&str],
    earlier: &[IssuerConfig],
    errors: &mut Vec<String>,
) -> Option<IssuerConfig> {
    let before = errors.len();
    let issuer = entry.issuer;
    let url = issuer.url.clone();
    if url.is_empty() {
        errors.push(format!("{at}.issuer.url: Required value"));
    } else if !url.starts_with("https://") {
        errors.push(format!(
            "{at}.issuer.url: Invalid value: {url:?}: URL scheme must be https"
        ));
    } else if taken.contains(&url.as_str()) {
        errors.push(format!(
            "{at}.issuer.url: Invalid value: {url:?}: URL must not overlap with disallowed issuers: {taken:?}"
        ));
    } else if earlier.iter().any(|e| e.url == url) {
        errors.push(format!("{at}.issuer.url: Duplicate value: {url:?}"));
    }
    if let Some(discovery) = &issuer.discovery_url
        && !discovery.starts_with("https://")
    {
        errors.push(format!(
            "{at}.issuer.discoveryURL: Invalid value: {discovery:?}: URL scheme must be https"
        ));
    }
    if issuer.audiences.is_empty() {
        errors.push(format!(
            "{at}.issuer.audiences: Required value: at least one {at}.issuer.audiences is required"
        ));
    }
    if let Some(policy) = issuer.audience_match_policy.as_deref()
        && !(policy == "MatchAny" || (policy.is_empty() && issuer.audiences.len() == 1))
    {
        errors.push(format!(
            "{at}.issuer.audienceMatchPolicy: Invalid value: {policy:?}: audienceMatchPolicy must be MatchAny for multiple audiences"
        ));
    }
    if let Some(pem) = &issuer.certificate_authority
        && crate::tls::bundle_roots(pem.as_bytes()).is_none()
    {
        errors.push(format!(
            "{at}.issuer.certificateAuthority: Invalid value: \"<omitted>\": data does not contain any valid RSA or ECDSA certificates"
        ));
    }
    let claim_rules = claim_rules(entry.claim_validation_rules, at, errors);
    let mut user_rules = Vec::new();
    for (j, rule) in entry.user_validation_rules.into_iter().enumerate() {
        let path = format!("{at}.userValidationRules[{j}]");
        match rule.expression.filter(|e| !e.is_empty()) {
            Some(source) => {
                if let Some(expression) =
                    compiled(&source, &format!("{path}.expression"), "user", errors)
                {
                    user_rules.push((expression, rule.message.unwrap_or_default()));
                }
            }
            None => errors.push(format!(
                "{path}.expression: Required value: expression is required"
            )),
        }
    }
    let mappings = entry.claim_mappings;
    let username_path = format!("{at}.claimMappings.username");
    let username = match mapping(mappings.username, &username_path, true, errors) {
        Some(Some(username)) => Some(username),
        Some(None) => {
            errors.push(format!(
                "{username_path}: Required value: claim or expression is required"
            ));
            None
        }
        None => None,
    };
    let groups = mapping(
        mappings.groups,
        &format!("{at}.claimMappings.groups"),
        true,
        errors,
    )
    .flatten();
    let uid = mapping(
        mappings.uid,
        &format!("{at}.claimMappings.uid"),
        false,
        errors,
    )
    .flatten();
    let mut extra: Vec<(String, Expression)> = Vec::new();
    for (j, entry) in mappings.extra.into_iter().enumerate() {
        let path = format!("{at}.claimMappings.extra[{j}]");
        if let Some(problem) = extra_key_problem(&entry.key) {
            errors.push(format!("{path}.key: {problem}"));
        } else if extra.iter().any(|(key, _)| *key == entry.key) {
            errors.push(format!("{path}.key: Duplicate value: {:?}", entry.key));
        }
        if entry.value_expression.is_empty() {
            errors.push(format!(
                "{path}.valueExpression: Required value: valueExpression is required"
            ));
        } else if let Some(expression) = compiled(
            &entry.value_expression,
            &format!("{path}.valueExpression"),
            "claims",
            errors,
        ) {
            extra.push((entry.key, expression));
        }
    }
    // A name taken from an email the issuer may not have verified would
    // let anyone register that address elsewhere and become its owner.
    if let Some(Mapping::Expression(expression)) = &username
        && names_claim(&expression.source, "email")
    {
        let verified = names_claim(&expression.source, "email_verified")
            || extra.iter().any(|(_, e)| names_claim(&e.source, "email_verified"))
            || claim_rules.iter().any(|rule| {
                matches!(rule, ClaimRule::Holds { expression, .. } if names_claim(&expression.source, "email_verified"))
            });
        if !verified {
            errors.push(format!(
                "{username_path}.expression: Invalid value: {:?}: claims.email_verified must be used in claimMappings.username.expression or claimMappings.extra[*].valueExpression or claimValidationRules[*].expression when claims.email is used in claimMappings.username.expression",
                expression.source
            ));
        }
    }
    if errors.len() > before {
        return None;
    }
    let discovery_url = issuer.discovery_url.unwrap_or_else(|| {
        format!(
            "{}/.well-known/openid-configuration",
            url.trim_end_matches('/')
        )
    });
    Some(IssuerConfig {
        url,
        discovery_url,
        certificate_authority: issuer.certificate_authority,
        audiences: issuer.audiences,
        claim_rules,
        username: username?,
        groups,
        uid,
        extra,
        user_rules,
        algorithms: Vec::new(),
    })
}

/// The claim validation rules of one issuer, checked and compiled.
fn claim_rules(rules: Vec<RuleEntry>, at: &str, errors: &mut Vec<String>) -> Vec<ClaimRule> {
    let mut out = Vec::new();
    for (j, rule) in rules.into_iter().enumerate() {
        let path = format!("{at}.claimValidationRules[{j}]");
        let claim = rule.claim.filter(|c| !c.is_empty());
        let expression = rule.expression.filter(|e| !e.is_empty());
        match (claim, expression) {
            (Some(_), Some(_)) => errors.push(format!(
                "{path}: Invalid value: \"claim\": claim and expression can't both be set"
            )),
            (None, None) => errors.push(format!(
                "{path}: Required value: claim or expression is required"
            )),
            (Some(claim), None) => {
                if rule.message.is_some() {
                    errors.push(format!(
                        "{path}.message: Invalid value: \"message\": message can't be set when claim is set"
                    ));
                }
                out.push(ClaimRule::Equals {
                    claim,
                    value: rule.required_value.unwrap_or_default(),
                });
            }
            (None, Some(source)) => {
                if rule.required_value.is_some() {
                    errors.push(format!(
                        "{path}.requiredValue: Invalid value: \"requiredValue\": requiredValue can't be set when expression is set"
                    ));
                }
                if let Some(expression) =
                    compiled(&source, &format!("{path}.expression"), "claims", errors)
                {
                    out.push(ClaimRule::Holds {
                        expression,
                        message: rule.message.unwrap_or_default(),
                    });
                }
            }
        }
    }
    out
}

/// A claim mapping at `path`: `None` when it is wrong (the errors say
/// why), `Some(None)` when it is not set.
fn mapping(
    entry: Option<ClaimEntry>,
    path: &str,
    prefixed: bool,
    errors: &mut Vec<String>,
) -> Option<Option<Mapping>> {
    let Some(entry) = entry else {
        return Some(None);
    };
    let claim = entry.claim.filter(|c| !c.is_empty());
    let expression = entry.expression.filter(|e| !e.is_empty());
    match (claim, expression) {
        (Some(_), Some(_)) => {
            errors.push(format!(
                "{path}: Invalid value: \"\": claim and expression can't both be set"
            ));
            None
        }
        (None, None) => Some(None),
        (Some(claim), None) => match (entry.prefix, prefixed) {
            (Some(prefix), true) => Some(Some(Mapping::Claim { claim, prefix })),
            (None, true) => {
                errors.push(format!(
                    "{path}.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing"
                ));
                None
            }
            (_, false) => Some(Some(Mapping::Claim {
                claim,
                prefix: String::new(),
            })),
        },
        (None, Some(source)) => {
            if entry.prefix.is_some() {
                errors.push(format!(
                    "{path}.prefix: Invalid value: \"\": prefix can't be set when expression is set"
                ));
                return None;
            }
            compiled(&source, &format!("{path}.expression"), "claims", errors)
                .map(|e| Some(Mapping::Expression(e)))
        }
    }
}

/// `source` compiled for an expression naming only `root`.
fn compiled(
    source: &str,
    path: &str,
    root: &'static str,
    errors: &mut Vec<String>,
) -> Option<Expression> {
    match cel::compile(source, &Declarations::roots(&[root])) {
        Ok(program) => Some(Expression {
            source: source.to_owned(),
            program,
        }),
        Err(error) => {
            errors.push(format!(
                "{path}: Invalid value: {source:?}: compilation failed: {error}"
            ));
            None
        }
    }
}

/// Whether `source` reads `claims.<name>` (and not a longer name).
fn names_claim(source: &str, name: &str) -> bool {
    let needle = format!("claims.{name}");
    source.match_indices(&needle).any(|(at, _)| {
        source[at + needle.len()..]
            .chars()
            .next()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'))
    })
}

/// Why `key` cannot name an extra fact of a user: it must be a
/// lowercase domain-prefixed path outside Kubernetes' own domains.
fn extra_key_problem(key: &str) -> Option<String> {
    if key.is_empty() {
        return Some("Required value: key is required".into());
    }
    let Some((domain, rest)) = key.split_once('/') else {
        return Some(format!(
            "Invalid value: {key:?}: key must be a domain-prefix path (e.g. example.org/foo)"
        ));
    };
    if domain.is_empty() || rest.is_empty() || !domain.contains('.') {
        return Some(format!(
            "Invalid value: {key:?}: key must be a domain-prefix path (e.g. example.org/foo)"
        ));
    }
    if key != key.to_lowercase() {
        return Some(format!("Invalid value: {key:?}: key must be lowercase"));
    }
    let reserved = ["kubernetes.io", "k8s.io"]
        .iter()
        .any(|d| domain == *d || domain.ends_with(&format!(".{d}")));
    reserved.then(|| format!("Invalid value: {key:?}: k8s.io, kubernetes.io and their subdomains are reserved for Kubernetes use"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAKEN: &[&str] = &["https://kubernetes.default.svc.cluster.local"];

    #[test]
    fn a_claim_mapped_issuer_is_read() {
        let config = parse(
            "apiVersion: apiserver.config.k8s.io/v1beta1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: https://issuer.example
    audiences: [skiff]
  claimValidationRules:
  - claim: hd
    requiredValue: example.com
  claimMappings:
    username: {claim: sub, prefix: 'oidc:'}
    groups: {claim: groups, prefix: ''}
    uid: {claim: sub}
",
            TAKEN,
        )
        .unwrap();
        assert_eq!(config.anonymous, None, "the file leaves it to the flag");
        assert_eq!(
            config.issuers,
            [IssuerConfig {
                url: "https://issuer.example".into(),
                discovery_url: "https://issuer.example/.well-known/openid-configuration".into(),
                certificate_authority: None,
                audiences: vec!["skiff".into()],
                claim_rules: vec![ClaimRule::Equals {
                    claim: "hd".into(),
                    value: "example.com".into()
                }],
                username: Mapping::Claim {
                    claim: "sub".into(),
                    prefix: "oidc:".into()
                },
                groups: Some(Mapping::Claim {
                    claim: "groups".into(),
                    prefix: String::new()
                }),
                uid: Some(Mapping::Claim {
                    claim: "sub".into(),
                    prefix: String::new()
                }),
                extra: Vec::new(),
                user_rules: Vec::new(),
                algorithms: Vec::new(),
            }]
        );
    }

    #[test]
    fn expressions_compile_when_the_file_is_read() {
        let config = parse(
            "apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer: {url: 'https://issuer.example', audiences: [a, b], audienceMatchPolicy: MatchAny}
  claimValidationRules:
  - {expression: 'claims.email_verified == true', message: 'email not verified'}
  claimMappings:
    username: {expression: \"'oidc:' + claims.email\"}
    groups: {expression: 'claims.roles'}
    extra:
    - {key: 'example.org/team', valueExpression: 'claims.team'}
  userValidationRules:
  - {expression: \"!user.username.startsWith('system:')\", message: 'no system users'}
",
            TAKEN,
        )
        .unwrap();
        let issuer = &config.issuers[0];
        assert!(
            matches!(&issuer.username, Mapping::Expression(e) if e.source == "'oidc:' + claims.email")
        );
        assert_eq!(issuer.extra.len(), 1);
        assert_eq!(issuer.user_rules[0].1, "no system users");
    }

    #[test]
    fn the_older_flags_take_upstreams_defaults() {
        let issuer = from_flags(OidcFlags {
            issuer_url: "https://issuer.example".into(),
            client_id: "skiff".into(),
            groups_claim: Some("groups".into()),
            required_claims: vec!["hd=example.com".into()],
            ..OidcFlags::default()
        })
        .unwrap();
        assert_eq!(
            issuer.username,
            Mapping::Claim {
                claim: "sub".into(),
                prefix: "https://issuer.example#".into()
            },
            "a claim other than email is prefixed with the issuer"
        );
        assert_eq!(issuer.audiences, ["skiff"]);
        assert_eq!(
            issuer.groups,
            Some(Mapping::Claim {
                claim: "groups".into(),
                prefix: String::new()
            })
        );
        assert_eq!(
            issuer.claim_rules,
            [ClaimRule::Equals {
                claim: "hd".into(),
                value: "example.com".into()
            }]
        );
        assert_eq!(issuer.algorithms, ["RS256"]);
        let by_email = from_flags(OidcFlags {
            issuer_url: "https://issuer.example".into(),
            client_id: "skiff".into(),
            username_claim: "email".into(),
            ..OidcFlags::default()
        })
        .unwrap();
        assert_eq!(
            by_email.username,
            Mapping::Claim {
                claim: "email".into(),
                prefix: String::new()
            }
        );
        let none = from_flags(OidcFlags {
            issuer_url: "https://issuer.example".into(),
            client_id: "skiff".into(),
            username_prefix: Some("-".into()),
            ..OidcFlags::default()
        })
        .unwrap();
        assert!(matches!(none.username, Mapping::Claim { prefix, .. } if prefix.is_empty()));
        for bad in [
            OidcFlags {
                issuer_url: "https://issuer.example".into(),
                ..OidcFlags::default()
            },
            OidcFlags {
                issuer_url: "http://issuer.example".into(),
                client_id: "skiff".into(),
                ..OidcFlags::default()
            },
        ] {
            assert!(from_flags(bad).is_err());
        }
    }

    #[test]
    fn the_anonymous_section_says_which_requests_without_credentials_go_on() {
        let anonymous = |section: &str| {
            parse(
                &format!(
                    "apiVersion: apiserver.config.k8s.io/v1beta1\n\
                     kind: AuthenticationConfiguration\nanonymous: {section}\n"
                ),
                TAKEN,
            )
            .map(|config| config.anonymous)
        };
        assert_eq!(
            anonymous("{enabled: true}"),
            Ok(Some(AnonymousAuth::Enabled))
        );
        assert_eq!(
            anonymous("{enabled: false}"),
            Ok(Some(AnonymousAuth::Disabled))
        );
        assert_eq!(
            anonymous("{enabled: true, conditions: [{path: /livez}, {path: /readyz}]}"),
            Ok(Some(AnonymousAuth::Paths(
                ["/livez".to_string(), "/readyz".to_string()].into()
            )))
        );
        // Conditions on a disabled (or unset, so disabled) section are
        // refused, as upstream refuses them.
        for section in [
            "{enabled: false, conditions: [{path: /livez}]}",
            "{conditions: [{path: /livez}]}",
        ] {
            assert_eq!(
                anonymous(section),
                Err(Parsed::Invalid(
                    "[anonymous.conditions: Invalid value: \
                     []apiserver.AnonymousAuthCondition{apiserver.AnonymousAuthCondition{Path:\"/livez\"}}: \
                     enabled should be set to true when conditions are defined]"
                        .into()
                )),
                "{section}"
            );
        }
    }

    #[test]
    fn what_upstream_refuses_is_refused() {
        let refused = parse(
            "apiVersion: apiserver.config.k8s.io/v1beta1
kind: AuthenticationConfiguration
jwt:
- issuer: {url: 'http://plain.example', audiences: []}
  claimMappings:
    username: {claim: sub}
- issuer: {url: 'https://kubernetes.default.svc.cluster.local', audiences: [a]}
  claimValidationRules:
  - {claim: hd, expression: 'true'}
  claimMappings:
    username: {expression: 'claims.email'}
    groups: {expression: 'claims.groups +', prefix: 'x:'}
    extra:
    - {key: 'example.org/Team', valueExpression: 'claims.team'}
    - {key: 'kubernetes.io/team', valueExpression: 'secrets.team'}
",
            TAKEN,
        )
        .unwrap_err();
        let Parsed::Invalid(message) = refused else {
            panic!("{refused:?}");
        };
        for expected in [
            "jwt[0].issuer.url: Invalid value: \"http://plain.example\": URL scheme must be https",
            "jwt[0].issuer.audiences: Required value: at least one jwt[0].issuer.audiences is required",
            "jwt[0].claimMappings.username.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing",
            "jwt[1].issuer.url: Invalid value: \"https://kubernetes.default.svc.cluster.local\": URL must not overlap with disallowed issuers: [\"https://kubernetes.default.svc.cluster.local\"]",
            "jwt[1].claimValidationRules[0]: Invalid value: \"claim\": claim and expression can't both be set",
            "jwt[1].claimMappings.groups.prefix: Invalid value: \"\": prefix can't be set when expression is set",
            "jwt[1].claimMappings.extra[0].key: Invalid value: \"example.org/Team\": key must be lowercase",
            "jwt[1].claimMappings.extra[1].key: Invalid value: \"kubernetes.io/team\": k8s.io, kubernetes.io and their subdomains are reserved for Kubernetes use",
            "jwt[1].claimMappings.extra[1].valueExpression: Invalid value: \"secrets.team\": compilation failed: ERROR: <input>: undeclared reference to 'secrets' (in container '')",
            "jwt[1].claimMappings.username.expression: Invalid value: \"claims.email\": claims.email_verified must be used in claimMappings.username.expression or claimMappings.extra[*].valueExpression or claimValidationRules[*].expression when claims.email is used in claimMappings.username.expression",
        ] {
            assert!(
                message.contains(expected),
                "missing {expected}\nin {message}"
            );
        }
        let Parsed::Decode(unknown) = parse(
            "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: AuthenticationConfiguration\nanonymus: {}\n",
            TAKEN,
        )
        .unwrap_err() else {
            panic!("an unknown field is a decode error");
        };
        assert!(unknown.contains("anonymus"), "{unknown}");
    }
}
