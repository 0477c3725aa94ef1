//! The Job controller: runs pods to completion (parallelism, completions,
//! Indexed completion), retries failures up to backoffLimit, enforces
//! activeDeadlineSeconds, suspends and resumes, tracks finished pods with the
//! `batch.kubernetes.io/job-tracking` finalizer, reports conditions as
//! upstream 1.33 does, and deletes finished Jobs after
//! ttlSecondsAfterFinished.

mod indexes;
mod pods;
mod sync;

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use skiff_informer::{Cache, Controller, EnqueueKeys, EventHandler, ObjectKey, WorkQueue};

use crate::controller_utils::{controller_ref, key_of};
use crate::events::EventRecorder;
use crate::manager::{Context, Stop, stopped};
use crate::pod_control::Expectations;

pub use sync::JobError;

/// The controller name in events and logs.
const CONTROLLER: &str = "job-controller";

/// Runs the Job controller until `stop`.
pub async fn run(ctx: Context, stop: Stop) {
    let jobs = ctx.factory.informer::<Job>();
    let pods = ctx.factory.informer::<Pod>();
    let queue = WorkQueue::<ObjectKey>::new();
    let expectations = Expectations::default();
    let registered = jobs
        .add_event_handler(EnqueueKeys::new(queue.clone()))
        .and_then(|_| {
            pods.add_event_handler(PodEvents {
                jobs: jobs.cache().clone(),
                queue: queue.clone(),
                expectations: expectations.clone(),
            })
        });
    if let Err(error) = registered {
        tracing::error!(controller = CONTROLLER, %error, "cannot watch");
        return;
    }
    tokio::select! {
        _ = async { jobs.wait_for_sync().await; pods.wait_for_sync().await } => {}
        _ = stopped(stop.clone()) => return,
    }
    let syncer = Arc::new(sync::Syncer::new(
        ctx.client.clone(),
        jobs.cache().clone(),
        pods.cache().clone(),
        expectations,
        EventRecorder::new(ctx.client.clone(), CONTROLLER),
    ));
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

/// Pod events settle expectations and wake the owning Job.
struct PodEvents {
    jobs: Arc<Cache<Job>>,
    queue: WorkQueue<ObjectKey>,
    expectations: Expectations,
}

impl PodEvents {
    fn owner(&self, pod: &Pod) -> Option<String> {
        let r = controller_ref(&pod.metadata)?;
        if r.kind != "Job" {
            return None;
        }
        let job = self
            .jobs
            .get(pod.metadata.namespace.as_deref().unwrap_or(""), &r.name)?;
        (job.metadata.uid.as_deref() == Some(r.uid.as_str())).then(|| key_of(&job.metadata))
    }
}

impl EventHandler<Pod> for PodEvents {
    fn on_add(&self, pod: &Arc<Pod>) {
        if let Some(key) = self.owner(pod) {
            if pod.metadata.deletion_timestamp.is_some() {
                self.expectations
                    .deletion_observed(&key, &key_of(&pod.metadata));
            } else {
                self.expectations.creation_observed(&key);
            }
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
