//! Pod events as the ReplicaSet controller sees them: they settle
//! expectations and wake the owner (or, for orphans, every owner that could
//! adopt the pod).

use std::marker::PhantomData;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use skiff_informer::{Cache, EventHandler, ObjectKey, WorkQueue};

use super::owner::ReplicaOwner;
use crate::controller_utils::{controller_ref, key_of, selects};
use crate::owner_events::owner_key;
use crate::pod_control::Expectations;

/// The pod informer handler of one owner kind.
pub(super) struct PodEvents<K> {
    owners: Arc<Cache<K>>,
    queue: WorkQueue<ObjectKey>,
    expectations: Expectations,
    kind: PhantomData<K>,
}

impl<K: ReplicaOwner> PodEvents<K> {
    pub(super) fn new(
        owners: Arc<Cache<K>>,
        queue: WorkQueue<ObjectKey>,
        expectations: Expectations,
    ) -> Self {
        Self {
            owners,
            queue,
            expectations,
            kind: PhantomData,
        }
    }

    /// The key of the owner of `pod` of our kind, if it still exists.
    fn owner_key(&self, pod: &Pod) -> Option<String> {
        owner_key(&self.owners, &pod.metadata)
    }

    fn enqueue(&self, key: &str) {
        self.queue.add(ObjectKey::parse(key));
    }

    fn enqueue_adopters(&self, pod: &Pod) {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("");
        for owner in self.owners.list_namespace(ns) {
            if owner
                .pod_selector()
                .is_some_and(|s| selects(&s, &pod.metadata))
            {
                self.enqueue(&key_of(owner.meta()));
            }
        }
    }
}

impl<K: ReplicaOwner> EventHandler<Pod> for PodEvents<K> {
    fn on_add(&self, pod: &Arc<Pod>) {
        if pod.metadata.deletion_timestamp.is_some() {
            self.on_delete(pod);
            return;
        }
        match self.owner_key(pod) {
            Some(key) => {
                self.expectations.creation_observed(&key);
                self.enqueue(&key);
            }
            None if controller_ref(&pod.metadata).is_none() => self.enqueue_adopters(pod),
            None => {}
        }
    }

    fn on_update(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        if old.metadata.resource_version == new.metadata.resource_version {
            return;
        }
        let labels_changed = old.metadata.labels != new.metadata.labels;
        if new.metadata.deletion_timestamp.is_some() && old.metadata.deletion_timestamp.is_none() {
            // A graceful deletion is as good as done for counting purposes.
            if let Some(key) = self.owner_key(new) {
                self.expectations
                    .deletion_observed(&key, &key_of(&new.metadata));
            }
        }
        let old_owner = self.owner_key(old);
        let new_owner = self.owner_key(new);
        if old_owner != new_owner
            && let Some(key) = &old_owner
        {
            self.enqueue(key);
        }
        match new_owner {
            Some(key) => self.enqueue(&key),
            None if controller_ref(&new.metadata).is_none()
                && (labels_changed || old_owner.is_some()) =>
            {
                self.enqueue_adopters(new)
            }
            None => {}
        }
    }

    fn on_delete(&self, pod: &Arc<Pod>) {
        if let Some(key) = self.owner_key(pod) {
            self.expectations
                .deletion_observed(&key, &key_of(&pod.metadata));
            self.enqueue(&key);
        }
    }
}
