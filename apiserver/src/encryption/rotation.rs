//! Key rotation and re-encryption, one at a time:
//!
//! - [`EncryptedStore::status`]: the configuration's keys and how many
//!   stored objects of configured resources do not use their active key;
//! - [`EncryptedStore::rotate_keys`] (managed configuration only): a new key
//!   becomes the writing key, the old ones stay for reading, written to the
//!   file before any value is encrypted with it, so a restart at any point
//!   can read everything;
//! - [`EncryptedStore::reencrypt`]: every object not written with its active
//!   key is rewritten (compare-and-swap, so concurrent writers win and are
//!   already current), then the store is compacted at its current revision
//!   and defragmented, which removes older values — plaintext or old
//!   ciphertext — from its history and its files. When nothing stale is left
//!   the managed configuration drops the keys that decrypt nothing.

use skiff_store::{KeyValue, StoreError};

use super::store::EncryptedStore;
use super::{EncryptionError, EncryptionSource, EncryptionStatus, KeyStatus, managed};
use crate::key_locks::KeyLocks;

/// Keys read per page while scanning the store.
const PAGE: usize = 500;

/// Attempts to rewrite one object that keeps changing under us.
const ATTEMPTS: usize = 8;

/// Where every API object is stored.
const REGISTRY: &str = "/registry/";

impl EncryptedStore {
    /// The status, counting stale objects with a scan of the store.
    pub async fn status(&self) -> Result<EncryptionStatus, EncryptionError> {
        let (objects, stale) = self.census().await?;
        Ok(self.describe(objects, stale))
    }

    fn describe(&self, objects: u64, stale: u64) -> EncryptionStatus {
        let active = self.active();
        let (mode, path) = match &self.state.source {
            EncryptionSource::Managed { path, .. } => ("managed", path),
            EncryptionSource::File(path) => ("file", path),
        };
        let keys = active
            .transformers
            .transformers()
            .next()
            .map(|first| {
                first
                    .providers()
                    .iter()
                    .enumerate()
                    .map(|(i, p)| KeyStatus {
                        provider: p.kind().name().to_string(),
                        name: p.key_name().to_string(),
                        active: i == 0,
                    })
                    .collect()
            })
            .unwrap_or_default();
        // Encryption is on when some resource is written with a real cipher.
        let enabled = active
            .transformers
            .transformers()
            .any(|t| t.active().kind() != super::ProviderKind::Identity);
        EncryptionStatus {
            enabled,
            mode: mode.into(),
            config_path: path.display().to_string(),
            resources: active
                .config
                .resources
                .iter()
                .flat_map(|entry| entry.resources.iter().cloned())
                .collect(),
            keys,
            objects,
            stale,
            stage: if stale == 0 {
                "reencrypt_finished".into()
            } else {
                "reencrypt_required".into()
            },
            rewritten: None,
        }
    }

    /// Counts the stored objects of configured resources and those among
    /// them not written with their active key.
    async fn census(&self) -> Result<(u64, u64), EncryptionError> {
        let mut objects = 0;
        let mut stale = 0;
        self.scan(|store, kv| {
            if let Some(current) = store.is_current(kv) {
                objects += 1;
                stale += u64::from(!current);
            }
        })
        .await?;
        Ok((objects, stale))
    }

    /// Whether a raw value uses its resource's active key (`None`: its
    /// resource is not configured).
    fn is_current(&self, kv: &KeyValue) -> Option<bool> {
        let active = self.active();
        let transformer = active.transformers.for_key(&kv.key)?;
        Some(transformer.is_current(&kv.value))
    }

    /// Calls `visit` with every raw key-value under `/registry/`, page by page.
    async fn scan(&self, mut visit: impl FnMut(&Self, &KeyValue)) -> Result<(), EncryptionError> {
        let mut after: Option<String> = None;
        loop {
            let page = self.raw.list(REGISTRY, after.as_deref(), PAGE).await?;
            for kv in &page.items {
                visit(self, kv);
            }
            match (page.more, page.items.last()) {
                (true, Some(last)) => after = Some(last.key.clone()),
                _ => return Ok(()),
            }
        }
    }

    /// Makes a new key the writing key of the managed configuration; the
    /// old keys keep decrypting what they wrote.
    pub async fn rotate_keys(&self) -> Result<EncryptionStatus, EncryptionError> {
        let one_at_a_time = self.state.rotation.lock().await;
        let (path, provider) = match &self.state.source {
            EncryptionSource::Managed { path, provider } => (path.clone(), *provider),
            EncryptionSource::File(path) => {
                return Err(EncryptionError::NotManaged { path: path.clone() });
            }
        };
        let rotated = managed::with_new_key(&self.active().config, provider)?;
        self.replace_config(rotated, |config| managed::write(&path, config))
            .await?;
        tracing::info!(path = %path.display(), "secrets encryption key rotated");
        drop(one_at_a_time);
        self.status().await
    }

    /// Rewrites every stale object with its active key, then compacts and
    /// defragments the store; prunes the managed configuration's unused
    /// keys when nothing stale is left.
    pub async fn reencrypt(&self, locks: &KeyLocks) -> Result<EncryptionStatus, EncryptionError> {
        let _one_at_a_time = self.state.rotation.lock().await;
        let mut stale_keys = Vec::new();
        self.scan(|store, kv| {
            if store.is_current(kv) == Some(false) {
                stale_keys.push(kv.key.clone());
            }
        })
        .await?;
        let mut rewritten = 0;
        for key in &stale_keys {
            let _serialised = locks.lock(key).await;
            rewritten += u64::from(self.rewrite(key).await?);
        }
        // Older values — plaintext from before encryption, ciphertext of
        // retired keys — live on in the history and in the file's free
        // space until compaction drops them and a fresh file replaces it.
        self.raw.compact(self.raw.current_revision()).await?;
        self.raw.defragment().await?;
        let (objects, stale) = self.census().await?;
        if stale == 0
            && let EncryptionSource::Managed { path, .. } = &self.state.source
        {
            let current = self.active().config.clone();
            let pruned = managed::pruned(&current);
            if pruned != current {
                self.replace_config(pruned, |config| managed::write(path, config))
                    .await?;
                tracing::info!(path = %path.display(), "unused secrets encryption keys removed");
            }
        }
        tracing::info!(rewritten, objects, stale, "re-encryption finished");
        let mut status = self.describe(objects, stale);
        status.rewritten = Some(rewritten);
        Ok(status)
    }

    /// Rewrites one object with its active key unless it is current or
    /// gone; whether it wrote.
    async fn rewrite(&self, key: &str) -> Result<bool, EncryptionError> {
        use skiff_store::Store as _;
        for _ in 0..ATTEMPTS {
            let Some(raw) = self.raw.get(key).await? else {
                return Ok(false);
            };
            if self.is_current(&raw) != Some(false) {
                return Ok(false);
            }
            let Some(plain) = self.get(key).await? else {
                return Ok(false);
            };
            if plain.mod_revision != raw.mod_revision {
                continue;
            }
            match self.update(key, plain.value, Some(raw.mod_revision)).await {
                Ok(_) => return Ok(true),
                Err(StoreError::Conflict { .. }) => continue,
                Err(StoreError::NotFound { .. }) => return Ok(false),
                Err(e) => return Err(e.into()),
            }
        }
        Err(EncryptionError::KeptChanging {
            key: key.to_string(),
        })
    }
}
