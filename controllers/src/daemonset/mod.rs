//! The DaemonSet controller: one pod per eligible node (node selector,
//! required node affinity, taints and tolerations), each pinned to its node
//! through node affinity on metadata.name so the scheduler binds it there;
//! each template kept as a ControllerRevision (`kubectl rollout history` and
//! `undo`); rolling updates within maxUnavailable; status.

mod failed_backoff;
mod placement;
mod rolling;
mod sync;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use skiff_informer::{Cache, EventHandler, ObjectKey, WorkQueue};

use crate::controller_utils::key_of;
use crate::events::EventRecorder;
use crate::manager::{Context, Stop, keyed_by, run_until_stopped};
use crate::owner_events::EnqueueOwner;
use crate::pod_control::Expectations;

/// The controller name in events and logs.
const CONTROLLER: &str = "daemonset-controller";

/// Runs the DaemonSet controller until `stop`.
pub(crate) async fn run(ctx: Context, stop: Stop) {
    let sets = ctx.factory.informer::<DaemonSet>();
    let pods = ctx.factory.informer::<Pod>();
    let nodes = ctx.factory.informer::<Node>();
    let revisions = ctx.factory.informer::<ControllerRevision>();
    let expectations = Expectations::default();
    let syncer = Arc::new(sync::Syncer {
        client: ctx.client.clone(),
        sets: sets.cache().clone(),
        pods: pods.cache().clone(),
        nodes: nodes.cache().clone(),
        revisions: revisions.cache().clone(),
        expectations: expectations.clone(),
        events: EventRecorder::new(ctx.client.clone(), CONTROLLER),
        failed_backoff: Default::default(),
    });
    let controller = keyed_by(CONTROLLER, &sets).workers(2);
    let queue = controller.queue().clone();
    // Pods settle the expected creations and deletions; revisions only wake.
    let owner = || EnqueueOwner::new(sets.cache().clone(), queue.clone());
    let pod_owner = owner().expecting(expectations);
    let node_events = NodeEvents {
        sets: sets.cache().clone(),
        queue: queue.clone(),
    };
    let controller = controller
        .watch(&pods, pod_owner)
        .watch(&revisions, owner())
        .watch(&nodes, node_events);
    run_until_stopped(controller, syncer, stop).await;
}

/// Any node change may change where daemons belong: wake every DaemonSet.
struct NodeEvents {
    sets: Arc<Cache<DaemonSet>>,
    queue: WorkQueue<ObjectKey>,
}

impl NodeEvents {
    fn wake_all(&self) {
        for set in self.sets.list() {
            self.queue.add(ObjectKey::parse(&key_of(&set.metadata)));
        }
    }
}

impl EventHandler<Node> for NodeEvents {
    fn on_add(&self, _node: &Arc<Node>) {
        self.wake_all();
    }

    fn on_update(&self, old: &Arc<Node>, new: &Arc<Node>) {
        if old.metadata.labels != new.metadata.labels || old.spec != new.spec {
            self.wake_all();
        }
    }

    fn on_delete(&self, _node: &Arc<Node>) {
        self.wake_all();
    }
}
