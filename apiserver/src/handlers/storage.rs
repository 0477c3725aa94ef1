//! Store access for handlers: keys to objects in the served version, store
//! errors to API errors, waiting for the watch cache after each write so a
//! client's next list or watch sees its own write, and
//! [`guaranteed_update`], the one read-decide-write loop every
//! read-modify-write goes through.

use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use serde_json::Value;
use skiff_store::{KeyValue, Revision, StoreError};

use crate::object::{decode_from_store, encode_for_store};
use crate::registry::ResourceInfo;
use crate::server::{CACHE_CATCH_UP, Inner};
use crate::service_alloc::AllocationGuard;
use crate::status::ApiError;
use crate::watch_cache::{Cached, Offer};

/// Attempts of a guaranteed update that keeps losing races before it gives
/// up with a conflict.
const ATTEMPTS: usize = 8;

/// The conflict detail upstream sends for a stale resourceVersion.
pub(crate) const MODIFIED: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

pub(crate) fn not_found(info: &ResourceInfo, name: &str) -> ApiError {
    ApiError::NotFound {
        resource: info.qualified(),
        group: info.group.to_string(),
        name: name.to_string(),
    }
}

/// A 403 about `name` of `info`'s resource, without causes: how admission
/// and a kind's own rules refuse a write.
pub(crate) fn forbidden(info: &ResourceInfo, name: &str, detail: String) -> ApiError {
    ApiError::Forbidden {
        resource: info.qualified(),
        group: info.group.to_string(),
        name: name.to_string(),
        detail,
        causes: Vec::new(),
    }
}

pub(crate) fn conflict(info: &ResourceInfo, name: &str, detail: &str) -> ApiError {
    ApiError::Conflict {
        resource: info.qualified(),
        group: info.group.to_string(),
        name: name.to_string(),
        detail: detail.to_string(),
    }
}

pub(crate) fn internal(e: StoreError) -> ApiError {
    match e {
        StoreError::Closed => ApiError::ServiceUnavailable("the storage is shutting down".into()),
        full @ StoreError::NoSpace { .. } => ApiError::InsufficientStorage(full.to_string()),
        other => ApiError::Internal(other.to_string()),
    }
}

/// Why a compare-and-swap write did not happen.
pub(crate) enum WriteError {
    /// The object changed since it was read.
    Conflict,
    Api(ApiError),
}

impl From<ApiError> for WriteError {
    fn from(e: ApiError) -> Self {
        WriteError::Api(e)
    }
}

/// Reads an object in `info`'s version with its store revision.
pub(crate) async fn read(
    inner: &Inner,
    info: &ResourceInfo,
    key: &str,
) -> Result<Option<(Value, Revision)>, ApiError> {
    let Some(kv) = get_stored(inner, info, key).await? else {
        return Ok(None);
    };
    Ok(Some((decode_stored(info, &kv)?, kv.mod_revision)))
}

/// The stored key-value at `key`, timed for the store metrics.
async fn get_stored(
    inner: &Inner,
    info: &ResourceInfo,
    key: &str,
) -> Result<Option<KeyValue>, ApiError> {
    timed_get(info, inner.store.get(key)).await
}

