//! The `AuthenticationConfiguration` file (`--authentication-config`), as
//! upstream's API server reads it: a list of JWT issuers, each with the
//! audiences its tokens must name and how their claims become a user.
//! Claims are mapped by name (`claim`, `prefix`); CEL `expression`s,
//! `extra` mappings and user validation rules are refused with a message
//! saying so, rather than ignored, so no rule an administrator wrote is
//! silently skipped.

use std::path::{Path, PathBuf};

use serde::Deserialize;

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
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct JwtEntry {
    issuer: IssuerEntry,
    #[serde(default)]
    claim_validation_rules: Vec<RuleEntry>,
    claim_mappings: MappingsEntry,
    #[serde(default)]
    user_validation_rules: Vec<serde_yaml::Value>,
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
    extra: Vec<serde_yaml::Value>,
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
    /// Claims that must hold exactly these string values.
    pub required_claims: Vec<(String, String)>,
    /// The claim naming the user, and what is put before its value.
    pub username: (String, String),
    /// The claim listing the user's groups, and each group's prefix.
    pub groups: Option<(String, String)>,
    /// The claim holding the user's uid.
    pub uid: Option<String>,
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
        required_claims,
        username: (claim, prefix),
        groups: flags
            .groups_claim
            .filter(|c| !c.is_empty())
            .map(|c| (c, flags.groups_prefix)),
        uid: None,
        algorithms: if flags.signing_algs.is_empty() {
            vec!["RS256".to_owned()]
        } else {
            flags.signing_algs
        },
    })
}

