//! The StatefulSet controller: pods with stable ordinal names `<set>-N`,
//! created in order (OrderedReady: one at a time, each Running and Ready
//! first) or all at once (Parallel), PersistentVolumeClaims from
//! volumeClaimTemplates (owned by the set or a scaled-down pod as the
//! retention policy says, `retention`), revisions as ControllerRevisions,
//! rolling updates from the highest ordinal down to the partition, and
//! status.

mod retention;
mod revision;
mod sync;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};

use crate::events::EventRecorder;
use crate::manager::{Context, Stop, keyed_by, run_until_stopped};
use crate::owner_events::EnqueueOwner;

/// The controller name in events and logs.
const CONTROLLER: &str = "statefulset-controller";

/// Runs the StatefulSet controller until `stop`.
pub(crate) async fn run(ctx: Context, stop: Stop) {
    let sets = ctx.factory.informer::<StatefulSet>();
    let pods = ctx.factory.informer::<Pod>();
    let revisions = ctx.factory.informer::<ControllerRevision>();
    let claims = ctx.factory.informer::<PersistentVolumeClaim>();
    let syncer = Arc::new(sync::Syncer {
        client: ctx.client.clone(),
        sets: sets.cache().clone(),
        pods: pods.cache().clone(),
        revisions: revisions.cache().clone(),
        claims: claims.cache().clone(),
        events: EventRecorder::new(ctx.client.clone(), CONTROLLER),
    });
    let controller = keyed_by(CONTROLLER, &sets).workers(4);
    let queue = controller.queue().clone();
    // A changed pod or revision wakes the StatefulSet that controls it.
    let owner = || EnqueueOwner::new(sets.cache().clone(), queue.clone());
    let controller = controller.watch(&pods, owner()).watch(&revisions, owner());
    run_until_stopped(controller, syncer, stop).await;
}