/// A store read, timed for the store metrics as a `get` of `info`'s kind.
async fn timed_get<T>(
    info: &ResourceInfo,
    read: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, ApiError> {
    timed("get", info, read).await.map_err(internal)
}

/// A store `operation` on an object of `info`'s kind, timed for the store
/// metrics (upstream's `etcd_request_duration_seconds`).
async fn timed<T>(
    operation: &str,
    info: &ResourceInfo,
    call: impl std::future::Future<Output = T>,
) -> T {
    let started = std::time::Instant::now();
    let done = call.await;
    crate::metrics::observe_store(operation, &info.qualified(), started);
    done
}

/// A stored value as an object in `info`'s version.
fn decode_stored(info: &ResourceInfo, kv: &KeyValue) -> Result<Value, ApiError> {
    let object = decode_from_store(kv)
        .map_err(|e| ApiError::Internal(format!("corrupt object at {}: {e}", kv.key)))?;
    Ok(info.from_storage(object))
}

/// An object read for a GET's answer.
pub(crate) enum Answer {
    /// The watch cache's copy, which holds the very revision the store
    /// returned: the same write, so the same object, already encoded when
    /// the cache keeps its kind as JSON.
    Cached(Cached),
    /// The store's value, decoded (and converted to `info`'s version).
    Read(Value),
}

/// Whether `info` is served in the form it is stored in (no conversion, no
/// custom schema), so the watch cache's copy is the answer as it stands.
fn served_as_stored(info: &ResourceInfo) -> bool {
    info.conversion.is_none() && info.custom.is_none()
}

/// The watch cache's encoded copy of `written`, an object a write has just
/// stored (its resourceVersion set), when the cache holds that very
/// revision: a write waits for the cache to see it, so its answer need not
/// encode the object again.
pub(crate) fn written_json(inner: &Inner, info: &ResourceInfo, written: &Value) -> Option<Bytes> {
    if !served_as_stored(info) {
        return None;
    }
    let revision = crate::object::resource_version(written)?;
    let name = crate::object::meta_str(written, "name")?;
    let key = info.key(crate::object::meta_str(written, "namespace"), name);
    let cached = inner.cache(info).ok()?.get(&key)?;
    if cached.resource_version() != Some(revision) {
        return None;
    }
    cached.encoded_json().cloned()
}

/// Reads an object from the store, as [`read`] does, to answer a GET with:
/// when `info` is served as stored and the watch cache holds the object at
/// the revision the store has for it, the cache's copy is the answer, so the
/// stored bytes are neither copied out of the store nor decoded and encoded
/// again. The store is still asked first, so the answer is as current as the
/// store (upstream's GET without a resourceVersion).
pub(crate) async fn read_answer(
    inner: &Inner,
    info: &ResourceInfo,
    key: &str,
) -> Result<Option<Answer>, ApiError> {
    if served_as_stored(info)
        && let Ok(cache) = inner.cache(info)
    {
        let Some(revision) = timed_get(info, inner.store.mod_revision(key)).await? else {
            return Ok(None);
        };
        if let Some(cached) = cache.get(key)
            && cached.resource_version() == Some(revision)
        {
            return Ok(Some(Answer::Cached(cached)));
        }
    }
    // The cache is behind the store (or not kept for this kind): the
    // store's value is the answer.
    let Some(kv) = get_stored(inner, info, key).await? else {
        return Ok(None);
    };
    Ok(Some(Answer::Read(decode_stored(info, &kv)?)))
}

/// Reads an object from the watch cache when it holds one, else from the
/// store, as upstream's guaranteed update starts from the cached object. The
/// cached copy may be a few writes behind: a write based on it must use the
/// returned revision as its precondition and fall back to [`read`] on conflict.
pub(crate) async fn read_cached(
    inner: &Inner,
    info: &ResourceInfo,
    key: &str,
) -> Result<Option<(Value, Revision)>, ApiError> {
    if let Ok(cache) = inner.cache(info)
        && let Some(cached) = cache.get(key)
        && let Some(revision) = cached.resource_version()
    {
        return Ok(Some((info.from_storage(cached.to_value()), revision)));
    }
    read(inner, info, key).await
}

/// An object only looked at (a namespace's labels, a service account's
/// pull secrets): the watch cache's own copy, shared rather than cloned, when
/// the cache holds it in the served version; else read as [`read_cached`]
/// reads it.
pub(crate) async fn lookup(
    inner: &Inner,
    info: &ResourceInfo,
    key: &str,
) -> Result<Option<Arc<Value>>, ApiError> {
    if served_as_stored(info)
        && let Ok(cache) = inner.cache(info)
        && let Some(cached) = cache.get(key)
    {
        return Ok(Some(cached.value()));
    }
    Ok(read_cached(inner, info, key)
        .await?
        .map(|(object, _)| Arc::new(object)))
}

/// Reads an object or fails with NotFound.
pub(crate) async fn read_existing(
    inner: &Inner,
    info: &ResourceInfo,
    key: &str,
    name: &str,
) -> Result<(Value, Revision), ApiError> {
    read(inner, info, key)
        .await?
        .ok_or_else(|| not_found(info, name))
}

async fn caught_up(inner: &Inner, info: &ResourceInfo, revision: Revision) {
    if let Ok(cache) = inner.cache(info)
        && !cache.wait_applied(revision, CACHE_CATCH_UP).await
    {
        tracing::warn!(revision, prefix = %info.storage_prefix, "watch cache did not catch up with a write");
    }
}

/// The bytes to store for `stored`, and `stored` offered to the watch cache
/// as their value until the returned offer is dropped (after the write has
/// reached the cache), so the cache's feed need not decode them again.
fn encode_offered(inner: &Inner, info: &ResourceInfo, stored: Value) -> (Bytes, Option<Offer>) {
    let bytes = encode_for_store(&stored);
    let offer = inner
        .cache(info)
        .ok()
        .map(|cache| cache.offer(&bytes, stored));
    (bytes, offer)
}

/// Creates an object given in `info`'s version; returns it as stored.
pub(crate) async fn create(
    inner: &Inner,
    info: &ResourceInfo,
    key: &str,
    object: Value,
) -> Result<Value, WriteError> {
    let stored = info.to_storage(object);
    let (bytes, _offer) = encode_offered(inner, info, stored.clone());
    match timed("create", info, inner.store.create(key, bytes)).await {
        Ok(kv) => {
            caught_up(inner, info, kv.mod_revision).await;
            let mut out = info.from_storage(stored);
            crate::object::set_resource_version(&mut out, kv.mod_revision);
            Ok(out)
        }
        Err(StoreError::AlreadyExists { .. }) => Err(WriteError::Conflict),
        Err(e) => Err(WriteError::Api(internal(e))),
    }
}

/// Replaces an object if it is still at `expected`.
pub(crate) async fn update(
    inner: &Inner,
    info: &ResourceInfo,
    key: &str,
    object: Value,
    expected: Revision,
) -> Result<Value, WriteError> {
    let stored = info.to_storage(object);
    let (bytes, _offer) = encode_offered(inner, info, stored.clone());
    let revision = replace_stored(inner, info, key, bytes, expected).await?;
    let mut out = info.from_storage(stored);
    crate::object::set_resource_version(&mut out, revision);
    Ok(out)
}

/// As [`update`], for a caller that does not answer with the object (a
/// binding answers with a Status): the object goes to the watch cache's
/// feed as it is, not copied.
async fn update_unanswered(
    inner: &Inner,
    info: &ResourceInfo,
    key: &str,
    object: Value,
    expected: Revision,
) -> Result<(), WriteError> {
    let (bytes, _offer) = encode_offered(inner, info, info.to_storage(object));
    replace_stored(inner, info, key, bytes, expected)
        .await
        .map(drop)
}

/// Stores `bytes` at `key` if it is still at `expected`, and waits for the
/// watch cache to see it; the new revision.
async fn replace_stored(
    inner: &Inner,
    info: &ResourceInfo,
    key: &str,
    bytes: Bytes,
    expected: Revision,
) -> Result<Revision, WriteError> {
    match timed(
        "update",
        info,
        inner.store.update(key, bytes, Some(expected)),
    )
    .await
    {
        Ok(kv) => {
            caught_up(inner, info, kv.mod_revision).await;
            Ok(kv.mod_revision)
        }
        Err(StoreError::Conflict { .. } | StoreError::NotFound { .. }) => Err(WriteError::Conflict),
        Err(e) => Err(WriteError::Api(internal(e))),
    }
}

/// Deletes an object if it is still at `expected`; returns its last state
/// with the deletion's resourceVersion.
pub(crate) async fn delete(
    inner: &Inner,
    info: &ResourceInfo,
    key: &str,
    last: Value,
    expected: Revision,
) -> Result<Value, WriteError> {
    match timed("delete", info, inner.store.delete(key, Some(expected))).await {
        Ok(kv) => {
            info.strategy.deleted(inner, &last).await;
            caught_up(inner, info, kv.mod_revision).await;
            let mut out = last;
            crate::object::set_resource_version(&mut out, kv.mod_revision);
            Ok(out)
        }
        Err(StoreError::Conflict { .. } | StoreError::NotFound { .. }) => Err(WriteError::Conflict),
        Err(e) => Err(WriteError::Api(internal(e))),
    }
}

/// Where a guaranteed update reads the object its first attempt starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FirstRead {
    /// The store: the usual start.
    Store,
    /// The watch cache (the store when the cache lacks the object), as
    /// upstream starts some updates; later attempts read the store.
    Cache,
}

