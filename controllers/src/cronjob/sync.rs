//! One sync of one CronJob at a given instant (injected, so schedule
//! decisions are testable): reconcile the active list, start the Job for the
//! latest unmet schedule time if policy allows, trim history, and come back
//! at the next scheduled time.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{CronJob, CronJobStatus, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Api, DeleteParams, PostParams, PropagationPolicy};
use kube::{Client, Resource, ResourceExt};
use skiff_informer::{Action, Cache, ObjectKey};

use crate::controller_utils::api_message;
use crate::controller_utils::{WriteFailed, write_status};
use crate::controller_utils::{controlled_by, controller_owner_ref, controller_ref};
use crate::events::{EventRecorder, object_reference};
use crate::manager::Reconciler;
use skiff_common::cron::Schedule;

/// What a sync needs.
pub(super) struct Syncer {
    pub client: Client,
    pub cronjobs: Arc<Cache<CronJob>>,
    pub jobs: Arc<Cache<Job>>,
    pub events: EventRecorder,
}

/// "Complete" or "Failed" when the Job has finished.
pub(super) fn finished(job: &Job) -> Option<&'static str> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    ["Complete", "Failed"].into_iter().find(|t| {
        conditions
            .iter()
            .any(|c| c.type_ == *t && c.status == "True")
    })
}

/// The name of the Job for a scheduled time: minutes since the epoch.
pub(super) fn job_name(cronjob: &str, scheduled: Timestamp) -> String {
    format!("{cronjob}-{}", scheduled.as_second().div_euclid(60))
}

/// What to do at `now`: the scheduled time to run (if any), and when to look
/// again. `earliest` is the last schedule time (or creation).
pub(super) fn decide(
    schedule: &Schedule,
    earliest: Timestamp,
    now: Timestamp,
    starting_deadline: Option<i64>,
) -> (Option<Timestamp>, Option<Timestamp>, bool) {
    let mut from = earliest;
    if let Some(d) = starting_deadline
        && let Ok(floor) = now.checked_sub(jiff::SignedDuration::from_secs(d))
        && floor > from
    {
        from = floor;
    }
    let recent = schedule.most_recent(from, now);
    // Counted on from the latest time due (or from where the window
    // starts), as upstream counts: for a cron schedule that is the first
    // time after `now`; for `@every` it keeps the interval's phase.
    let next = schedule.next_after(recent.map_or(from, |(t, _)| t));
    match recent {
        None => (None, next, false),
        Some((t, _)) => {
            let too_late = starting_deadline.is_some_and(|d| t.as_second() + d < now.as_second());
            if too_late {
                (None, next, true)
            } else {
                (Some(t), next, false)
            }
        }
    }
}

fn job_reference(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        field_path: None,
    }
}

impl Reconciler for Syncer {
    type Error = WriteFailed;

    /// Syncs the CronJob under `key` as of the present.
    async fn sync(&self, key: ObjectKey) -> Result<Action, WriteFailed> {
        self.sync_at(key, Timestamp::now()).await
    }
}

impl Syncer {
    fn err(key: &str, what: &'static str, source: kube::Error) -> WriteFailed {
        WriteFailed::new("cronjob", key, what, source)
    }

