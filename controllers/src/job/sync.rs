//! One sync of one Job: count finished pods (through the tracking
//! finalizer), decide success or failure, create or delete pods, write
//! status and conditions.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::{Client, ResourceExt};
use serde_json::json;
use skiff_informer::{Action, Cache, ObjectKey};

use super::indexes;
use super::pods::{TRACKING_FINALIZER, has_finalizer, index_of, is_indexed, new_pod};
use super::policies::{self, Verdict};
use crate::controller_utils::WriteFailed;
use crate::controller_utils::{controlled_by, controller_ref, done_or_gone, now, seconds_between};
use crate::events::{EventRecorder, object_reference};
use crate::manager::Reconciler;
use crate::pod_control::{
    BURST_REPLICAS, Expectations, WorkloadSyncError, create_pods, is_ready, phase, pods_to_delete,
};

/// Upstream's first delay before recreating a failed pod; it doubles per
/// consecutive failure up to [`MAX_BACKOFF`].
const BASE_BACKOFF: Duration = Duration::from_secs(10);
const MAX_BACKOFF: Duration = Duration::from_secs(360);

/// Consecutive failures of a Job since its last success, for the recreate
/// backoff.
#[derive(Debug, Clone, Copy)]
struct Backoff {
    failures: u32,
    last: Instant,
}

/// What is left of the backoff after `failures` consecutive failures, the
/// last at `last`: upstream's 10 s doubling per failure up to 6 minutes.
fn remaining(failures: u32, last: Instant) -> Option<Duration> {
    let exp = failures.saturating_sub(1).min(16);
    let delay = BASE_BACKOFF.saturating_mul(1 << exp).min(MAX_BACKOFF);
    delay.checked_sub(last.elapsed()).filter(|d| !d.is_zero())
}

/// A Job being synced and its active pods: what creating and deleting its
/// pods works from, passed as one.
struct ActivePods<'a> {
    job: &'a Job,
    key: &'a str,
    api: &'a Api<Pod>,
    active: &'a [Arc<Pod>],
    /// Pods still terminating that hold their place: with
    /// `podReplacementPolicy: Failed` a pod is replaced only once it failed.
    holding: &'a [Arc<Pod>],
}

/// An Indexed Job's indexes as a sync sees them: completed, failed for
/// good, and (with `backoffLimitPerIndex`) how often each failed so far.
struct Indexes<'a> {
    completed: &'a BTreeSet<i32>,
    failed: &'a BTreeSet<i32>,
    failures: Option<&'a std::collections::BTreeMap<i32, i32>>,
}

/// What a sync needs, plus per-Job memory: pods whose finalizer this
/// controller removed (the cache may still show it) and failure backoff.
pub(super) struct Syncer {
    client: Client,
    jobs: Arc<Cache<Job>>,
    pods: Arc<Cache<Pod>>,
    expectations: Expectations,
    events: EventRecorder,
    finalized: Mutex<HashMap<String, HashSet<String>>>,
    backoff: Mutex<HashMap<String, Backoff>>,
    /// With `backoffLimitPerIndex`, when each index last failed: each
    /// index waits out its own backoff, as upstream's.
    index_backoff: Mutex<HashMap<String, std::collections::BTreeMap<i32, Instant>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

fn condition<'a>(status: &'a JobStatus, type_: &str) -> Option<&'a JobCondition> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
}

fn is_true(status: &JobStatus, type_: &str) -> bool {
    condition(status, type_).is_some_and(|c| c.status == "True")
}

/// Sets a condition, keeping the transition time when the status is unchanged.
fn set_condition(status: &mut JobStatus, type_: &str, value: &str, reason: &str, message: &str) {
    let at = now();
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    if let Some(c) = conditions.iter_mut().find(|c| c.type_ == type_) {
        if c.status == value && c.reason.as_deref() == Some(reason) {
            return;
        }
        if c.status != value {
            c.last_transition_time = Some(at.clone());
        }
        c.status = value.to_owned();
        c.reason = Some(reason.to_owned());
        c.message = Some(message.to_owned());
        c.last_probe_time = Some(at);
        return;
    }
    conditions.push(JobCondition {
        type_: type_.to_owned(),
        status: value.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_probe_time: Some(at.clone()),
        last_transition_time: Some(at),
    });
}

