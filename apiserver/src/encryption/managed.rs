//! The configuration skiff keeps itself under `--secrets-encryption`, as
//! k3s keeps `server/cred/encryption-config.json`: upstream's
//! `EncryptionConfiguration` (JSON) encrypting Secrets with generated keys,
//! `identity` last so Secrets stored before encryption was turned on stay
//! readable until they are re-encrypted. The file is 0600 in a 0700
//! directory and is replaced atomically (temporary file, fsync, rename,
//! fsync of the directory), so a crash leaves the old or the new file whole.
//!
//! Key changes are pure functions of the configuration: a rotation puts a
//! new key first and keeps the old ones for reading; pruning (after every
//! object was re-encrypted) keeps only the writing key and `identity`.

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use base64::Engine as _;
use skiff_common::files;

use super::config::{
    API_VERSION, EncryptionConfiguration, KIND, Key, ProviderConfiguration, ResourceConfiguration,
};
use super::providers::{ProviderKind, generate_key};
use super::{EncryptionError, MANAGED_PROVIDERS};

/// Bytes of a generated key (AES-256, or secretbox's only size).
const KEY_BYTES: usize = 32;

/// The resources the managed configuration encrypts.
const MANAGED_RESOURCES: &[&str] = &["secrets"];

/// Reads the managed configuration at `path`, or creates it with one fresh
/// `provider` key when it does not exist yet.
pub(super) fn load_or_create(
    path: &Path,
    provider: ProviderKind,
) -> Result<EncryptionConfiguration, EncryptionError> {
    check_provider(provider)?;
    if path.exists() {
        // Tighten what an older or hand-made file may have been given.
        fs::set_permissions(path, fs::Permissions::from_mode(0o600)).map_err(|source| {
            files::FileError {
                action: "restrict",
                path: path.to_path_buf(),
                source,
            }
        })?;
        return Ok(EncryptionConfiguration::load(path)?);
    }
    let config = EncryptionConfiguration {
        kind: KIND.into(),
        api_version: API_VERSION.into(),
        resources: vec![ResourceConfiguration {
            resources: MANAGED_RESOURCES.iter().map(|r| r.to_string()).collect(),
            providers: vec![
                ProviderConfiguration::keyed(provider, vec![new_key(provider, &[])?]),
                ProviderConfiguration::identity(),
            ],
        }],
    };
    write(path, &config)?;
    tracing::info!(path = %path.display(), provider = provider.name(), "secrets encryption key created");
    Ok(config)
}

fn check_provider(provider: ProviderKind) -> Result<(), EncryptionError> {
    if MANAGED_PROVIDERS.contains(&provider) {
        Ok(())
    } else {
        Err(EncryptionError::ManagedProvider { provider })
    }
}

/// A fresh key named after its provider and the time, unlike any of `taken`.
fn new_key(provider: ProviderKind, taken: &[&str]) -> Result<Key, EncryptionError> {
    let stamp = jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string();
    let base = format!("{}key-{stamp}", provider.name());
    let name = (1..)
        .map(|n| {
            if n == 1 {
                base.clone()
            } else {
                format!("{base}-{n}")
            }
        })
        .find(|candidate| !taken.contains(&candidate.as_str()))
        .unwrap_or(base);
    let secret = generate_key(KEY_BYTES)?;
    Ok(Key {
        name,
        secret: base64::engine::general_purpose::STANDARD.encode(secret),
    })
}

/// `config` with a new `provider` key writing in every entry: first among
/// the keys of a leading `provider` entry, else in a new leading entry.
/// Every existing key stays for reading.
pub(super) fn with_new_key(
    config: &EncryptionConfiguration,
    provider: ProviderKind,
) -> Result<EncryptionConfiguration, EncryptionError> {
    check_provider(provider)?;
    let mut rotated = config.clone();
    for entry in &mut rotated.resources {
        let taken: Vec<String> = entry
            .providers
            .iter()
            .filter_map(|p| p.kind())
            .flat_map(|(_, keys)| keys.iter().map(|k| k.name.clone()))
            .collect();
        let taken: Vec<&str> = taken.iter().map(String::as_str).collect();
        let key = new_key(provider, &taken)?;
        let leading_same = entry
            .providers
            .first()
            .and_then(|p| p.kind())
            .is_some_and(|(kind, _)| kind == provider);
        match entry.providers.first_mut().and_then(|p| p.keys_mut()) {
            Some(keys) if leading_same => keys.insert(0, key),
            _ => entry
                .providers
                .insert(0, ProviderConfiguration::keyed(provider, vec![key])),
        }
    }
    Ok(rotated)
}

