//! Encryption at rest, as kube-apiserver's `--encryption-provider-config`
//! and k3s's `--secrets-encryption`: values of the configured resources are
//! encrypted between the API server and the store, so the store (its
//! current values, its history, its files) only ever holds ciphertext of
//! them, while the watch caches, lists, watches and handlers see plaintext.
//!
//! - `config`: upstream's `EncryptionConfiguration` file, parsed and checked;
//! - `providers`: the ciphers (`aesgcm`, `aescbc`, `secretbox`, `identity`);
//! - `transformer`: which providers a storage key gets, reading and writing;
//! - `store`: [`EncryptedStore`], the one place values are transformed — a
//!   [`skiff_store::Store`] over the real store that the API server is built on;
//! - `managed`: the configuration skiff keeps itself under `--secrets-encryption`
//!   (`DATA_DIR/cred/encryption-config.json`, 0600) and its key rotation;
//! - `rotation`: status, rotating keys, re-encrypting everything with the
//!   active key and then compacting and defragmenting the store so no older
//!   plaintext or ciphertext stays on disk;
//! - `http`: the admin endpoints `skiff secrets-encrypt` calls.
//!
//! Nothing here may write plaintext of a configured resource to the store,
//! or print a key.

mod config;
mod http;
mod managed;
mod providers;
mod rotation;
mod store;
mod transformer;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use config::{ConfigError, EncryptionConfiguration, ResourcePattern};
pub(crate) use http::{reencrypt_handler, rotate_keys_handler, status_handler};
pub use providers::ProviderKind;
pub use store::EncryptedStore;

/// Where the managed configuration lives inside the data dir.
pub const MANAGED_CONFIG: &str = "cred/encryption-config.json";

/// The admin endpoints (non-resource paths, authorized as such: `get` for
/// the status, `post` for the actions).
pub const STATUS_PATH: &str = "/v1-skiff/encrypt/status";
/// Makes a new key the writing key (managed configuration only).
pub const ROTATE_KEYS_PATH: &str = "/v1-skiff/encrypt/rotate-keys";
/// Rewrites every object of an encrypted resource with the active key,
/// then compacts and defragments the store.
pub const REENCRYPT_PATH: &str = "/v1-skiff/encrypt/reencrypt";

/// Which configuration encrypts the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EncryptionSource {
    /// k3s's `--secrets-encryption`: skiff keeps the configuration at
    /// `path` (Secrets only), creating it with a fresh key of `provider`,
    /// and rotates its keys on request.
    Managed {
        /// The configuration file skiff writes and rotates.
        path: PathBuf,
        /// The provider of newly made keys.
        provider: ProviderKind,
    },
    /// Upstream's `--encryption-provider-config`: the operator's file, read
    /// at start; keys change by editing it and restarting.
    File(PathBuf),
}

impl EncryptionSource {
    /// The source `skiff server`'s flags choose: an operator's file first;
    /// else the managed configuration when asked for, or when one exists
    /// already (a cluster that encrypted its Secrets keeps doing so even if
    /// the flag is forgotten at a restart); else none.
    pub fn from_flags(
        data_dir: &Path,
        secrets_encryption: bool,
        provider: ProviderKind,
        config_file: Option<PathBuf>,
    ) -> Option<Self> {
        if let Some(file) = config_file {
            return Some(EncryptionSource::File(file));
        }
        let path = data_dir.join(MANAGED_CONFIG);
        (secrets_encryption || path.exists())
            .then_some(EncryptionSource::Managed { path, provider })
    }
}

/// The providers `--secrets-encryption-provider` accepts for managed keys,
/// as k3s: AES-CBC (its default) or secretbox.
pub const MANAGED_PROVIDERS: &[ProviderKind] = &[ProviderKind::AesCbc, ProviderKind::Secretbox];