/// When the Job finished (Complete or Failed turned True).
fn finished_at(status: &JobStatus) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time> {
    ["Complete", "Failed"]
        .iter()
        .filter_map(|t| condition(status, t))
        .find(|c| c.status == "True")
        .map(|c| c.last_transition_time.clone().unwrap_or_else(now))
}

fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).sum())
        .unwrap_or(0)
}

impl Reconciler for Syncer {
    type Error = WorkloadSyncError;

    /// Syncs the Job under `key`.
    async fn sync(&self, key: ObjectKey) -> Result<Action, WorkloadSyncError> {
        let ns = key.namespace.clone().unwrap_or_default();
        let key_str = key.to_string();
        let Some(job) = self.jobs.get(&ns, &key.name) else {
            self.release_orphans(&key_str, &ns, &key.name, None).await?;
            self.expectations.forget(&key_str);
            lock(&self.finalized).remove(&key_str);
            lock(&self.backoff).remove(&key_str);
            lock(&self.index_backoff).remove(&key_str);
            return Ok(Action::Done);
        };
        let mut job = (*job).clone();
        let uid = job.metadata.uid.clone().unwrap_or_default();
        self.release_orphans(&key_str, &ns, &key.name, Some(&uid))
            .await?;
        let pod_api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let pods = controlled_by(&self.pods, &ns, &uid);
        let mut status = job.status.clone().unwrap_or_default();

        if finished_at(&status).is_some() {
            // Anything still tracked is released; then only the TTL matters.
            let leftover: Vec<Arc<Pod>> =
                pods.iter().filter(|p| has_finalizer(p)).cloned().collect();
            self.remove_finalizers(&key_str, &pod_api, &leftover)
                .await?;
            return self.expire(&job, &key_str).await;
        }

        let spec = job.spec.clone().unwrap_or_default();
        let indexed = is_indexed(&job);
        let completions = spec.completions;
        let parallelism = spec.parallelism.unwrap_or(1).max(0);
        let backoff_limit = spec.backoff_limit.unwrap_or(6);
        let suspended = spec.suspend == Some(true);
        let on_failure = spec
            .template
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.as_deref())
            == Some("OnFailure");

