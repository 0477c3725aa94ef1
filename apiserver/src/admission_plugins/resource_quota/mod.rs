//! ResourceQuota, as upstream's admission plugin: a create (or an update
//! that grows what a Service or claim uses) is refused with upstream's
//! `exceeded quota: <name>, requested: ..., used: ..., limited: ...` when it
//! would take a namespace's usage past a quota's hard limit, and with
//! `failed quota: <name>: must specify ...` when a pod does not say how much
//! cpu or memory a quota constrains. What counts is decided by
//! `skiff_common::quota`, the same rules the quota controller reports
//! `status.used` with.
//!
//! Race-free by a per-namespace lock rather than upstream's
//! compare-and-swap of `status.used`: a write a quota counts takes its
//! namespace's lock, is checked against usage counted live from the watch
//! caches (every earlier counted write is in them: each held the lock until
//! stored, and the next check waits for its cache to show it: `lock`), and
//! keeps the lock until it is stored (see [`super::Admitted`]). So two creates never both take the last slot,
//! a refused or failed write charges nothing, and no quota needs a status
//! before it is enforced. The lock is this process's; skiff runs one API
//! server per store. This plugin never writes.

pub(crate) mod lock;
mod usage;

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use skiff_common::quota::{
    Evaluator, QuotaSpec, ResourceList, exceeded, is_zero, mask, pretty, subtract_non_negative,
};

use super::{Operation, WriteRequest, cached_in_namespace, namespace_objects};
use crate::object::meta_str;
use crate::server::CACHE_CATCH_UP;
use crate::server::Inner;
use crate::status::ApiError;

/// A quota that counts the object being written, and under which names.
struct Counting {
    name: String,
    spec: QuotaSpec,
    charged: Vec<String>,
}

/// Checks `request` against the namespace's quotas; returns the namespace's
/// quota lock, to be held until the write is stored, when a quota counts it.
pub(crate) async fn admit(
    inner: &Inner,
    request: &WriteRequest<'_>,
) -> Result<Option<lock::QuotaGuard>, ApiError> {
    let info = request.info;
    let (Some(object), None, true) = (request.new, request.subresource, info.namespaced) else {
        return Ok(None);
    };
    let evaluator = Evaluator::for_resource(info.group, info.resource);
    let old = match request.operation {
        Operation::Create => None,
        Operation::Update if evaluator.charges_updates() => request.old,
        _ => return Ok(None),
    };
    let Some(namespace) = meta_str(object, "namespace").filter(|ns| !ns.is_empty()) else {
        return Ok(None);
    };
    let now = Timestamp::now();
    let mut delta = evaluator.usage(object, now);
    if let Some(old) = old {
        delta = subtract_non_negative(&delta, &evaluator.usage(old, now));
    }
    let refuse = |detail: String| ApiError::Forbidden {
        resource: info.qualified(),
        group: info.group.to_string(),
        name: meta_str(object, "name").unwrap_or("").to_string(),
        detail,
        causes: Vec::new(),
    };
    if counting(inner, namespace, &evaluator, object).is_empty() {
        return Ok(None);
    }
    // The quotas are read again under the lock: one created meanwhile counts.
    let guard = inner.quota_locks.lock(namespace).await;
    let quotas = counting(inner, namespace, &evaluator, object);
    for quota in &quotas {
        evaluator
            .constraints(&quota.charged, object)
            .map_err(|e| refuse(format!("failed quota: {}: {e}", quota.name)))?;
    }
    if is_zero(&delta) {
        return Ok(None);
    }
    // The last counted write of this resource must be in the cache counted.
    if let Some(revision) = guard.last_write(&info.storage_prefix)
        && let Ok(cache) = inner.cache(info)
        && !cache.wait_for(revision, CACHE_CATCH_UP).await
    {
        return Err(ApiError::ServiceUnavailable(format!(
            "the quota of namespace {namespace} cannot be checked now: the {} cache lags the store",
            info.qualified()
        )));
    }
    let objects = cached_in_namespace(inner, info, namespace);
    for quota in &quotas {
        let requested = mask(&delta, quota.charged.iter().map(String::as_str));
        let used = usage::used(&evaluator, &quota.spec, &requested, &objects, now);
        let after = skiff_common::quota::add(&used, &requested);
        let over = exceeded(&after, &quota.spec.hard);
        if !over.is_empty() {
            let pick = |list: &ResourceList| pretty(&mask(list, over.iter().map(String::as_str)));
            return Err(refuse(format!(
                "exceeded quota: {}, requested: {}, used: {}, limited: {}",
                quota.name,
                pick(&requested),
                pick(&used),
                pick(&quota.spec.hard),
            )));
        }
    }
    Ok(Some(guard))
}

/// The namespace's quotas that count `object`, in name order.
fn counting(
    inner: &Inner,
    namespace: &str,
    evaluator: &Evaluator,
    object: &Value,
) -> Vec<Counting> {
    let mut quotas: Vec<Counting> = namespace_objects(inner, "resourcequotas", namespace)
        .iter()
        .map(Arc::as_ref)
        .filter_map(|quota| {
            let spec = QuotaSpec::of(quota);
            let charged = spec.charged_names(evaluator, object);
            (!charged.is_empty()).then(|| Counting {
                name: meta_str(quota, "name").unwrap_or("").to_string(),
                spec,
                charged,
            })
        })
        .collect();
    quotas.sort_by(|a, b| a.name.cmp(&b.name));
    quotas
}
