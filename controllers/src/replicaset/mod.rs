//! The ReplicaSet controller (and the ReplicationController controller, the
//! same logic over the older type): keeps `spec.replicas` pods of the
//! template running, adopting matching orphans and releasing pods that stop
//! matching, and reports status.

mod handlers;
mod owner;
mod status;
mod sync;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, ReplicationController};

use crate::events::EventRecorder;
use crate::manager::{Context, Stop, keyed_by, run_until_stopped};
use crate::pod_control::Expectations;

pub(crate) use owner::ReplicaOwner;

/// Runs the ReplicaSet controller until `stop`.
pub(crate) async fn run(ctx: Context, stop: Stop) {
    run_for::<ReplicaSet>(ctx, stop).await;
}

/// Runs the ReplicationController controller until `stop`.
pub(crate) async fn run_replication_controllers(ctx: Context, stop: Stop) {
    run_for::<ReplicationController>(ctx, stop).await;
}

async fn run_for<K: ReplicaOwner>(ctx: Context, stop: Stop) {
    let owners = ctx.factory.informer::<K>();
    let pods = ctx.factory.informer::<Pod>();
    let expectations = Expectations::default();
    let syncer = Arc::new(sync::Syncer::<K> {
        client: ctx.client.clone(),
        owners: owners.cache().clone(),
        pods: pods.cache().clone(),
        expectations: expectations.clone(),
        events: EventRecorder::new(ctx.client.clone(), K::CONTROLLER),
    });
    let controller = keyed_by(K::CONTROLLER, &owners).workers(4);
    let queue = controller.queue().clone();
    let pod_events = handlers::PodEvents::<K>::new(owners.cache().clone(), queue, expectations);
    run_until_stopped(controller.watch(&pods, pod_events), syncer, stop).await;
}