        // 1. Finished pods not yet counted.
        let already: HashSet<String> = lock(&self.finalized)
            .get(&key_str)
            .cloned()
            .unwrap_or_default();
        let mut uncounted = status.uncounted_terminated_pods.clone().unwrap_or_default();
        let in_uncounted: HashSet<String> = uncounted
            .succeeded
            .iter()
            .flatten()
            .chain(uncounted.failed.iter().flatten())
            .cloned()
            .collect();
        let mut completed = indexes::parse(
            status.completed_indexes.as_deref(),
            completions.unwrap_or(0),
        );
        // With `backoffLimitPerIndex`, each index has its own limit: one
        // that failed more often (or by a FailIndex rule) is not run again.
        let per_index = spec.backoff_limit_per_index.filter(|_| indexed);
        let mut failed_indexes =
            indexes::parse(status.failed_indexes.as_deref(), completions.unwrap_or(0));
        let index_failures = policies::index_failures(&job, &pods);
        // Once the Job met its success criteria, pods failing as they are
        // stopped no longer decide anything. (With `backoffLimitPerIndex`
        // the API defaults `backoffLimit` to i32::MAX: only the per-index
        // rules fail such a Job.)
        let success_met = is_true(&status, "SuccessCriteriaMet");
        let mut new_succeeded = 0;
        let mut new_failed = 0;
        // Indexes that failed in this sync (with `backoffLimitPerIndex`).
        let mut failed_now: Vec<i32> = Vec::new();
        let mut failed_by_policy: Option<String> = None;
        let mut to_unfinalize: Vec<Arc<Pod>> = Vec::new();
        for pod in &pods {
            let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
            if !has_finalizer(pod) || already.contains(&pod_uid) {
                continue;
            }
            if in_uncounted.contains(&pod_uid) {
                to_unfinalize.push(pod.clone());
                continue;
            }
            // Under a pod failure policy a pod is judged by how it ended, so
            // one being stopped is counted only once it has failed.
            let outcome = match phase(pod) {
                "Succeeded" => Some(true),
                "Failed" => Some(false),
                // A pod stopped because the Job met its success criteria
                // (one a retried sync finds still tracked) is released
                // without counting.
                _ if pod.metadata.deletion_timestamp.is_some() && success_met => {
                    to_unfinalize.push(pod.clone());
                    None
                }
                _ if pod.metadata.deletion_timestamp.is_some()
                    && spec.pod_failure_policy.is_none() =>
                {
                    Some(false)
                }
                _ => None,
            };
            match outcome {
                Some(true) => {
                    uncounted
                        .succeeded
                        .get_or_insert_with(Vec::new)
                        .push(pod_uid);
                    new_succeeded += 1;
                    if indexed && let Some(i) = index_of(pod, completions.unwrap_or(0)) {
                        completed.insert(i);
                    }
                    to_unfinalize.push(pod.clone());
                }
                Some(false) => {
                    match policies::judge(&job, pod) {
                        // Not a failure that counts (a disruption, say).
                        Verdict::Ignore => {}
                        verdict => {
                            if let Verdict::FailJob(message) = &verdict {
                                failed_by_policy.get_or_insert(message.clone());
                            }
                            if let (Some(limit), Some(i)) =
                                (per_index, index_of(pod, completions.unwrap_or(0)))
                            {
                                let failures = index_failures.get(&i).copied().unwrap_or(1);
                                if verdict == Verdict::FailIndex || failures > limit {
                                    failed_indexes.insert(i);
                                }
                                failed_now.push(i);
                            }
                            uncounted.failed.get_or_insert_with(Vec::new).push(pod_uid);
                            new_failed += 1;
                        }
                    }
                    to_unfinalize.push(pod.clone());
                }
                None => {}
            }
        }
        if per_index.is_some() {
            self.note_index_failures(&key_str, &failed_now);
        } else {
            self.note_outcomes(&key_str, new_succeeded, new_failed);
        }

