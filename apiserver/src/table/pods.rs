//! Pods: NAME READY STATUS RESTARTS AGE (wide: IP NODE NOMINATED-NODE
//! READINESS-GATES), with STATUS derived from container states the way
//! kubectl users know it (ContainerCreating, CrashLoopBackOff, Init:0/1,
//! Completed, Terminating, ...).

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::age::{human_duration, seconds_since};
use super::columns::{Column, Printer, age, deleting, int, list, name, or_none, text};
use crate::object::condition_true;

pub(crate) static PODS: Printer = Printer {
    columns: &[
        Column::NAME,
        Column::string(
            "Ready",
            "The aggregate readiness state of this pod for accepting traffic.",
        ),
        Column::string(
            "Status",
            "The aggregate status of the containers in this pod.",
        ),
        Column::string(
            "Restarts",
            "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
        ),
        Column::AGE,
        Column::string(
            "IP",
            "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
        )
        .wide(),
        Column::string(
            "Node",
            "NodeName is a request to schedule this pod onto a specific node.",
        )
        .wide(),
        Column::string(
            "Nominated Node",
            "nominatedNodeName is set only when this pod preempts other pods on the node.",
        )
        .wide(),
        Column::string(
            "Readiness Gates",
            "If specified, all readiness gates will be evaluated for pod readiness.",
        )
        .wide(),
    ],
    cells,
};

/// What the pod's containers add up to.
#[derive(Debug, Default, PartialEq)]
struct Summary {
    ready: usize,
    total: usize,
    status: String,
    restarts: i64,
    /// Seconds since the most recent container termination, if any.
    last_restart_age: Option<i64>,
}

fn cells(pod: &Value, now: Timestamp) -> Vec<Value> {
    let summary = summarize(pod, now);
    let restarts = match summary.last_restart_age {
        Some(ago) if summary.restarts != 0 => {
            format!("{} ({} ago)", summary.restarts, human_duration(ago))
        }
        _ => summary.restarts.to_string(),
    };
    let ip = text(pod, "status/podIP").unwrap_or("");
    vec![
        name(pod),
        Value::from(format!("{}/{}", summary.ready, summary.total)),
        Value::from(summary.status),
        Value::from(restarts),
        age(pod, now),
        or_none(ip),
        or_none(text(pod, "spec/nodeName").unwrap_or("")),
        or_none(text(pod, "status/nominatedNodeName").unwrap_or("")),
        or_none(readiness_gates(pod)),
    ]
}

fn is_sidecar(pod: &Value, container_name: &str) -> bool {
    list(pod, "spec/initContainers").iter().any(|c| {
        text(c, "name") == Some(container_name) && text(c, "restartPolicy") == Some("Always")
    })
}

/// A termination's reason, or "Signal:9" / "ExitCode:1" when it gives none.
fn termination_reason(terminated: &Value) -> String {
    if let Some(reason) = text(terminated, "reason").filter(|r| !r.is_empty()) {
        return reason.to_string();
    }
    let signal = int(terminated, "signal");
    if signal != 0 {
        format!("Signal:{signal}")
    } else {
        format!("ExitCode:{}", int(terminated, "exitCode"))
    }
}

/// The reason a container state gives for waiting, when it waits for one.
fn waiting_reason(state: Option<&Value>) -> Option<&str> {
    state
        .and_then(|s| s.get("waiting"))
        .and_then(|w| text(w, "reason"))
        .filter(|r| !r.is_empty())
}

