//! Upstream's `EncryptionConfiguration` (`apiserver.config.k8s.io/v1`), the
//! file of `--encryption-provider-config` and the form skiff keeps its own
//! managed keys in: which resources are encrypted, and by which providers
//! (the first writes, every one reads). Parsing checks what upstream
//! checks before a key is used: one provider type per entry, unique key
//! names, base64 secrets of a length the cipher takes, resource names that
//! are lower case and either exact, `*.<group>` or `*.*`.
//!
//! It never prints a secret: errors name the field, not its value.

use std::collections::HashSet;
use std::path::Path;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::providers::{Provider, ProviderKind};

/// The `apiVersion` accepted.
pub(super) const API_VERSION: &str = "apiserver.config.k8s.io/v1";
/// The `kind` accepted.
pub(super) const KIND: &str = "EncryptionConfiguration";

/// Why a configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read the encryption configuration {path}: {source}")]
    Read {
        /// The configuration file.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not an EncryptionConfiguration in YAML or JSON.
    #[error("the encryption configuration {path} cannot be parsed: {source}")]
    Parse {
        /// The configuration file.
        path: std::path::PathBuf,
        /// Why it did not parse.
        #[source]
        source: serde_yaml::Error,
    },
    /// The configuration parsed but cannot be used.
    #[error("the encryption configuration {path} is invalid: {}", .problems.join("; "))]
    Invalid {
        /// The configuration file.
        path: std::path::PathBuf,
        /// Every problem found.
        problems: Vec<String>,
    },
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EncryptionConfiguration {
    /// `EncryptionConfiguration`.
    #[serde(default)]
    pub kind: String,
    /// `apiserver.config.k8s.io/v1`.
    #[serde(default)]
    pub api_version: String,
    /// Which providers encrypt which resources.
    #[serde(default)]
    pub resources: Vec<ResourceConfiguration>,
}

/// One entry: resources and the providers that write and read them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceConfiguration {
    #[serde(default)]
    pub resources: Vec<String>,
    #[serde(default)]
    pub providers: Vec<ProviderConfiguration>,
}

/// One provider; exactly one field is set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfiguration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aesgcm: Option<KeysConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aescbc: Option<KeysConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secretbox: Option<KeysConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<IdentityConfiguration>,
    /// Recognised so it can be refused by name: skiff has no KMS plugins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kms: Option<serde_json::Value>,
}

/// `identity: {}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityConfiguration {}

/// The keys of a keyed provider, the first one writing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeysConfiguration {
    #[serde(default)]
    pub keys: Vec<Key>,
}

/// A named key; `secret` is base64 of the raw key.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Key {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub secret: String,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("name", &self.name)
            .field("secret", &"<redacted>")
            .finish()
    }
}

impl ProviderConfiguration {
    /// A keyed provider entry of `kind` with `keys`.
    pub fn keyed(kind: ProviderKind, keys: Vec<Key>) -> Self {
        let keys = Some(KeysConfiguration { keys });
        match kind {
            ProviderKind::AesGcm => Self {
                aesgcm: keys,
                ..Self::default()
            },
            ProviderKind::AesCbc => Self {
                aescbc: keys,
                ..Self::default()
            },
            ProviderKind::Secretbox => Self {
                secretbox: keys,
                ..Self::default()
            },
            ProviderKind::Identity => Self::identity(),
        }
    }

    /// `identity: {}`.
    pub fn identity() -> Self {
        Self {
            identity: Some(IdentityConfiguration {}),
            ..Self::default()
        }
    }

    /// The provider type and its keys (none for identity), when exactly one
    /// supported type is set.
    pub fn kind(&self) -> Option<(ProviderKind, &[Key])> {
        let set: Vec<(ProviderKind, &[Key])> = [
            (ProviderKind::AesGcm, self.aesgcm.as_ref()),
            (ProviderKind::AesCbc, self.aescbc.as_ref()),
            (ProviderKind::Secretbox, self.secretbox.as_ref()),
        ]
        .into_iter()
        .filter_map(|(kind, keys)| keys.map(|k| (kind, k.keys.as_slice())))
        .chain(
            self.identity
                .as_ref()
                .map(|_| (ProviderKind::Identity, &[][..])),
        )
        .collect();
        match (set.as_slice(), &self.kms) {
            ([one], None) => Some(*one),
            _ => None,
        }
    }

