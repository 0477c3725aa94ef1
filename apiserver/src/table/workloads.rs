//! Workload controllers: Deployments, ReplicaSets, ReplicationControllers,
//! StatefulSets, DaemonSets, Jobs and CronJobs, their ControllerRevisions,
//! and PodTemplates.

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::age::{human_duration, seconds_since};
use super::columns::{
    Column, OwnCells, Printer, at, containers_and_images, deleting, flag, int, list,
    map_selector_string, name, name_age_printer, name_age_row, or_none, selector_string, text,
    text_cell,
};
use crate::object::condition_true;

const CONTAINERS: Column =
    Column::string("Containers", "Names of each container in the template.").wide();
const IMAGES: Column = Column::string(
    "Images",
    "Images referenced by each container in the template.",
)
.wide();
const SELECTOR: Column = Column::string("Selector", "Label selector for pods.").wide();

/// The columns of a row [`workload_row`] lays out with a selector: name, the
/// kind's `own` columns, age, then the wide containers, images and selector.
macro_rules! workload_columns {
    ($($own:expr),* $(,)?) => {
        &[Column::NAME, $($own,)* Column::AGE, CONTAINERS, IMAGES, SELECTOR]
    };
}

/// A workload's row: its name, its `own` cells, its age, then the wide
/// containers and images of the pod template at `template` and, when it
/// has the column, its `selector`: how every workload's row is laid out.
fn workload_row(
    object: &Value,
    now: Timestamp,
    own: Vec<Value>,
    template: &str,
    selector: Option<String>,
) -> Vec<Value> {
    let (containers, images) = containers_and_images(at(object, template));
    let mut row = name_age_row(object, now, own);
    row.extend([Value::from(containers), Value::from(images)]);
    row.extend(selector.map(or_none));
    row
}

/// The pod template of every workload but a CronJob.
const TEMPLATE: &str = "spec/template/spec";

/// The row of a workload with its pod template at [`TEMPLATE`] and its
/// label selector at `spec/selector`.
fn selected_row(object: &Value, now: Timestamp, own: Vec<Value>) -> Vec<Value> {
    let selector = selector_string(at(object, "spec/selector"));
    workload_row(object, now, own, TEMPLATE, Some(selector))
}

/// The [`Printer`] of a workload with its pod template at [`TEMPLATE`] and
/// its label selector at `spec/selector`: its own `columns` laid out by
/// [`workload_columns`], their cells (what `own`, an [`OwnCells`], gives)
/// by [`selected_row`].
macro_rules! selected_workload_printer {
    ([$($column:expr),+ $(,)?], $own:expr $(,)?) => {
        Printer {
            columns: workload_columns![$($column),+],
            cells: |object, now| {
                let own: OwnCells = $own;
                selected_row(object, now, own(object, now))
            },
        }
    };
}

/// The column [`ready_of_desired`] fills.
const READY_OF_DESIRED: Column = Column::string("Ready", "Number of the pod with ready state");

/// Ready replicas of the desired ones, as `ready/desired`.
fn ready_of_desired(object: &Value) -> Value {
    Value::from(format!(
        "{}/{}",
        int(object, "status/readyReplicas"),
        replicas(object)
    ))
}