        let active: Vec<Arc<Pod>> = pods
            .iter()
            .filter(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && !matches!(phase(p), "Succeeded" | "Failed")
            })
            .cloned()
            .collect();
        let count = |v: &Option<Vec<String>>| v.as_ref().map_or(0, Vec::len) as i32;
        let succeeded_total = if indexed {
            completed.len() as i32
        } else {
            status.succeeded.unwrap_or(0) + count(&uncounted.succeeded)
        };
        let failed_total = status.failed.unwrap_or(0) + count(&uncounted.failed);

        // 2. Start, suspension, success, failure.
        if suspended {
            if !is_true(&status, "Suspended") {
                set_condition(
                    &mut status,
                    "Suspended",
                    "True",
                    "JobSuspended",
                    "Job suspended",
                );
                self.events.normal(
                    &object_reference(&job),
                    "Suspended",
                    "Suspend",
                    "Job suspended",
                );
            }
        } else {
            if is_true(&status, "Suspended") {
                set_condition(
                    &mut status,
                    "Suspended",
                    "False",
                    "JobResumed",
                    "Job resumed",
                );
                self.events
                    .normal(&object_reference(&job), "Resumed", "Resume", "Job resumed");
                status.start_time = Some(now());
            }
            if status.start_time.is_none() {
                status.start_time = Some(now());
            }
        }
        let restarts_total: i32 = if on_failure {
            active.iter().map(|p| restarts(p)).sum()
        } else {
            0
        };
        let mut failure = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "FailureTarget" && c.status == "True")
            .map(|c| {
                (
                    c.reason.clone().unwrap_or_default(),
                    c.message.clone().unwrap_or_default(),
                )
            });
        if failure.is_none() && !success_met {
            let all_done = (0..completions.unwrap_or(0))
                .all(|i| completed.contains(&i) || failed_indexes.contains(&i));
            let too_many_failed = spec
                .max_failed_indexes
                .filter(|_| per_index.is_some())
                .is_some_and(|max| failed_indexes.len() as i32 > max);
            failure = if let Some(message) = failed_by_policy {
                Some(("PodFailurePolicy", message))
            } else if too_many_failed {
                Some((
                    "MaxFailedIndexesExceeded",
                    "Job has exceeded the specified maximal number of failed indexes".into(),
                ))
            } else if !failed_indexes.is_empty() && all_done {
                Some(("FailedIndexes", "Job has failed indexes".into()))
            } else if failed_total + restarts_total > backoff_limit {
                Some((
                    "BackoffLimitExceeded",
                    "Job has reached the specified backoff limit".into(),
                ))
            } else {
                None
            }
            .map(|(reason, message)| (reason.to_string(), message));
        }
        let mut deadline_left = None;
        if failure.is_none()
            && !suspended
            && let (Some(ads), Some(start)) = (spec.active_deadline_seconds, &status.start_time)
        {
            let elapsed = seconds_between(start, &now());
            if elapsed >= ads {
                failure = Some((
                    "DeadlineExceeded".into(),
                    "Job was active longer than specified deadline".into(),
                ));
            } else {
                deadline_left = Some(ads - elapsed);
            }
        }
        let policy_rule = indexed
            .then(|| policies::success_rule(&job, &completed))
            .flatten();
        let success = failure.is_none()
            && (success_met
                || policy_rule.is_some()
                || match completions {
                    Some(c) => succeeded_total >= c,
                    None => succeeded_total > 0 && active.is_empty(),
                });
        if indexed {
            status.completed_indexes = Some(indexes::format(&completed));
        }
        if per_index.is_some() {
            status.failed_indexes = Some(indexes::format(&failed_indexes));
        }
        // The interim condition saying why the Job is finishing. It is
        // written before any pod is stopped for it: a sync retried after a
        // later write failed then finds the decision, instead of counting
        // the pods it stopped as failures and deciding anew.
        let decision = if let Some((reason, message)) = &failure {
            Some(("FailureTarget", reason.clone(), message.clone()))
        } else if success {
            // As first decided, else the success policy's rule, else the
            // completions.
            let (reason, message) =
                match condition(&status, "SuccessCriteriaMet").filter(|c| c.status == "True") {
                    Some(c) => (
                        c.reason.clone().unwrap_or_default(),
                        c.message.clone().unwrap_or_default(),
                    ),
                    None => match policy_rule {
                        Some(i) => (
                            "SuccessPolicy".to_string(),
                            format!("Matched rules at index {i}"),
                        ),
                        None => (
                            "CompletionsReached".to_string(),
                            "Reached expected number of succeeded pods".to_string(),
                        ),
                    },
                };
            Some(("SuccessCriteriaMet", reason, message))
        } else {
            None
        };
        if let Some((type_, reason, message)) = &decision
            && !is_true(&status, type_)
        {
            set_condition(&mut status, type_, "True", reason, message);
            if !active.is_empty() {
                let mut decided = status.clone();
                decided.uncounted_terminated_pods = Some(uncounted.clone());
                job = self.write_status(&job, &key_str, &decided).await?;
            }
        }

        // 3. Pods.
        let mut requeue = deadline_left.map(|s| Duration::from_secs(s.max(1) as u64));
        let mut deleted: Vec<Arc<Pod>> = Vec::new();
        // Pods being stopped that have not ended yet.
        let stopping: Vec<Arc<Pod>> = pods
            .iter()
            .filter(|p| {
                p.metadata.deletion_timestamp.is_some()
                    && !matches!(phase(p), "Succeeded" | "Failed")
            })
            .cloned()
            .collect();
        let holding: &[Arc<Pod>] = if spec.pod_replacement_policy.as_deref() == Some("Failed") {
            &stopping
        } else {
            &[]
        };
        let working = ActivePods {
            job: &job,
            key: &key_str,
            api: &pod_api,
            active: &active,
            holding,
        };
        if failure.is_some() || success || suspended {
            deleted = self.delete_pods(&working, active.len()).await?;
            if failure.is_some() {
                for p in &deleted {
                    uncounted
                        .failed
                        .get_or_insert_with(Vec::new)
                        .push(p.metadata.uid.clone().unwrap_or_default());
                }
            }
            to_unfinalize.extend(deleted.iter().cloned());
        } else if self.expectations.satisfied(&key_str) {
            requeue = self
                .manage(
                    &working,
                    &Indexes {
                        completed: &completed,
                        failed: &failed_indexes,
                        failures: per_index.map(|_| &index_failures),
                    },
                    succeeded_total,
                    parallelism,
                )
                .await?
                .or(requeue);
        }
        let still_active = active.len() - deleted.len();
        // Pods stopped by this sync are terminating too: the Job is Complete
        // or Failed only once they are gone, as upstream's.
        let terminating = stopping
            .iter()
            .filter(|p| !has_finalizer(p) || success_met)
            .count()
            + deleted.len();

        // 4. Status: first record uncounted pods, then release them, then count.
        let ready = active.iter().filter(|p| is_ready(p)).count() as i32;
        status.active = Some(still_active as i32);
        status.ready = Some(if deleted.is_empty() { ready } else { 0 });
        status.terminating = Some(terminating as i32);
        if !to_unfinalize.is_empty() {
            status.uncounted_terminated_pods = Some(uncounted.clone());
            job = self.write_status(&job, &key_str, &status).await?;
            self.remove_finalizers(&key_str, &pod_api, &to_unfinalize)
                .await?;
        }
        status.succeeded = Some(succeeded_total);
        status.failed = Some(status.failed.unwrap_or(0) + count(&uncounted.failed));
        status.uncounted_terminated_pods = Some(UncountedTerminatedPods::default());
        let nothing_running = still_active == 0 && terminating == 0;
        // The final condition, once nothing of the Job runs any more. Its
        // event is told only once the status holding it is written: a sync
        // that read a stale Job has its write refused (a conflict) and must
        // not tell of the end a second time.
        let mut finished = None;
        if let Some((interim, reason, message)) = &decision
            && nothing_running
        {
            let failed = *interim == "FailureTarget";
            let last = if failed { "Failed" } else { "Complete" };
            if !is_true(&status, last) {
                set_condition(&mut status, last, "True", reason, message);
                if !failed {
                    status.completion_time = Some(now());
                }
                finished = Some((failed, reason.clone(), message.clone()));
            }
        }
        if Some(&status) != job.status.as_ref() {
            job = self.write_status(&job, &key_str, &status).await?;
        }
        match finished {
            Some((true, reason, message)) => {
                self.events
                    .warning(&object_reference(&job), &reason, "Fail", message);
            }
            Some((false, _, _)) => {
                self.events.normal(
                    &object_reference(&job),
                    "Completed",
                    "Complete",
                    "Job completed",
                );
            }
            None => {}
        }
        if finished_at(&status).is_some() {
            return self.expire(&job, &key_str).await;
        }
        Ok(match requeue {
            Some(d) => Action::RequeueAfter(d),
            None => Action::Done,
        })
    }
}

