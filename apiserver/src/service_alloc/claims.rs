//! Allocation records: one store key per allocated cluster IP
//! (`/skiff/ranges/serviceips/<ip>`) and node port
//! (`/skiff/ranges/servicenodeports/<port>`), outside the API's key space,
//! naming the Service (uid and `namespace/name`) that holds it. A record is
//! created only if absent, so two API servers on one store never hand out
//! the same address: the one that loses chooses again. Upstream keeps one
//! bitmap per range updated by compare-and-swap; a key per allocation
//! makes concurrent creates of different addresses independent writes.

use std::collections::HashSet;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use skiff_store::{Revision, Store, StoreError};

use super::{AllocationError, Used, ips_of, node_ports_of};
use crate::handlers::storage::internal;
use crate::object::meta_str;
use crate::registry::ResourceInfo;
use crate::server::Inner;
use crate::status::ApiError;

/// Records of cluster IPs.
pub(crate) const IPS_PREFIX: &str = "/skiff/ranges/serviceips/";
/// Records of node ports.
pub(crate) const PORTS_PREFIX: &str = "/skiff/ranges/servicenodeports/";

/// Choices made again after losing a record to another writer before the
/// create gives up (each loss also teaches the next choice every record).
const ATTEMPTS: usize = 16;

/// What a record says.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub(crate) struct Record {
    /// The holding Service's uid.
    pub uid: String,
    /// Its `namespace/name`.
    pub service: String,
    /// When the record was written (seconds since the epoch): the repair
    /// releases a record no Service holds only once it is old enough that
    /// no create can still be on its way to storing the Service.
    #[serde(rename = "allocatedAt")]
    pub allocated_at: i64,
}

impl Record {
    pub(crate) fn parse(value: &[u8]) -> Option<Self> {
        serde_json::from_slice(value).ok()
    }

    fn for_service(service: &Value) -> Self {
        Record {
            uid: meta_str(service, "uid").unwrap_or_default().to_string(),
            service: name_of(service),
            allocated_at: jiff::Timestamp::now().as_second(),
        }
    }

    fn encode(&self) -> bytes::Bytes {
        serde_json::to_vec(self).unwrap_or_default().into()
    }
}

/// `namespace/name` of a Service.
pub(crate) fn name_of(service: &Value) -> String {
    format!(
        "{}/{}",
        meta_str(service, "namespace").unwrap_or_default(),
        meta_str(service, "name").unwrap_or_default()
    )
}

/// One allocated address or port.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Item {
    Ip(String),
    Port(u16),
}

impl Item {
    /// Its record's key.
    pub(crate) fn key(&self) -> String {
        match self {
            Item::Ip(ip) => format!("{IPS_PREFIX}{ip}"),
            Item::Port(port) => format!("{PORTS_PREFIX}{port}"),
        }
    }

    /// The item a record key names.
    pub(crate) fn from_key(key: &str) -> Option<Self> {
        if let Some(ip) = key.strip_prefix(IPS_PREFIX) {
            return Some(Item::Ip(ip.to_string()));
        }
        key.strip_prefix(PORTS_PREFIX)?.parse().ok().map(Item::Port)
    }
}

/// The addresses and ports a Service holds (a headless Service's `None`
/// is no address).
pub(crate) fn items_of(service: &Value) -> Vec<Item> {
    let mut items: Vec<Item> = Vec::new();
    for ip in ips_of(service) {
        let item = Item::Ip(ip.to_string());
        if ip.parse::<std::net::Ipv4Addr>().is_ok() && !items.contains(&item) {
            items.push(item);
        }
    }
    for port in node_ports_of(service) {
        let item = Item::Port(port);
        if !items.contains(&item) {
            items.push(item);
        }
    }
    items
}

/// The records one write created, held until the Service is stored: if
/// it is not (refused, failed, a dry run), they are deleted again.
pub(crate) struct AllocationGuard<'a> {
    store: Arc<dyn Store>,
    created: Vec<(String, Revision)>,
    stored: bool,
    _inner: PhantomData<&'a Inner>,
}

