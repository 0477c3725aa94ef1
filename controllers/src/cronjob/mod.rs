//! The CronJob controller: creates a Job named `<cronjob>-<minutes since
//! the epoch>` at each scheduled time (time zones, concurrencyPolicy,
//! startingDeadlineSeconds, suspend), tracks active Jobs and the last
//! schedule and success, and trims finished Jobs to the history limits.

mod schedule;
mod sync;

use std::sync::Arc;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use skiff_informer::{Cache, Controller, EnqueueKeys, EventHandler, ObjectKey, WorkQueue};

use crate::controller_utils::{controller_ref, key_of};
use crate::events::EventRecorder;
use crate::manager::{Context, Stop, stopped};

pub use schedule::{Schedule, ScheduleError};
pub use sync::CronJobError;

/// The controller name in events and logs.
const CONTROLLER: &str = "cronjob-controller";

/// Runs the CronJob controller until `stop`.
pub async fn run(ctx: Context, stop: Stop) {
    let cronjobs = ctx.factory.informer::<CronJob>();
    let jobs = ctx.factory.informer::<Job>();
    let queue = WorkQueue::<ObjectKey>::new();
    let registered = cronjobs
        .add_event_handler(EnqueueKeys::new(queue.clone()))
        .and_then(|_| {
            jobs.add_event_handler(JobEvents {
                cronjobs: cronjobs.cache().clone(),
                queue: queue.clone(),
            })
        });
    if let Err(error) = registered {
        tracing::error!(controller = CONTROLLER, %error, "cannot watch");
        return;
    }
    tokio::select! {
        _ = async { cronjobs.wait_for_sync().await; jobs.wait_for_sync().await } => {}
        _ = stopped(stop.clone()) => return,
    }
    let syncer = Arc::new(sync::Syncer {
        client: ctx.client.clone(),
        cronjobs: cronjobs.cache().clone(),
        jobs: jobs.cache().clone(),
        events: EventRecorder::new(ctx.client.clone(), CONTROLLER),
    });
    Controller::new(CONTROLLER, queue)
        .workers(2)
        .run_until(
            move |key: ObjectKey| {
                let syncer = syncer.clone();
                async move { syncer.sync(key, jiff::Timestamp::now()).await }
            },
            stopped(stop),
        )
        .await;
}

/// Job changes wake the owning CronJob.
struct JobEvents {
    cronjobs: Arc<Cache<CronJob>>,
    queue: WorkQueue<ObjectKey>,
}

impl JobEvents {
    fn wake(&self, job: &Job) {
        let Some(r) = controller_ref(&job.metadata) else {
            return;
        };
        if r.kind != "CronJob" {
            return;
        }
        if let Some(cj) = self
            .cronjobs
            .get(job.metadata.namespace.as_deref().unwrap_or(""), &r.name)
            && cj.metadata.uid.as_deref() == Some(r.uid.as_str())
        {
            self.queue.add(ObjectKey::parse(&key_of(&cj.metadata)));
        }
    }
}

impl EventHandler<Job> for JobEvents {
    fn on_add(&self, job: &Arc<Job>) {
        self.wake(job);
    }

    fn on_update(&self, _old: &Arc<Job>, new: &Arc<Job>) {
        self.wake(new);
    }

    fn on_delete(&self, job: &Arc<Job>) {
        self.wake(job);
    }
}
