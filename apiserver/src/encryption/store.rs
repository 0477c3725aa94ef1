//! [`EncryptedStore`]: a [`Store`] over the real one that encrypts values of
//! configured resources on their way in and decrypts them on their way out
//! (gets, lists, deletes' previous values, watch events and their previous
//! values). The API server, its watch caches and its helpers all use it, so
//! this is the one place values are transformed; values of resources the
//! configuration does not name pass through untouched.
//!
//! It holds the active configuration behind a lock that a key change swaps,
//! and a write gate so that no value encrypted under a configuration that
//! has been replaced reaches the store after the replacement.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use skiff_store::{
    Event, KeyValue, ListResult, Revision, Store, StoreError, WatchProgress, WatchStream,
};

use super::config::EncryptionConfiguration;
use super::transformer::Transformers;
use super::{EncryptionError, EncryptionSource, managed};

/// The configuration in force, compiled.
pub(crate) struct Active {
    pub config: EncryptionConfiguration,
    pub transformers: Transformers,
}

pub(crate) struct State {
    pub source: EncryptionSource,
    current: parking_lot::RwLock<Arc<Active>>,
    /// Held shared by every write from encryption until the store answered,
    /// and exclusively by a configuration change.
    gate: tokio::sync::RwLock<()>,
    /// One rotation or re-encryption at a time.
    pub rotation: tokio::sync::Mutex<()>,
}

/// The store as the API server sees it when encryption at rest is on.
#[derive(Clone)]
pub struct EncryptedStore {
    pub(crate) raw: Arc<dyn Store>,
    pub(crate) state: Arc<State>,
}

