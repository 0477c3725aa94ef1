//! The charges quota admission has granted that the watch caches may not
//! show yet. Usage is counted from the caches; a write admitted a moment
//! ago is still on its way to the store (or stored, with its cache a little
//! behind), so each admitted write leaves a [`Charge`] here until its cache
//! shows it, and the next check adds every charge its snapshot does not
//! show. The namespace's lock is held only while one write is checked and
//! charged, not while it is stored, so admitted writes reach the store
//! together (one durable flush for many) instead of one after another.
//!
//! When a charge counts, for a snapshot of its resource's cache:
//! - stored at revision `r`: until the snapshot's revision reaches `r`
//!   (then it is dropped for good);
//! - still on its way, a create: while the snapshot has no object under its
//!   key (one there is this create, landed, or an older object that will
//!   make this create fail);
//! - still on its way, an update: while the snapshot's object still has the
//!   resourceVersion the update started from (another one means this update
//!   landed, or will fail on its precondition).
//!
//! A write that fails or is given up drops its charge.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use parking_lot::{Mutex, MutexGuard};
use serde_json::Value;
use skiff_common::quota::{Evaluator, QuotaSpec, ResourceList};
use skiff_store::Revision;

use super::usage::Tally;

use crate::object::meta_str;
use crate::watch_cache::{Snapshot, WatchCache};

/// One admitted write's usage, until its cache shows it.
#[derive(Debug)]
struct Charge {
    id: u64,
    /// The written resource's storage prefix.
    prefix: String,
    /// The written object's store key.
    key: String,
    /// The resourceVersion an update started from; `None` for a create.
    from_version: Option<String>,
    /// What the write adds to the namespace's usage (every name).
    delta: ResourceList,
    /// The revision the write was stored at, once it is.
    stored: Option<Revision>,
}

impl Charge {
    /// Whether `snapshot` (of this charge's resource) already counts it.
    fn shown_in(&self, snapshot: &Snapshot) -> bool {
        if let Some(revision) = self.stored {
            return snapshot.revision >= revision;
        }
        let cached = snapshot.objects.get(&self.key);
        match (&self.from_version, cached) {
            (None, cached) => cached.is_some(),
            (Some(from), Some(object)) => {
                object
                    .resource_version()
                    .map(|rv| rv.to_string())
                    .as_deref()
                    != Some(from.as_str())
            }
            // Deleted meanwhile: the update will fail.
            (Some(_), None) => true,
        }
    }
}

/// One namespace's outstanding charges, and its quotas' tallies of what
/// the caches show.
#[derive(Debug, Default)]
pub(crate) struct Charges {
    next_id: u64,
    charges: Vec<Charge>,
    /// Per (resource's storage prefix, quota name).
    tallies: HashMap<(String, String), Tally>,
}

impl Charges {
    /// What the objects of `snapshot` under `collection` (the written
    /// resource's collection in this namespace) use of quota `name`'s
    /// `names`, from its tally brought up to date.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn used<'n>(
        &mut self,
        prefix: &str,
        name: &str,
        spec: &QuotaSpec,
        evaluator: &Evaluator,
        collection: &str,
        snapshot: &Snapshot,
        now: Timestamp,
        names: impl IntoIterator<Item = &'n str>,
    ) -> ResourceList {
        let tally = self
            .tallies
            .entry((prefix.to_string(), name.to_string()))
            .and_modify(|tally| {
                if tally.is_for(spec) {
                    tally.follow(evaluator, collection, snapshot, now);
                } else {
                    *tally = Tally::count(evaluator, spec, collection, snapshot, now);
                }
            })
            .or_insert_with(|| Tally::count(evaluator, spec, collection, snapshot, now));
        tally.used(names)
    }

    /// Forgets the tallies of `prefix` for quotas not in `names`.
    pub(crate) fn keep_tallies(&mut self, prefix: &str, names: &[&str]) {
        self.tallies
            .retain(|(p, name), _| p != prefix || names.contains(&name.as_str()));
    }

    /// The deltas of the charges of `prefix` that `snapshot` does not show
    /// yet; forgets those of `prefix` it shows for good.
    pub(crate) fn pending(&mut self, prefix: &str, snapshot: &Snapshot) -> Vec<ResourceList> {
        self.charges
            .retain(|c| c.prefix != prefix || c.stored.is_none() || !c.shown_in(snapshot));
        self.charges
            .iter()
            .filter(|c| c.prefix == prefix && !c.shown_in(snapshot))
            .map(|c| c.delta.clone())
            .collect()
    }
}

/// Every namespace's outstanding charges.
#[derive(Debug, Default)]
pub(crate) struct QuotaLedger {
    namespaces: Mutex<HashMap<String, Arc<Mutex<Charges>>>>,
}

/// Namespaces without charges are forgotten once there are this many.
const SWEEP_AT: usize = 4096;

impl QuotaLedger {
    /// The namespace's charges, locked: a check and its charge happen under
    /// one lock, so no two writes both take the last of a quota.
    pub(crate) fn lock(&self, namespace: &str) -> NamespaceCharges {
        let charges = {
            let mut namespaces = self.namespaces.lock();
            if namespaces.len() >= SWEEP_AT {
                namespaces.retain(|_, charges| {
                    Arc::strong_count(charges) > 1 || !charges.lock().charges.is_empty()
                });
                // A forgotten namespace's tallies are counted anew.
            }
            namespaces.entry(namespace.to_string()).or_default().clone()
        };
        NamespaceCharges { charges }
    }
}

/// A namespace's charges, ready to be locked.
pub(crate) struct NamespaceCharges {
    charges: Arc<Mutex<Charges>>,
}