impl Syncer {
    /// A syncer over the given caches.
    pub(super) fn new(
        client: Client,
        jobs: Arc<Cache<Job>>,
        pods: Arc<Cache<Pod>>,
        expectations: Expectations,
        events: EventRecorder,
    ) -> Self {
        Self {
            client,
            jobs,
            pods,
            expectations,
            events,
            finalized: Mutex::default(),
            backoff: Mutex::default(),
            index_backoff: Mutex::default(),
        }
    }

    fn api_error(key: &str, what: &'static str, source: kube::Error) -> WorkloadSyncError {
        WriteFailed::new("job", key, what, source).into()
    }

    fn note_outcomes(&self, key: &str, succeeded: usize, failed: usize) {
        let mut backoff = lock(&self.backoff);
        if succeeded > 0 {
            backoff.remove(key);
        }
        if failed > 0 {
            let entry = backoff.entry(key.to_owned()).or_insert(Backoff {
                failures: 0,
                last: Instant::now(),
            });
            entry.failures += failed as u32;
            entry.last = Instant::now();
        }
    }

    fn note_index_failures(&self, key: &str, indexes: &[i32]) {
        if indexes.is_empty() {
            return;
        }
        let mut backoff = lock(&self.index_backoff);
        let last = backoff.entry(key.to_owned()).or_default();
        for i in indexes {
            last.insert(*i, Instant::now());
        }
    }