    /// The keys, mutable (none for identity).
    pub fn keys_mut(&mut self) -> Option<&mut Vec<Key>> {
        [&mut self.aesgcm, &mut self.aescbc, &mut self.secretbox]
            .into_iter()
            .find_map(|keys| keys.as_mut().map(|k| &mut k.keys))
    }
}

/// Which resources a configured name matches: upstream's `secrets`,
/// `deployments.apps`, `*.apps`, `*.` (the core group) and `*.*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePattern {
    /// The resource, or `None` for any.
    pub resource: Option<String>,
    /// The group (`""` for core), or `None` for any.
    pub group: Option<String>,
}

impl ResourcePattern {
    /// Reads a configured name; `None` when it is not one upstream accepts.
    pub fn parse(name: &str) -> Option<Self> {
        if name.is_empty() || name != name.to_ascii_lowercase() {
            return None;
        }
        let (resource, group) = name.split_once('.').unwrap_or((name, ""));
        match (resource, group) {
            ("*", "*") => Some(Self {
                resource: None,
                group: None,
            }),
            // A named resource in every group is not a thing upstream accepts.
            (_, "*") => None,
            ("*", group) => Some(Self {
                resource: None,
                group: Some(group.to_string()),
            }),
            (resource, _) if resource.contains('*') || group.contains('*') => None,
            (resource, group) => Some(Self {
                resource: Some(resource.to_string()),
                group: Some(group.to_string()),
            }),
        }
    }

    /// Whether the resource `resource` of `group` (`""`: core) matches.
    pub fn matches(&self, group: &str, resource: &str) -> bool {
        self.resource.as_deref().is_none_or(|r| r == resource)
            && self.group.as_deref().is_none_or(|g| g == group)
    }
}

impl EncryptionConfiguration {
    /// Reads and checks the file at `path` (YAML or JSON).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses and checks `text`; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let config: Self = serde_yaml::from_str(text).map_err(|source| ConfigError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
        let problems = config.problems();
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                problems,
            })
        }
    }

    /// Everything wrong with the configuration, as `field: problem`.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.kind != KIND {
            problems.push(format!("kind: must be {KIND:?}, not {:?}", self.kind));
        }
        if self.api_version != API_VERSION {
            problems.push(format!(
                "apiVersion: must be {API_VERSION:?}, not {:?}",
                self.api_version
            ));
        }
        if self.resources.is_empty() {
            problems.push("resources: at least one entry is required".into());
        }
        let mut seen_resources = HashSet::new();
        for (i, entry) in self.resources.iter().enumerate() {
            let at = format!("resources[{i}]");
            if entry.resources.is_empty() {
                problems.push(format!("{at}.resources: at least one resource is required"));
            }
            for (j, name) in entry.resources.iter().enumerate() {
                if ResourcePattern::parse(name).is_none() {
                    problems.push(format!(
                        "{at}.resources[{j}]: {name:?} is not a lower-case resource, resource.group, *.group or *.*"
                    ));
                } else if !seen_resources.insert(name.as_str()) {
                    problems.push(format!(
                        "{at}.resources[{j}]: {name:?} is named by an earlier entry"
                    ));
                }
            }
            if entry.providers.is_empty() {
                problems.push(format!("{at}.providers: at least one provider is required"));
            }
            for (j, provider) in entry.providers.iter().enumerate() {
                check_provider(provider, &format!("{at}.providers[{j}]"), &mut problems);
            }
        }
        problems
    }

    /// The providers of `entry`, in order, one per key.
    pub(crate) fn build(entry: &ResourceConfiguration) -> Result<Vec<Provider>, ConfigProblem> {
        let mut out = Vec::new();
        for provider in &entry.providers {
            let Some((kind, keys)) = provider.kind() else {
                return Err(ConfigProblem(
                    "a provider names no single supported type".into(),
                ));
            };
            if kind == ProviderKind::Identity {
                out.push(Provider::identity());
                continue;
            }
            for key in keys {
                let secret = decode_secret(&key.secret).ok_or_else(|| {
                    ConfigProblem(format!("key {:?} is not valid base64", key.name))
                })?;
                let built = Provider::keyed(kind, &key.name, &secret)
                    .map_err(|e| ConfigProblem(e.to_string()))?;
                out.push(built);
            }
        }
        Ok(out)
    }
}