fn summarize(pod: &Value, now: Timestamp) -> Summary {
    let init_specs = list(pod, "spec/initContainers");
    let mut summary = Summary {
        total: list(pod, "spec/containers").len()
            + init_specs
                .iter()
                .filter(|c| text(c, "restartPolicy") == Some("Always"))
                .count(),
        ..Default::default()
    };
    let mut reason = text(pod, "status/reason")
        .filter(|r| !r.is_empty())
        .or_else(|| text(pod, "status/phase"))
        .unwrap_or("")
        .to_string();
    if list(pod, "status/conditions").iter().any(|c| {
        text(c, "type") == Some("PodScheduled") && text(c, "reason") == Some("SchedulingGated")
    }) {
        reason = "SchedulingGated".to_string();
    }

    let note_termination = |status: &Value, summary: &mut Summary| {
        if let Some(ago) = status
            .get("lastState")
            .and_then(|s| s.get("terminated"))
            .and_then(|t| t.get("finishedAt"))
            .and_then(|f| seconds_since(f, now))
        {
            summary.last_restart_age = Some(summary.last_restart_age.map_or(ago, |a| a.min(ago)));
        }
    };

    let mut sidecar_restarts = 0;
    let mut initializing = false;
    for (index, status) in list(pod, "status/initContainerStatuses").iter().enumerate() {
        let restarts = int(status, "restartCount");
        summary.restarts += restarts;
        note_termination(status, &mut summary);
        let container = text(status, "name").unwrap_or("");
        let sidecar = is_sidecar(pod, container);
        let started = status.get("started").and_then(Value::as_bool) == Some(true);
        if sidecar {
            sidecar_restarts += restarts;
            if started && status.get("ready").and_then(Value::as_bool) == Some(true) {
                summary.ready += 1;
            }
        }
        let state = status.get("state");
        let terminated = state.and_then(|s| s.get("terminated"));
        if terminated.is_some_and(|t| t.get("exitCode").and_then(Value::as_i64) == Some(0)) {
            continue;
        }
        if sidecar && started {
            continue;
        }
        reason = match (terminated, waiting_reason(state)) {
            (Some(t), _) => format!("Init:{}", termination_reason(t)),
            (None, Some(waiting)) if waiting != "PodInitializing" => format!("Init:{waiting}"),
            _ => format!("Init:{index}/{}", init_specs.len()),
        };
        initializing = true;
        break;
    }

    if !initializing || condition_true(pod, "Initialized") {
        summary.restarts = sidecar_restarts;
        let mut has_running = false;
        for status in list(pod, "status/containerStatuses").iter().rev() {
            summary.restarts += int(status, "restartCount");
            note_termination(status, &mut summary);
            let state = status.get("state");
            let terminated = state.and_then(|s| s.get("terminated"));
            if let Some(waiting) = waiting_reason(state) {
                reason = waiting.to_string();
            } else if let Some(t) = terminated {
                reason = termination_reason(t);
            } else if status.get("ready").and_then(Value::as_bool) == Some(true)
                && state.and_then(|s| s.get("running")).is_some()
            {
                has_running = true;
                summary.ready += 1;
            }
        }
        // A finished container beside a running one does not make the pod
        // Completed.
        if reason == "Completed" && has_running {
            reason = if condition_true(pod, "Ready") {
                "Running".to_string()
            } else {
                "NotReady".to_string()
            };
        }
    }

    let phase = text(pod, "status/phase").unwrap_or("");
    if deleting(pod) {
        if text(pod, "status/reason") == Some("NodeLost") {
            reason = "Unknown".to_string();
        } else if phase != "Succeeded" && phase != "Failed" {
            reason = "Terminating".to_string();
        }
    }
    summary.status = reason;
    summary
}