/// The object one attempt of a guaranteed update starts from.
pub(crate) struct Current {
    pub object: Value,
    /// Its store revision, the precondition of the attempt's write.
    pub revision: Revision,
    /// Read from the watch cache, so possibly behind the store: a refusal
    /// based on it should be [`Next::Retry`] instead, which reads the store.
    pub cached: bool,
}

/// What an attempt holds until its write is stored: a Service's
/// allocation lock, and what admission holds (its quota charge).
#[derive(Default)]
pub(crate) struct Held<'a> {
    allocation: Option<AllocationGuard<'a>>,
    admission: crate::admission_plugins::Admitted,
}

impl<'a> Held<'a> {
    pub(crate) fn new(
        allocation: Option<AllocationGuard<'a>>,
        admission: crate::admission_plugins::Admitted,
    ) -> Self {
        Held {
            allocation,
            admission,
        }
    }
}

/// What one attempt of a guaranteed update decided.
pub(crate) enum Next<'a> {
    /// Store `object` in place of the current one. `held` (allocation lock and
    /// quota charge) is released once the write is done. With `pinned` (the caller
    /// gave a resourceVersion precondition) a conflict is answered with
    /// upstream's 409 instead of retried.
    Replace {
        object: Value,
        held: Held<'a>,
        pinned: bool,
    },
    /// Store `object` and answer with nothing (`Value::Null`): for a caller
    /// whose response is not the object, which then need not be copied.
    /// Holds nothing and is not pinned.
    ReplaceUnanswered(Value),
    /// Remove the object from the store; `object` is its last state.
    Remove { object: Value, pinned: bool },
    /// Write nothing and answer with this object (no change, a dry run, or
    /// what the attempt did instead, such as creating a missing object).
    Done(Value),
    /// Read again from the store and start over.
    Retry,
}