impl NamespaceCharges {
    /// Locks them for one check.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Charges> {
        self.charges.lock()
    }

    /// Records an admitted write's charge (the lock from [`Self::lock`]
    /// must be the one the check ran under). The charge lasts until the
    /// returned handle is dropped without the write stored, or until the
    /// cache of `prefix` shows the stored write.
    pub(crate) fn charge(
        &self,
        locked: &mut Charges,
        prefix: &str,
        key: &str,
        old: Option<&Value>,
        delta: ResourceList,
        cache: Option<Arc<WatchCache>>,
    ) -> QuotaCharge {
        locked.next_id += 1;
        let id = locked.next_id;
        locked.charges.push(Charge {
            id,
            prefix: prefix.to_string(),
            key: key.to_string(),
            from_version: old.and_then(|o| meta_str(o, "resourceVersion").map(String::from)),
            delta,
            stored: None,
        });
        QuotaCharge {
            charges: self.charges.clone(),
            id,
            stored: None,
            cache,
            shared: Vec::new(),
        }
    }
}

/// An admitted write's hold on its charge.
#[must_use = "hold it until the write is stored"]
pub(crate) struct QuotaCharge {
    charges: Arc<Mutex<Charges>>,
    id: u64,
    stored: Option<Revision>,
    /// The written resource's cache, to drop the charge at once when it
    /// already shows the write.
    cache: Option<Arc<WatchCache>>,
    /// On a shared store, each counting quota's part, for the durable
    /// charge (`shared::reserve`).
    pub shared: Vec<super::shared::SharedCharge>,
}

impl QuotaCharge {
    /// Records that the write was stored at `revision`.
    pub(crate) fn stored(&mut self, revision: Revision) {
        self.stored = Some(revision);
        let mut charges = self.charges.lock();
        if let Some(charge) = charges.charges.iter_mut().find(|c| c.id == self.id) {
            charge.stored = Some(revision);
        }
    }
}

impl Drop for QuotaCharge {
    fn drop(&mut self) {
        let shown = match (self.stored, &self.cache) {
            (Some(revision), Some(cache)) => cache.revision() >= revision,
            (Some(_), None) => false,
            // Never stored: the write failed or was given up.
            (None, _) => true,
        };
        if shown {
            self.charges.lock().charges.retain(|c| c.id != self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use imbl::OrdMap;
    use serde_json::json;
    use skiff_common::amount::Amount;

    use super::*;

    const PODS: &str = "/registry/core/pods/";
    const POD: &str = "/registry/core/pods/a/p";

    fn one_pod() -> ResourceList {
        [("pods".to_string(), Amount::count(1))].into()
    }

    /// A charge of one pod for a write of the pod at [`POD`] (an update
    /// of `old`, or a create), with no cache to watch.
    fn charge_pod(ns: &NamespaceCharges, old: Option<&Value>) -> QuotaCharge {
        let mut locked = ns.lock();
        ns.charge(&mut locked, PODS, POD, old, one_pod(), None)
    }

    fn snapshot(revision: Revision, objects: &[(&str, &str)]) -> Snapshot {
        Snapshot {
            objects: objects
                .iter()
                .map(|(key, rv)| {
                    (
                        key.to_string(),
                        Arc::new(json!({"metadata": {"resourceVersion": rv}})),
                    )
                })
                .collect::<OrdMap<_, _>>(),
            revision,
        }
    }

    #[test]
    fn a_charge_counts_until_its_cache_shows_the_write() {
        let ledger = QuotaLedger::default();
        let ns = ledger.lock("a");
        let mut charge = charge_pod(&ns, None);
        let empty = snapshot(10, &[]);
        assert_eq!(ns.lock().pending(PODS, &empty).len(), 1, "in flight");
        assert!(
            ns.lock()
                .pending("/registry/core/configmaps/", &empty)
                .is_empty(),
            "other resources are not charged"
        );
        charge.stored(12);
        assert_eq!(
            ns.lock().pending(PODS, &empty).len(),
            1,
            "stored, cache behind"
        );
        let shown = snapshot(12, &[(POD, "12")]);
        assert!(
            ns.lock().pending(PODS, &shown).is_empty(),
            "the cache shows it"
        );
        assert!(ns.lock().charges.is_empty(), "and it is forgotten");
        drop(charge);
    }

    #[test]
    fn an_in_flight_create_already_in_the_cache_is_not_counted_twice() {
        let ledger = QuotaLedger::default();
        let ns = ledger.lock("a");
        let _charge = charge_pod(&ns, None);
        let landed = snapshot(13, &[(POD, "13")]);
        assert!(ns.lock().pending(PODS, &landed).is_empty());
    }

    #[test]
    fn an_update_counts_while_the_cache_has_the_version_it_started_from() {
        let ledger = QuotaLedger::default();
        let ns = ledger.lock("a");
        let old = json!({"metadata": {"resourceVersion": "7"}});
        let key = POD;
        let _charge = charge_pod(&ns, Some(&old));
        assert_eq!(
            ns.lock().pending(PODS, &snapshot(9, &[(key, "7")])).len(),
            1
        );
        assert!(
            ns.lock()
                .pending(PODS, &snapshot(9, &[(key, "9")]))
                .is_empty()
        );
    }

    #[test]
    fn a_write_that_fails_drops_its_charge() {
        let ledger = QuotaLedger::default();
        let ns = ledger.lock("a");
        let charge = charge_pod(&ns, None);
        drop(charge);
        assert!(ns.lock().pending(PODS, &snapshot(1, &[])).is_empty());
    }
}