    /// Syncs the CronJob under `key` as of `now`.
    pub(super) async fn sync_at(
        &self,
        key: ObjectKey,
        now: Timestamp,
    ) -> Result<Action, WriteFailed> {
        let ns = key.namespace.clone().unwrap_or_default();
        let key_str = key.to_string();
        let Some(cj) = self.cronjobs.get(&ns, &key.name) else {
            return Ok(Action::Done);
        };
        let cj = (*cj).clone();
        let uid = cj.metadata.uid.clone().unwrap_or_default();
        let spec = cj.spec.clone().unwrap_or_default();
        let mut status = cj.status.clone().unwrap_or_default();
        let jobs = controlled_by(&self.jobs, &ns, &uid);

        self.reconcile_active(&cj, &key_str, &jobs, &mut status)
            .await?;

        let mut requeue = None;
        if cj.metadata.deletion_timestamp.is_none() && spec.suspend != Some(true) {
            let time_zone = spec.time_zone.as_deref();
            match Schedule::parse(&spec.schedule, time_zone) {
                Err(e) => {
                    self.events.warning(
                        &object_reference(&cj),
                        "UnparseableSchedule",
                        "Schedule",
                        format!("unparseable schedule: {:?} : {e}", spec.schedule),
                    );
                }
                // A schedule that parses yet names no real time (31 February)
                // never fires: upstream reports it as invalid and waits
                // for the spec to change.
                Ok(schedule) if schedule.next_after(now).is_none() => {
                    self.events.warning(
                        &object_reference(&cj),
                        "InvalidSchedule",
                        "Schedule",
                        format!(
                            "invalid schedule: {} : time difference between two schedules is less than 1 second",
                            spec.schedule
                        ),
                    );
                }
                Ok(schedule) => {
                    let earliest = status
                        .last_schedule_time
                        .as_ref()
                        .or(cj.metadata.creation_timestamp.as_ref())
                        .map(|t| t.0)
                        .unwrap_or(now);
                    let (due, next, missed) =
                        decide(&schedule, earliest, now, spec.starting_deadline_seconds);
                    if missed {
                        self.events.warning(
                            &object_reference(&cj),
                            "MissSchedule",
                            "Schedule",
                            "Missed scheduled time to start a job".to_owned(),
                        );
                    }
                    if let Some(t) = due {
                        self.start_job(&cj, &key_str, &jobs, &mut status, t).await?;
                    }
                    requeue = next.map(|n| {
                        let secs = (n.as_second() - now.as_second()).max(1);
                        Duration::from_secs(secs as u64 + 1)
                    });
                }
            }
        }
        self.trim_history(&cj, &key_str, &jobs).await?;
        if Some(&status) != cj.status.as_ref() {
            let api: Api<CronJob> = Api::namespaced(self.client.clone(), &ns);
            let mut body = serde_json::to_value(&status).unwrap_or_default();
            if status.active.is_none() {
                body["active"] = serde_json::Value::Null;
            }
            let written = write_status(&api, &cj.name_any(), body)
                .await
                .map_err(|e| Self::err(&key_str, "updating status", e))?;
            if !written {
                return Ok(Action::Done);
            }
        }
        Ok(match requeue {
            Some(d) => Action::RequeueAfter(d),
            None => Action::Done,
        })
    }

