//! A namespace's usage as quota admission counts it: the stored objects of
//! the written resource (from its watch cache), each charged as
//! `skiff_common::quota` says, summed per quota over its hard names.
//!
//! Counting every object on every check would make each create cost as
//! much as the namespace holds, so a [`Tally`] keeps one quota's sum and
//! what each object added to it, and follows the cache from one snapshot to
//! the next by their difference (the cache's maps share structure, so that
//! costs about as much as the writes in between). A pod being deleted stops
//! counting when its grace period ends without any write, so those are
//! looked at again on every check.

use std::collections::{BTreeSet, HashMap};

use imbl::OrdMap;
use imbl::ordmap::DiffItem;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use skiff_common::amount::Amount;
use skiff_common::quota::{
    Evaluator, QuotaSpec, ResourceList, add, is_zero, mask, subtract_non_negative,
};

use crate::watch_cache::{Cached, Snapshot};

/// One quota's usage of one resource in one namespace, as of a snapshot.
#[derive(Debug)]
pub(super) struct Tally {
    /// The quota it counts for, as it was read: another spec starts over.
    spec: QuotaSpec,
    /// The cache's objects it was last brought up to date with.
    objects: OrdMap<String, Cached>,
    /// What each counted object adds (only those that add something).
    counted: HashMap<String, ResourceList>,
    /// Objects being deleted: their part may end with time alone.
    deleting: BTreeSet<String>,
    /// The sum of `counted`.
    used: ResourceList,
}

impl Tally {
    /// Counts the objects of `snapshot` under `prefix` (one namespace's
    /// collection) for `spec`.
    pub(super) fn count(
        evaluator: &Evaluator,
        spec: &QuotaSpec,
        prefix: &str,
        snapshot: &Snapshot,
        now: Timestamp,
    ) -> Self {
        let mut tally = Tally {
            spec: spec.clone(),
            objects: OrdMap::new(),
            counted: HashMap::new(),
            deleting: BTreeSet::new(),
            used: ResourceList::new(),
        };
        for (key, object) in snapshot.under(prefix) {
            tally.insert(evaluator, key, &object.value(), now);
        }
        tally.objects = snapshot.objects.clone();
        tally
    }

    /// Whether this tally counts for `spec` (else it must be counted anew).
    pub(super) fn is_for(&self, spec: &QuotaSpec) -> bool {
        self.spec == *spec
    }

    /// Brings the tally to `snapshot`: only the objects under `prefix` that
    /// changed since the last one are counted again, and those being deleted.
    pub(super) fn follow(
        &mut self,
        evaluator: &Evaluator,
        prefix: &str,
        snapshot: &Snapshot,
        now: Timestamp,
    ) {
        if !self.objects.ptr_eq(&snapshot.objects) {
            let changed: Vec<(String, Option<Cached>)> = self
                .objects
                .diff(&snapshot.objects)
                .map(|item| match item {
                    DiffItem::Add(key, object)
                    | DiffItem::Update {
                        new: (key, object), ..
                    } => (key.clone(), Some(object.clone())),
                    DiffItem::Remove(key, _) => (key.clone(), None),
                })
                .filter(|(key, _)| key.starts_with(prefix))
                .collect();
            for (key, object) in changed {
                self.remove(&key);
                if let Some(object) = object {
                    self.insert(evaluator, &key, &object.value(), now);
                }
            }
            self.objects = snapshot.objects.clone();
        }
        let deleting: Vec<String> = self.deleting.iter().cloned().collect();
        for key in deleting {
            if let Some(object) = snapshot.objects.get(&key).cloned() {
                self.remove(&key);
                self.insert(evaluator, &key, &object.value(), now);
            }
        }
    }