impl EncryptedStore {
    /// Loads the configuration `source` names (creating the managed one
    /// with a fresh key when missing) and wraps `raw`.
    pub fn open(raw: Arc<dyn Store>, source: EncryptionSource) -> Result<Self, EncryptionError> {
        let config = match &source {
            EncryptionSource::File(path) => EncryptionConfiguration::load(path)?,
            EncryptionSource::Managed { path, provider } => {
                managed::load_or_create(path, *provider)?
            }
        };
        let transformers = Transformers::compile(&config)?;
        Ok(Self {
            raw,
            state: Arc::new(State {
                source,
                current: parking_lot::RwLock::new(Arc::new(Active {
                    config,
                    transformers,
                })),
                gate: tokio::sync::RwLock::new(()),
                rotation: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// The store underneath, holding ciphertext.
    pub fn raw(&self) -> &Arc<dyn Store> {
        &self.raw
    }

    /// The configuration in force.
    pub(crate) fn active(&self) -> Arc<Active> {
        self.state.current.read().clone()
    }

    /// Puts `config` in force once no write under the old one is in flight;
    /// `persist` runs first (under the gate) and its failure changes nothing.
    pub(crate) async fn replace_config(
        &self,
        config: EncryptionConfiguration,
        persist: impl FnOnce(&EncryptionConfiguration) -> Result<(), EncryptionError>,
    ) -> Result<(), EncryptionError> {
        let transformers = Transformers::compile(&config)?;
        let _exclusive = self.state.gate.write().await;
        persist(&config)?;
        *self.state.current.write() = Arc::new(Active {
            config,
            transformers,
        });
        Ok(())
    }

    fn seal(active: &Active, key: &str, value: &Bytes) -> Result<Bytes, StoreError> {
        match active.transformers.for_key(key) {
            None => Ok(value.clone()),
            Some(transformer) => {
                transformer
                    .write(value, key)
                    .map(Bytes::from)
                    .map_err(|e| StoreError::Backend {
                        context: "encrypting a value",
                        source: Box::new(e),
                    })
            }
        }
    }
}

impl State {
    /// Decrypts one value read from `key` in place.
    fn open(&self, key: &str, value: &mut Bytes) -> Result<(), StoreError> {
        // Deletions carry no value; there is nothing to decrypt.
        if value.is_empty() {
            return Ok(());
        }
        let active = self.current.read().clone();
        if let Some(transformer) = active.transformers.for_key(key) {
            let plaintext = transformer
                .read(value, key)
                .map_err(|e| StoreError::Corrupt {
                    what: key.to_string(),
                    detail: e.to_string(),
                })?;
            *value = Bytes::from(plaintext);
        }
        Ok(())
    }

    fn open_kv(&self, mut kv: KeyValue) -> Result<KeyValue, StoreError> {
        self.open(&kv.key, &mut kv.value)?;
        Ok(kv)
    }

    fn open_event(&self, mut event: Event) -> Result<Event, StoreError> {
        self.open(&event.kv.key, &mut event.kv.value)?;
        if let Some(prev) = event.prev.as_mut() {
            self.open(&prev.key, &mut prev.value)?;
        }
        Ok(event)
    }
}

#[async_trait]
impl Store for EncryptedStore {
    fn current_revision(&self) -> Revision {
        self.raw.current_revision()
    }

    fn health(&self) -> Result<(), StoreError> {
        self.raw.health()
    }

    fn compact_revision(&self) -> Revision {
        self.raw.compact_revision()
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        self.raw
            .get(key)
            .await?
            .map(|kv| self.state.open_kv(kv))
            .transpose()
    }

    async fn mod_revision(&self, key: &str) -> Result<Option<Revision>, StoreError> {
        // Revisions are not encrypted: nothing to open.
        self.raw.mod_revision(key).await
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<ListResult, StoreError> {
        let mut listed = self.raw.list(prefix, start_after, limit).await?;
        for kv in &mut listed.items {
            self.state.open(&kv.key, &mut kv.value)?;
        }
        Ok(listed)
    }

    async fn list_at(&self, prefix: &str, revision: Revision) -> Result<ListResult, StoreError> {
        let mut listed = self.raw.list_at(prefix, revision).await?;
        for kv in &mut listed.items {
            self.state.open(&kv.key, &mut kv.value)?;
        }
        Ok(listed)
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue, StoreError> {
        let _shared = self.state.gate.read().await;
        let sealed = Self::seal(&self.active(), key, &value)?;
        let mut kv = self.raw.create(key, sealed).await?;
        kv.value = value;
        Ok(kv)
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected_mod_revision: Option<Revision>,
    ) -> Result<KeyValue, StoreError> {
        let _shared = self.state.gate.read().await;
        let sealed = Self::seal(&self.active(), key, &value)?;
        let mut kv = self.raw.update(key, sealed, expected_mod_revision).await?;
        kv.value = value;
        Ok(kv)
    }

    async fn delete(
        &self,
        key: &str,
        expected_mod_revision: Option<Revision>,
    ) -> Result<KeyValue, StoreError> {
        let kv = self.raw.delete(key, expected_mod_revision).await?;
        self.state.open_kv(kv)
    }

    /// The raw store's progress holds for the opened stream: each event is
    /// opened as it passes, so the consumer takes them in the same order.
    fn watch_with_progress(
        &self,
        prefix: &str,
        from_revision: Revision,
    ) -> Result<(WatchStream, Option<WatchProgress>), StoreError> {
        let state = self.state.clone();
        let (events, progress) = self.raw.watch_with_progress(prefix, from_revision)?;
        let opened = events
            .map(move |event| event.and_then(|e| state.open_event(e)))
            .boxed();
        Ok((opened, progress))
    }

    async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        self.raw.compact(revision).await
    }

    async fn defragment(&self) -> Result<(), StoreError> {
        self.raw.defragment().await
    }

    /// The stored bytes, not decrypted: a snapshot holds what the disk
    /// holds, and the key travels beside it (see `skiff_store::snapshot`).
    async fn read_all(&self) -> Result<skiff_store::ListResult, StoreError> {
        self.raw.read_all().await
    }

    async fn close(&self) -> Result<(), StoreError> {
        self.raw.close().await
    }
}

#[cfg(test)]
mod tests {
    use skiff_store::{EventKind, SledConfig, SledStore};

    use super::*;

    const CONFIG: &str = r#"
apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources: [secrets]
    providers:
      - aesgcm:
          keys:
            - name: k1
              secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=
"#;

    async fn fixture() -> (EncryptedStore, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let config_path = dir.path().join("enc.yaml");
        std::fs::write(&config_path, CONFIG).unwrap();
        let raw: Arc<dyn Store> =
            Arc::new(SledStore::open(SledConfig::new(dir.path().join("db"))).unwrap());
        let store = EncryptedStore::open(raw, EncryptionSource::File(config_path)).unwrap();
        (store, dir)
    }

    const SECRET: &str = "/registry/core/secrets/default/s";

    #[tokio::test]
    async fn configured_keys_hold_ciphertext_and_read_back_plaintext() {
        let (store, _dir) = fixture().await;
        let mut watch = store.watch("/registry/", store.current_revision()).unwrap();
        store
            .create(SECRET, Bytes::from_static(b"{\"v\":1}"))
            .await
            .unwrap();
        store
            .update(SECRET, Bytes::from_static(b"{\"v\":2}"), None)
            .await
            .unwrap();
        let cm = "/registry/core/configmaps/default/c";
        store
            .create(cm, Bytes::from_static(b"{\"c\":1}"))
            .await
            .unwrap();

        let raw = store.raw().get(SECRET).await.unwrap().unwrap();
        assert!(raw.value.starts_with(b"k8s:enc:aesgcm:v1:k1:"));
        assert!(!raw.value.windows(5).any(|w| w == b"\"v\":2"));
        assert_eq!(
            store.raw().get(cm).await.unwrap().unwrap().value,
            "{\"c\":1}"
        );

        assert_eq!(store.get(SECRET).await.unwrap().unwrap().value, "{\"v\":2}");
        let listed = store.list("/registry/", None, 0).await.unwrap();
        let values: Vec<_> = listed.items.iter().map(|kv| kv.value.clone()).collect();
        assert_eq!(values, ["{\"c\":1}", "{\"v\":2}"]);
        // A backup holds what the disk holds: the Secret still encrypted.
        let backup = store.read_all().await.unwrap();
        assert_eq!(backup.items[0].value, "{\"c\":1}");
        assert!(backup.items[1].value.starts_with(b"k8s:enc:aesgcm:v1:k1:"));

        let created = watch.next().await.unwrap().unwrap();
        assert_eq!(created.kv.value, "{\"v\":1}");
        let updated = watch.next().await.unwrap().unwrap();
        assert_eq!(updated.kv.value, "{\"v\":2}");
        assert_eq!(updated.prev.unwrap().value, "{\"v\":1}");
        let deleted = store.delete(SECRET, None).await.unwrap();
        assert_eq!(deleted.value, "{\"v\":2}");
        let _cm = watch.next().await.unwrap().unwrap();
        let gone = watch.next().await.unwrap().unwrap();
        assert_eq!(gone.kind, EventKind::Delete);
        assert_eq!(gone.prev.unwrap().value, "{\"v\":2}");
    }

    #[tokio::test]
    async fn a_value_no_key_opens_is_an_error_not_ciphertext() {
        let (store, _dir) = fixture().await;
        store
            .raw()
            .create(
                SECRET,
                Bytes::from_static(b"k8s:enc:aesgcm:v1:k1:garbage-garbage"),
            )
            .await
            .unwrap();
        match store.get(SECRET).await {
            Err(StoreError::Corrupt { what, detail }) => {
                assert_eq!(what, SECRET);
                assert!(
                    detail.contains("aesgcm key \"k1\" cannot decrypt"),
                    "{detail}"
                );
            }
            other => panic!("expected a decryption error, got {other:?}"),
        }
        assert!(
            store
                .list("/registry/core/secrets/", None, 0)
                .await
                .is_err()
        );
        // Plaintext under an encrypted resource is refused too: this
        // configuration has no identity provider to read it.
        let other = "/registry/core/secrets/default/plain";
        store
            .raw()
            .create(other, Bytes::from_static(b"{}"))
            .await
            .unwrap();
        assert!(store.get(other).await.is_err());
    }
}