/// A configuration problem found while building providers.
#[derive(Debug)]
pub(crate) struct ConfigProblem(pub String);

/// Decodes a key's secret (standard base64, padding optional).
pub(super) fn decode_secret(secret: &str) -> Option<Vec<u8>> {
    let engine = &base64::engine::general_purpose::STANDARD;
    engine.decode(secret.trim()).ok().or_else(|| {
        base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(secret.trim())
            .ok()
    })
}

fn check_provider(provider: &ProviderConfiguration, at: &str, problems: &mut Vec<String>) {
    if provider.kms.is_some() {
        problems.push(format!(
            "{at}.kms: KMS providers are not supported by skiff; use aescbc, aesgcm or secretbox"
        ));
        return;
    }
    let Some((kind, keys)) = provider.kind() else {
        problems.push(format!(
            "{at}: exactly one of aesgcm, aescbc, secretbox or identity must be set"
        ));
        return;
    };
    if kind == ProviderKind::Identity {
        return;
    }
    let at = format!("{at}.{}", kind.name());
    if keys.is_empty() {
        problems.push(format!("{at}.keys: at least one key is required"));
    }
    let mut names = HashSet::new();
    for (k, key) in keys.iter().enumerate() {
        let key_at = format!("{at}.keys[{k}]");
        if key.name.is_empty() {
            problems.push(format!("{key_at}.name: a name is required"));
        } else if !names.insert(key.name.as_str()) {
            problems.push(format!("{key_at}.name: {:?} is used twice", key.name));
        }
        if key.secret.is_empty() {
            problems.push(format!("{key_at}.secret: a secret is required"));
            continue;
        }
        match decode_secret(&key.secret) {
            None => problems.push(format!("{key_at}.secret: not valid base64")),
            Some(raw) if !kind.key_sizes().contains(&raw.len()) => problems.push(format!(
                "{key_at}.secret: the key is {} bytes; {} takes {:?}",
                raw.len(),
                kind.name(),
                kind.key_sizes()
            )),
            Some(_) => {}
        }
    }
}

