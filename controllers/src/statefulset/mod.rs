//! The StatefulSet controller: pods with stable ordinal names `<set>-N`,
//! created in order (OrderedReady: one at a time, each Running and Ready
//! first) or all at once (Parallel), PersistentVolumeClaims from
//! volumeClaimTemplates, revisions as ControllerRevisions, rolling updates
//! from the highest ordinal down to the partition, and status.

mod revision;
mod sync;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use skiff_informer::{Cache, Controller, EnqueueKeys, EventHandler, ObjectKey, WorkQueue};

use crate::controller_utils::{controller_ref, key_of};
use crate::events::EventRecorder;
use crate::manager::{Context, Stop, stopped};

pub use sync::StatefulSetError;

/// The controller name in events and logs.
const CONTROLLER: &str = "statefulset-controller";

/// Runs the StatefulSet controller until `stop`.
pub async fn run(ctx: Context, stop: Stop) {
    let sets = ctx.factory.informer::<StatefulSet>();
    let pods = ctx.factory.informer::<Pod>();
    let revisions = ctx.factory.informer::<ControllerRevision>();
    let queue = WorkQueue::<ObjectKey>::new();
    let registered = sets
        .add_event_handler(EnqueueKeys::new(queue.clone()))
        .and_then(|_| {
            pods.add_event_handler(WakeOwner {
                sets: sets.cache().clone(),
                queue: queue.clone(),
            })
        })
        .and_then(|_| {
            revisions.add_event_handler(WakeOwner {
                sets: sets.cache().clone(),
                queue: queue.clone(),
            })
        });
    if let Err(error) = registered {
        tracing::error!(controller = CONTROLLER, %error, "cannot watch");
        return;
    }
    tokio::select! {
        _ = async {
            sets.wait_for_sync().await;
            pods.wait_for_sync().await;
            revisions.wait_for_sync().await;
        } => {}
        _ = stopped(stop.clone()) => return,
    }
    let syncer = Arc::new(sync::Syncer {
        client: ctx.client.clone(),
        sets: sets.cache().clone(),
        pods: pods.cache().clone(),
        revisions: revisions.cache().clone(),
        events: EventRecorder::new(ctx.client.clone(), CONTROLLER),
    });
    Controller::new(CONTROLLER, queue)
        .workers(4)
        .run_until(
            move |key: ObjectKey| {
                let syncer = syncer.clone();
                async move { syncer.sync(key).await }
            },
            stopped(stop),
        )
        .await;
}

/// Wakes the StatefulSet that controls a changed pod or revision.
struct WakeOwner {
    sets: Arc<Cache<StatefulSet>>,
    queue: WorkQueue<ObjectKey>,
}

impl WakeOwner {
    fn wake(&self, meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) {
        let Some(r) = controller_ref(meta) else {
            return;
        };
        if r.kind != "StatefulSet" {
            return;
        }
        if let Some(set) = self
            .sets
            .get(meta.namespace.as_deref().unwrap_or(""), &r.name)
            && set.metadata.uid.as_deref() == Some(r.uid.as_str())
        {
            self.queue.add(ObjectKey::parse(&key_of(&set.metadata)));
        }
    }
}

impl<K: kube::Resource + Send + Sync + 'static> EventHandler<K> for WakeOwner {
    fn on_add(&self, obj: &Arc<K>) {
        self.wake(obj.meta());
    }

    fn on_update(&self, _old: &Arc<K>, new: &Arc<K>) {
        self.wake(new.meta());
    }

    fn on_delete(&self, obj: &Arc<K>) {
        self.wake(obj.meta());
    }
}
