//! A namespace's usage as quota admission counts it: the stored objects of
//! the written resource (from its watch cache), each charged as
//! `skiff_common::quota` says, summed over the names a write asks for.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use skiff_common::amount::Amount;
use skiff_common::quota::{Evaluator, QuotaSpec, ResourceList, add, mask};

/// What `objects` in `quota`'s scopes use of each name in `requested`
/// (zero for names nothing uses, so a refusal prints `used: pods=0`).
pub(super) fn used(
    evaluator: &Evaluator,
    quota: &QuotaSpec,
    requested: &ResourceList,
    objects: &[Arc<Value>],
    now: Timestamp,
) -> ResourceList {
    let names: Vec<&str> = requested.keys().map(String::as_str).collect();
    let zero: ResourceList = names
        .iter()
        .map(|name| (name.to_string(), Amount::ZERO))
        .collect();
    objects
        .iter()
        .filter(|object| quota.in_scope(evaluator, object))
        .fold(zero, |sum, object| {
            add(
                &sum,
                &mask(&evaluator.usage(object, now), names.iter().copied()),
            )
        })
}
