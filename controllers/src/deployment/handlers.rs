//! ReplicaSet events as the Deployment controller sees them: they wake the
//! owning Deployment (or, for orphans, every Deployment that could adopt).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use skiff_informer::{Cache, EventHandler, ObjectKey, WorkQueue};

use crate::controller_utils::{controller_ref, key_of, selects, workload_selector};
use crate::owner_events::owner_key;

/// The ReplicaSet informer handler.
pub(super) struct ReplicaSetEvents {
    deployments: Arc<Cache<Deployment>>,
    queue: WorkQueue<ObjectKey>,
}

impl ReplicaSetEvents {
    pub(super) fn new(deployments: Arc<Cache<Deployment>>, queue: WorkQueue<ObjectKey>) -> Self {
        Self { deployments, queue }
    }

    fn wake(&self, rs: &ReplicaSet) {
        if let Some(key) = owner_key(&self.deployments, &rs.metadata) {
            self.queue.add(ObjectKey::parse(&key));
        } else if controller_ref(&rs.metadata).is_none() {
            let ns = rs.metadata.namespace.as_deref().unwrap_or("");
            for d in self.deployments.list_namespace(ns) {
                let selector = workload_selector(d.spec.as_ref().map(|s| &s.selector));
                if selector.is_some_and(|s| selects(&s, &rs.metadata)) {
                    self.queue.add(ObjectKey::parse(&key_of(&d.metadata)));
                }
            }
        }
    }
}

impl EventHandler<ReplicaSet> for ReplicaSetEvents {
    fn on_add(&self, rs: &Arc<ReplicaSet>) {
        self.wake(rs);
    }

    fn on_update(&self, old: &Arc<ReplicaSet>, new: &Arc<ReplicaSet>) {
        if old.metadata.resource_version == new.metadata.resource_version {
            return;
        }
        if controller_ref(&old.metadata) != controller_ref(&new.metadata)
            || old.metadata.labels != new.metadata.labels
        {
            self.wake(old);
        }
        self.wake(new);
    }

    fn on_delete(&self, rs: &Arc<ReplicaSet>) {
        self.wake(rs);
    }
}