impl AllocationGuard<'_> {
    /// The Service holding these records is stored: keep them.
    pub(crate) fn stored(&mut self) {
        self.stored = true;
    }

    /// Deletes the records this guard created, now.
    async fn release(mut self) {
        let created = std::mem::take(&mut self.created);
        release_all(self.store.as_ref(), created).await;
    }
}

impl Drop for AllocationGuard<'_> {
    fn drop(&mut self) {
        if self.stored || self.created.is_empty() {
            return;
        }
        let created = std::mem::take(&mut self.created);
        let store = self.store.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { release_all(store.as_ref(), created).await });
        }
    }
}

/// Deletes each record if it is still the one written.
async fn release_all(store: &dyn Store, created: Vec<(String, Revision)>) {
    for (key, revision) in created {
        match store.delete(&key, Some(revision)).await {
            Ok(_) | Err(StoreError::NotFound { .. } | StoreError::Conflict { .. }) => {}
            Err(error) => tracing::warn!(%key, %error, "could not release an allocation"),
        }
    }
}

/// Why a claim did not go through.
enum ClaimError {
    /// Another Service holds this one.
    Taken(Item),
    Store(StoreError),
}

/// Chooses what the Service at `key` lacks (starting from what the watch
/// cache shows taken) and claims every address and port it then holds,
/// choosing again when another writer holds one. Field errors (a requested
/// address outside the range or taken, a full range) are 422.
pub(crate) async fn claim_for<'i>(
    inner: &'i Inner,
    info: &ResourceInfo,
    key: &str,
    object: &mut Value,
) -> Result<AllocationGuard<'i>, ApiError> {
    let stored = inner.cache(info)?.snapshot();
    let same_name = name_of(object);
    let mut used = Used::of(
        stored
            .objects
            .iter()
            .filter(|(k, _)| k.as_str() != key)
            .map(|(_, v)| v.value())
            .collect::<Vec<_>>()
            .iter()
            .map(|v| &**v)
            // A Service of the same name is not competition: its create
            // fails with AlreadyExists (409), not "already allocated".
            .filter(|other| name_of(other) != same_name),
    );
    // What the stored object already holds was claimed when it was
    // written: an update (a status write among them) claims nothing again.
    let uid = meta_str(object, "uid").unwrap_or_default().to_string();
    let already: HashSet<Item> = stored
        .objects
        .get(key)
        .map(|cached| cached.value())
        .filter(|current| meta_str(current, "uid") == Some(uid.as_str()))
        .map(|current| items_of(&current).into_iter().collect())
        .unwrap_or_default();
    let mut learned = false;
    for _ in 0..ATTEMPTS {
        let mut candidate = object.clone();
        inner
            .services
            .allocate_with(&mut candidate, &used)
            .map_err(|e| match e {
                AllocationError::Invalid(causes) => {
                    crate::handlers::create::invalid(info, object, causes)
                }
                AllocationError::Full(what) => ApiError::Internal(format!("{what}: range is full")),
            })?;
        match claim(inner, key, &candidate, &already).await {
            Ok(guard) => {
                *object = candidate;
                return Ok(guard);
            }
            Err(ClaimError::Store(e)) => return Err(internal(e)),
            Err(ClaimError::Taken(item)) => {
                tracing::debug!(?item, service = %same_name, "allocation taken by another writer; choosing again");
                match item {
                    Item::Ip(ip) => used.ips.insert(ip),
                    Item::Port(port) => used.ports.insert(port),
                };
                if !learned {
                    learned = true;
                    learn_records(inner.store.as_ref(), &mut used, &uid, &same_name)
                        .await
                        .map_err(internal)?;
                }
            }
        }
    }
    Err(ApiError::ServiceUnavailable(format!(
        "could not allocate the addresses of Service {same_name}: other writers kept taking them"
    )))
}

