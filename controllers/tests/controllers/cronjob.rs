//! The CronJob controller over the real API server. Schedule arithmetic is
//! unit-tested next to the code; here one due run is observed end to end.

use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use serde_json::json;

use super::support::{TestCluster, eventually, list_all, merge_patch_status};
use super::workload_helpers::{WAIT, assert_event, create_workload, event_about, wait_for_events};

/// Makes a run of `name` due now: the last one three minutes ago.
async fn due_now(api: &Api<CronJob>, name: &str) {
    let three_minutes_ago = jiff::Timestamp::now() - jiff::SignedDuration::from_mins(3);
    merge_patch_status(
        api,
        name,
        json!({"status": {"lastScheduleTime": three_minutes_ago.to_string()}}),
    )
    .await;
}

/// The spec of a CronJob on `schedule` whose Jobs run one busybox
/// container once.
fn one_shot(schedule: &str) -> serde_json::Value {
    json!({
        "schedule": schedule,
        "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]
        }}}}
    })
}

/// Suspends or resumes CronJob `name`.
async fn suspend(api: &Api<CronJob>, name: &str, on: bool) {
    let patch = kube::api::Patch::Merge(json!({"spec": {"suspend": on}}));
    api.patch(name, &Default::default(), &patch).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_due_schedule_starts_a_job_and_tracks_it_to_success() {
    let (cluster, client) = TestCluster::start_with_client(&["cronjob"]).await;
    let spec = json!({
        "schedule": "* * * * *",
        "concurrencyPolicy": "Forbid",
        "jobTemplate": {
            "metadata": {"labels": {"team": "ops"}},
            "spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox"}]
            }}}
        }
    });
    create_workload::<CronJob>(&client, "tick", spec, json!({})).await;
    let api: Api<CronJob> = Api::namespaced(client.clone(), "default");
    due_now(&api, "tick").await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let job = eventually(WAIT, "a job", || async {
        jobs.list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .next()
    })
    .await;
    let now_minutes = jiff::Timestamp::now().as_second() / 60;
    let minutes: i64 = job
        .name_any()
        .strip_prefix("tick-")
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (now_minutes - 1..=now_minutes).contains(&minutes),
        "{} vs {now_minutes}",
        job.name_any()
    );
    assert_eq!(job.labels()["team"], "ops");
    assert_eq!(job.owner_references()[0].kind, "CronJob");
    assert!(
        job.annotations()
            .contains_key("batch.kubernetes.io/cronjob-scheduled-timestamp")
    );
    let status = eventually(WAIT, "active job in status", || async {
        let s = api.get("tick").await.ok()?.status?;
        (s.active.as_ref()?.len() == 1).then_some(s)
    })
    .await;
    assert_eq!(status.active.unwrap()[0].name, Some(job.name_any()));
    assert_eq!(
        status.last_schedule_time.unwrap().0.as_second(),
        minutes * 60,
        "lastScheduleTime is the scheduled minute"
    );
    // The job finishes (the job controller is not running: set its status).
    let done = jiff::Timestamp::now().to_string();
    merge_patch_status(
        &jobs,
        &job.name_any(),
        json!({"status": {
            "startTime": done, "completionTime": done, "succeeded": 1,
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": done},
                {"type": "Complete", "status": "True", "lastTransitionTime": done}
            ]
        }}),
    )
    .await;
    eventually(WAIT, "success recorded", || async {
        let s = api.get("tick").await.ok()?.status?;
        (s.active.is_none() && s.last_successful_time.is_some()).then_some(())
    })
    .await;
    let reasons = ["SuccessfulCreate", "SawCompletedJob"];
    wait_for_events(&client, "tick", &reasons).await;
    assert_eq!(list_all(&jobs).await.len(), 1, "one run only");
    cluster.shutdown().await;
}