fn readiness_gates(pod: &Value) -> String {
    let gates = list(pod, "spec/readinessGates");
    if gates.is_empty() {
        return String::new();
    }
    let satisfied = gates
        .iter()
        .filter(|g| text(g, "conditionType").is_some_and(|t| condition_true(pod, t)))
        .count();
    format!("{satisfied}/{}", gates.len())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::table::test_now as now;

    fn pod(spec: Value, status: Value) -> Value {
        json!({"metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": spec, "status": status})
    }

    fn status_of(p: &Value) -> String {
        cells(p, now())[2].as_str().expect("status").to_string()
    }

    #[test]
    fn pending_pod_without_statuses_shows_its_phase() {
        let p = pod(
            json!({"containers": [{"name": "c"}]}),
            json!({"phase": "Pending"}),
        );
        let c = cells(&p, now());
        assert_eq!(c[1], "0/1");
        assert_eq!(c[2], "Pending");
        assert_eq!(c[3], "0");
        assert_eq!(c[4], "60m");
        assert_eq!(c[5], "<none>");
    }

    #[test]
    fn waiting_reasons_show_through() {
        let p = pod(
            json!({"containers": [{"name": "c"}]}),
            json!({"phase": "Pending", "containerStatuses": [{"name": "c", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ContainerCreating"}}}]}),
        );
        assert_eq!(status_of(&p), "ContainerCreating");
        let p = pod(
            json!({"containers": [{"name": "c"}]}),
            json!({"phase": "Running", "containerStatuses": [{"name": "c", "ready": false, "restartCount": 4,
                "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2026-01-01T00:58:00Z"}},
                "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}),
        );
        let c = cells(&p, now());
        assert_eq!(c[2], "CrashLoopBackOff");
        assert_eq!(c[3], "4 (2m ago)");
    }

    #[test]
    fn running_and_completed_pods() {
        let running = pod(
            json!({"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}]}),
            json!({"phase": "Running", "podIP": "10.42.0.5", "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
                {"name": "b", "ready": true, "restartCount": 0, "state": {"running": {}}}]}),
        );
        let c = cells(&running, now());
        assert_eq!(
            (c[1].clone(), c[2].clone(), c[5].clone(), c[6].clone()),
            (
                json!("2/2"),
                json!("Running"),
                json!("10.42.0.5"),
                json!("n1")
            )
        );
        let done = pod(
            json!({"containers": [{"name": "a"}]}),
            json!({"phase": "Succeeded", "containerStatuses": [{"name": "a", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}),
        );
        assert_eq!(status_of(&done), "Completed");
        let failed = pod(
            json!({"containers": [{"name": "a"}]}),
            json!({"phase": "Failed", "containerStatuses": [{"name": "a", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 3}}}]}),
        );
        assert_eq!(status_of(&failed), "ExitCode:3");
        let mixed = pod(
            json!({"containers": [{"name": "a"}, {"name": "b"}]}),
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}], "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
                {"name": "b", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}),
        );
        assert_eq!(status_of(&mixed), "NotReady");
    }

    #[test]
    fn init_containers_report_progress() {
        let p = pod(
            json!({"initContainers": [{"name": "i1"}, {"name": "i2"}], "containers": [{"name": "c"}]}),
            json!({"phase": "Pending", "initContainerStatuses": [
                {"name": "i1", "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
                {"name": "i2", "restartCount": 0, "state": {"running": {}}}]}),
        );
        assert_eq!(status_of(&p), "Init:1/2");
        let p = pod(
            json!({"initContainers": [{"name": "i1"}], "containers": [{"name": "c"}]}),
            json!({"phase": "Pending", "initContainerStatuses": [
                {"name": "i1", "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}),
        );
        assert_eq!(status_of(&p), "Init:CrashLoopBackOff");
        let sidecar = pod(
            json!({"initContainers": [{"name": "s", "restartPolicy": "Always"}], "containers": [{"name": "c"}]}),
            json!({"phase": "Running", "conditions": [{"type": "Initialized", "status": "True"}],
                "initContainerStatuses": [{"name": "s", "started": true, "ready": true, "restartCount": 0, "state": {"running": {}}}],
                "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0, "state": {"running": {}}}]}),
        );
        let c = cells(&sidecar, now());
        assert_eq!(
            (c[1].clone(), c[2].clone()),
            (json!("2/2"), json!("Running"))
        );
    }

    #[test]
    fn deletion_and_gates() {
        let mut p = pod(
            json!({"containers": [{"name": "c"}], "readinessGates": [{"conditionType": "x/ok"}, {"conditionType": "x/two"}]}),
            json!({"phase": "Running", "conditions": [{"type": "x/ok", "status": "True"}]}),
        );
        assert_eq!(cells(&p, now())[8], "1/2");
        p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:59:00Z");
        assert_eq!(status_of(&p), "Terminating");
        p["status"]["phase"] = json!("Succeeded");
        assert_eq!(status_of(&p), "Succeeded");
        let gated = pod(
            json!({"containers": [{"name": "c"}]}),
            json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}),
        );
        assert_eq!(status_of(&gated), "SchedulingGated");
    }
}