#[cfg(test)]
impl ResourceConfiguration {
    /// The kinds of the providers, in order (each must be well-formed).
    pub(crate) fn provider_kinds(&self) -> Vec<ProviderKind> {
        self.providers
            .iter()
            .map(|p| p.kind().expect("a well-formed provider").0)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<EncryptionConfiguration, ConfigError> {
        EncryptionConfiguration::parse(text, Path::new("enc.yaml"))
    }

    /// Upstream's documented example, all four providers.
    const UPSTREAM: &str = r#"
apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources:
      - secrets
      - configmaps
      - pandas.awesome.bears.example
    providers:
      - aescbc:
          keys:
            - name: key1
              secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=
      - identity: {}
      - aesgcm:
          keys:
            - name: key1
              secret: c2VjcmV0IGlzIHNlY3VyZQ==
            - name: key2
              secret: dGhpcyBpcyBwYXNzd29yZA==
      - secretbox:
          keys:
            - name: key1
              secret: YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY=
  - resources:
      - events
    providers:
      - identity: {}
  - resources:
      - '*.apps'
    providers:
      - aescbc:
          keys:
          - name: key2
            secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=
  - resources:
      - '*.*'
    providers:
      - aescbc:
          keys:
          - name: key3
            secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=
"#;

    #[test]
    fn upstreams_example_parses_and_builds() {
        let config = parse(UPSTREAM).unwrap();
        assert_eq!(config.resources.len(), 4);
        let first = &config.resources[0];
        assert_eq!(
            first.provider_kinds(),
            [
                ProviderKind::AesCbc,
                ProviderKind::Identity,
                ProviderKind::AesGcm,
                ProviderKind::Secretbox
            ]
        );
        let providers = EncryptionConfiguration::build(first).unwrap();
        let names: Vec<_> = providers
            .iter()
            .map(|p| format!("{}:{}", p.kind().name(), p.key_name()))
            .collect();
        assert_eq!(
            names,
            [
                "aescbc:key1",
                "identity:",
                "aesgcm:key1",
                "aesgcm:key2",
                "secretbox:key1"
            ]
        );
    }

    #[test]
    fn json_as_k3s_writes_it_parses_too() {
        let json = r#"{"kind":"EncryptionConfiguration","apiVersion":"apiserver.config.k8s.io/v1","resources":[{"resources":["secrets"],"providers":[{"aescbc":{"keys":[{"name":"aescbckey","secret":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}]}},{"identity":{}}]}]}"#;
        let config = parse(json).unwrap();
        assert_eq!(config.resources[0].resources, ["secrets"]);
    }

    #[test]
    fn resource_patterns_match_as_upstream() {
        let p = |s: &str| ResourcePattern::parse(s).unwrap();
        assert!(p("secrets").matches("", "secrets"));
        assert!(!p("secrets").matches("", "configmaps"));
        assert!(!p("secrets").matches("example.com", "secrets"));
        assert!(p("deployments.apps").matches("apps", "deployments"));
        assert!(p("*.apps").matches("apps", "statefulsets"));
        assert!(!p("*.apps").matches("", "secrets"));
        assert!(p("*.").matches("", "configmaps"));
        assert!(!p("*.").matches("apps", "deployments"));
        assert!(p("*.*").matches("example.com", "widgets"));
        assert!(p("pandas.awesome.bears.example").matches("awesome.bears.example", "pandas"));
        for bad in ["Secrets", "secrets.*", "", "se*crets"] {
            assert!(ResourcePattern::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn invalid_configurations_name_the_field_and_never_the_secret() {
        let cases = [
            (
                "apiVersion: v1\nkind: EncryptionConfiguration\nresources: [{resources: [secrets], providers: [{identity: {}}]}]",
                "apiVersion",
            ),
            (
                "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources: [{resources: [secrets], providers: []}]",
                "resources[0].providers: at least one provider",
            ),
            (
                "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources: [{resources: [secrets], providers: [{aescbc: {keys: [{name: k, secret: c2hvcnRrZXk=}]}}]}]",
                "resources[0].providers[0].aescbc.keys[0].secret: the key is 8 bytes",
            ),
            (
                "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources: [{resources: [secrets], providers: [{aescbc: {keys: []}, identity: {}}]}]",
                "exactly one of",
            ),
            (
                "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources: [{resources: [secrets], providers: [{kms: {name: x}}]}]",
                "KMS providers are not supported",
            ),
            (
                "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources: [{resources: [secrets], providers: [{secretbox: {keys: [{name: a, secret: YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY=}, {name: a, secret: YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY=}]}}]}]",
                "\"a\" is used twice",
            ),
            (
                "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources: [{resources: [Secrets], providers: [{identity: {}}]}]",
                "resources[0].resources[0]",
            ),
        ];
        for (text, wanted) in cases {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(wanted), "{err} lacks {wanted}");
            assert!(
                !err.contains("c2hvcnRrZXk") && !err.contains("YWJjZGVm"),
                "{err}"
            );
        }
        let unknown = parse(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources: [{resources: [secrets], providers: [{aescbc: {keys: [], typo: 1}}]}]",
        );
        assert!(matches!(unknown, Err(ConfigError::Parse { .. })));
    }
}
