//! The Job controller: runs pods to completion (parallelism, completions,
//! Indexed completion), retries failures up to backoffLimit, enforces
//! activeDeadlineSeconds, suspends and resumes, tracks finished pods with the
//! `batch.kubernetes.io/job-tracking` finalizer (released from the pods of
//! a Job that is gone), reports conditions as
//! upstream 1.33 does, and deletes finished Jobs after
//! ttlSecondsAfterFinished.

mod indexes;
mod orphans;
mod pods;
mod policies;
mod sync;

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use skiff_informer::{Controller, ObjectKey, WorkQueue};

use crate::events::EventRecorder;
use crate::manager::{Context, Stop, keyed_by, run_until_stopped, stopped};
use crate::owner_events::EnqueueOwner;
use crate::pod_control::Expectations;

/// The controller name in events and logs.
const CONTROLLER: &str = "job-controller";
/// The name of the loop releasing tracked pods that name no controller.
const ORPHAN_POD_QUEUE: &str = "job-orphan-pod";

/// Runs the Job controller until `stop`.
pub(crate) async fn run(ctx: Context, stop: Stop) {
    let jobs = ctx.factory.informer::<Job>();
    let pods = ctx.factory.informer::<Pod>();
    let expectations = Expectations::default();
    let syncer = Arc::new(sync::Syncer::new(
        ctx.client.clone(),
        jobs.cache().clone(),
        pods.cache().clone(),
        expectations.clone(),
        EventRecorder::new(ctx.client.clone(), CONTROLLER),
    ));
    let controller = keyed_by(CONTROLLER, &jobs).workers(4);
    let queue = controller.queue().clone();
    // Pod events settle expectations and wake the owning Job.
    let owner = EnqueueOwner::new(jobs.cache().clone(), queue.clone()).expecting(expectations);
    // Tracked pods whose Job is gone wake that Job's key to be released.
    let orphans = orphans::EnqueueOrphans::new(jobs.cache().clone(), queue);
    let controller = controller.watch(&pods, owner).watch(&pods, orphans);
    let jobs_loop = run_until_stopped(controller, syncer.clone(), stop.clone());
    // Tracked pods that name no controller at all: keyed by pod, as
    // upstream's orphan-pod queue.
    let ownerless_queue = WorkQueue::<ObjectKey>::new();
    let ownerless_loop = Controller::new(ORPHAN_POD_QUEUE, ownerless_queue.clone())
        .watch(&pods, orphans::EnqueueOwnerless::new(ownerless_queue))
        .run_shared(
            syncer,
            |s, key| async move { s.sync_ownerless(key).await },
            stopped(stop),
        );
    tokio::join!(jobs_loop, ownerless_loop);
}
