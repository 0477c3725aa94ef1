//! The Job controller over the real API server; the test plays the node by
//! setting pod phases.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::support::{TestCluster, create_object, eventually, merge_patch, merge_patch_status};
use super::workload_helpers::{
    WAIT, condition, create_workload, get_workload, pods_owned_by, set_pod_status, template,
    wait_for_condition, wait_for_events,
};

async fn create(client: &Client, name: &str, spec: Value) -> Job {
    let mut full = json!({
        "template": template(json!({"app": name}), "busybox"),
    });
    full["template"]["spec"]["restartPolicy"] = json!("Never");
    create_workload(client, name, full, spec).await
}

/// A cluster running the Job controller with the Job `name` of `spec`
/// created, where most tests begin: the cluster, a client and the Job's uid.
async fn start_with_job(name: &str, spec: Value) -> (TestCluster, Client, String) {
    let (cluster, client) = TestCluster::start_with_client(&["job"]).await;
    let uid = create(&client, name, spec).await.uid().unwrap();
    (cluster, client, uid)
}

/// The Job `name` in `default`, as the API has it now.
async fn get(client: &Client, name: &str) -> Job {
    get_workload(client, name).await
}

fn running(pods: &[Pod]) -> Vec<&Pod> {
    pods.iter()
        .filter(|p| {
            p.metadata.deletion_timestamp.is_none()
                && !matches!(
                    p.status.as_ref().and_then(|s| s.phase.as_deref()),
                    Some("Succeeded" | "Failed")
                )
        })
        .collect()
}

