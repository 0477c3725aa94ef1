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

#[cfg(test)]
mod tests {
    use serde_json::json;
    use skiff_common::quota::pretty;

    use super::*;

    #[test]
    fn usage_sums_the_objects_in_scope_over_the_requested_names() {
        let pods = Evaluator::for_resource("", "pods");
        let quota = QuotaSpec::of(&json!({"spec": {
            "hard": {"pods": "5", "requests.cpu": "2"}, "scopes": ["NotBestEffort"]}}));
        let pod = |cpu: Option<&str>, phase: &str| {
            let resources = cpu.map_or(json!({}), |c| json!({"requests": {"cpu": c}}));
            Arc::new(
                json!({"spec": {"containers": [{"name": "c", "resources": resources}]},
                            "status": {"phase": phase}}),
            )
        };
        let objects = vec![
            pod(Some("250m"), "Running"),
            pod(Some("500m"), "Pending"),
            pod(Some("1"), "Succeeded"),
            pod(None, "Running"),
        ];
        let requested: ResourceList = [
            ("pods".to_string(), Amount::count(1)),
            ("requests.cpu".to_string(), Amount::parse("100m").unwrap()),
        ]
        .into();
        let now = Timestamp::UNIX_EPOCH;
        assert_eq!(
            pretty(&used(&pods, &quota, &requested, &objects, now)),
            "pods=2,requests.cpu=750m",
            "the finished pod and the BestEffort one do not count"
        );
        let only_pods: ResourceList = [("pods".to_string(), Amount::count(1))].into();
        assert_eq!(pretty(&used(&pods, &quota, &only_pods, &[], now)), "pods=0");
    }
}