/// Everything that can go wrong encrypting, decrypting or rotating.
#[derive(Debug, thiserror::Error)]
pub enum EncryptionError {
    /// A key has a length its provider does not take.
    #[error("{provider} key {key:?} is {length} bytes; {provider} takes {allowed:?}")]
    KeyLength {
        /// The provider, e.g. `aesgcm`.
        provider: &'static str,
        /// The key's name.
        key: String,
        /// The key's length in bytes.
        length: usize,
        /// The lengths the provider takes.
        allowed: &'static [usize],
    },
    /// The named provider failed to encrypt.
    #[error("{0} could not encrypt the value")]
    Seal(&'static str),
    /// A stored value did not decrypt with the key its prefix names.
    #[error("{provider} key {key:?} cannot decrypt the value: {why}")]
    Open {
        /// The provider.
        provider: &'static str,
        /// The key's name.
        key: String,
        /// Why it did not decrypt.
        why: &'static str,
    },
    /// A stored value's prefix names no configured provider and key.
    #[error("no configured provider can read a value starting with {prefix:?}")]
    NoProvider {
        /// The value's prefix.
        prefix: String,
    },
    /// The system's random source failed making a nonce or key.
    #[error("the system's random source failed: {0}")]
    Random(String),
    /// The configuration is unusable.
    #[error("the encryption configuration cannot be used: {detail}")]
    Config {
        /// What is wrong with it.
        detail: String,
    },
    /// The configuration file is unusable.
    #[error(transparent)]
    ConfigFile(#[from] ConfigError),
    /// The managed configuration file could not be written (or its permissions set).
    #[error(transparent)]
    File(#[from] skiff_common::files::FileError),
    /// The managed configuration was asked for a provider it cannot rotate.
    #[error("{provider:?} cannot be the managed encryption provider; use aescbc or secretbox")]
    ManagedProvider {
        /// The provider asked for.
        provider: ProviderKind,
    },
    /// Key status or rotation was asked for while encryption is off.
    #[error(
        "secrets encryption is not enabled; start skiff server with --secrets-encryption or --encryption-provider-config"
    )]
    NotEnabled,
    /// A rotation was asked for but the operator's own file configures encryption.
    #[error(
        "the encryption configuration is the file {path} given with --encryption-provider-config; add the new key to it as the first key, restart skiff server, then re-encrypt"
    )]
    NotManaged {
        /// The operator's file.
        path: PathBuf,
    },
    /// Re-encrypting a key lost every compare-and-swap race; running again finishes it.
    #[error("{key} kept changing while it was re-encrypted; run the re-encryption again")]
    KeptChanging {
        /// The store key.
        key: String,
    },
    /// The store failed.
    #[error("the store failed: {0}")]
    Store(#[from] skiff_store::StoreError),
}

/// What `skiff secrets-encrypt status` shows (the JSON of [`STATUS_PATH`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EncryptionStatus {
    /// Whether any resource is encrypted at rest (`k8s:enc` values).
    pub enabled: bool,
    /// `managed` (`--secrets-encryption`) or `file` (`--encryption-provider-config`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mode: String,
    /// The configuration file.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub config_path: String,
    /// The resources configured, as the configuration names them.
    #[serde(default)]
    pub resources: Vec<String>,
    /// Every key of the first configuration entry, the writing one first.
    #[serde(default)]
    pub keys: Vec<KeyStatus>,
    /// Stored objects of configured resources.
    pub objects: u64,
    /// Those not written with their resource's active key.
    pub stale: u64,
    /// k3s's rotation stage: `reencrypt_finished` when every object uses the
    /// active key, `reencrypt_required` when some do not.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stage: String,
    /// Objects rewritten by the re-encryption that answered with this status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewritten: Option<u64>,
}

/// One key of the status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyStatus {
    /// The provider (`aescbc`, `secretbox`, `aesgcm`, `identity`).
    pub provider: String,
    /// The key's name (empty for identity).
    pub name: String,
    /// Whether new values are written with it.
    pub active: bool,
}

impl EncryptionStatus {
    /// Whether every stored object of a configured resource uses its active key.
    pub fn all_current(&self) -> bool {
        self.stale == 0
    }
}
