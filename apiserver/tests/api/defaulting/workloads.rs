//! apps/v1 and batch/v1: Deployments, ReplicaSets, StatefulSets,
//! DaemonSets, Jobs and CronJobs, with their pod templates (which get the
//! pod-spec defaults but none of a pod's admission).

use serde_json::{Value, json};

use super::{Case, run};

fn selector() -> Value {
    json!({"matchLabels": {"app": "w"}})
}

fn template() -> Value {
    json!({"metadata": {"labels": {"app": "w"}},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36",
            "resources": {"limits": {"cpu": "1"}}}]}})
}

/// The pod-template defaults every workload shares, under `at`.
fn template_defaults(at: &'static str) -> Vec<(&'static str, Value)> {
    let field = |f: &str| -> &'static str { Box::leak(format!("{at}{f}").into_boxed_str()) };
    vec![
        (field("/restartPolicy"), json!("Always")),
        (field("/dnsPolicy"), json!("ClusterFirst")),
        (field("/terminationGracePeriodSeconds"), json!(30)),
        (field("/schedulerName"), json!("default-scheduler")),
        (field("/securityContext"), json!({})),
        (
            field("/containers/0/terminationMessagePath"),
            json!("/dev/termination-log"),
        ),
        (
            field("/containers/0/imagePullPolicy"),
            json!("IfNotPresent"),
        ),
        // Admission-time pod defaults are not a template's.
        (field("/tolerations"), Value::Null),
        (field("/enableServiceLinks"), Value::Null),
        (field("/priority"), Value::Null),
        (field("/containers/0/resources/requests"), Value::Null),
        (field("/containers/0/resizePolicy"), Value::Null),
    ]
}