impl Next<'_> {
    /// Store `object`, holding nothing (no allocation, no quota charge)
    /// and not pinned (the tests' shorthand; handlers hold or answer).
    #[cfg(test)]
    pub(crate) fn replace(object: Value) -> Self {
        Next::Replace {
            object,
            held: Held::default(),
            pinned: false,
        }
    }

    /// Marks a write as made under the caller's resourceVersion precondition
    /// when `pinned`.
    pub(crate) fn pinned(self, pinned: bool) -> Self {
        match self {
            Next::Replace { object, held, .. } => Next::Replace {
                object,
                held,
                pinned,
            },
            Next::Remove { object, .. } => Next::Remove { object, pinned },
            other => other,
        }
    }
}

/// The 409 for a write whose resourceVersion precondition `wanted` is not
/// the stored `revision`.
pub(crate) fn check_precondition(
    info: &ResourceInfo,
    name: &str,
    wanted: Option<Revision>,
    revision: Revision,
) -> Result<(), ApiError> {
    match wanted {
        Some(w) if w != revision => Err(conflict(info, name, MODIFIED)),
        _ => Ok(()),
    }
}

/// Reads the object at `key` (`None` when missing), lets `attempt` decide
/// its next state, and writes that with the read revision as precondition;
/// on a conflict it starts over from a fresh read, unless the write was
/// pinned to the caller's resourceVersion (then upstream's 409). Writes to
/// one key are serialised in this process, so races are rare.
///
/// `attempt` returns a boxed future (rather than being an async closure) so
/// the handlers' futures stay provably `Send`.
pub(crate) async fn guaranteed_update<'a, 'f>(
    inner: &'a Inner,
    info: &ResourceInfo,
    key: &str,
    name: &str,
    first: FirstRead,
    mut attempt: impl FnMut(Option<Current>) -> BoxFuture<'f, Result<Next<'a>, ApiError>>,
) -> Result<Value, ApiError> {
    let _serialised = inner.key_locks.lock(key).await;
    let mut cached = first == FirstRead::Cache;
    for _ in 0..ATTEMPTS {
        let read = if cached {
            read_cached(inner, info, key).await?
        } else {
            read(inner, info, key).await?
        };
        let revision = read.as_ref().map(|(_, revision)| *revision);
        let current = read.map(|(object, revision)| Current {
            object,
            revision,
            cached,
        });
        cached = false;
        let next = attempt(current).await?;
        let (written, pinned) = match (next, revision) {
            (Next::Done(answer), _) => return Ok(answer),
            (Next::Retry, _) => continue,
            (
                Next::Replace {
                    object,
                    held,
                    pinned,
                },
                Some(revision),
            ) => {
                let mut held = held;
                let written = update(inner, info, key, object, revision).await;
                if let Ok(stored) = &written {
                    held.admission.stored(stored);
                    if let Some(allocation) = held.allocation.as_mut() {
                        allocation.stored();
                    }
                }
                drop(held);
                (written, pinned)
            }
            (Next::ReplaceUnanswered(object), Some(revision)) => {
                let written = update_unanswered(inner, info, key, object, revision).await;
                (written.map(|()| Value::Null), false)
            }
            (Next::Remove { object, pinned }, Some(revision)) => {
                (delete(inner, info, key, object, revision).await, pinned)
            }
            // Nothing was read, so there is nothing to replace or remove.
            (Next::Replace { .. } | Next::ReplaceUnanswered(_) | Next::Remove { .. }, None) => {
                return Err(not_found(info, name));
            }
        };
        match written {
            Ok(stored) => return Ok(stored),
            Err(WriteError::Conflict) if !pinned => continue,
            Err(WriteError::Conflict) => return Err(conflict(info, name, MODIFIED)),
            Err(WriteError::Api(e)) => return Err(e),
        }
    }
    Err(conflict(info, name, MODIFIED))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::json;
    use skiff_store::{SledConfig, SledStore};

    use super::*;
    use crate::server::{ApiServer, ApiServerConfig};

    struct Fixture {
        server: ApiServer,
        info: Arc<ResourceInfo>,
        key: String,
        _dir: tempfile::TempDir,
    }

    /// A server with one stored ConfigMap `default/cm` holding `data.v = "0"`.
    async fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SledStore::open(SledConfig::new(dir.path().join("s"))).unwrap());
        let server = ApiServer::new(store, ApiServerConfig::default())
            .await
            .unwrap();
        let info = server.inner().registry.get("", "v1", "configmaps").unwrap();
        let key = info.key(Some("default"), "cm");
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default"}, "data": {"v": "0"}});
        assert!(create(server.inner(), &info, &key, cm).await.is_ok());
        Fixture {
            server,
            info,
            key,
            _dir: dir,
        }
    }

    /// Writes `data.v = value` straight to the store, as another writer
    /// racing the update would.
    async fn write_behind(inner: &Inner, key: &str, value: &str) {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default"}, "data": {"v": value}});
        inner
            .store
            .update(key, encode_for_store(&cm), None)
            .await
            .unwrap();
    }

    /// An update (`v` += "+mine") whose first `losses` attempts each lose
    /// a race to another writer (writing `other<n>`): it retries from the
    /// other writer's state, or answers 409 when pinned. The result, the
    /// attempts made and what is stored at the end.
    async fn race(pinned: bool, losses: usize) -> (Result<Value, ApiError>, usize, Value) {
        let f = fixture().await;
        let inner = f.server.inner();
        let attempts = &AtomicUsize::new(0);
        let key = f.key.as_str();
        let result = guaranteed_update(
            inner,
            &f.info,
            key,
            "cm",
            FirstRead::Store,
            move |current| {
                Box::pin(async move {
                    let current = current.expect("the ConfigMap exists");
                    let n = attempts.fetch_add(1, Ordering::SeqCst);
                    if n < losses {
                        write_behind(inner, key, &format!("other{n}")).await;
                    }
                    let mut next = current.object;
                    let seen = next["data"]["v"].as_str().unwrap_or("").to_string();
                    next["data"]["v"] = json!(format!("{seen}+mine"));
                    Ok(Next::replace(next).pinned(pinned))
                })
            },
        )
        .await;
        let (stored, _) = read(inner, &f.info, key).await.unwrap().unwrap();
        (result, attempts.load(Ordering::SeqCst), stored)
    }

    #[tokio::test]
    async fn a_lost_race_is_retried_from_the_winners_state() {
        let (result, attempts, stored) = race(false, 1).await;
        let written = result.unwrap();
        assert_eq!(attempts, 2);
        assert_eq!(written["data"]["v"], "other0+mine");
        assert_eq!(stored["data"]["v"], "other0+mine");
    }

    #[tokio::test]
    async fn a_pinned_write_that_lost_a_race_is_a_conflict() {
        let (result, attempts, stored) = race(true, 1).await;
        match result {
            Err(ApiError::Conflict { detail, .. }) => assert_eq!(detail, MODIFIED),
            other => panic!("expected a conflict, got {other:?}"),
        }
        assert_eq!(attempts, 1);
        assert_eq!(
            stored["data"]["v"], "other0",
            "the other writer's state stays"
        );
    }

    #[tokio::test]
    async fn done_writes_nothing_and_missing_objects_reach_the_attempt() {
        let f = fixture().await;
        let inner = f.server.inner();
        let (_, before) = read(inner, &f.info, &f.key).await.unwrap().unwrap();
        let answer = guaranteed_update(inner, &f.info, &f.key, "cm", FirstRead::Cache, |current| {
            Box::pin(async move {
                assert!(current.is_some_and(|c| c.cached));
                Ok(Next::Done(json!("unchanged")))
            })
        })
        .await
        .unwrap();
        assert_eq!(answer, json!("unchanged"));
        let (_, after) = read(inner, &f.info, &f.key).await.unwrap().unwrap();
        assert_eq!(before, after);

        let missing = f.info.key(Some("default"), "absent");
        let result = guaranteed_update(
            inner,
            &f.info,
            &missing,
            "absent",
            FirstRead::Store,
            |current| {
                Box::pin(async move {
                    assert!(current.is_none());
                    Ok(Next::replace(json!({})))
                })
            },
        )
        .await;
        assert!(matches!(result, Err(ApiError::NotFound { .. })));
    }

    /// What makes a GET answered from the cache right: at the store's
    /// revision the cache holds the same object the store's bytes decode
    /// to; when the cache holds another revision, the store's value is the
    /// answer.
    #[tokio::test]
    async fn a_get_is_answered_from_the_cache_only_at_the_stores_revision() {
        let f = fixture().await;
        let inner = f.server.inner();
        let unanswered = guaranteed_update(inner, &f.info, &f.key, "cm", FirstRead::Store, |c| {
            Box::pin(async move {
                let mut next = c.expect("stored").object;
                next["data"]["v"] = json!("1");
                Ok(Next::ReplaceUnanswered(next))
            })
        })
        .await
        .unwrap();
        assert_eq!(
            unanswered,
            Value::Null,
            "a binding-style write answers nothing"
        );
        let (stored, revision) = read(inner, &f.info, &f.key).await.unwrap().unwrap();
        assert_eq!(stored["data"]["v"], "1");
        match read_answer(inner, &f.info, &f.key).await.unwrap() {
            Some(Answer::Cached(cached)) => {
                assert_eq!(cached.resource_version(), Some(revision));
                assert_eq!(*cached.value(), stored);
                let json = cached
                    .encoded_json()
                    .expect("ConfigMaps are cached as JSON");
                assert_eq!(json.as_ref(), crate::wire_order::to_vec(&stored).as_slice());
            }
            _ => panic!("the cache holds the store's revision"),
        }

        // Right after a write to the store, the cache may not hold it yet;
        // its older copy must never be the answer.
        write_behind(inner, &f.key, "behind").await;
        let answered = match read_answer(inner, &f.info, &f.key).await.unwrap() {
            Some(Answer::Read(object)) => object,
            Some(Answer::Cached(cached)) => cached.to_value(),
            None => panic!("the object exists"),
        };
        assert_eq!(answered["data"]["v"], "behind");
        assert!(
            read_answer(inner, &f.info, &f.info.key(Some("default"), "absent"))
                .await
                .unwrap()
                .is_none()
        );
    }

    #[tokio::test]
    async fn endless_races_end_in_a_conflict() {
        let (result, attempts, _) = race(false, usize::MAX).await;
        assert!(matches!(result, Err(ApiError::Conflict { .. })));
        assert_eq!(attempts, ATTEMPTS);
    }
}
