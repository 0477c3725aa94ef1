//! A small in-memory `Store` with etcd semantics, so the API tests do not
//! depend on a disk backend.

use std::collections::BTreeMap;

use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::Mutex;
use skiff_store::{
    Event, EventKind, KeyValue, ListResult, Revision, Store, StoreError, WatchStream,
};
use tokio::sync::mpsc;

struct Watcher {
    prefix: String,
    tx: mpsc::UnboundedSender<Result<Event, StoreError>>,
}

#[derive(Default)]
struct State {
    data: BTreeMap<String, KeyValue>,
    revision: Revision,
    compacted: Revision,
    history: Vec<Event>,
    watchers: Vec<Watcher>,
    closed: bool,
}

/// The whole store behind one mutex.
pub struct MemStore {
    state: Mutex<State>,
}

impl MemStore {
    pub fn new() -> Self {
        Self {
            state: Mutex::new(State {
                revision: 1,
                ..Default::default()
            }),
        }
    }

    /// Every key currently stored (for "nothing was stored" assertions).
    pub fn keys(&self) -> Vec<String> {
        self.state.lock().data.keys().cloned().collect()
    }
}

impl State {
    fn publish(&mut self, event: Event) {
        self.watchers.retain(|w| {
            !event.kv.key.starts_with(&w.prefix) || w.tx.send(Ok(event.clone())).is_ok()
        });
        self.history.push(event);
    }
}

#[async_trait]
impl Store for MemStore {
    fn current_revision(&self) -> Revision {
        self.state.lock().revision
    }

    fn compact_revision(&self) -> Revision {
        self.state.lock().compacted
    }

    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        Ok(self.state.lock().data.get(key).cloned())
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<ListResult, StoreError> {
        let s = self.state.lock();
        let mut items = Vec::new();
        let mut more = false;
        for (k, v) in s.data.range(prefix.to_string()..) {
            if !k.starts_with(prefix) {
                break;
            }
            if start_after.is_some_and(|a| k.as_str() <= a) {
                continue;
            }
            if limit > 0 && items.len() == limit {
                more = true;
                break;
            }
            items.push(v.clone());
        }
        Ok(ListResult {
            items,
            revision: s.revision,
            more,
        })
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue, StoreError> {
        let mut s = self.state.lock();
        if s.closed {
            return Err(StoreError::Closed);
        }
        if s.data.contains_key(key) {
            return Err(StoreError::AlreadyExists { key: key.into() });
        }
        s.revision += 1;
        let kv = KeyValue {
            key: key.into(),
            value,
            create_revision: s.revision,
            mod_revision: s.revision,
            version: 1,
        };
        s.data.insert(key.into(), kv.clone());
        s.publish(Event {
            kind: EventKind::Put,
            kv: kv.clone(),
            prev: None,
        });
        Ok(kv)
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected: Option<Revision>,
    ) -> Result<KeyValue, StoreError> {
        let mut s = self.state.lock();
        let Some(prev) = s.data.get(key).cloned() else {
            return Err(StoreError::NotFound { key: key.into() });
        };
        if let Some(e) = expected
            && e != prev.mod_revision
        {
            return Err(StoreError::Conflict {
                key: key.into(),
                expected: e,
                actual: prev.mod_revision,
            });
        }
        s.revision += 1;
        let kv = KeyValue {
            key: key.into(),
            value,
            create_revision: prev.create_revision,
            mod_revision: s.revision,
            version: prev.version + 1,
        };
        s.data.insert(key.into(), kv.clone());
        s.publish(Event {
            kind: EventKind::Put,
            kv: kv.clone(),
            prev: Some(prev),
        });
        Ok(kv)
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<KeyValue, StoreError> {
        let mut s = self.state.lock();
        let Some(prev) = s.data.get(key).cloned() else {
            return Err(StoreError::NotFound { key: key.into() });
        };
        if let Some(e) = expected
            && e != prev.mod_revision
        {
            return Err(StoreError::Conflict {
                key: key.into(),
                expected: e,
                actual: prev.mod_revision,
            });
        }
        s.revision += 1;
        s.data.remove(key);
        let gone = KeyValue {
            key: key.into(),
            value: Bytes::new(),
            create_revision: 0,
            mod_revision: s.revision,
            version: 0,
        };
        s.publish(Event {
            kind: EventKind::Delete,
            kv: gone,
            prev: Some(prev.clone()),
        });
        Ok(KeyValue {
            mod_revision: s.revision,
            ..prev
        })
    }

    fn watch(&self, prefix: &str, from: Revision) -> Result<WatchStream, StoreError> {
        let mut s = self.state.lock();
        if from < s.compacted {
            return Err(StoreError::Compacted {
                requested: from,
                compact_revision: s.compacted,
            });
        }
        let (tx, mut rx) = mpsc::unbounded_channel();
        for e in s
            .history
            .iter()
            .filter(|e| e.revision() > from && e.kv.key.starts_with(prefix))
        {
            let _ = tx.send(Ok(e.clone()));
        }
        s.watchers.push(Watcher {
            prefix: prefix.into(),
            tx,
        });
        Ok(Box::pin(futures::stream::poll_fn(move |cx| {
            rx.poll_recv(cx)
        })))
    }

    async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        let mut s = self.state.lock();
        s.compacted = revision;
        s.history.retain(|e| e.revision() > revision);
        Ok(())
    }

    async fn close(&self) -> Result<(), StoreError> {
        let mut s = self.state.lock();
        s.closed = true;
        s.watchers.clear();
        Ok(())
    }
}
