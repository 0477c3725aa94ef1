//! Pods a Job no longer owns but still holds: a pod carrying the
//! `batch.kubernetes.io/job-tracking` finalizer whose controlling Job is gone
//! (deleted, or replaced by a Job of the same name and another uid) would
//! stay Terminating forever and keep its namespace from going. This handler
//! wakes the Job key the pod names, so the sync releases it, as upstream's
//! orphan-pod queue does. A tracked pod that names no controller at all
//! (its Job deleted with orphan propagation) has no Job key to wake: its own
//! key goes to a queue of its own, whose sync releases it. These handlers
//! only read the Jobs' cache and add keys.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use skiff_informer::{Cache, EventHandler, ObjectKey, WorkQueue};

use super::pods::has_finalizer;
use crate::controller_utils::controller_ref;

/// Enqueues the Job key of tracked pods whose Job is not in the cache.
pub(super) struct EnqueueOrphans {
    jobs: Arc<Cache<Job>>,
    queue: WorkQueue<ObjectKey>,
}

impl EnqueueOrphans {
    /// Looks Jobs up in `jobs`, wakes their keys on `queue`.
    pub(super) fn new(jobs: Arc<Cache<Job>>, queue: WorkQueue<ObjectKey>) -> Self {
        Self { jobs, queue }
    }

    fn check(&self, pod: &Pod) {
        if let Some(key) = orphaned_job_key(&self.jobs, pod) {
            self.queue.add(key);
        }
    }
}

/// The key of the Job a tracked pod names as its controller, when that Job
/// is not the one in `jobs` (gone, or another uid).
fn orphaned_job_key(jobs: &Cache<Job>, pod: &Pod) -> Option<ObjectKey> {
    if !has_finalizer(pod) {
        return None;
    }
    let owner = controller_ref(&pod.metadata).filter(|r| r.kind == "Job")?;
    let ns = pod.metadata.namespace.as_deref().unwrap_or("");
    let live = jobs.get(ns, &owner.name);
    let owned = live.is_some_and(|job| job.metadata.uid.as_deref() == Some(owner.uid.as_str()));
    (!owned).then(|| ObjectKey::new(Some(ns), &owner.name))
}

impl EventHandler<Pod> for EnqueueOrphans {
    fn on_add(&self, pod: &Arc<Pod>) {
        self.check(pod);
    }

    fn on_update(&self, _old: &Arc<Pod>, new: &Arc<Pod>) {
        self.check(new);
    }
}

/// Enqueues the pod's own key when it carries the tracking finalizer and
/// names no controller (see [`Syncer::sync_ownerless`](super::sync::Syncer::sync_ownerless)).
pub(super) struct EnqueueOwnerless {
    queue: WorkQueue<ObjectKey>,
}

impl EnqueueOwnerless {
    /// Wakes pod keys on `queue`.
    pub(super) fn new(queue: WorkQueue<ObjectKey>) -> Self {
        Self { queue }
    }

    fn check(&self, pod: &Pod) {
        if has_finalizer(pod) && controller_ref(&pod.metadata).is_none() {
            self.queue.add(ObjectKey::from_object(pod));
        }
    }
}

impl EventHandler<Pod> for EnqueueOwnerless {
    fn on_add(&self, pod: &Arc<Pod>) {
        self.check(pod);
    }

    fn on_update(&self, _old: &Arc<Pod>, new: &Arc<Pod>) {
        self.check(new);
    }
}
