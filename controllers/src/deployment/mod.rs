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

use crate::events::EventRecorder;
use crate::manager::{Context, Stop, keyed_by, run_until_stopped};

/// The controller name in events and logs.
const CONTROLLER: &str = "deployment-controller";

/// Runs the Deployment controller until `stop`.
pub(crate) async fn run(ctx: Context, stop: Stop) {
    let deployments = ctx.factory.informer::<Deployment>();
    let replica_sets = ctx.factory.informer::<ReplicaSet>();
    let syncer = Arc::new(sync::Syncer {
        client: ctx.client.clone(),
        deployments: deployments.cache().clone(),
        replica_sets: replica_sets.cache().clone(),
        events: EventRecorder::new(ctx.client.clone(), CONTROLLER),
    });
    let controller = keyed_by(CONTROLLER, &deployments).workers(4);
    let owner =
        handlers::ReplicaSetEvents::new(deployments.cache().clone(), controller.queue().clone());
    run_until_stopped(controller.watch(&replica_sets, owner), syncer, stop).await;
}