async fn wait_running(client: &Client, uid: &str, count: usize) -> Vec<Pod> {
    eventually(WAIT, &format!("{count} running pods"), || async {
        let pods = pods_owned_by(client, "default", uid).await;
        let r: Vec<Pod> = running(&pods).into_iter().cloned().collect();
        (r.len() == count).then_some(r)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_pods_to_completions_with_parallelism() {
    let (cluster, client, uid) =
        start_with_job("work", json!({"completions": 3, "parallelism": 2})).await;
    let pods = wait_running(&client, &uid, 2).await;
    for pod in &pods {
        assert!(pod.name_any().starts_with("work-"));
        assert_eq!(pod.labels()["job-name"], "work");
        assert_eq!(pod.labels()["batch.kubernetes.io/controller-uid"], uid);
        assert!(
            pod.finalizers()
                .iter()
                .any(|f| f == "batch.kubernetes.io/job-tracking")
        );
    }
    eventually(WAIT, "active 2 and startTime", || async {
        let s = get(&client, "work").await.status?;
        (s.active == Some(2) && s.start_time.is_some()).then_some(())
    })
    .await;
    set_pod_status(&client, "default", &pods[0].name_any(), "Succeeded", false).await;
    // One more pod replaces the finished one; never more than parallelism.
    let next = eventually(WAIT, "third pod", || async {
        let all = pods_owned_by(&client, "default", &uid).await;
        let r = running(&all);
        assert!(r.len() <= 2, "parallelism exceeded");
        (all.len() == 3 && r.len() == 2).then(|| r.iter().map(|p| p.name_any()).collect::<Vec<_>>())
    })
    .await;
    for name in next {
        set_pod_status(&client, "default", &name, "Succeeded", false).await;
    }
    let job: Job =
        wait_for_condition(&client, "work", "Complete", ("True", "CompletionsReached")).await;
    let s = job.status.clone().unwrap();
    assert_eq!(
        (s.succeeded, s.failed.unwrap_or(0), s.active.unwrap_or(0)),
        (Some(3), 0, 0)
    );
    assert!(s.completion_time.is_some());
    assert_eq!(condition(&job, "SuccessCriteriaMet").unwrap().0, "True");
    assert_eq!(
        pods_owned_by(&client, "default", &uid).await.len(),
        3,
        "no extra pods"
    );
    eventually(WAIT, "finalizers removed", || async {
        let all = pods_owned_by(&client, "default", &uid).await;
        all.iter().all(|p| p.finalizers().is_empty()).then_some(())
    })
    .await;
    let reasons = ["Completed", "SuccessfulCreate"];
    wait_for_events(&client, "work", &reasons).await;
    // The end is told once: a sync that read the Job before its Complete
    // status was written does not tell it again (as a second event or a
    // series of two).
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), "default");
    let completed: Vec<_> = events
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Completed"))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("work"))
        .collect();
    assert_eq!(completed.len(), 1, "{completed:?}");
    assert!(completed[0].series.is_none(), "{:?}", completed[0]);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_pods_are_retried_until_the_backoff_limit() {
    let (cluster, client, uid) = start_with_job("flaky", json!({"backoffLimit": 1})).await;
    let first = wait_running(&client, &uid, 1).await;
    set_pod_status(&client, "default", &first[0].name_any(), "Failed", false).await;
    // The replacement comes after upstream's 10 s failure backoff.
    let second = eventually(std::time::Duration::from_secs(30), "retry pod", || async {
        let pods = pods_owned_by(&client, "default", &uid).await;
        let r: Vec<Pod> = running(&pods).into_iter().cloned().collect();
        (r.len() == 1 && r[0].name_any() != first[0].name_any()).then_some(r)
    })
    .await;
    assert_eq!(get(&client, "flaky").await.status.unwrap().failed, Some(1));
    set_pod_status(&client, "default", &second[0].name_any(), "Failed", false).await;
    let job: Job =
        wait_for_condition(&client, "flaky", "Failed", ("True", "BackoffLimitExceeded")).await;
    assert_eq!(
        condition(&job, "FailureTarget").unwrap().1,
        "BackoffLimitExceeded"
    );
    assert_eq!(job.status.unwrap().failed, Some(2));
    assert_eq!(pods_owned_by(&client, "default", &uid).await.len(), 2);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexed_jobs_give_each_pod_an_index_and_track_completed_indexes() {
    let (cluster, client, uid) = start_with_job(
        "idx",
        json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed"}),
    )
    .await;
    let pods = wait_running(&client, &uid, 3).await;
    let mut by_index = std::collections::BTreeMap::new();
    for pod in &pods {
        let index = pod.annotations()["batch.kubernetes.io/job-completion-index"].clone();
        assert_eq!(
            pod.labels()["batch.kubernetes.io/job-completion-index"],
            index
        );
        assert_eq!(
            pod.spec.as_ref().unwrap().hostname.as_deref(),
            Some(format!("idx-{index}").as_str())
        );
        assert!(pod.name_any().starts_with(&format!("idx-{index}-")));
        by_index.insert(index, pod.name_any());
    }
    assert_eq!(
        by_index.keys().cloned().collect::<Vec<_>>(),
        ["0", "1", "2"]
    );
    set_pod_status(&client, "default", &by_index["1"], "Succeeded", false).await;
    eventually(WAIT, "index 1 completed", || async {
        let s = get(&client, "idx").await.status?;
        (s.completed_indexes.as_deref() == Some("1") && s.succeeded == Some(1)).then_some(())
    })
    .await;
    set_pod_status(&client, "default", &by_index["0"], "Succeeded", false).await;
    set_pod_status(&client, "default", &by_index["2"], "Succeeded", false).await;
    let job = eventually(WAIT, "complete", || async {
        let j = get(&client, "idx").await;
        (condition(&j, "Complete").is_some_and(|c| c.0 == "True")).then_some(j)
    })
    .await;
    assert_eq!(
        job.status.unwrap().completed_indexes.as_deref(),
        Some("0-2")
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn active_deadline_fails_the_job_and_removes_its_pods() {
    let (cluster, client, uid) = start_with_job(
        "late",
        json!({"parallelism": 2, "completions": 4, "activeDeadlineSeconds": 2}),
    )
    .await;
    wait_running(&client, &uid, 2).await;
    let job: Job =
        wait_for_condition(&client, "late", "Failed", ("True", "DeadlineExceeded")).await;
    let s = job.status.unwrap();
    assert_eq!(s.active.unwrap_or(0), 0);
    eventually(WAIT, "pods removed", || async {
        pods_owned_by(&client, "default", &uid)
            .await
            .is_empty()
            .then_some(())
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspended_jobs_run_nothing_until_resumed() {
    let (cluster, client, uid) = start_with_job(
        "later",
        json!({"suspend": true, "parallelism": 2, "completions": 2}),
    )
    .await;
    wait_for_condition::<Job>(&client, "later", "Suspended", ("True", "JobSuspended")).await;
    assert!(pods_owned_by(&client, "default", &uid).await.is_empty());
    merge_patch(
        &Api::<Job>::namespaced(client.clone(), "default"),
        "later",
        json!({"spec": {"suspend": false}}),
    )
    .await;
    wait_running(&client, &uid, 2).await;
    // The sync that creates the pods writes the condition after them.
    let j: Job = wait_for_condition(&client, "later", "Suspended", ("False", "JobResumed")).await;
    assert!(j.status.unwrap().start_time.is_some());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_jobs_are_deleted_after_their_ttl() {
    let (cluster, client) = TestCluster::start_with_client(&["job", "garbage-collector"]).await;
    let uid = create(&client, "brief", json!({"ttlSecondsAfterFinished": 1}))
        .await
        .uid()
        .unwrap();
    let pods = wait_running(&client, &uid, 1).await;
    set_pod_status(&client, "default", &pods[0].name_any(), "Succeeded", false).await;
    eventually(WAIT, "job deleted after ttl", || async {
        match Api::<Job>::namespaced(client.clone(), "default")
            .get("brief")
            .await
        {
            Err(kube::Error::Api(s)) if s.code == 404 => Some(()),
            Ok(j) if j.metadata.deletion_timestamp.is_some() => Some(()),
            _ => None,
        }
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_of_a_deleted_job_lose_the_tracking_finalizer() {
    let (cluster, client, uid) =
        start_with_job("gone", json!({"parallelism": 2, "completions": 2})).await;
    let pods = wait_running(&client, &uid, 2).await;
    let tracked = |p: &Pod| {
        p.finalizers()
            .iter()
            .any(|f| f == "batch.kubernetes.io/job-tracking")
    };
    assert!(pods.iter().all(tracked));
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    jobs.delete("gone", &Default::default()).await.unwrap();
    // Deleting a pod (as the garbage collector would) now ends with it gone
    // instead of Terminating for good.
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), "default");
    pod_api
        .delete(&pods[0].name_any(), &Default::default())
        .await
        .unwrap();
    eventually(WAIT, "the deleted pod gone, the other released", || async {
        let first = pod_api.get_opt(&pods[0].name_any()).await.ok()?;
        let second = pod_api.get(&pods[1].name_any()).await.ok()?;
        (first.is_none() && !tracked(&second)).then_some(())
    })
    .await;

    // A tracked pod naming a Job that no longer exists (or never did under
    // that uid) is released when it is seen, with no Job event at all.
    create_object(
        &pod_api,
        json!({
            "metadata": {"name": "stray", "finalizers": ["batch.kubernetes.io/job-tracking"],
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "ghost",
                    "uid": "00000000-0000-0000-0000-000000000000", "controller": true}]},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}
        }),
    )
    .await;
    eventually(WAIT, "the stray pod released", || async {
        let pod = pod_api.get("stray").await.ok()?;
        (!tracked(&pod)).then_some(())
    })
    .await;

    // A tracked pod naming no controller at all (its Job deleted with
    // orphan propagation: the garbage collector dropped the reference) is
    // released too, and keeps running; other finalizers stay.
    create_object(
        &pod_api,
        json!({
            "metadata": {"name": "ownerless",
                "finalizers": ["batch.kubernetes.io/job-tracking", "skiff.test/keep"]},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}
        }),
    )
    .await;
    let released = eventually(WAIT, "the ownerless pod released", || async {
        let pod = pod_api.get("ownerless").await.ok()?;
        (!tracked(&pod)).then_some(pod)
    })
    .await;
    assert_eq!(released.finalizers(), ["skiff.test/keep"]);
    assert!(released.metadata.deletion_timestamp.is_none());
    cluster.shutdown().await;
}

/// The message of the Job's condition `type_`.
fn condition_message(job: &Job, type_: &str) -> String {
    (job.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten()))
    .find(|c| c.type_ == type_)
    .and_then(|c| c.message.clone())
    .unwrap_or_default()
}

/// Plays the node: pod `name` failed, its container `main` exiting with
/// `exit`, with the pod `conditions` given.
async fn fail_pod(client: &Client, name: &str, exit: i32, conditions: Value) {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let status = json!({"status": {"phase": "Failed", "conditions": conditions,
        "containerStatuses": [{"name": "main", "image": "busybox", "imageID": "", "ready": false,
            "restartCount": 0, "state": {"terminated": {"exitCode": exit}}}]}});
    api.patch_status(name, &Default::default(), &kube::api::Patch::Merge(status))
        .await
        .expect("pod status");
}

/// An Indexed Job `name` of three pods, each index allowed no failure,
/// that succeeds once indexes 0 and 1 did; its pods are bound to a node,
/// so a stopped one is terminating for its grace period (the test plays
/// no node to end it). Returns once its three pods run.
async fn start_with_success_policy(name: &str) -> (TestCluster, Client, String, Vec<Pod>) {
    let mut on_node = template(json!({"app": name}), "busybox");
    on_node["spec"]["restartPolicy"] = json!("Never");
    on_node["spec"]["nodeName"] = json!("n1");
    let (cluster, client, uid) = start_with_job(
        name,
        json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed",
               "backoffLimitPerIndex": 0, "template": on_node,
               "successPolicy": {"rules": [{"succeededIndexes": "0,1"}]}}),
    )
    .await;
    let pods = wait_running(&client, &uid, 3).await;
    (cluster, client, uid, pods)
}

/// A pod's completion index.
fn index(pod: &Pod) -> String {
    pod.annotations()["batch.kubernetes.io/job-completion-index"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_success_policy_completes_an_indexed_job_once_its_indexes_succeeded() {
    let (cluster, client, uid, pods) = start_with_success_policy("early").await;
    for pod in pods.iter().filter(|p| index(p) != "2") {
        set_pod_status(&client, "default", &pod.name_any(), "Succeeded", false).await;
    }
    // Index 2 is still running; the rule is met, so it is stopped, and its
    // end does not count as a failure of its index.
    let stopped = eventually(WAIT, "index 2 stopped", || async {
        let pods = pods_owned_by(&client, "default", &uid).await;
        pods.into_iter()
            .find(|p| index(p) == "2" && p.metadata.deletion_timestamp.is_some())
    })
    .await;
    // The decision is recorded before any pod is stopped for it, so a sync
    // retried after a failed write finds it. Met, but not Complete while a
    // pod of it is still stopping.
    let met = get(&client, "early").await;
    assert_eq!(
        condition(&met, "SuccessCriteriaMet"),
        Some(("True".into(), "SuccessPolicy".into()))
    );
    assert_eq!(condition(&met, "Complete"), None);
    fail_pod(&client, &stopped.name_any(), 137, json!([])).await;
    let job: Job =
        wait_for_condition(&client, "early", "Complete", ("True", "SuccessPolicy")).await;
    assert_eq!(
        condition_message(&job, "Complete"),
        "Matched rules at index 0"
    );
    assert_eq!(
        condition(&job, "SuccessCriteriaMet"),
        Some(("True".into(), "SuccessPolicy".into()))
    );
    assert!(running(&pods_owned_by(&client, "default", &uid).await).is_empty());
    assert_eq!(job.status.unwrap().failed_indexes.as_deref(), Some(""));
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_stopped_after_the_success_criteria_were_met_are_not_failures_after_a_restart() {
    let (mut cluster, client, _, pods) = start_with_success_policy("met").await;
    let third = pods.iter().find(|p| index(p) == "2").unwrap().name_any();
    // What a sync leaves when it fails after recording its decision and
    // stopping index 2, before releasing any pod: the controller manager
    // stops there and starts again.
    cluster
        .restart_controllers(async {
            let done: Vec<String> = pods
                .iter()
                .filter(|p| index(p) != "2")
                .map(|p| p.uid().unwrap())
                .collect();
            for pod in pods.iter().filter(|p| index(p) != "2") {
                set_pod_status(&client, "default", &pod.name_any(), "Succeeded", false).await;
            }
            let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
            let now = k8s_openapi::jiff::Timestamp::now().to_string();
            merge_patch_status(
                &jobs,
                "met",
                json!({"status": {
                "completedIndexes": "0,1",
                "uncountedTerminatedPods": {"succeeded": done},
                "conditions": [{"type": "SuccessCriteriaMet", "status": "True",
                    "reason": "SuccessPolicy", "message": "Matched rules at index 0",
                    "lastProbeTime": now, "lastTransitionTime": now}]}}),
            )
            .await;
            let api: Api<Pod> = Api::namespaced(client.clone(), "default");
            api.delete(&third, &Default::default())
                .await
                .expect("delete");
        })
        .await;
    // The stopped pod is released without counting as a failure of its
    // index, and the Job completes once it has ended.
    eventually(WAIT, "index 2's pod released", || async {
        let api: Api<Pod> = Api::namespaced(client.clone(), "default");
        let pod = api.get(&third).await.ok()?;
        pod.finalizers().is_empty().then_some(())
    })
    .await;
    fail_pod(&client, &third, 137, json!([])).await;
    let job: Job = wait_for_condition(&client, "met", "Complete", ("True", "SuccessPolicy")).await;
    let status = job.status.unwrap();
    assert_eq!(status.failed_indexes.as_deref(), Some(""));
    assert_eq!(status.failed.unwrap_or(0), 0);
    assert_eq!(status.succeeded, Some(2));
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_failure_policy_fails_the_job_at_once_or_ignores_the_failure() {
    let policy = json!({"backoffLimit": 6, "podFailurePolicy": {"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}});
    let (cluster, client, uid) = start_with_job("strict", policy).await;

    // A disrupted pod does not count: replaced at once, nothing failed.
    let first = wait_running(&client, &uid, 1).await;
    let disrupted = json!([{"type": "DisruptionTarget", "status": "True"}]);
    fail_pod(&client, &first[0].name_any(), 137, disrupted).await;
    let second = eventually(WAIT, "a replacement", || async {
        let r = wait_running(&client, &uid, 1).await;
        (r[0].name_any() != first[0].name_any()).then_some(r)
    })
    .await;
    assert_eq!(
        get(&client, "strict")
            .await
            .status
            .unwrap()
            .failed
            .unwrap_or(0),
        0
    );

    // Exit code 42 fails the Job, whatever backoffLimit leaves.
    fail_pod(&client, &second[0].name_any(), 42, json!([])).await;
    let job: Job =
        wait_for_condition(&client, "strict", "Failed", ("True", "PodFailurePolicy")).await;
    assert_eq!(
        condition_message(&job, "Failed"),
        format!(
            "Container main for pod default/{} failed with exit code 42 matching FailJob rule at index 1",
            second[0].name_any()
        )
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_limit_per_index_each_index_waits_out_its_own_backoff() {
    let spec = json!({"completions": 2, "parallelism": 2, "completionMode": "Indexed",
        "backoffLimitPerIndex": 2});
    let (cluster, client, uid) = start_with_job("own-backoff", spec).await;
    let pods = wait_running(&client, &uid, 2).await;
    let of = |i: &str| pods.iter().find(|p| index(p) == i).unwrap().name_any();
    fail_pod(&client, &of("0"), 1, json!([])).await;
    eventually(WAIT, "index 0's failure counted", || async {
        let status = get(&client, "own-backoff").await.status?;
        (status.failed == Some(1)).then_some(())
    })
    .await;
    // Another index succeeding does not end index 0's backoff (a Job-wide
    // backoff would: a success resets it).
    set_pod_status(&client, "default", &of("1"), "Succeeded", false).await;
    eventually(WAIT, "index 1 completed", || async {
        let status = get(&client, "own-backoff").await.status?;
        (status.completed_indexes.as_deref() == Some("1")).then_some(())
    })
    .await;
    let index_0_running = || async {
        let pods = pods_owned_by(&client, "default", &uid).await;
        running(&pods).into_iter().any(|p| index(p) == "0")
    };
    for _ in 0..20 {
        assert!(
            !index_0_running().await,
            "index 0 ran again within its backoff"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    eventually(
        std::time::Duration::from_secs(30),
        "index 0 again",
        || async { index_0_running().await.then_some(()) },
    )
    .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_index_has_its_own_backoff_limit() {
    let spec = json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed",
        "backoffLimitPerIndex": 1,
        "podFailurePolicy": {"rules": [
            {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [42]}}]}});
    let (cluster, client, uid) = start_with_job("per-index", spec).await;
    let failures = |p: &Pod| p.annotations()["batch.kubernetes.io/job-index-failure-count"].clone();
    let pods = wait_running(&client, &uid, 3).await;
    assert!(pods.iter().all(|p| failures(p) == "0"));
    let of = |i: &str| pods.iter().find(|p| index(p) == i).unwrap().name_any();

    // Index 0 fails once (within its limit of 1) and runs again, counted;
    // index 1 fails by a FailIndex rule and never runs again.
    fail_pod(&client, &of("0"), 1, json!([])).await;
    fail_pod(&client, &of("1"), 42, json!([])).await;
    // After index 0's own failure backoff of 10 s.
    let retried = eventually(
        std::time::Duration::from_secs(60),
        "index 0 again",
        || async {
            let pods = pods_owned_by(&client, "default", &uid).await;
            running(&pods)
                .into_iter()
                .find(|p| index(p) == "0")
                .cloned()
        },
    )
    .await;
    assert_eq!(failures(&retried), "1");
    let status = get(&client, "per-index").await.status.unwrap();
    assert_eq!(status.failed_indexes.as_deref(), Some("1"));
    assert!(
        running(&pods_owned_by(&client, "default", &uid).await)
            .iter()
            .all(|p| index(p) != "1")
    );

    // The others succeed: the Job fails for its failed index.
    set_pod_status(&client, "default", &retried.name_any(), "Succeeded", false).await;
    set_pod_status(&client, "default", &of("2"), "Succeeded", false).await;
    let job: Job =
        wait_for_condition(&client, "per-index", "Failed", ("True", "FailedIndexes")).await;
    let status = job.status.unwrap();
    assert_eq!(status.completed_indexes.as_deref(), Some("0,2"));
    assert_eq!(status.failed_indexes.as_deref(), Some("1"));

    // A cap on failed indexes fails the Job as soon as it is passed.
    let capped = json!({"completions": 2, "parallelism": 2, "completionMode": "Indexed",
        "backoffLimitPerIndex": 0, "maxFailedIndexes": 0});
    let capped_uid = create(&client, "capped", capped).await.uid().unwrap();
    let pods = wait_running(&client, &capped_uid, 2).await;
    fail_pod(&client, &pods[0].name_any(), 1, json!([])).await;
    wait_for_condition::<Job>(
        &client,
        "capped",
        "Failed",
        ("True", "MaxFailedIndexesExceeded"),
    )
    .await;
    assert!(running(&pods_owned_by(&client, "default", &capped_uid).await).is_empty());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_failure_policy_a_pod_is_replaced_only_once_it_failed() {
    // Bound to a node, so a deleted pod stays terminating until the test,
    // playing the node, ends it.
    let mut on_node = template(json!({"app": "patient"}), "busybox");
    on_node["spec"]["restartPolicy"] = json!("Never");
    on_node["spec"]["nodeName"] = json!("n1");
    let spec = json!({"template": on_node, "podFailurePolicy": {"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}});
    let (cluster, client, uid) = start_with_job("patient", spec).await;
    let job = get(&client, "patient").await;
    assert_eq!(
        job.spec.unwrap().pod_replacement_policy.as_deref(),
        Some("Failed")
    );
    let first = wait_running(&client, &uid, 1).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.delete(&first[0].name_any(), &Default::default())
        .await
        .expect("delete");
    // Still terminating: its place is held, nothing else runs.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let owned = pods_owned_by(&client, "default", &uid).await;
    assert_eq!(
        owned.len(),
        1,
        "{:?}",
        owned.iter().map(|p| p.name_any()).collect::<Vec<_>>()
    );
    // It ends, disrupted: the failure is ignored and a new pod comes.
    let disrupted = json!([{"type": "DisruptionTarget", "status": "True"}]);
    fail_pod(&client, &first[0].name_any(), 137, disrupted).await;
    let second = wait_running(&client, &uid, 1).await;
    assert_ne!(second[0].name_any(), first[0].name_any());
    assert_eq!(
        get(&client, "patient")
            .await
            .status
            .unwrap()
            .failed
            .unwrap_or(0),
        0
    );
    cluster.shutdown().await;
}