/// `config` with only each entry's writing key (and `identity`, for data
/// stored before encryption): once every object uses the writing key, the
/// other keys decrypt nothing and are dropped.
pub(super) fn pruned(config: &EncryptionConfiguration) -> EncryptionConfiguration {
    let mut pruned = config.clone();
    for entry in &mut pruned.resources {
        let Some(mut writer) = entry.providers.first().cloned() else {
            continue;
        };
        if let Some(keys) = writer.keys_mut() {
            keys.truncate(1);
        }
        let writer_is_identity = writer.identity.is_some();
        entry.providers = vec![writer];
        if !writer_is_identity {
            entry.providers.push(ProviderConfiguration::identity());
        }
    }
    pruned
}

/// Replaces the file at `path` atomically with `config`, mode 0600, its
/// directory 0700.
pub(super) fn write(path: &Path, config: &EncryptionConfiguration) -> Result<(), EncryptionError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    files::create_private_dir(dir)?;
    let mut text = serde_json::to_vec_pretty(config).map_err(|e| EncryptionError::Config {
        detail: format!("cannot serialize the configuration: {e}"),
    })?;
    text.push(b'\n');
    Ok(files::write_private(path, &text)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encryption::transformer::Transformers;

    fn key_names(config: &EncryptionConfiguration) -> Vec<String> {
        config.resources[0]
            .providers
            .iter()
            .filter_map(|p| p.kind())
            .flat_map(|(kind, keys)| {
                if kind == ProviderKind::Identity {
                    vec!["identity".to_string()]
                } else {
                    keys.iter().map(|k| k.name.clone()).collect()
                }
            })
            .collect()
    }

    #[test]
    fn the_managed_file_is_private_parses_as_upstreams_and_is_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cred/encryption-config.json");
        let created = load_or_create(&path, ProviderKind::AesCbc).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(created.resources[0].resources, ["secrets"]);
        let names = key_names(&created);
        assert_eq!(names.len(), 2);
        assert!(names[0].starts_with("aescbckey-"), "{names:?}");
        assert_eq!(names[1], "identity");
        assert!(Transformers::compile(&created).is_ok());
        assert_eq!(
            load_or_create(&path, ProviderKind::AesCbc).unwrap(),
            created
        );
        assert!(matches!(
            load_or_create(&path, ProviderKind::AesGcm),
            Err(EncryptionError::ManagedProvider { .. })
        ));
    }

    #[test]
    fn rotation_puts_a_new_key_first_and_pruning_keeps_only_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("enc.json");
        let first = load_or_create(&path, ProviderKind::AesCbc).unwrap();
        let old = key_names(&first)[0].clone();
        let rotated = with_new_key(&first, ProviderKind::AesCbc).unwrap();
        let names = key_names(&rotated);
        assert_eq!(names.len(), 3, "{names:?}");
        assert_ne!(names[0], old);
        assert_eq!(names[1], old);
        // The same provider: one entry holding both keys.
        assert_eq!(rotated.resources[0].providers.len(), 2);

        let switched = with_new_key(&rotated, ProviderKind::Secretbox).unwrap();
        assert_eq!(
            switched.resources[0].provider_kinds(),
            [
                ProviderKind::Secretbox,
                ProviderKind::AesCbc,
                ProviderKind::Identity
            ]
        );

        let pruned = pruned(&switched);
        let names = key_names(&pruned);
        assert_eq!(names.len(), 2);
        assert!(names[0].starts_with("secretboxkey-"));
        assert_eq!(names[1], "identity");
        assert!(Transformers::compile(&pruned).is_ok());
    }
}