fn with(
    mut want: Vec<(&'static str, Value)>,
    more: Vec<(&'static str, Value)>,
) -> Vec<(&'static str, Value)> {
    want.extend(more);
    want
}

/// The apps/v1 workload `name` in `path` with nothing but a selector and
/// the template: each kind's minimal case, which gets the template's
/// defaults and the kind's own `more`.
fn minimal_apps(
    what: &'static str,
    path: &'static str,
    name: &str,
    more: Vec<(&'static str, Value)>,
) -> Case {
    Case {
        what,
        path,
        body: minimal_body(name),
        want: with(template_defaults("/spec/template/spec"), more),
    }
}

/// The minimal workload `name` given the `(pointer, strategy)` of a type
/// other than RollingUpdate: upstream keeps it as given, adding no
/// rollingUpdate parameters.
fn kept_strategy(
    what: &'static str,
    path: &'static str,
    name: &str,
    (pointer, strategy): (&'static str, Value),
) -> Case {
    let mut body = minimal_body(name);
    body["spec"][pointer.trim_start_matches("/spec/")] = strategy.clone();
    Case {
        what,
        path,
        body,
        want: vec![(pointer, strategy)],
    }
}

/// An apps/v1 workload `name` of only a selector and the template.
fn minimal_body(name: &str) -> Value {
    json!({"metadata": {"name": name},
        "spec": {"selector": selector(), "template": template()}})
}

#[tokio::test]
async fn apps_workloads_are_defaulted_as_upstream() {
    run(vec![
        minimal_apps(
            "a minimal deployment",
            "/apis/apps/v1/namespaces/default/deployments",
            "d",
            vec![
                ("/spec/replicas", json!(1)),
                ("/spec/revisionHistoryLimit", json!(10)),
                ("/spec/progressDeadlineSeconds", json!(600)),
                (
                    "/spec/strategy",
                    json!({"type": "RollingUpdate",
                        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
                ),
            ],
        ),
        kept_strategy(
            "a deployment that recreates",
            "/apis/apps/v1/namespaces/default/deployments",
            "d-recreate",
            ("/spec/strategy", json!({"type": "Recreate"})),
        ),
        minimal_apps(
            "a minimal replica set",
            "/apis/apps/v1/namespaces/default/replicasets",
            "rs",
            vec![("/spec/replicas", json!(1))],
        ),
        Case {
            what: "a stateful set with a claim template",
            path: "/apis/apps/v1/namespaces/default/statefulsets",
            body: json!({"metadata": {"name": "sts"},
                "spec": {"selector": selector(), "serviceName": "sts", "template": template(),
                    "volumeClaimTemplates": [{"metadata": {"name": "data"},
                        "spec": {"accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}}}}]}}),
            want: with(
                template_defaults("/spec/template/spec"),
                vec![
                    ("/spec/replicas", json!(1)),
                    ("/spec/podManagementPolicy", json!("OrderedReady")),
                    ("/spec/revisionHistoryLimit", json!(10)),
                    (
                        "/spec/updateStrategy",
                        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
                    ),
                    (
                        "/spec/persistentVolumeClaimRetentionPolicy",
                        json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
                    ),
                    (
                        "/spec/volumeClaimTemplates/0/spec/volumeMode",
                        json!("Filesystem"),
                    ),
                    (
                        "/spec/volumeClaimTemplates/0/status",
                        json!({"phase": "Pending"}),
                    ),
                ],
            ),
        },
        minimal_apps(
            "a minimal daemon set",
            "/apis/apps/v1/namespaces/default/daemonsets",
            "ds",
            vec![
                ("/spec/revisionHistoryLimit", json!(10)),
                (
                    "/spec/updateStrategy",
                    json!({"type": "RollingUpdate",
                        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
                ),
            ],
        ),
        kept_strategy(
            "a daemon set that updates on delete",
            "/apis/apps/v1/namespaces/default/daemonsets",
            "ds-ondelete",
            ("/spec/updateStrategy", json!({"type": "OnDelete"})),
        ),
    ])
    .await;
}

#[tokio::test]
async fn batch_workloads_are_defaulted_as_upstream() {
    let job_template = || {
        json!({"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox:1.36"}]}})
    };
    run(vec![
        Case {
            what: "a minimal job",
            path: "/apis/batch/v1/namespaces/default/jobs",
            body: json!({"metadata": {"name": "j"}, "spec": {"template": job_template()}}),
            want: vec![
                ("/spec/completions", json!(1)),
                ("/spec/parallelism", json!(1)),
                ("/spec/backoffLimit", json!(6)),
                ("/spec/completionMode", json!("NonIndexed")),
                ("/spec/suspend", json!(false)),
                ("/spec/podReplacementPolicy", json!("TerminatingOrFailed")),
                ("/spec/manualSelector", Value::Null),
                ("/spec/template/spec/restartPolicy", json!("Never")),
                ("/spec/template/spec/dnsPolicy", json!("ClusterFirst")),
            ],
        },
        Case {
            what: "a work-queue job (parallelism only)",
            path: "/apis/batch/v1/namespaces/default/jobs",
            body: json!({"metadata": {"name": "j-queue"},
                "spec": {"parallelism": 3, "template": job_template()}}),
            want: vec![
                ("/spec/completions", Value::Null),
                ("/spec/parallelism", json!(3)),
            ],
        },
        Case {
            what: "a job with a pod failure policy and per-index limits",
            path: "/apis/batch/v1/namespaces/default/jobs",
            body: json!({"metadata": {"name": "j-indexed"}, "spec": {
                "completionMode": "Indexed", "completions": 2, "backoffLimitPerIndex": 1,
                "podFailurePolicy": {"rules": [{"action": "FailJob",
                    "onExitCodes": {"operator": "In", "values": [42]}}]},
                "template": job_template()}}),
            want: vec![
                ("/spec/backoffLimit", json!(2147483647)),
                ("/spec/podReplacementPolicy", json!("Failed")),
                ("/spec/completions", json!(2)),
                ("/spec/parallelism", json!(1)),
            ],
        },
        Case {
            what: "a minimal cron job",
            path: "/apis/batch/v1/namespaces/default/cronjobs",
            body: json!({"metadata": {"name": "cj"}, "spec": {"schedule": "*/5 * * * *",
                "jobTemplate": {"spec": {"template": job_template()}}}}),
            want: vec![
                ("/spec/concurrencyPolicy", json!("Allow")),
                ("/spec/suspend", json!(false)),
                ("/spec/successfulJobsHistoryLimit", json!(3)),
                ("/spec/failedJobsHistoryLimit", json!(1)),
                // A job template gets its pod template's defaults, not a Job's.
                ("/spec/jobTemplate/spec/backoffLimit", Value::Null),
                ("/spec/jobTemplate/spec/completions", Value::Null),
                (
                    "/spec/jobTemplate/spec/template/spec/terminationGracePeriodSeconds",
                    json!(30),
                ),
            ],
        },
    ])
    .await;
}
