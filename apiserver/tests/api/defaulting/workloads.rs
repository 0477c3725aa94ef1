//! apps/v1 and batch/v1: Deployments, ReplicaSets, StatefulSets,
//! DaemonSets, Jobs and CronJobs, with their pod templates (which get the
//! pod-spec defaults but none of a pod's admission).

use serde_json::{Value, json};

use super::{Case, run};

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

#[tokio::test]
async fn apps_workloads_are_defaulted_as_upstream() {
    let selector = json!({"matchLabels": {"app": "w"}});
    run(vec![
        Case {
            what: "a minimal deployment",
            path: "/apis/apps/v1/namespaces/default/deployments",
            body: json!({"metadata": {"name": "d"},
                "spec": {"selector": selector, "template": template()}}),
            want: with(
                template_defaults("/spec/template/spec"),
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
        },
        Case {
            what: "a deployment that recreates",
            path: "/apis/apps/v1/namespaces/default/deployments",
            body: json!({"metadata": {"name": "d-recreate"},
                "spec": {"selector": selector, "template": template(),
                    "strategy": {"type": "Recreate"}}}),
            want: vec![("/spec/strategy", json!({"type": "Recreate"}))],
        },
        Case {
            what: "a minimal replica set",
            path: "/apis/apps/v1/namespaces/default/replicasets",
            body: json!({"metadata": {"name": "rs"},
                "spec": {"selector": selector, "template": template()}}),
            want: with(
                template_defaults("/spec/template/spec"),
                vec![("/spec/replicas", json!(1))],
            ),
        },
        Case {
            what: "a stateful set with a claim template",
            path: "/apis/apps/v1/namespaces/default/statefulsets",
            body: json!({"metadata": {"name": "sts"},
                "spec": {"selector": selector, "serviceName": "sts", "template": template(),
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
        Case {
            what: "a minimal daemon set",
            path: "/apis/apps/v1/namespaces/default/daemonsets",
            body: json!({"metadata": {"name": "ds"},
                "spec": {"selector": selector, "template": template()}}),
            want: with(
                template_defaults("/spec/template/spec"),
                vec![
                    ("/spec/revisionHistoryLimit", json!(10)),
                    (
                        "/spec/updateStrategy",
                        json!({"type": "RollingUpdate",
                            "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
                    ),
                ],
            ),
        },
        Case {
            what: "a daemon set that updates on delete",
            path: "/apis/apps/v1/namespaces/default/daemonsets",
            body: json!({"metadata": {"name": "ds-ondelete"},
                "spec": {"selector": selector, "template": template(),
                    "updateStrategy": {"type": "OnDelete"}}}),
            want: vec![("/spec/updateStrategy", json!({"type": "OnDelete"}))],
        },
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
