//! The CronJob controller: creates a Job named `<cronjob>-<minutes since
//! the epoch>` at each scheduled time (time zones, concurrencyPolicy,
//! startingDeadlineSeconds, suspend), tracks active Jobs and the last
//! schedule and success, and trims finished Jobs to the history limits.

mod sync;

use std::sync::Arc;

use k8s_openapi::api::batch::v1::{CronJob, Job};

use crate::events::EventRecorder;
use crate::manager::{Context, Stop, keyed_by, run_until_stopped};
use crate::owner_events::EnqueueOwner;

/// The controller name in events and logs.
const CONTROLLER: &str = "cronjob-controller";

/// Runs the CronJob controller until `stop`.
pub(crate) async fn run(ctx: Context, stop: Stop) {
    let cronjobs = ctx.factory.informer::<CronJob>();
    let jobs = ctx.factory.informer::<Job>();
    let syncer = Arc::new(sync::Syncer {
        client: ctx.client.clone(),
        cronjobs: cronjobs.cache().clone(),
        jobs: jobs.cache().clone(),
        events: EventRecorder::new(ctx.client.clone(), CONTROLLER),
    });
    let controller = keyed_by(CONTROLLER, &cronjobs).workers(2);
    // Job changes wake the owning CronJob.
    let owner = EnqueueOwner::new(cronjobs.cache().clone(), controller.queue().clone());
    run_until_stopped(controller.watch(&jobs, owner), syncer, stop).await;
}