    /// The active list as upstream's controller keeps it: a finished Job
    /// leaves it (`SawCompletedJob`), a listed Job that no longer exists
    /// leaves it (`MissingJob`), and a running Job the controller did not
    /// start (`kubectl create job --from=cronjob/…`) is reported
    /// (`UnexpectedJob`) but never added, so concurrency policy counts only
    /// the scheduled runs. Completions count towards the last success
    /// whether or not the Job was listed.
    async fn reconcile_active(
        &self,
        cj: &CronJob,
        key: &str,
        jobs: &[Arc<Job>],
        status: &mut CronJobStatus,
    ) -> Result<(), WriteFailed> {
        let listed = |status: &CronJobStatus, uid: &Option<String>| {
            status.active.iter().flatten().any(|r| &r.uid == uid)
        };
        let ns = cj.namespace().unwrap_or_default();
        for job in jobs {
            let uid = &job.metadata.uid;
            match finished(job) {
                None if !listed(status, uid) => {
                    // The cache may predate the status write that listed a
                    // Job this controller just started: ask the server.
                    let api: Api<CronJob> = Api::namespaced(self.client.clone(), &ns);
                    let fresh = api
                        .get(&cj.name_any())
                        .await
                        .map_err(|e| Self::err(key, "reading the cronjob", e))?;
                    let fresh_status = fresh.status.unwrap_or_default();
                    if listed(&fresh_status, uid) {
                        status.active = fresh_status.active;
                        continue;
                    }
                    self.events.warning(
                        &object_reference(cj),
                        "UnexpectedJob",
                        "Observe",
                        format!(
                            "Saw a job that the controller did not create or forgot: {}",
                            job.name_any()
                        ),
                    );
                }
                None => {}
                Some(outcome) => {
                    if listed(status, uid) {
                        if let Some(active) = status.active.as_mut() {
                            active.retain(|r| &r.uid != uid);
                        }
                        self.events.normal(
                            &object_reference(cj),
                            "SawCompletedJob",
                            "Observe",
                            format!(
                                "Saw completed job: {}, condition: {outcome}",
                                job.name_any()
                            ),
                        );
                    }
                    if outcome == "Complete"
                        && let Some(done) =
                            job.status.as_ref().and_then(|s| s.completion_time.clone())
                        && status
                            .last_successful_time
                            .as_ref()
                            .is_none_or(|t| t.0 < done.0)
                    {
                        status.last_successful_time = Some(done);
                    }
                }
            }
        }
        // Listed Jobs the cache does not hold: gone, or not yet seen here.
        let jobs_api: Api<Job> = Api::namespaced(self.client.clone(), &ns);
        let unseen: Vec<ObjectReference> = status
            .active
            .iter()
            .flatten()
            .filter(|r| !jobs.iter().any(|j| j.metadata.uid == r.uid))
            .cloned()
            .collect();
        for reference in unseen {
            let name = reference.name.clone().unwrap_or_default();
            match jobs_api.get(&name).await {
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    self.events.normal(
                        &object_reference(cj),
                        "MissingJob",
                        "Observe",
                        format!("Active job went missing: {name}"),
                    );
                    if let Some(active) = status.active.as_mut() {
                        active.retain(|r| r.uid != reference.uid);
                    }
                }
                Err(e) => return Err(Self::err(key, "reading an active job", e)),
                Ok(_) => {}
            }
        }
        if status.active.as_ref().is_some_and(Vec::is_empty) {
            status.active = None;
        }
        Ok(())
    }

    async fn start_job(
        &self,
        cj: &CronJob,
        key: &str,
        jobs: &[Arc<Job>],
        status: &mut CronJobStatus,
        scheduled: Timestamp,
    ) -> Result<(), WriteFailed> {
        let ns = cj.namespace().unwrap_or_default();
        let name = job_name(&cj.name_any(), scheduled);
        if jobs.iter().any(|j| j.name_any() == name) {
            // Already started for this time (the status write may have been lost).
            status.last_schedule_time = Some(Time(scheduled));
            return Ok(());
        }
        let spec = cj.spec.clone().unwrap_or_default();
        let api: Api<Job> = Api::namespaced(self.client.clone(), &ns);
        let running: Vec<ObjectReference> = status.active.clone().unwrap_or_default();
        match spec.concurrency_policy.as_deref() {
            Some("Forbid") if !running.is_empty() => {
                self.events.normal(
                    &object_reference(cj),
                    "JobAlreadyActive",
                    "Schedule",
                    "Not starting job because prior execution is running and concurrency policy is Forbid".to_owned(),
                );
                return Ok(());
            }
            Some("Replace") => {
                for r in &running {
                    let Some(job_name) = r.name.as_deref() else {
                        continue;
                    };
                    let params = DeleteParams {
                        propagation_policy: Some(PropagationPolicy::Background),
                        ..Default::default()
                    };
                    match api.delete(job_name, &params).await {
                        Ok(_) => self.events.normal(
                            &object_reference(cj),
                            "SuccessfulDelete",
                            "Delete",
                            format!("Deleted job {job_name}"),
                        ),
                        Err(kube::Error::Api(s)) if s.code == 404 => {}
                        Err(e) => return Err(Self::err(key, "replacing a job", e)),
                    }
                }
                status.active = None;
            }
            _ => {}
        }
        let template = spec.job_template;
        let meta = template.metadata.unwrap_or_default();
        let mut annotations = meta.annotations.unwrap_or_default();
        annotations.insert(
            "batch.kubernetes.io/cronjob-scheduled-timestamp".into(),
            scheduled.to_string(),
        );
        let job = Job {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(ns),
                labels: meta.labels,
                annotations: Some(annotations),
                owner_references: Some(vec![controller_owner_ref(cj)]),
                ..Default::default()
            },
            spec: template.spec,
            status: None,
        };
        let created = match api.create(&PostParams::default(), &job).await {
            Ok(created) => {
                self.events.normal(
                    &object_reference(cj),
                    "SuccessfulCreate",
                    "Create",
                    format!("Created job {name}"),
                );
                created
            }
            Err(kube::Error::Api(s)) if s.code == 409 => match api.get(&name).await {
                Ok(existing) => existing,
                Err(e) => return Err(Self::err(key, "reading an existing job", e)),
            },
            Err(e) => {
                self.events.warning(
                    &object_reference(cj),
                    "FailedCreate",
                    "Create",
                    format!("Error creating job: {}", api_message(&e)),
                );
                return Err(Self::err(key, "creating a job", e));
            }
        };
        let owned = controller_ref(&created.metadata)
            .is_some_and(|r| Some(&r.uid) == cj.meta().uid.as_ref());
        if owned {
            status
                .active
                .get_or_insert_with(Vec::new)
                .push(job_reference(&created));
        }
        status.last_schedule_time = Some(Time(scheduled));
        Ok(())
    }

    /// Deletes the oldest finished Jobs beyond the success / failure limits.
    async fn trim_history(
        &self,
        cj: &CronJob,
        key: &str,
        jobs: &[Arc<Job>],
    ) -> Result<(), WriteFailed> {
        let spec = cj.spec.clone().unwrap_or_default();
        let api: Api<Job> =
            Api::namespaced(self.client.clone(), &cj.namespace().unwrap_or_default());
        for (outcome, limit) in [
            ("Complete", spec.successful_jobs_history_limit.unwrap_or(3)),
            ("Failed", spec.failed_jobs_history_limit.unwrap_or(1)),
        ] {
            let mut done: Vec<&Arc<Job>> = jobs
                .iter()
                .filter(|j| finished(j) == Some(outcome) && j.metadata.deletion_timestamp.is_none())
                .collect();
            let excess = done.len() as i64 - i64::from(limit.max(0));
            if excess <= 0 {
                continue;
            }
            done.sort_by_key(|j| {
                j.status
                    .as_ref()
                    .and_then(|s| s.start_time.clone())
                    .or_else(|| j.metadata.creation_timestamp.clone())
                    .map(|t| t.0)
            });
            for job in done.into_iter().take(excess as usize) {
                let params = DeleteParams {
                    propagation_policy: Some(PropagationPolicy::Background),
                    ..Default::default()
                };
                match api.delete(&job.name_any(), &params).await {
                    Ok(_) => self.events.normal(
                        &object_reference(cj),
                        "SuccessfulDelete",
                        "Delete",
                        format!("Deleted job {}", job.name_any()),
                    ),
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(Self::err(key, "deleting an old job", e)),
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn job_names_count_minutes_since_the_epoch() {
        assert_eq!(
            job_name("hello", ts("2025-01-10T10:47:00Z")),
            "hello-28941767"
        );
    }

    #[test]
    fn decisions_respect_the_starting_deadline() {
        let s = Schedule::parse("*/10 * * * *", None).unwrap();
        // Every case but the last: unmet since 10:05, looked at 10:47.
        let at_10_47 = |deadline| {
            decide(
                &s,
                ts("2025-01-10T10:05:00Z"),
                ts("2025-01-10T10:47:00Z"),
                deadline,
            )
        };
        // due at 10:40, looked at 10:47 with no deadline: run it
        let (due, next, missed) = at_10_47(None);
        assert_eq!(due, Some(ts("2025-01-10T10:40:00Z")));
        assert_eq!(next, Some(ts("2025-01-10T10:50:00Z")));
        assert!(!missed);
        // a 60 s deadline has passed for 10:40 (and 10:30 is out of the window)
        let (due, _, missed) = at_10_47(Some(60));
        assert_eq!((due, missed), (None, false));
        // a 500 s window still sees 10:40 but it is too late: 10:40 + 300 < 10:47
        let (due, _, missed) = at_10_47(Some(300));
        assert_eq!((due, missed), (None, false));
        let (due, _, missed) = at_10_47(Some(500));
        assert_eq!((due, missed), (Some(ts("2025-01-10T10:40:00Z")), false));
        // nothing since the last run
        let (due, next, _) = decide(
            &s,
            ts("2025-01-10T10:40:00Z"),
            ts("2025-01-10T10:47:00Z"),
            None,
        );
        assert_eq!((due, next), (None, Some(ts("2025-01-10T10:50:00Z"))));
    }

    #[test]
    fn a_constant_interval_runs_in_phase_with_its_last_run() {
        let s = Schedule::parse("@every 5m", None).unwrap();
        // Created 10:00:10, looked at 10:03:17: nothing due; the first run is
        // at 10:05:10, not five minutes after the look.
        let created = ts("2025-01-10T10:00:10Z");
        let (due, next, _) = decide(&s, created, ts("2025-01-10T10:03:17Z"), None);
        assert_eq!((due, next), (None, Some(ts("2025-01-10T10:05:10Z"))));
        // Looked at 10:16:00: 10:15:10 is due, then 10:20:10.
        let (due, next, _) = decide(&s, created, ts("2025-01-10T10:16:00Z"), None);
        assert_eq!(due, Some(ts("2025-01-10T10:15:10Z")));
        assert_eq!(next, Some(ts("2025-01-10T10:20:10Z")));
    }
}
