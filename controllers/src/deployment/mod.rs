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

/// The controller name in events and logs.
const CONTROLLER: &str = "deployment-controller";

/// Runs the Deployment controller until `stop`.
pub(crate) async fn run(ctx: Context, stop: Stop) {
    let deployments = ctx.factory.informer::<Deployment>();
    let replica_sets = ctx.factory.informer::<ReplicaSet>();
    let queue = WorkQueue::<ObjectKey>::new();
    let syncer = Arc::new(sync::Syncer {
        client: ctx.client.clone(),
        deployments: deployments.cache().clone(),
        replica_sets: replica_sets.cache().clone(),
        events: EventRecorder::new(ctx.client.clone(), CONTROLLER),
    });
    let owner = handlers::ReplicaSetEvents::new(deployments.cache().clone(), queue.clone());
    Controller::new(CONTROLLER, queue.clone())
        .workers(4)
        .watch(&deployments, EnqueueKeys::new(queue))
        .watch(&replica_sets, owner)
        .run_shared(
            syncer,
            |s, key| async move { s.sync(key).await },
            stopped(stop),
        )
        .await;
}