/// `@every` counts its interval from the last scheduled time, as upstream's
/// controller does: the run due is the last one that interval lands on, not
/// the time the controller happens to look.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_every_schedule_runs_its_interval_on_from_the_last_run() {
    let (cluster, client) = TestCluster::start_with_client(&["cronjob"]).await;
    create_workload::<CronJob>(&client, "every", one_shot("@every 1m"), json!({})).await;
    let api: Api<CronJob> = Api::namespaced(client.clone(), "default");
    // The last run 150 s ago: runs were due 90 s and 30 s ago.
    let last = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second() - 150).unwrap();
    merge_patch_status(
        &api,
        "every",
        json!({"status": {"lastScheduleTime": last.to_string()}}),
    )
    .await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let job = eventually(WAIT, "a job", || async {
        list_all(&jobs).await.into_iter().next()
    })
    .await;
    let scheduled: jiff::Timestamp =
        job.annotations()["batch.kubernetes.io/cronjob-scheduled-timestamp"]
            .parse()
            .unwrap();
    assert_eq!(scheduled, last + jiff::SignedDuration::from_secs(120));
    let status = eventually(WAIT, "lastScheduleTime moved on", || async {
        let t = api.get("every").await.ok()?.status?.last_schedule_time?.0;
        (t != last).then_some(t)
    })
    .await;
    assert_eq!(status, scheduled);
    assert_eq!(list_all(&jobs).await.len(), 1, "one run for the one due");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_that_never_fires_is_reported_invalid() {
    let (cluster, client) = TestCluster::start_with_client(&["cronjob"]).await;
    create_workload::<CronJob>(&client, "never", one_shot("59 23 31 2 *"), json!({})).await;
    let event = event_about(&client, "never", "InvalidSchedule").await;
    assert_event(
        &event,
        "Warning",
        "invalid schedule: 59 23 31 2 * : time difference between two schedules is less than 1 second",
    );
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    assert!(list_all(&jobs).await.is_empty());
    cluster.shutdown().await;
}

/// A Job started by hand from a CronJob (`kubectl create job
/// --from=cronjob/…`: owned by it, as its controller) is reported but never
/// listed as active, as upstream's controller does: a `Forbid` policy still
/// starts the scheduled run beside it. A listed Job that is deleted leaves
/// the list as missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_started_by_hand_is_not_an_active_run() {
    let (cluster, client) = TestCluster::start_with_client(&["cronjob"]).await;
    let template = json!({"spec": {"template": {"spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "busybox"}]
    }}}});
    let spec = json!({
        "schedule": "* * * * *",
        "concurrencyPolicy": "Forbid",
        "suspend": true,
        "jobTemplate": template,
    });
    let cj = create_workload::<CronJob>(&client, "tick", spec, json!({})).await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let manual: Job = serde_json::from_value(json!({
        "metadata": {
            "name": "tick-manual",
            "annotations": {"cronjob.kubernetes.io/instantiate": "manual"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "tick",
                "uid": cj.uid().unwrap(), "controller": true}],
        },
        "spec": template["spec"],
    }))
    .unwrap();
    jobs.create(&Default::default(), &manual).await.unwrap();
    wait_for_events(&client, "tick", &["UnexpectedJob"]).await;
    let api: Api<CronJob> = Api::namespaced(client.clone(), "default");
    let status = api.get("tick").await.unwrap().status.unwrap_or_default();
    assert_eq!(status.active, None, "a job started by hand is not active");

    // A run is due (the last one three minutes ago): Forbid does not count
    // the job started by hand, so the scheduled one starts.
    due_now(&api, "tick").await;
    suspend(&api, "tick", false).await;
    let active = eventually(WAIT, "the scheduled run listed", || async {
        let active = api.get("tick").await.ok()?.status?.active?;
        (active.len() == 1).then_some(active)
    })
    .await;
    let scheduled = active[0].name.clone().unwrap();
    assert_ne!(scheduled, "tick-manual");
    assert_eq!(
        list_all(&jobs).await.len(),
        2,
        "{scheduled} beside tick-manual"
    );

    // Deleted, the listed run goes missing and leaves the list (suspended
    // first, so no next minute's run joins it meanwhile).
    suspend(&api, "tick", true).await;
    jobs.delete(&scheduled, &Default::default()).await.unwrap();
    wait_for_events(&client, "tick", &["MissingJob"]).await;
    eventually(WAIT, "an empty active list", || async {
        let status = api.get("tick").await.ok()?.status?;
        status.active.is_none().then_some(())
    })
    .await;
    cluster.shutdown().await;
}
