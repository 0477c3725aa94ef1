//! ResourceQuota, as upstream's admission plugin: a create (or an update
//! that grows what a Service or claim uses) is refused with upstream's
//! `exceeded quota: <name>, requested: ..., used: ..., limited: ...` when it
//! would take a namespace's usage past a quota's hard limit, and with
//! `failed quota: <name>: must specify ...` when a pod does not say how much
//! cpu or memory a quota constrains. What counts is decided by
//! `skiff_common::quota`, the same rules the quota controller reports
//! `status.used` with.
//!
//! Race-free without holding writes back: a write a quota counts is
//! checked and charged under its namespace's lock, against usage counted
//! live from the watch caches plus the charges of admitted writes those
//! caches do not show yet (`ledger`). The lock is released before the write
//! is stored, so two creates never both take the last slot, yet admitted
//! writes still reach the store together. A refused or failed write charges
//! nothing, and no quota needs a status before it is enforced. Upstream
//! instead compares-and-swaps each quota's `status.used`, one durable write
//! per admission. The ledger is this process's: on a store several API
//! servers share, each charge is also made durable upstream's way
//! (`shared`, compare-and-swap of the quotas' `status.used`).

pub(crate) mod ledger;
pub(crate) mod shared;
mod usage;

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use skiff_common::amount::Amount;
use skiff_common::quota::{
    Evaluator, QuotaSpec, ResourceList, exceeded, is_zero, mask, pretty, subtract_non_negative,
};

use super::{Operation, WriteRequest, namespace_objects};
use crate::handlers::storage;
use crate::object::meta_str;
use crate::server::Inner;
use crate::status::ApiError;

/// A quota that counts the object being written, and under which names.
struct Counting {
    name: String,
    spec: QuotaSpec,
    charged: Vec<String>,
}

/// Checks `request` against the namespace's quotas; returns its charge, to
/// be held until the write is stored, when a quota counts it.
pub(crate) fn admit(
    inner: &Inner,
    request: &WriteRequest<'_>,
) -> Result<Option<ledger::QuotaCharge>, ApiError> {
    let info = request.info;
    // A pod's resize changes what it requests, so it is charged as an
    // update of its resources, as upstream's quota charges it.
    let resize = request.subresource == Some(crate::registry::Subresource::Resize);
    let (Some(object), None | Some(crate::registry::Subresource::Resize), true) =
        (request.new, request.subresource, info.namespaced)
    else {
        return Ok(None);
    };
    let evaluator = Evaluator::for_resource(info.group, info.resource);
    let old = match request.operation {
        Operation::Create => None,
        Operation::Update if resize || evaluator.charges_updates() => request.old,
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
    let refuse =
        |detail: String| storage::forbidden(info, meta_str(object, "name").unwrap_or(""), detail);
    if counting(inner, namespace, &evaluator, object).is_empty() {
        return Ok(None);
    }
    let cache = inner.cache(info).ok();
    let charges = inner.quota_ledger.lock(namespace);
    let mut locked = charges.lock();
    // Read under the lock: a quota created meanwhile counts.
    let quotas = counting(inner, namespace, &evaluator, object);
    for quota in &quotas {
        evaluator
            .constraints(&quota.charged, object)
            .map_err(|e| refuse(format!("failed quota: {}: {e}", quota.name)))?;
    }
    if is_zero(&delta) {
        return Ok(None);
    }
    let snapshot = cache.as_ref().map(|cache| cache.snapshot());
    let pending = snapshot
        .as_ref()
        .map(|snapshot| locked.pending(&info.storage_prefix, snapshot))
        .unwrap_or_default();
    let names: Vec<&str> = quotas.iter().map(|quota| quota.name.as_str()).collect();
    let mut shared = Vec::new();
    locked.keep_tallies(&info.storage_prefix, &names);
    let collection = info.collection_prefix(Some(namespace));
    for quota in &quotas {
        let requested = mask(&delta, quota.charged.iter().map(String::as_str));
        let requested_names = requested.keys().map(String::as_str);
        let mut used = match &snapshot {
            Some(snapshot) => locked.used(
                &info.storage_prefix,
                &quota.name,
                &quota.spec,
                &evaluator,
                &collection,
                snapshot,
                now,
                requested_names,
            ),
            None => requested_names
                .map(|n| (n.to_string(), Amount::ZERO))
                .collect(),
        };
        // What the stored objects use, before this server's own writes
        // in flight (those reach a shared store's quota status themselves).
        let live = used.clone();
        for charge in &pending {
            used = skiff_common::quota::add(
                &used,
                &mask(charge, requested.keys().map(String::as_str)),
            );
        }
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
        if inner.config.shared_store {
            shared.push(shared::SharedCharge {
                quota: quota.name.clone(),
                live,
                requested,
            });
        }
    }
    let key = info.key(Some(namespace), meta_str(object, "name").unwrap_or(""));
    let mut charge = charges.charge(&mut locked, &info.storage_prefix, &key, old, delta, cache);
    charge.shared = shared;
    Ok(Some(charge))
}

/// The namespace's quotas that count `object`, in name order.
fn counting(
    inner: &Inner,
    namespace: &str,
    evaluator: &Evaluator,
    object: &Value,
) -> Vec<Counting> {
    let mut quotas: Vec<Counting> = namespace_objects(inner, "", "resourcequotas", namespace)
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