/// Adds every record not held by this Service to `used`.
async fn learn_records(
    store: &dyn Store,
    used: &mut Used,
    uid: &str,
    name: &str,
) -> Result<(), StoreError> {
    for prefix in [IPS_PREFIX, PORTS_PREFIX] {
        for kv in store.list(prefix, None, 0).await?.items {
            let ours = Record::parse(&kv.value).is_some_and(|r| r.uid == uid || r.service == name);
            match Item::from_key(&kv.key) {
                Some(_) if ours => {}
                Some(Item::Ip(ip)) => {
                    used.ips.insert(ip);
                }
                Some(Item::Port(port)) => {
                    used.ports.insert(port);
                }
                None => {}
            }
        }
    }
    Ok(())
}

/// Creates the record of each address and port `service` holds, except
/// those in `already` and those whose record already names this Service. On the first one another Service holds,
/// the records created so far are deleted again.
async fn claim<'i>(
    inner: &'i Inner,
    key: &str,
    service: &Value,
    already: &HashSet<Item>,
) -> Result<AllocationGuard<'i>, ClaimError> {
    let store = inner.store.clone();
    let mut guard = AllocationGuard {
        store: store.clone(),
        created: Vec::new(),
        stored: false,
        _inner: PhantomData,
    };
    let record = Record::for_service(service);
    let mut seen = HashSet::new();
    for item in items_of(service) {
        if already.contains(&item) || !seen.insert(item.clone()) {
            continue;
        }
        match claim_one(store.as_ref(), key, &item, &record).await {
            Ok(Some(revision)) => guard.created.push((item.key(), revision)),
            Ok(None) => {}
            Err(error) => {
                guard.release().await;
                return Err(error);
            }
        }
    }
    Ok(guard)
}

/// Claims one item: `Some(revision)` when this call wrote its record,
/// `None` when the record already names this Service.
async fn claim_one(
    store: &dyn Store,
    service_key: &str,
    item: &Item,
    record: &Record,
) -> Result<Option<Revision>, ClaimError> {
    let key = item.key();
    // A record deleted between the failed create and the read is tried
    // again; a few rounds at most.
    for _ in 0..4 {
        match store.create(&key, record.encode()).await {
            Ok(kv) => return Ok(Some(kv.mod_revision)),
            Err(StoreError::AlreadyExists { .. }) => {}
            Err(e) => return Err(ClaimError::Store(e)),
        }
        let Some(current) = store.get(&key).await.map_err(ClaimError::Store)? else {
            continue;
        };
        let owner = Record::parse(&current.value);
        match owner {
            Some(owner) if owner.uid == record.uid => return Ok(None),
            Some(owner) if owner.service == record.service => {
                // Held under this name by an earlier Service: if that one
                // is still stored, the create fails with AlreadyExists; if
                // not, its record outlived it and is taken over.
                if store
                    .get(service_key)
                    .await
                    .map_err(ClaimError::Store)?
                    .is_some()
                {
                    return Ok(None);
                }
                match store
                    .update(&key, record.encode(), Some(current.mod_revision))
                    .await
                {
                    Ok(kv) => return Ok(Some(kv.mod_revision)),
                    Err(StoreError::Conflict { .. } | StoreError::NotFound { .. }) => continue,
                    Err(e) => return Err(ClaimError::Store(e)),
                }
            }
            _ => return Err(ClaimError::Taken(item.clone())),
        }
    }
    Err(ClaimError::Taken(item.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn items_and_keys() {
        let svc = json!({"spec": {"clusterIP": "10.43.0.7", "clusterIPs": ["10.43.0.7"],
            "ports": [{"nodePort": 30001}, {"nodePort": 30002}]}});
        let items = items_of(&svc);
        assert_eq!(
            items,
            vec![
                Item::Ip("10.43.0.7".into()),
                Item::Port(30001),
                Item::Port(30002)
            ]
        );
        for item in items {
            assert_eq!(Item::from_key(&item.key()), Some(item));
        }
        assert!(items_of(&json!({"spec": {"clusterIP": "None"}})).is_empty());
        assert_eq!(Item::from_key("/registry/core/services/x"), None);
    }
}
