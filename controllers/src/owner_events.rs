//! Waking the owner of a changed object: the event handler the workload
//! controllers put on their pods (and Jobs, ReplicaSets, revisions), which
//! finds the controlling owner of the kind the controller reconciles and
//! enqueues its key, settling the controller's expectations on the way.
//!
//! It only reads the owners' cache and adds keys; it never writes to the API.
//! Adoption of orphans (ReplicaSet, Deployment) stays with those controllers,
//! which call [`owner_key`] for the part they share.

use std::marker::PhantomData;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use skiff_informer::{Cache, EventHandler, ObjectKey, WorkQueue};

use crate::controller_utils::{controller_ref, key_of};
use crate::pod_control::Expectations;

/// The key of the object of kind `O` that controls `meta`'s object, when its
/// controller reference names one that is in `owners` with the same uid (a
/// reference to a deleted and re-created owner wakes nobody).
pub(crate) fn owner_key<O>(owners: &Cache<O>, meta: &ObjectMeta) -> Option<String>
where
    O: Resource<DynamicType = ()>,
{
    let r = controller_ref(meta)?;
    if r.kind != O::kind(&()) {
        return None;
    }
    let owner = owners.get(meta.namespace.as_deref().unwrap_or(""), &r.name)?;
    (owner.meta().uid.as_deref() == Some(r.uid.as_str())).then(|| key_of(owner.meta()))
}

/// Enqueues the controlling owner (of kind `O`) of every added, updated or
/// deleted object. With [`expecting`](Self::expecting), an owned object seen
/// for the first time settles one expected creation and one that is being
/// or has been deleted settles its expected deletion, as upstream's
/// controllers count the pods they asked for.
pub(crate) struct EnqueueOwner<O> {
    owners: Arc<Cache<O>>,
    queue: WorkQueue<ObjectKey>,
    expectations: Option<Expectations>,
    kind: PhantomData<O>,
}

impl<O: Resource<DynamicType = ()>> EnqueueOwner<O> {
    /// Wakes owners found in `owners` through `queue`.
    pub(crate) fn new(owners: Arc<Cache<O>>, queue: WorkQueue<ObjectKey>) -> Self {
        Self {
            owners,
            queue,
            expectations: None,
            kind: PhantomData,
        }
    }

    /// Also settles `expectations` as owned objects appear and go.
    pub(crate) fn expecting(mut self, expectations: Expectations) -> Self {
        self.expectations = Some(expectations);
        self
    }

    fn owner(&self, meta: &ObjectMeta) -> Option<String> {
        owner_key(&self.owners, meta)
    }

    fn wake(&self, key: &str) {
        self.queue.add(ObjectKey::parse(key));
    }
}

impl<O, K> EventHandler<K> for EnqueueOwner<O>
where
    O: Resource<DynamicType = ()> + Send + Sync + 'static,
    K: Resource + Send + Sync + 'static,
{
    fn on_add(&self, obj: &Arc<K>) {
        let Some(key) = self.owner(obj.meta()) else {
            return;
        };
        if let Some(expectations) = &self.expectations {
            // An object first seen while being deleted counts as deleted.
            if obj.meta().deletion_timestamp.is_some() {
                expectations.deletion_observed(&key, &key_of(obj.meta()));
            } else {
                expectations.creation_observed(&key);
            }
        }
        self.wake(&key);
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        let Some(key) = self.owner(new.meta()) else {
            return;
        };
        if let Some(expectations) = &self.expectations
            && new.meta().deletion_timestamp.is_some()
            && old.meta().deletion_timestamp.is_none()
        {
            // A graceful deletion is as good as done for counting.
            expectations.deletion_observed(&key, &key_of(new.meta()));
        }
        self.wake(&key);
    }

    fn on_delete(&self, obj: &Arc<K>) {
        let Some(key) = self.owner(obj.meta()) else {
            return;
        };
        if let Some(expectations) = &self.expectations {
            expectations.deletion_observed(&key, &key_of(obj.meta()));
        }
        self.wake(&key);
    }
}
