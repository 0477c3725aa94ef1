//! GET of one object (read from the store; answered with the watch cache's
//! copy when that holds the same revision) and LIST of collections (from
//! the watch cache, with selectors and limit/continue over a snapshot). A
//! list without resourceVersion is a consistent read, as upstream's: the
//! cache answers once the store's watch says it is current at the store's
//! revision, and the store answers when it cannot say so. A list at an
//! exact past resourceVersion, and a page after the first once the cache no
//! longer holds the first page's snapshot, are read from the store's
//! history (`continue_token`).

use std::ops::Bound;
use std::sync::Arc;

use axum::response::Response;
use http::StatusCode;
use serde_json::json;
use skiff_store::{Revision, StoreError};

use super::continue_token::{ContinueToken, ReadAt};
use super::{Ctx, respond};
use super::{list_body, storage};
use crate::object::decode_from_store;
use crate::status::ApiError;
use crate::watch_cache::{Cached, Snapshot, WatchCache};

/// How long a list waits for the cache to reach a requested resourceVersion.
const WAIT_FOR_REVISION: std::time::Duration = std::time::Duration::from_millis(500);
/// How long a consistent list waits for the cache to be current before it
/// reads the store instead (upstream's watch cache blocks up to 3 s).
pub(super) const WAIT_FOR_CURRENT: std::time::Duration = std::time::Duration::from_secs(3);

pub(super) async fn get(ctx: Ctx) -> Result<Response, ApiError> {
    let info = ctx.info();
    let name = ctx.name()?;
    let answer = storage::read_answer(&ctx.inner, info, &ctx.key()?)
        .await?
        .ok_or_else(|| storage::not_found(info, name))?;
    let object = match answer {
        // A table is rendered from the value; the object itself is answered
        // with the cache's JSON when it holds that.
        storage::Answer::Cached(cached)
            if crate::table::requested_table_version(&ctx.headers).is_none() =>
        {
            return match cached.encoded_json() {
                Some(json) => Ok(crate::status::encoded_json_response(
                    StatusCode::OK,
                    json.clone(),
                )),
                None => respond(StatusCode::OK, &cached.value()),
            };
        }
        storage::Answer::Cached(cached) => cached.to_value(),
        storage::Answer::Read(object) => object,
    };
    let metadata = json!({ "resourceVersion": object.pointer("/metadata/resourceVersion") });
    if let Some(table) = ctx.table(info, std::slice::from_ref(&object), metadata) {
        return respond(StatusCode::OK, &table?);
    }
    respond(StatusCode::OK, &object)
}

/// The first key after all those that start with `prefix`: the prefix with
/// its last character raised by one, when that is ASCII (a collection prefix
/// ends in `/`); unbounded otherwise, and the caller checks each key.
fn prefix_end(prefix: &str) -> Bound<String> {
    match prefix.as_bytes().last() {
        Some(&last) if last < 0x7f => {
            let mut end = prefix[..prefix.len() - 1].to_owned();
            end.push(char::from(last + 1));
            Bound::Excluded(end)
        }
        _ => Bound::Unbounded,
    }
}

/// The snapshot a list reads, per its continue token or resourceVersion.
async fn list_snapshot(ctx: &Ctx, token: Option<&ContinueToken>) -> Result<Snapshot, ApiError> {
    let cache = ctx.inner.cache(ctx.info())?;
    if let Some(token) = token {
        return match token.read_at() {
            ReadAt::Newest => consistent_snapshot(ctx, &cache).await,
            // Upstream reads the first page's revision from etcd until
            // compaction drops it; so does this, from a snapshot the first
            // page left behind or else from the store's history.
            ReadAt::Revision(rv) if rv < ctx.inner.store.compact_revision() => Err(token.expired()),
            ReadAt::Revision(rv) => match cache.snapshot_at(rv) {
                Some(snapshot) => Ok(snapshot),
                None => store_snapshot(ctx, &cache, Some(rv), || token.expired()).await,
            },
        };
    }
    let Some(rv) = ctx
        .params
        .resource_version
        .as_deref()
        .filter(|rv| *rv != "0")
    else {
        return match ctx.params.resource_version.as_deref() {
            // "0": any state the cache holds.
            Some(_) => Ok(cache.snapshot()),
            None => consistent_snapshot(ctx, &cache).await,
        };
    };
    let rv: Revision = rv
        .parse()
        .map_err(|_| ApiError::BadRequest(format!("invalid resource version: {rv}")))?;
    // Ahead of the store: wait briefly as upstream does, then 504.
    let store = ctx.inner.store.as_ref();
    if rv > store.current_revision()
        && !super::watch::store_reaches(store, rv, super::watch::TOO_LARGE_WAIT).await
    {
        return Err(ApiError::too_large_resource_version(
            rv,
            store.current_revision(),
        ));
    }
    if ctx.params.resource_version_match.as_deref() == Some("Exact") {
        // The cache holds its current state and the snapshots of recent
        // paginated lists; an older state is read from the store's history,
        // as upstream reads it from etcd's, until compaction drops it.
        cache.wait_for(rv, WAIT_FOR_REVISION).await;
        if let Some(snapshot) = cache.snapshot_at(rv) {
            return Ok(snapshot);
        }
        return store_snapshot(ctx, &cache, Some(rv), too_old_list).await;
    }
    if cache.wait_for(rv, WAIT_FOR_REVISION).await {
        return Ok(cache.current_snapshot());
    }
    // Not there in time (a store that reports no watch progress, so a
    // version from a write elsewhere never shows here): read the store.
    store_snapshot(ctx, &cache, None, too_old_list).await
}

