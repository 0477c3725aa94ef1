//! What a configuration means for one stored value: which providers apply
//! to a storage key (the first configuration entry naming its resource),
//! how a value is written (the first provider) and read (any provider whose
//! prefix it carries, in order), and whether it was written by the active
//! provider. Pure and synchronous: no I/O, no locks.

use super::EncryptionError;
use super::config::{ConfigProblem, EncryptionConfiguration, ResourcePattern};
use super::providers::{ENCRYPTED_PREFIX, Provider};

/// The providers of one configuration entry, the writer first.
#[derive(Debug)]
pub(crate) struct Transformer {
    providers: Vec<Provider>,
}

impl Transformer {
    /// The provider new values are written with.
    pub(crate) fn active(&self) -> &Provider {
        // `compile` refuses entries without providers.
        &self.providers[0]
    }

    /// Every provider, the writer first.
    pub(crate) fn providers(&self) -> &[Provider] {
        &self.providers
    }

    /// The stored form of `plaintext` at storage key `key`.
    pub(crate) fn write(&self, plaintext: &[u8], key: &str) -> Result<Vec<u8>, EncryptionError> {
        self.active().encrypt(plaintext, key)
    }

    /// The plaintext of a stored value: the providers whose prefix it
    /// carries are tried in order; a value carrying none is refused.
    pub(crate) fn read(&self, stored: &[u8], key: &str) -> Result<Vec<u8>, EncryptionError> {
        let mut last = None;
        for provider in self.providers.iter().filter(|p| p.wrote(stored)) {
            match provider.decrypt(stored, key) {
                Ok(plaintext) => return Ok(plaintext),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| EncryptionError::NoProvider {
            prefix: describe_prefix(stored),
        }))
    }

    /// Whether `stored` was written by the active provider (and key).
    pub(crate) fn is_current(&self, stored: &[u8]) -> bool {
        self.active().wrote(stored)
    }
}

/// The readable start of a stored value, for errors: the encryption
/// prefix up to the key name, or "unencrypted data".
fn describe_prefix(stored: &[u8]) -> String {
    if !stored.starts_with(ENCRYPTED_PREFIX) {
        return "unencrypted data".into();
    }
    // k8s:enc:<provider>:v1:<name>: — five colons end the prefix.
    let end = stored
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b':')
        .nth(4)
        .map_or(stored.len().min(64), |(i, _)| i + 1);
    String::from_utf8_lossy(&stored[..end]).into_owned()
}

/// A whole configuration, compiled: for each entry its resource patterns
/// and providers.
#[derive(Debug)]
pub(crate) struct Transformers {
    entries: Vec<(Vec<ResourcePattern>, Transformer)>,
}

impl Transformers {
    /// Builds the providers of every entry of a checked configuration.
    pub(crate) fn compile(config: &EncryptionConfiguration) -> Result<Self, EncryptionError> {
        let mut entries = Vec::new();
        for (i, entry) in config.resources.iter().enumerate() {
            let patterns = entry
                .resources
                .iter()
                .map(|name| {
                    ResourcePattern::parse(name).ok_or_else(|| EncryptionError::Config {
                        detail: format!("resources[{i}]: {name:?} is not a resource pattern"),
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let providers = EncryptionConfiguration::build(entry).map_err(|ConfigProblem(p)| {
                EncryptionError::Config {
                    detail: format!("resources[{i}]: {p}"),
                }
            })?;
            if providers.is_empty() {
                return Err(EncryptionError::Config {
                    detail: format!("resources[{i}]: no providers"),
                });
            }
            entries.push((patterns, Transformer { providers }));
        }
        Ok(Self { entries })
    }

    /// The transformer for a storage key (`/registry/<group|core>/<resource>/…`),
    /// if its resource is configured.
    pub(crate) fn for_key(&self, key: &str) -> Option<&Transformer> {
        let (group, resource) = resource_of(key)?;
        self.entries
            .iter()
            .find(|(patterns, _)| patterns.iter().any(|p| p.matches(group, resource)))
            .map(|(_, transformer)| transformer)
    }

    /// Every entry's transformer, in configuration order.
    pub(crate) fn transformers(&self) -> impl Iterator<Item = &Transformer> {
        self.entries.iter().map(|(_, t)| t)
    }
}

/// The group (`""` for core) and resource a storage key belongs to.
pub(super) fn resource_of(key: &str) -> Option<(&str, &str)> {
    let rest = key.strip_prefix("/registry/")?;
    let mut parts = rest.splitn(3, '/');
    let group = parts.next()?;
    let resource = parts.next()?;
    // A key names an object below its resource's prefix.
    parts.next().filter(|name| !name.is_empty())?;
    let group = if group == "core" { "" } else { group };
    Some((group, resource))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::encryption::providers::ProviderKind;

    const CONFIG: &str = r#"
apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources: [secrets]
    providers:
      - secretbox:
          keys:
            - name: new
              secret: YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY=
      - aescbc:
          keys:
            - name: old
              secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=
      - identity: {}
  - resources: ['*.apps']
    providers:
      - aesgcm:
          keys:
            - name: g
              secret: c2VjcmV0IGlzIHNlY3VyZQ==
"#;

    fn compiled() -> Transformers {
        let config = EncryptionConfiguration::parse(CONFIG, Path::new("c")).unwrap();
        Transformers::compile(&config).unwrap()
    }

    #[test]
    fn keys_find_the_entry_naming_their_resource() {
        let t = compiled();
        let secret = t.for_key("/registry/core/secrets/default/s").unwrap();
        assert_eq!(secret.active().kind(), ProviderKind::Secretbox);
        let deployment = t.for_key("/registry/apps/deployments/default/d").unwrap();
        assert_eq!(deployment.active().kind(), ProviderKind::AesGcm);
        assert!(t.for_key("/registry/core/configmaps/default/c").is_none());
        assert!(t.for_key("/registry/core/secrets/").is_none());
        assert!(t.for_key("/other/core/secrets/default/s").is_none());
    }

    #[test]
    fn old_keys_and_plaintext_stay_readable_and_are_not_current() {
        let t = compiled();
        let key = "/registry/core/secrets/default/s";
        let secrets = t.for_key(key).unwrap();
        let old = &secrets.providers()[1];
        assert_eq!(old.key_name(), "old");
        let by_old = old.encrypt(b"v", key).unwrap();
        assert_eq!(secrets.read(&by_old, key).unwrap(), b"v");
        assert!(!secrets.is_current(&by_old));
        assert_eq!(
            secrets.read(b"{\"plain\":1}", key).unwrap(),
            b"{\"plain\":1}"
        );
        assert!(!secrets.is_current(b"{}"));
        let new = secrets.write(b"v", key).unwrap();
        assert!(new.starts_with(b"k8s:enc:secretbox:v1:new:"));
        assert!(secrets.is_current(&new));
    }

    #[test]
    fn values_no_provider_knows_are_refused_with_their_prefix() {
        let t = compiled();
        let key = "/registry/apps/deployments/default/d";
        let gcm = t.for_key(key).unwrap();
        // No identity in this entry: plaintext is refused.
        let err = gcm.read(b"{}", key).unwrap_err().to_string();
        assert!(err.contains("unencrypted data"), "{err}");
        let err = gcm
            .read(
                b"k8s:enc:aescbc:v1:gone:0123456789abcdef0123456789abcdef",
                key,
            )
            .unwrap_err()
            .to_string();
        assert!(err.contains("k8s:enc:aescbc:v1:gone:"), "{err}");
        assert!(!err.contains("0123456789"), "{err}");
    }
}