    /// How long to wait before replacing failed pods (None: go ahead).
    fn backoff_left(&self, key: &str) -> Option<Duration> {
        let b = *lock(&self.backoff).get(key)?;
        remaining(b.failures, b.last)
    }

    /// How long index `index`, failed `failures` times so far, waits before
    /// it runs again (None: go ahead).
    fn index_backoff_left(&self, key: &str, index: i32, failures: i32) -> Option<Duration> {
        let last = *lock(&self.index_backoff).get(key)?.get(&index)?;
        remaining(u32::try_from(failures).unwrap_or(0), last)
    }

    /// Creates or deletes pods towards the wanted number of active ones.
    /// Returns when to look again (failure backoff), if needed.
    async fn manage(
        &self,
        working: &ActivePods<'_>,
        done: &Indexes<'_>,
        succeeded: i32,
        parallelism: i32,
    ) -> Result<Option<Duration>, WorkloadSyncError> {
        let completed = done.completed;
        let &ActivePods {
            job,
            key,
            api,
            active,
            holding,
        } = working;
        let completions = job.spec.as_ref().and_then(|s| s.completions);
        let failed = done.failed.len() as i32;
        let want = match completions {
            None if succeeded > 0 => 0,
            None => parallelism,
            Some(c) => parallelism.min((c - succeeded - failed).max(0)),
        } as usize;
        if active.len() > want {
            self.delete_pods(working, active.len() - want).await?;
            return Ok(None);
        }
        let have = active.len() + holding.len();
        if have >= want {
            return Ok(None);
        }
        // With `backoffLimitPerIndex` each index waits out its own
        // backoff; otherwise the Job's failures hold back every new pod.
        if done.failures.is_none()
            && let Some(wait) = self.backoff_left(key)
        {
            return Ok(Some(wait));
        }
        let mut wait: Option<Duration> = None;
        let count = (want - have).min(BURST_REPLICAS);
        let new_pods: Vec<Pod> = if is_indexed(job) {
            let c = completions.unwrap_or(0);
            let running: BTreeSet<i32> = (active.iter().chain(holding))
                .filter_map(|p| index_of(p, c))
                .collect();
            let pending: Vec<i32> = (0..c)
                .filter(|i| {
                    !completed.contains(i) && !done.failed.contains(i) && !running.contains(i)
                })
                .take(count)
                .collect();
            let ready: Vec<i32> = match done.failures {
                Some(failures) => pending
                    .into_iter()
                    .filter(|i| {
                        let failed = failures.get(i).copied().unwrap_or(0);
                        match self.index_backoff_left(key, *i, failed) {
                            Some(left) => {
                                wait = Some(wait.map_or(left, |w| w.min(left)));
                                false
                            }
                            None => true,
                        }
                    })
                    .collect(),
                None => pending,
            };
            ready
                .into_iter()
                .map(|i| {
                    let mut pod = new_pod(job, Some(i));
                    if let Some(failures) = done.failures {
                        let before = failures.get(&i).copied().unwrap_or(0);
                        pod.metadata
                            .annotations
                            .get_or_insert_with(Default::default)
                            .insert(policies::INDEX_FAILURE_COUNT.into(), before.to_string());
                    }
                    pod
                })
                .collect()
        } else {
            (0..count).map(|_| new_pod(job, None)).collect()
        };
        let error = create_pods(
            api,
            &self.events,
            &self.expectations,
            key,
            &object_reference(job),
            new_pods,
        )
        .await;
        match error {
            Some(source) => Err(Self::api_error(key, "creating pods", source)),
            None => Ok(wait),
        }
    }

    /// Deletes `count` of the active pods (least useful first).
    async fn delete_pods(
        &self,
        working: &ActivePods<'_>,
        count: usize,
    ) -> Result<Vec<Arc<Pod>>, WorkloadSyncError> {
        let victims = pods_to_delete(working.active, working.active, count);
        let regarding = object_reference(working.job);
        crate::pod_control::delete_pods(
            working.api,
            &self.events,
            &self.expectations,
            working.key,
            &regarding,
            &victims,
        )
        .await?;
        Ok(victims)
    }

