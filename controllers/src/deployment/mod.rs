//! The Deployment controller: rolls a Deployment's pod template out through
//! ReplicaSets (RollingUpdate within maxSurge / maxUnavailable, or
//! Recreate), keeps revisions and history, and reports progress and
//! availability as upstream does, so `kubectl rollout` works.

mod handlers;
mod rolling;
mod status;
mod sync;
mod util;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use skiff_informer::{Controller, EnqueueKeys, ObjectKey, WorkQueue};

use crate::events::EventRecorder;
use crate::manager::{Context, Stop, stopped};

pub use sync::DeploymentError;

/// The controller name in events and logs.
const CONTROLLER: &str = "deployment-controller";

/// Runs the Deployment controller until `stop`.
pub async fn run(ctx: Context, stop: Stop) {
    let deployments = ctx.factory.informer::<Deployment>();
    let replica_sets = ctx.factory.informer::<ReplicaSet>();
    let queue = WorkQueue::<ObjectKey>::new();
    let registered = deployments
        .add_event_handler(EnqueueKeys::new(queue.clone()))
        .and_then(|_| {
            replica_sets.add_event_handler(handlers::ReplicaSetEvents::new(
                deployments.cache().clone(),
                queue.clone(),
            ))
        });
    if let Err(error) = registered {
        tracing::error!(controller = CONTROLLER, %error, "cannot watch");
        return;
    }
    tokio::select! {
        _ = async { deployments.wait_for_sync().await; replica_sets.wait_for_sync().await } => {}
        _ = stopped(stop.clone()) => return,
    }
    let syncer = Arc::new(sync::Syncer {
        client: ctx.client.clone(),
        deployments: deployments.cache().clone(),
        replica_sets: replica_sets.cache().clone(),
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
