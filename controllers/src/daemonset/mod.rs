//! The DaemonSet controller: one pod per eligible node (node selector,
//! required node affinity, taints and tolerations), each pinned to its node
//! through node affinity on metadata.name so the scheduler binds it there;
//! rolling updates within maxUnavailable; status.

mod placement;
mod sync;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use skiff_informer::{Cache, Controller, EnqueueKeys, EventHandler, ObjectKey, WorkQueue};

use crate::controller_utils::{controller_ref, key_of};
use crate::events::EventRecorder;
use crate::manager::{Context, Stop, stopped};
use crate::pod_control::Expectations;

pub use sync::DaemonSetError;

/// The controller name in events and logs.
const CONTROLLER: &str = "daemonset-controller";

/// Runs the DaemonSet controller until `stop`.
pub async fn run(ctx: Context, stop: Stop) {
    let sets = ctx.factory.informer::<DaemonSet>();
    let pods = ctx.factory.informer::<Pod>();
    let nodes = ctx.factory.informer::<Node>();
    let queue = WorkQueue::<ObjectKey>::new();
    let expectations = Expectations::default();
    let registered = sets
        .add_event_handler(EnqueueKeys::new(queue.clone()))
        .and_then(|_| {
            pods.add_event_handler(PodEvents {
                sets: sets.cache().clone(),
                queue: queue.clone(),
                expectations: expectations.clone(),
            })
        })
        .and_then(|_| {
            nodes.add_event_handler(NodeEvents {
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
            nodes.wait_for_sync().await;
        } => {}
        _ = stopped(stop.clone()) => return,
    }
    let syncer = Arc::new(sync::Syncer {
        client: ctx.client.clone(),
        sets: sets.cache().clone(),
        pods: pods.cache().clone(),
        nodes: nodes.cache().clone(),
        expectations,
        events: EventRecorder::new(ctx.client.clone(), CONTROLLER),
    });
    Controller::new(CONTROLLER, queue)
        .workers(2)
        .run_until(
            move |key: ObjectKey| {
                let syncer = syncer.clone();
                async move { syncer.sync(key).await }
            },
            stopped(stop),
        )
        .await;
}

struct PodEvents {
    sets: Arc<Cache<DaemonSet>>,
    queue: WorkQueue<ObjectKey>,
    expectations: Expectations,
}

impl PodEvents {
    fn owner(&self, pod: &Pod) -> Option<String> {
        let r = controller_ref(&pod.metadata)?;
        if r.kind != "DaemonSet" {
            return None;
        }
        let set = self
            .sets
            .get(pod.metadata.namespace.as_deref().unwrap_or(""), &r.name)?;
        (set.metadata.uid.as_deref() == Some(r.uid.as_str())).then(|| key_of(&set.metadata))
    }
}

impl EventHandler<Pod> for PodEvents {
    fn on_add(&self, pod: &Arc<Pod>) {
        if let Some(key) = self.owner(pod) {
            self.expectations.creation_observed(&key);
            self.queue.add(ObjectKey::parse(&key));
        }
    }

    fn on_update(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        if let Some(key) = self.owner(new) {
            if new.metadata.deletion_timestamp.is_some()
                && old.metadata.deletion_timestamp.is_none()
            {
                self.expectations
                    .deletion_observed(&key, &key_of(&new.metadata));
            }
            self.queue.add(ObjectKey::parse(&key));
        }
    }

    fn on_delete(&self, pod: &Arc<Pod>) {
        if let Some(key) = self.owner(pod) {
            self.expectations
                .deletion_observed(&key, &key_of(&pod.metadata));
            self.queue.add(ObjectKey::parse(&key));
        }
    }
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