/// A snapshot at least as new as the store is now, as a list without
/// resourceVersion must be (upstream's consistent read): the cache's, once
/// it is current at the store's revision, else the store's own.
async fn consistent_snapshot(ctx: &Ctx, cache: &WatchCache) -> Result<Snapshot, ApiError> {
    let now = ctx.inner.store.current_revision();
    if cache.wait_current(now, WAIT_FOR_CURRENT).await {
        return Ok(cache.current_snapshot());
    }
    store_snapshot(ctx, cache, None, too_old_list).await
}

/// Upstream's 410 for a list at a resourceVersion compaction dropped.
fn too_old_list() -> ApiError {
    ApiError::Expired("The resourceVersion for the provided list is too old.".into())
}

/// A snapshot of the whole resource read from the store, now or as it was
/// `at` a past revision (`compacted` answers when that is gone), retained
/// so its continue tokens work like the cache's own.
async fn store_snapshot(
    ctx: &Ctx,
    cache: &WatchCache,
    at: Option<Revision>,
    compacted: impl FnOnce() -> ApiError,
) -> Result<Snapshot, ApiError> {
    let store = &ctx.inner.store;
    let listed = match at {
        None => store.list(cache.prefix(), None, 0).await,
        Some(revision) => store.list_at(cache.prefix(), revision).await,
    }
    .map_err(|e| match e {
        StoreError::Compacted { .. } => compacted(),
        e => ApiError::Internal(e.to_string()),
    })?;
    let mut objects = imbl::OrdMap::new();
    for kv in &listed.items {
        let object = decode_from_store(kv)
            .map_err(|e| ApiError::Internal(format!("corrupt object at {}: {e}", kv.key)))?;
        objects.insert(kv.key.clone(), Cached::hold(object, cache.form()));
    }
    let snapshot = Snapshot {
        objects,
        revision: listed.revision,
    };
    cache.retain(&snapshot);
    Ok(snapshot)
}

pub(super) async fn list(ctx: Ctx) -> Result<Response, ApiError> {
    let info = ctx.info().clone();
    let (labels, fields) = ctx.collection_selectors()?;
    let token = ctx
        .params
        .continue_token
        .as_deref()
        .map(ContinueToken::decode)
        .transpose()?;
    let snapshot = list_snapshot(&ctx, token.as_ref()).await?;
    let prefix = info.collection_prefix(ctx.namespace());
    let lower = match &token {
        Some(t) if t.start.starts_with(&prefix) => Bound::Excluded(t.start.clone()),
        Some(_) => {
            return Err(ApiError::BadRequest(
                "continue key is not valid for this collection".into(),
            ));
        }
        None => Bound::Included(prefix.clone()),
    };
    let limit = ctx.params.limit.unwrap_or(usize::MAX);
    let selecting = !labels.is_empty() || !fields.is_empty();
    // The collection is one key range of the snapshot: stepping through it
    // compares no keys, so counting what a page leaves out touches no
    // object.
    let end = prefix_end(&prefix);
    let bounded = matches!(end, Bound::Excluded(_));
    let mut range = snapshot
        .objects
        .range((lower, end))
        .take_while(|(key, _)| bounded || key.starts_with(&prefix));
    // Items stay shared with the snapshot unless they need converting; a
    // converted one is made once here, for the selectors, and kept. An
    // item held encoded is decoded only when a selector looks inside.
    let mut items: Vec<Cached> = Vec::new();
    let mut last_key: Option<&String> = None;
    let mut more = false;
    let mut remaining = 0usize;
    for (key, stored) in range.by_ref() {
        let object = match info.conversion {
            None => stored.clone(),
            Some(_) => Cached::Decoded(Arc::new(info.from_storage(stored.to_value()))),
        };
        if selecting {
            let value = object.value();
            if !(labels.matches(&value) && fields.matches(&value)) {
                continue;
            }
        }
        if items.len() == limit {
            more = true;
            break;
        }
        items.push(object);
        last_key = Some(key);
        if items.len() == limit && !selecting {
            // Without selectors every later key is a remaining item.
            remaining = range.by_ref().count();
            more = remaining > 0;
            break;
        }
    }
    let mut metadata = json!({ "resourceVersion": snapshot.revision.to_string() });
    if more && let Some(last) = last_key {
        ctx.inner.cache(&info)?.retain(&snapshot);
        metadata["continue"] = json!(ContinueToken::encode(snapshot.revision, last));
        if !selecting {
            metadata["remainingItemCount"] = json!(remaining);
        }
    }
    // Tables render from copies; only a Table request pays for them.
    if crate::table::requested_table_version(&ctx.headers).is_some()
        && let Some(table) = ctx.table(
            &info,
            &items.iter().map(Cached::to_value).collect::<Vec<_>>(),
            metadata.clone(),
        )
    {
        return respond(StatusCode::OK, &table?);
    }
    let head = list_body::ListHead {
        kind: info.list_kind(),
        api_version: info.api_version(),
        metadata,
    };
    list_body::respond(head, items, info.custom.is_some())
}