    /// What the counted objects use of each name in `names` (zero for names
    /// nothing uses, so a refusal prints `used: pods=0`).
    pub(super) fn used<'n>(&self, names: impl IntoIterator<Item = &'n str>) -> ResourceList {
        names
            .into_iter()
            .map(|name| {
                let used = self.used.get(name).copied().unwrap_or(Amount::ZERO);
                (name.to_string(), used)
            })
            .collect()
    }

    fn insert(&mut self, evaluator: &Evaluator, key: &str, object: &Value, now: Timestamp) {
        if object["metadata"]["deletionTimestamp"].is_string() {
            self.deleting.insert(key.to_string());
        }
        if !self.spec.in_scope(evaluator, object) {
            return;
        }
        let part = mask(
            &evaluator.usage(object, now),
            self.spec.hard.keys().map(String::as_str),
        );
        if is_zero(&part) {
            return;
        }
        self.used = add(&self.used, &part);
        self.counted.insert(key.to_string(), part);
    }

    fn remove(&mut self, key: &str) {
        self.deleting.remove(key);
        if let Some(part) = self.counted.remove(key) {
            self.used = subtract_non_negative(&self.used, &part);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;
    use skiff_common::quota::pretty;

    use super::*;

    const NS: &str = "/registry/core/pods/a/";

    fn pod(cpu: Option<&str>, phase: &str) -> Arc<Value> {
        let resources = cpu.map_or(json!({}), |c| json!({"requests": {"cpu": c}}));
        Arc::new(
            json!({"spec": {"containers": [{"name": "c", "resources": resources}]},
                        "status": {"phase": phase}}),
        )
    }

    fn snapshot(objects: &OrdMap<String, Arc<Value>>, revision: u64) -> Snapshot {
        Snapshot {
            objects: objects
                .iter()
                .map(|(k, v)| (k.clone(), Cached::from(v.clone())))
                .collect(),
            revision,
        }
    }

    fn names() -> [&'static str; 2] {
        ["pods", "requests.cpu"]
    }

    #[test]
    fn usage_sums_the_objects_in_scope_over_the_requested_names() {
        let pods = Evaluator::for_resource("", "pods");
        let quota = QuotaSpec::of(&json!({"spec": {
            "hard": {"pods": "5", "requests.cpu": "2"}, "scopes": ["NotBestEffort"]}}));
        let objects: OrdMap<String, Arc<Value>> = [
            (format!("{NS}a"), pod(Some("250m"), "Running")),
            (format!("{NS}b"), pod(Some("500m"), "Pending")),
            (format!("{NS}c"), pod(Some("1"), "Succeeded")),
            (format!("{NS}d"), pod(None, "Running")),
            (
                "/registry/core/pods/other/e".to_string(),
                pod(Some("1"), "Running"),
            ),
        ]
        .into_iter()
        .collect();
        let now = Timestamp::UNIX_EPOCH;
        let tally = Tally::count(&pods, &quota, NS, &snapshot(&objects, 1), now);
        assert_eq!(
            pretty(&tally.used(names())),
            "pods=2,requests.cpu=750m",
            "the finished pod, the BestEffort one and the other namespace's do not count"
        );
        let empty = Tally::count(&pods, &quota, NS, &snapshot(&OrdMap::new(), 1), now);
        assert_eq!(pretty(&empty.used(["pods"])), "pods=0");
    }

    #[test]
    fn a_tally_follows_adds_updates_and_removes_like_a_recount() {
        let pods = Evaluator::for_resource("", "pods");
        let quota = QuotaSpec::of(&json!({"spec": {"hard": {"pods": "50", "requests.cpu": "20"}}}));
        let now = Timestamp::UNIX_EPOCH;
        let mut objects: OrdMap<String, Arc<Value>> = (0..20)
            .map(|i| (format!("{NS}p{i:02}"), pod(Some("100m"), "Running")))
            .collect();
        let mut tally = Tally::count(&pods, &quota, NS, &snapshot(&objects, 1), now);
        objects.insert(format!("{NS}new"), pod(Some("1"), "Pending"));
        objects.insert(format!("{NS}p03"), pod(Some("100m"), "Succeeded"));
        objects.remove(&format!("{NS}p07"));
        objects.insert("/registry/core/pods/b/x".into(), pod(Some("3"), "Running"));
        tally.follow(&pods, NS, &snapshot(&objects, 2), now);
        let recount = Tally::count(&pods, &quota, NS, &snapshot(&objects, 2), now);
        assert_eq!(pretty(&tally.used(names())), pretty(&recount.used(names())));
        assert_eq!(pretty(&tally.used(names())), "pods=19,requests.cpu=2800m");
    }

    #[test]
    fn a_deleted_pod_stops_counting_when_its_grace_period_ends() {
        let pods = Evaluator::for_resource("", "pods");
        let quota = QuotaSpec::of(&json!({"spec": {"hard": {"pods": "5"}}}));
        let deleting = Arc::new(json!({
            "metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z", "deletionGracePeriodSeconds": 30},
            "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": "Running"}
        }));
        let objects: OrdMap<String, Arc<Value>> =
            [(format!("{NS}d"), deleting)].into_iter().collect();
        let at: Timestamp = "2026-01-01T00:00:10Z".parse().unwrap();
        let mut tally = Tally::count(&pods, &quota, NS, &snapshot(&objects, 1), at);
        assert_eq!(
            pretty(&tally.used(["pods"])),
            "pods=1",
            "in its grace period"
        );
        let later: Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        tally.follow(&pods, NS, &snapshot(&objects, 1), later);
        assert_eq!(
            pretty(&tally.used(["pods"])),
            "pods=0",
            "with no write in between"
        );
    }
}
