//! Store access for handlers: keys to objects in the served version, store
//! errors to API errors, and waiting for the watch cache after each write so
//! a client's next list or watch sees its own write.

use serde_json::Value;
use skiff_store::{Revision, StoreError};

use crate::object::{decode_from_store, encode_for_store};
use crate::registry::ResourceInfo;
use crate::server::{CACHE_CATCH_UP, Inner};
use crate::status::ApiError;

/// The conflict detail upstream sends for a stale resourceVersion.
pub const MODIFIED: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

pub fn not_found(info: &ResourceInfo, name: &str) -> ApiError {
    ApiError::NotFound {
        resource: info.qualified(),
        group: info.group.to_string(),
        name: name.to_string(),
    }
}

pub fn conflict(info: &ResourceInfo, name: &str, detail: &str) -> ApiError {
    ApiError::Conflict {
        resource: info.qualified(),
        group: info.group.to_string(),
        name: name.to_string(),
        detail: detail.to_string(),
    }
}

fn internal(e: StoreError) -> ApiError {
    match e {
        StoreError::Closed => ApiError::ServiceUnavailable("the storage is shutting down".into()),
        other => ApiError::Internal(other.to_string()),
    }
}

/// Why a compare-and-swap write did not happen.
pub enum WriteError {
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
pub async fn read(
    inner: &Inner,
    info: &ResourceInfo,
    key: &str,
) -> Result<Option<(Value, Revision)>, ApiError> {
    let Some(kv) = inner.store.get(key).await.map_err(internal)? else {
        return Ok(None);
    };
    let object = decode_from_store(&kv)
        .map_err(|e| ApiError::Internal(format!("corrupt object at {key}: {e}")))?;
    Ok(Some((info.from_storage(object), kv.mod_revision)))
}

/// Reads an object from the watch cache when it holds one, else from the
/// store, as upstream's guaranteed update starts from the cached object. The
/// cached copy may be a few writes behind: a write based on it must use the
/// returned revision as its precondition and fall back to [`read`] on conflict.
pub async fn read_cached(
    inner: &Inner,
    info: &ResourceInfo,
    key: &str,
) -> Result<Option<(Value, Revision)>, ApiError> {
    if let Ok(cache) = inner.cache(info)
        && let Some(object) = cache.get(key)
        && let Some(revision) = object["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|rv| rv.parse::<Revision>().ok())
    {
        return Ok(Some((info.from_storage((*object).clone()), revision)));
    }
    read(inner, info, key).await
}

/// Reads an object or fails with NotFound.
pub async fn read_existing(
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
        && !cache.wait_for(revision, CACHE_CATCH_UP).await
    {
        tracing::warn!(revision, prefix = %info.storage_prefix, "watch cache did not catch up with a write");
    }
}

/// Creates an object given in `info`'s version; returns it as stored.
pub async fn create(
    inner: &Inner,
    info: &ResourceInfo,
    key: &str,
    object: Value,
) -> Result<Value, WriteError> {
    let stored = info.to_storage(object);
    match inner.store.create(key, encode_for_store(&stored)).await {
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
pub async fn update(
    inner: &Inner,
    info: &ResourceInfo,
    key: &str,
    object: Value,
    expected: Revision,
) -> Result<Value, WriteError> {
    let stored = info.to_storage(object);
    match inner
        .store
        .update(key, encode_for_store(&stored), Some(expected))
        .await
    {
        Ok(kv) => {
            caught_up(inner, info, kv.mod_revision).await;
            let mut out = info.from_storage(stored);
            crate::object::set_resource_version(&mut out, kv.mod_revision);
            Ok(out)
        }
        Err(StoreError::Conflict { .. } | StoreError::NotFound { .. }) => Err(WriteError::Conflict),
        Err(e) => Err(WriteError::Api(internal(e))),
    }
}

/// Deletes an object if it is still at `expected`; returns its last state
/// with the deletion's resourceVersion.
pub async fn delete(
    inner: &Inner,
    info: &ResourceInfo,
    key: &str,
    last: Value,
    expected: Revision,
) -> Result<Value, WriteError> {
    match inner.store.delete(key, Some(expected)).await {
        Ok(kv) => {
            caught_up(inner, info, kv.mod_revision).await;
            let mut out = last;
            crate::object::set_resource_version(&mut out, kv.mod_revision);
            Ok(out)
        }
        Err(StoreError::Conflict { .. } | StoreError::NotFound { .. }) => Err(WriteError::Conflict),
        Err(e) => Err(WriteError::Api(internal(e))),
    }
}