/// Reads and checks the file at `path`.
pub fn load(path: &Path) -> Result<Vec<IssuerConfig>, OidcConfigError> {
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

/// The issuers `text` configures; `taken` are issuers this server itself
/// signs for (its service accounts'), which no entry may claim.
pub(crate) fn parse(text: &str, taken: &[&str]) -> Result<Vec<IssuerConfig>, Parsed> {
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
    if errors.is_empty() {
        Ok(issuers)
    } else {
        Err(Parsed::Invalid(format!("[{}]", errors.join(", "))))
    }
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
    let unsupported = |path: String, errors: &mut Vec<String>| {
        errors.push(format!(
            "{path}: Forbidden: CEL expressions, extra mappings and user validation rules are not supported by skiff; map claims by name"
        ));
    };
    let mut required_claims = Vec::new();
    for (j, rule) in entry.claim_validation_rules.iter().enumerate() {
        let path = format!("{at}.claimValidationRules[{j}]");
        if rule.expression.is_some() || rule.message.is_some() {
            unsupported(format!("{path}.expression"), errors);
            continue;
        }
        match &rule.claim {
            Some(claim) if !claim.is_empty() => required_claims.push((
                claim.clone(),
                rule.required_value.clone().unwrap_or_default(),
            )),
            _ => errors.push(format!(
                "{path}.claim: Required value: claim or expression is required"
            )),
        }
    }
    if !entry.user_validation_rules.is_empty() {
        unsupported(format!("{at}.userValidationRules"), errors);
    }
    let mappings = entry.claim_mappings;
    if !mappings.extra.is_empty() {
        unsupported(format!("{at}.claimMappings.extra"), errors);
    }
    let username = match mappings.username {
        Some(ClaimEntry {
            expression: Some(_),
            ..
        }) => {
            unsupported(format!("{at}.claimMappings.username.expression"), errors);
            None
        }
        Some(ClaimEntry {
            claim: Some(claim),
            prefix,
            ..
        }) if !claim.is_empty() => match prefix {
            Some(prefix) => Some((claim, prefix)),
            None => {
                errors.push(format!(
                    "{at}.claimMappings.username.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing"
                ));
                None
            }
        },
        _ => {
            errors.push(format!(
                "{at}.claimMappings.username: Required value: claim or expression is required"
            ));
            None
        }
    };
    let groups = match mappings.groups {
        Some(ClaimEntry {
            expression: Some(_),
            ..
        }) => {
            unsupported(format!("{at}.claimMappings.groups.expression"), errors);
            None
        }
        Some(ClaimEntry {
            claim: Some(claim),
            prefix,
            ..
        }) if !claim.is_empty() => match prefix {
            Some(prefix) => Some((claim, prefix)),
            None => {
                errors.push(format!(
                    "{at}.claimMappings.groups.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing"
                ));
                None
            }
        },
        _ => None,
    };
    let uid = match mappings.uid {
        Some(ClaimEntry {
            expression: Some(_),
            ..
        }) => {
            unsupported(format!("{at}.claimMappings.uid.expression"), errors);
            None
        }
        Some(ClaimEntry { claim, .. }) => claim.filter(|c| !c.is_empty()),
        None => None,
    };
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
        required_claims,
        username: username?,
        groups,
        uid,
        algorithms: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAKEN: &[&str] = &["https://kubernetes.default.svc.cluster.local"];

    #[test]
    fn a_claim_mapped_issuer_is_read() {
        let issuers = parse(
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
        assert_eq!(
            issuers,
            [IssuerConfig {
                url: "https://issuer.example".into(),
                discovery_url: "https://issuer.example/.well-known/openid-configuration".into(),
                certificate_authority: None,
                audiences: vec!["skiff".into()],
                required_claims: vec![("hd".into(), "example.com".into())],
                username: ("sub".into(), "oidc:".into()),
                groups: Some(("groups".into(), String::new())),
                uid: Some("sub".into()),
                algorithms: Vec::new(),
            }]
        );
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
            ("sub".into(), "https://issuer.example#".into()),
            "a claim other than email is prefixed with the issuer"
        );
        assert_eq!(issuer.audiences, ["skiff"]);
        assert_eq!(issuer.groups, Some(("groups".into(), String::new())));
        assert_eq!(
            issuer.required_claims,
            [("hd".into(), "example.com".into())]
        );
        assert_eq!(issuer.algorithms, ["RS256"]);
        let by_email = from_flags(OidcFlags {
            issuer_url: "https://issuer.example".into(),
            client_id: "skiff".into(),
            username_claim: "email".into(),
            ..OidcFlags::default()
        })
        .unwrap();
        assert_eq!(by_email.username, ("email".into(), String::new()));
        let none = from_flags(OidcFlags {
            issuer_url: "https://issuer.example".into(),
            client_id: "skiff".into(),
            username_prefix: Some("-".into()),
            ..OidcFlags::default()
        })
        .unwrap();
        assert_eq!(none.username.1, "");
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
    fn what_upstream_refuses_and_what_skiff_does_not_support_is_refused() {
        let refused = parse(
            "apiVersion: apiserver.config.k8s.io/v1beta1
kind: AuthenticationConfiguration
jwt:
- issuer: {url: 'http://plain.example', audiences: []}
  claimMappings:
    username: {claim: sub}
- issuer: {url: 'https://kubernetes.default.svc.cluster.local', audiences: [a]}
  claimMappings:
    username: {expression: 'claims.sub'}
",
            TAKEN,
        )
        .unwrap_err();
        assert_eq!(
            refused,
            Parsed::Invalid(
                "[jwt[0].issuer.url: Invalid value: \"http://plain.example\": URL scheme must be https, \
                 jwt[0].issuer.audiences: Required value: at least one jwt[0].issuer.audiences is required, \
                 jwt[0].claimMappings.username.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing, \
                 jwt[1].issuer.url: Invalid value: \"https://kubernetes.default.svc.cluster.local\": URL must not overlap with disallowed issuers: [\"https://kubernetes.default.svc.cluster.local\"], \
                 jwt[1].claimMappings.username.expression: Forbidden: CEL expressions, extra mappings and user validation rules are not supported by skiff; map claims by name]"
                    .into()
            )
        );
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
