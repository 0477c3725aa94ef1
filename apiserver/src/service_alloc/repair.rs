//! Keeping allocation records true to the stored Services: a Service's
//! records are released as soon as the store shows it deleted or no longer
//! holding them (a store watch on the services), and a repair pass at start
//! and every few minutes (upstream's repair controllers) releases records
//! no Service holds — left by a server that died between writing a record
//! and storing its Service — and writes the records of addresses Services
//! hold without one (a store written before records existed). Every API
//! server on the store runs this; each write is a compare-and-swap, so two
//! doing the same step do it once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use skiff_store::{Event, EventKind, Store, StoreError};

use super::claims::{IPS_PREFIX, Item, PORTS_PREFIX, Record, items_of, name_of};
use crate::object::meta_str;
use crate::server::Inner;

/// How often the repair pass runs.
const REPAIR_EVERY: Duration = Duration::from_secs(180);

/// A record no Service holds is released only once it is this old (a
/// create may still be on its way to storing its Service).
const GRACE: Duration = Duration::from_secs(180);

/// Follows the services until shutdown.
pub(crate) async fn run(inner: Arc<Inner>) {
    let Some(prefix) = inner
        .registry
        .get("", "v1", "services")
        .map(|info| info.storage_prefix.clone())
    else {
        return;
    };
    let mut shutdown = inner.shutdown.subscribe();
    loop {
        let from = inner.store.current_revision();
        if let Err(error) = repair_once(inner.store.as_ref(), &prefix, GRACE).await {
            tracing::warn!(%error, "service allocation repair failed");
        }
        let mut events = match inner.store.watch(&prefix, from) {
            Ok(events) => events,
            Err(error) => {
                tracing::warn!(%error, "cannot watch services to release allocations");
                tokio::select! {
                    _ = shutdown.changed() => return,
                    _ = tokio::time::sleep(Duration::from_secs(5)) => continue,
                }
            }
        };
        let mut ticker = tokio::time::interval(REPAIR_EVERY);
        ticker.tick().await;
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = ticker.tick() => {
                    if let Err(error) = repair_once(inner.store.as_ref(), &prefix, GRACE).await {
                        tracing::warn!(%error, "service allocation repair failed");
                    }
                }
                event = events.next() => match event {
                    Some(Ok(event)) => release_dropped(inner.store.as_ref(), &event).await,
                    Some(Err(error)) => {
                        tracing::debug!(%error, "services watch ended; repairing and watching again");
                        break;
                    }
                    None => {
                        if inner.is_shutting_down() {
                            return;
                        }
                        break;
                    }
                },
            }
        }
    }
}

/// Releases what the Service held before `event` and holds no more.
async fn release_dropped(store: &dyn Store, event: &Event) {
    let Some(prev) = event.prev.as_ref() else {
        return;
    };
    let Ok(before) = serde_json::from_slice::<Value>(&prev.value) else {
        return;
    };
    let after = match event.kind {
        EventKind::Delete => Vec::new(),
        _ => serde_json::from_slice::<Value>(&event.kv.value)
            .map(|v| items_of(&v))
            .unwrap_or_default(),
    };
    let uid = meta_str(&before, "uid").unwrap_or_default();
    for item in items_of(&before) {
        if !after.contains(&item) {
            release_if_held_by(store, &item, uid).await;
        }
    }
}

/// Releases every record the (deleted) `service` holds, at once, so its
/// addresses can be requested again by the next write.
pub(crate) async fn release_held(store: &dyn Store, service: &Value) {
    let uid = meta_str(service, "uid").unwrap_or_default();
    for item in items_of(service) {
        release_if_held_by(store, &item, uid).await;
    }
}

/// Deletes the record of `item` if `uid` holds it.
async fn release_if_held_by(store: &dyn Store, item: &Item, uid: &str) {
    let key = item.key();
    let Ok(Some(current)) = store.get(&key).await else {
        return;
    };
    if Record::parse(&current.value).is_none_or(|r| r.uid != uid) {
        return;
    }
    match store.delete(&key, Some(current.mod_revision)).await {
        Ok(_) => tracing::debug!(%key, "allocation released"),
        Err(StoreError::NotFound { .. } | StoreError::Conflict { .. }) => {}
        Err(error) => tracing::warn!(%key, %error, "could not release an allocation"),
    }
}

/// What one repair pass changed.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Repaired {
    /// Records no Service held, deleted.
    pub released: usize,
    /// Records written for what Services held without one.
    pub recorded: usize,
}

/// One pass: reads the records, then the Services (so a record written
/// before that read whose Service is stored is seen held), releases
/// records older than `grace` that no Service holds, and records what
/// Services hold without a record.
pub(crate) async fn repair_once(
    store: &dyn Store,
    services_prefix: &str,
    grace: Duration,
) -> Result<Repaired, StoreError> {
    let mut records = Vec::new();
    for prefix in [IPS_PREFIX, PORTS_PREFIX] {
        records.extend(store.list(prefix, None, 0).await?.items);
    }
    let services = store.list(services_prefix, None, 0).await?.items;
    let mut held: HashMap<Item, (String, Record)> = HashMap::new();
    for kv in &services {
        let Ok(service) = serde_json::from_slice::<Value>(&kv.value) else {
            continue;
        };
        for item in items_of(&service) {
            let record = Record {
                uid: meta_str(&service, "uid").unwrap_or_default().to_string(),
                service: name_of(&service),
                allocated_at: jiff::Timestamp::now().as_second(),
            };
            if let Some((_, other)) = held.get(&item) {
                tracing::warn!(?item, first = %other.service, second = %record.service, "two Services hold the same allocation");
                continue;
            }
            held.insert(item, (kv.key.clone(), record));
        }
    }
    let now = jiff::Timestamp::now().as_second();
    let grace = i64::try_from(grace.as_secs()).unwrap_or(i64::MAX);
    let mut repaired = Repaired::default();
    let mut recorded_items = std::collections::HashSet::new();
    for kv in records {
        let Some(item) = Item::from_key(&kv.key) else {
            continue;
        };
        let record = Record::parse(&kv.value);
        let holder = held.get(&item).map(|(_, r)| r);
        if record.is_some() {
            recorded_items.insert(item.clone());
        }
        let holds = matches!((&record, holder), (Some(r), Some(h)) if r.uid == h.uid);
        if holds {
            continue;
        }
        let old = record
            .as_ref()
            .is_none_or(|r| now.saturating_sub(r.allocated_at) >= grace);
        if !old {
            continue;
        }
        match store.delete(&kv.key, Some(kv.mod_revision)).await {
            Ok(_) => {
                repaired.released += 1;
                recorded_items.remove(&item);
                tracing::info!(key = %kv.key, "released an allocation no Service holds");
            }
            Err(StoreError::NotFound { .. } | StoreError::Conflict { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    for (item, (_, record)) in held {
        if recorded_items.contains(&item) {
            continue;
        }
        match store.create(&item.key(), record_bytes(&record)).await {
            Ok(_) => {
                repaired.recorded += 1;
                tracing::info!(key = %item.key(), service = %record.service, "recorded an allocation a Service held without a record");
            }
            Err(StoreError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(repaired)
}

fn record_bytes(record: &Record) -> bytes::Bytes {
    serde_json::to_vec(record).unwrap_or_default().into()
}
