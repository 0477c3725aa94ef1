//! Values a handler has just written, offered to the cache's feed so it
//! need not decode the same bytes back from the store's event.
//!
//! A handler encodes an object, gives the bytes to the store, and the store
//! (sled: its committer passes the very `Bytes` through to the watch event)
//! hands them to the feed, which used to parse them again. Now the handler
//! offers the decoded value under the address of those bytes before it
//! writes; the feed takes it when the event carries the same allocation.
//!
//! Why the address is a safe key: the offer holds a clone of the `Bytes`
//! until it is withdrawn, so no other allocation can take that address
//! meanwhile, and an event can only carry it if it carries these bytes.
//! Stores that copy values (etcd, the encrypting store for its resources)
//! give the feed other addresses, so it decodes as before. Either way the
//! cache ends up with the same value: the one the bytes were encoded from.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::Value;

use super::WatchCache;

/// The values on offer, by the address and length of their bytes.
#[derive(Default)]
pub(super) struct Offers {
    slots: Mutex<HashMap<(usize, usize), Value>>,
}

fn slot_of(bytes: &Bytes) -> (usize, usize) {
    (bytes.as_ptr() as usize, bytes.len())
}

impl Offers {
    /// The value offered for `bytes`, if one is (taken, so only once).
    pub(super) fn take(&self, bytes: &Bytes) -> Option<Value> {
        if bytes.is_empty() {
            return None;
        }
        self.slots.lock().remove(&slot_of(bytes))
    }
}

/// An offer in place; withdrawn when dropped, whether or not the feed took
/// it (a failed write, or a store that copies the bytes).
pub(crate) struct Offer {
    cache: Arc<WatchCache>,
    bytes: Bytes,
}

impl WatchCache {
    /// Offers `value` as what `bytes` decode to (without its
    /// resourceVersion, which the feed sets from the event) until the
    /// returned offer is dropped. Keep it until the write is in the cache.
    pub(crate) fn offer(self: &Arc<Self>, bytes: &Bytes, value: Value) -> Offer {
        if !bytes.is_empty() {
            self.offers.slots.lock().insert(slot_of(bytes), value);
        }
        Offer {
            cache: self.clone(),
            bytes: bytes.clone(),
        }
    }
}

impl Drop for Offer {
    fn drop(&mut self) {
        if !self.bytes.is_empty() {
            self.cache.offers.slots.lock().remove(&slot_of(&self.bytes));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch_cache::CacheLimits;
    use serde_json::json;
    use std::time::Duration;

    fn cache() -> Arc<WatchCache> {
        WatchCache::new(
            "/registry/core/configmaps/".into(),
            &CacheLimits {
                history: 10,
                history_max_age: Duration::from_secs(60),
                fanout_buffer: 10,
                snapshot_ttl: Duration::from_secs(60),
            },
        )
    }

    #[test]
    fn an_offer_is_taken_once_for_its_own_bytes_only() {
        let cache = cache();
        let bytes = Bytes::from_static(b"{\"a\":1}");
        let copy = Bytes::copy_from_slice(&bytes);
        let _offer = cache.offer(&bytes, json!({"a": 1}));
        assert_eq!(cache.offers.take(&copy), None, "equal bytes elsewhere");
        assert_eq!(cache.offers.take(&bytes), Some(json!({"a": 1})));
        assert_eq!(cache.offers.take(&bytes), None, "taken already");
    }

    /// On sled the event carries the handler's own bytes, so the cache
    /// takes the offered value (here told apart by a field the bytes lack;
    /// a handler offers exactly what it encoded). A copy of the bytes, as
    /// etcd or the encrypting store hand back, is decoded instead.
    #[tokio::test]
    async fn the_feed_takes_the_offer_for_the_same_bytes_and_decodes_a_copy() {
        use skiff_store::{SledConfig, SledStore, Store};
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(SledStore::open(SledConfig::new(dir.path().join("db"))).unwrap());
        let cache = cache();
        let (_stop, shutdown) = tokio::sync::watch::channel(false);
        tokio::spawn(cache.clone().follow(store.clone(), shutdown));
        let encoded = |name: &str| {
            Bytes::from(serde_json::to_vec(&json!({"metadata": {"name": name}})).unwrap())
        };

        let bytes = encoded("a");
        let offer = cache.offer(&bytes, json!({"metadata": {"name": "a"}, "offered": true}));
        let a = "/registry/core/configmaps/default/a";
        let written = store.create(a, bytes).await.unwrap();
        assert!(
            cache
                .wait_applied(written.mod_revision, Duration::from_secs(5))
                .await
        );
        drop(offer);
        let held = cache.get(a).unwrap().value();
        assert_eq!(held["offered"], true, "the offered value is held");
        assert_eq!(
            held["metadata"]["resourceVersion"],
            written.mod_revision.to_string()
        );

        let bytes = encoded("b");
        let _offer = cache.offer(&bytes, json!({"metadata": {"name": "b"}, "offered": true}));
        let b = "/registry/core/configmaps/default/b";
        let copy = Bytes::copy_from_slice(&bytes);
        let written = store.create(b, copy).await.unwrap();
        assert!(
            cache
                .wait_applied(written.mod_revision, Duration::from_secs(5))
                .await
        );
        let held = cache.get(b).unwrap().value();
        assert!(held.get("offered").is_none(), "a copy is decoded: {held}");
        assert_eq!(held["metadata"]["name"], "b");
        store.close().await.unwrap();
    }

    #[test]
    fn a_dropped_offer_is_withdrawn() {
        let cache = cache();
        let bytes = Bytes::from(b"{\"a\":1}".to_vec());
        drop(cache.offer(&bytes, json!({"a": 1})));
        assert_eq!(cache.offers.take(&bytes), None);
        assert!(cache.offers.slots.lock().is_empty());
    }
}
