//! Feeding a watch cache from the store: an initial list, then one store
//! watch from the list's revision; on a compacted or broken watch the cache
//! is re-listed.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use imbl::OrdMap;
use serde_json::Value;
use skiff_store::{EventKind, KeyValue, Store, StoreError};
use tokio::sync::watch;

use super::{Cached, ChangeKind, WatchCache};
use crate::object::{decode_from_store, set_resource_version};

/// The store could not be read to (re)fill a cache.
#[derive(Debug, thiserror::Error)]
#[error("filling the watch cache for {prefix} failed: {source}")]
pub struct FeedError {
    pub prefix: String,
    #[source]
    pub source: StoreError,
}

impl WatchCache {
    /// Lists the prefix from the store and replaces the cache's content.
    pub(crate) async fn load(&self, store: &dyn Store) -> Result<(), FeedError> {
        let listed = store
            .list(self.prefix(), None, 0)
            .await
            .map_err(|source| FeedError {
                prefix: self.prefix().to_string(),
                source,
            })?;
        let mut objects = OrdMap::new();
        for kv in &listed.items {
            match decode_from_store(kv) {
                Ok(object) => {
                    objects.insert(kv.key.clone(), Cached::hold(object, self.form()));
                }
                Err(e) => {
                    tracing::warn!(key = %kv.key, error = %e, "skipping undecodable stored object")
                }
            }
        }
        self.reset(objects, listed.revision);
        Ok(())
    }

    /// Follows the store until `shutdown` turns true or the store closes.
    pub(crate) async fn follow(
        self: Arc<Self>,
        store: Arc<dyn Store>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            if *shutdown.borrow() {
                return;
            }
            let from = self.revision();
            let (mut stream, store_progress) = match store.watch_with_progress(self.prefix(), from)
            {
                Ok(watching) => watching,
                Err(StoreError::Closed) => return,
                Err(e) => {
                    tracing::warn!(prefix = %self.prefix(), error = %e, "store watch failed; re-listing");
                    self.relist(store.as_ref()).await;
                    continue;
                }
            };
            self.follows(store_progress);
            loop {
                tokio::select! {
                    _ = shutdown.changed() => return,
                    next = stream.next() => match next {
                        Some(Ok(event)) => {
                            let revision = event.revision();
                            match event.kind {
                                EventKind::Put => match self.written_value(&event.kv) {
                                    Ok(object) => self.apply(revision, ChangeKind::Put, event.kv.key, Some(object)),
                                    Err(e) => tracing::warn!(key = %event.kv.key, error = %e, "undecodable stored object"),
                                },
                                EventKind::Delete => self.apply(revision, ChangeKind::Delete, event.kv.key, None),
                            }
                        }
                        Some(Err(StoreError::Closed)) | None => return,
                        Some(Err(e)) => {
                            tracing::warn!(prefix = %self.prefix(), error = %e, "store watch broke; re-listing");
                            break;
                        }
                    }
                }
            }
            self.follows(None);
            self.relist(store.as_ref()).await;
        }
    }

    /// The value of a stored write: the one its handler offered, when the
    /// event carries the handler's own bytes, else decoded from them.
    fn written_value(&self, kv: &KeyValue) -> Result<Value, serde_json::Error> {
        match self.offers.take(&kv.value) {
            Some(mut object) => {
                set_resource_version(&mut object, kv.mod_revision);
                Ok(object)
            }
            None => decode_from_store(kv),
        }
    }

    async fn relist(&self, store: &dyn Store) {
        while let Err(e) = self.load(store).await {
            if matches!(e.source, StoreError::Closed) {
                return;
            }
            tracing::warn!(error = %e, "re-list failed; retrying");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}