    /// Releases the pod `key` (a pod's key, not a Job's) when it carries the
    /// tracking finalizer but names no controller at all — its Job was
    /// deleted with orphan propagation, or someone removed the reference:
    /// no Job will ever count it. A pod that has a controller by now (adopted
    /// again) is left alone, as upstream's orphan-pod sync does.
    pub(super) async fn sync_ownerless(&self, key: ObjectKey) -> Result<Action, WorkloadSyncError> {
        let ns = key.namespace.clone().unwrap_or_default();
        let Some(pod) = self.pods.get(&ns, &key.name) else {
            return Ok(Action::Done);
        };
        if !has_finalizer(&pod) || controller_ref(&pod.metadata).is_some() {
            return Ok(Action::Done);
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        self.remove_finalizers(&key.to_string(), &api, &[pod])
            .await?;
        Ok(Action::Done)
    }

    /// Removes the tracking finalizer from pods whose controller is a Job
    /// named `name` other than the live one (uid `live`; `None` when no Job
    /// of that name exists): nobody will count them, and the finalizer
    /// would keep them, and their namespace, from ever going.
    async fn release_orphans(
        &self,
        key: &str,
        ns: &str,
        name: &str,
        live: Option<&str>,
    ) -> Result<(), WorkloadSyncError> {
        let orphans: Vec<Arc<Pod>> = self
            .pods
            .list_namespace(ns)
            .into_iter()
            .filter(|p| {
                has_finalizer(p)
                    && controller_ref(&p.metadata).is_some_and(|r| {
                        r.kind == "Job" && r.name == name && Some(r.uid.as_str()) != live
                    })
            })
            .collect();
        if orphans.is_empty() {
            return Ok(());
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        self.remove_finalizers(key, &api, &orphans).await
    }

    async fn remove_finalizers(
        &self,
        key: &str,
        api: &Api<Pod>,
        pods: &[Arc<Pod>],
    ) -> Result<(), WorkloadSyncError> {
        // Upstream's patch: it removes only the tracking finalizer, whatever
        // else changed meanwhile (a pod being stopped changes often), so it
        // needs no fresh copy and meets no conflict.
        let patch = json!({"metadata": {
            "$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER],
        }});
        for pod in pods {
            let result = api
                .patch(
                    &pod.name_any(),
                    &PatchParams::default(),
                    &Patch::Strategic(&patch),
                )
                .await;
            match result {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(Self::api_error(key, "removing a finalizer", e)),
            }
            lock(&self.finalized)
                .entry(key.to_owned())
                .or_default()
                .insert(pod.metadata.uid.clone().unwrap_or_default());
        }
        Ok(())
    }

    async fn write_status(
        &self,
        job: &Job,
        key: &str,
        status: &JobStatus,
    ) -> Result<Job, WorkloadSyncError> {
        let api: Api<Job> =
            Api::namespaced(self.client.clone(), &job.namespace().unwrap_or_default());
        let mut body = job.clone();
        body.status = Some(status.clone());
        api.replace_status(&job.name_any(), &PostParams::default(), &body)
            .await
            .map_err(|e| Self::api_error(key, "updating status", e))
    }

    /// Deletes a finished Job once its ttlSecondsAfterFinished has passed.
    async fn expire(&self, job: &Job, key: &str) -> Result<Action, WorkloadSyncError> {
        let Some(ttl) = job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished) else {
            return Ok(Action::Done);
        };
        let Some(at) = job.status.as_ref().and_then(finished_at) else {
            return Ok(Action::Done);
        };
        let left = i64::from(ttl) - seconds_between(&at, &now());
        if left > 0 {
            return Ok(Action::RequeueAfter(Duration::from_secs(left as u64)));
        }
        if job.metadata.deletion_timestamp.is_some() {
            return Ok(Action::Done);
        }
        let api: Api<Job> =
            Api::namespaced(self.client.clone(), &job.namespace().unwrap_or_default());
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            preconditions: Some(kube::api::Preconditions {
                uid: job.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        done_or_gone(api.delete(&job.name_any(), &params).await, |e| {
            Self::api_error(key, "deleting the expired job", e)
        })
    }
}