fn replicas(object: &Value) -> i64 {
    // An unset spec.replicas means 1, as the defaulting does.
    at(object, "spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

pub(crate) static DEPLOYMENTS: Printer = selected_workload_printer!(
    [
        READY_OF_DESIRED,
        Column::string(
            "Up-to-date",
            "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
        ),
        Column::string(
            "Available",
            "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
        ),
    ],
    |d, _| {
        vec![
            ready_of_desired(d),
            Value::from(int(d, "status/updatedReplicas")),
            Value::from(int(d, "status/availableReplicas")),
        ]
    },
);

fn replica_set_cells(rs: &Value, now: Timestamp, selector: String) -> Vec<Value> {
    let own = vec![
        Value::from(replicas(rs)),
        Value::from(int(rs, "status/replicas")),
        Value::from(int(rs, "status/readyReplicas")),
    ];
    workload_row(rs, now, own, TEMPLATE, Some(selector))
}

const REPLICA_SET_COLUMNS: &[Column] = workload_columns![
    Column::integer("Desired", "Replicas is the number of desired replicas.",),
    Column::integer(
        "Current",
        "Replicas is the most recently observed number of replicas.",
    ),
    Column::integer(
        "Ready",
        "The number of ready replicas for this replica set.",
    ),
];

pub(crate) static REPLICASETS: Printer = Printer {
    columns: REPLICA_SET_COLUMNS,
    cells: |rs, now| replica_set_cells(rs, now, selector_string(at(rs, "spec/selector"))),
};

pub(crate) static REPLICATIONCONTROLLERS: Printer = Printer {
    columns: REPLICA_SET_COLUMNS,
    cells: |rc, now| replica_set_cells(rc, now, map_selector_string(at(rc, "spec/selector"))),
};

pub(crate) static STATEFULSETS: Printer = Printer {
    columns: &[
        Column::NAME,
        READY_OF_DESIRED,
        Column::AGE,
        CONTAINERS,
        IMAGES,
    ],
    cells: |s, now| workload_row(s, now, vec![ready_of_desired(s)], TEMPLATE, None),
};

pub(crate) static DAEMONSETS: Printer = selected_workload_printer!(
    [
        Column::integer(
            "Desired",
            "The total number of nodes that should be running the daemon pod.",
        ),
        Column::integer(
            "Current",
            "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
        ),
        Column::integer(
            "Ready",
            "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.",
        ),
        Column::integer(
            "Up-to-date",
            "The total number of nodes that are running updated daemon pod",
        ),
        Column::integer(
            "Available",
            "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available.",
        ),
        Column::string(
            "Node Selector",
            "NodeSelector is a selector which must be true for the pod to fit on a node.",
        ),
    ],
    |d, _| {
        vec![
            Value::from(int(d, "status/desiredNumberScheduled")),
            Value::from(int(d, "status/currentNumberScheduled")),
            Value::from(int(d, "status/numberReady")),
            Value::from(int(d, "status/updatedNumberScheduled")),
            Value::from(int(d, "status/numberAvailable")),
            or_none(map_selector_string(at(
                d,
                "spec/template/spec/nodeSelector",
            ))),
        ]
    },
);

fn job_status(job: &Value) -> &'static str {
    if condition_true(job, "Complete") {
        "Complete"
    } else if condition_true(job, "Failed") {
        "Failed"
    } else if deleting(job) {
        "Terminating"
    } else if condition_true(job, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else if condition_true(job, "FailureTarget") {
        "FailureTarget"
    } else if condition_true(job, "Suspended") {
        "Suspended"
    } else {
        "Running"
    }
}

fn job_completions(job: &Value) -> String {
    let succeeded = int(job, "status/succeeded");
    if let Some(completions) = at(job, "spec/completions").and_then(Value::as_i64) {
        return format!("{succeeded}/{completions}");
    }
    let parallelism = at(job, "spec/parallelism")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if parallelism > 1 {
        format!("{succeeded}/1 of {parallelism}")
    } else {
        format!("{succeeded}/1")
    }
}

fn job_duration(job: &Value, now: Timestamp) -> String {
    let Some(start) = at(job, "status/startTime").and_then(|s| seconds_since(s, now)) else {
        return String::new();
    };
    match at(job, "status/completionTime").and_then(|c| seconds_since(c, now)) {
        Some(since_completion) => human_duration(start - since_completion),
        None => human_duration(start),
    }
}

pub(crate) static JOBS: Printer = selected_workload_printer!(
    [
        Column::string("Status", "Status of the job."),
        Column::string("Completions", "The completion status of the job."),
        Column::string("Duration", "Time required to complete the job."),
    ],
    |job, now| {
        vec![
            Value::from(job_status(job)),
            Value::from(job_completions(job)),
            Value::from(job_duration(job, now)),
        ]
    },
);

pub(crate) static CRONJOBS: Printer = Printer {
    columns: workload_columns![
        Column::string("Schedule", "The schedule in Cron format."),
        Column::string("Timezone", "The time zone name for the given schedule.",),
        Column::boolean(
            "Suspend",
            "This flag tells the controller to suspend subsequent executions.",
        ),
        Column::integer("Active", "A list of pointers to currently running jobs.",),
        Column::string(
            "Last Schedule",
            "Information when was the last time the job was successfully scheduled.",
        ),
    ],
    cells: |cj, now| {
        let last = at(cj, "status/lastScheduleTime")
            .and_then(|t| seconds_since(t, now))
            .map(human_duration)
            .unwrap_or_default();
        let suspend = flag(cj, "spec/suspend", false);
        let own = vec![
            text_cell(cj, "spec/schedule", ""),
            or_none(text(cj, "spec/timeZone").unwrap_or("")),
            Value::from(if suspend { "True" } else { "False" }),
            Value::from(list(cj, "status/active").len()),
            or_none(last),
        ];
        let template = "spec/jobTemplate/spec/template/spec";
        let selector = selector_string(at(cj, "spec/jobTemplate/spec/selector"));
        workload_row(cj, now, own, template, Some(selector))
    },
};

/// ControllerRevisions: `NAME CONTROLLER REVISION AGE`, the controller as
/// `statefulset.apps/web`.
pub(crate) static CONTROLLERREVISIONS: Printer = name_age_printer!(
    [
        Column::string("Controller", "The workload that keeps this revision.",),
        Column::integer("Revision", "The revision's number."),
    ],
    |revision, _| {
        let controller = list(revision, "metadata/ownerReferences")
            .iter()
            .find(|r| r["controller"] == true)
            .map(|r| {
                let group = text(r, "apiVersion")
                    .and_then(|v| v.split_once('/'))
                    .map(|(group, _)| format!(".{group}"))
                    .unwrap_or_default();
                let kind = text(r, "kind").unwrap_or("").to_lowercase();
                format!("{kind}{group}/{}", text(r, "name").unwrap_or(""))
            })
            .unwrap_or_else(|| "<none>".into());
        vec![
            Value::from(controller),
            Value::from(int(revision, "revision")),
        ]
    },
);

/// PodTemplates: `NAME CONTAINERS IMAGES POD LABELS`, no AGE (as upstream
/// prints them).
pub(crate) static PODTEMPLATES: Printer = Printer {
    columns: &[
        Column::NAME,
        // The workloads' wide columns, shown here without `-o wide`.
        Column {
            priority: 0,
            ..CONTAINERS
        },
        Column {
            priority: 0,
            ..IMAGES
        },
        Column::string("Pod Labels", "The labels of the template's pods."),
    ],
    cells: |template, _| {
        let (containers, images) = containers_and_images(at(template, "template/spec"));
        vec![
            name(template),
            Value::from(containers),
            Value::from(images),
            // Labels print as a map selector does: sorted `key=value` pairs.
            or_none(map_selector_string(at(
                template,
                "template/metadata/labels",
            ))),
        ]
    },
};

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::table::test_now as now;

    #[test]
    fn deployment_cells() {
        let d = json!({"metadata": {"name": "web", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1"}, {"name": "side", "image": "busybox"}]}}},
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
        assert_eq!(
            (DEPLOYMENTS.cells)(&d, now()),
            vec![
                json!("web"),
                json!("2/3"),
                json!(3),
                json!(2),
                json!("60m"),
                json!("nginx,side"),
                json!("nginx:1,busybox"),
                json!("app=web")
            ]
        );
    }

    #[test]
    fn job_completions_and_duration() {
        let running = json!({"metadata": {"name": "j"}, "spec": {"completions": 5},
            "status": {"succeeded": 2, "startTime": "2026-01-01T00:59:00Z"}});
        let c = (JOBS.cells)(&running, now());
        assert_eq!(
            (c[1].clone(), c[2].clone(), c[3].clone()),
            (json!("Running"), json!("2/5"), json!("60s"))
        );
        let done = json!({"metadata": {"name": "j"}, "spec": {"parallelism": 3},
            "status": {"succeeded": 1, "startTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T00:00:12Z",
                       "conditions": [{"type": "Complete", "status": "True"}]}});
        let c = (JOBS.cells)(&done, now());
        assert_eq!(
            (c[1].clone(), c[2].clone(), c[3].clone()),
            (json!("Complete"), json!("1/1 of 3"), json!("12s"))
        );
    }

    #[test]
    fn cronjob_and_daemonset_cells() {
        let cj = json!({"metadata": {"name": "c"}, "spec": {"schedule": "*/5 * * * *"},
            "status": {"active": [{"name": "c-1"}], "lastScheduleTime": "2026-01-01T00:55:00Z"}});
        let c = (CRONJOBS.cells)(&cj, now());
        assert_eq!(
            &c[1..6],
            &[
                json!("*/5 * * * *"),
                json!("<none>"),
                json!("False"),
                json!(1),
                json!("5m")
            ]
        );
        let ds = json!({"metadata": {"name": "d"}, "spec": {"template": {"spec": {"nodeSelector": {"kubernetes.io/os": "linux"}}}},
            "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2, "updatedNumberScheduled": 3, "numberAvailable": 2}});
        let c = (DAEMONSETS.cells)(&ds, now());
        assert_eq!(
            &c[1..7],
            &[
                json!(3),
                json!(3),
                json!(2),
                json!(3),
                json!(2),
                json!("kubernetes.io/os=linux")
            ]
        );
    }
}
