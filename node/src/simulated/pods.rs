//! What a simulated node does with the pods bound to it: report them Running at
//! once, finish the ones that do not restart, and remove the ones being deleted
//! — first writing their terminal phase, as the containerd path (and upstream's
//! kubelet) does, so controllers and watchers see how a deleted pod ended.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use serde_json::{Value, json};
use skiff_informer::{Action, Cache, ObjectKey};

use super::ips::PodIps;
use super::{EXIT_CODE_ANNOTATION, NodeClients, RUN_SECONDS_ANNOTATION, SimulatedConfig};
use crate::agent::pod::status::readiness_gates_hold;
use crate::agent::pod::sync::merge_pod_status;
use crate::agent::pod::termination::delete_for_good;

/// Drives the pods of every simulated node from one shared cache.
#[derive(Clone)]
pub(super) struct PodReconciler {
    clients: NodeClients,
    cache: Arc<Cache<Pod>>,
    config: Arc<SimulatedConfig>,
    ips: Arc<PodIps>,
}

/// What the next step for one pod is.
#[derive(Debug, PartialEq)]
enum Step {
    /// Deleted or not ours: nothing to do.
    Nothing,
    /// Being deleted and not yet in a final phase: containers "stop" at
    /// once (as a process ended by SIGTERM), that is reported, then the
    /// object goes.
    StopAndRemove,
    /// Being deleted and already in its final phase: the object goes.
    Remove,
    /// Bound but never started: report it running.
    Start,
    /// Running with ephemeral containers (`kubectl debug`) not yet
    /// reported: report them running.
    StartEphemeral,
    /// Running and due to exit at the given time.
    ExitAt(Timestamp),
    /// In its final phase.
    Finished,
}

impl PodReconciler {
    pub(super) fn new(
        clients: NodeClients,
        cache: Arc<Cache<Pod>>,
        config: Arc<SimulatedConfig>,
    ) -> Self {
        Self {
            clients,
            cache,
            config,
            ips: Arc::default(),
        }
    }

    /// Moves one pod a step along its simulated life.
    pub(super) async fn reconcile(self, key: ObjectKey) -> Result<Action, kube::Error> {
        let namespace = key.namespace.clone().unwrap_or_default();
        let Some(pod) = self.cache.get(&namespace, &key.name) else {
            return Ok(Action::Done);
        };
        // As the node the pod is bound to: a node may only write its own pods.
        let index = self.node_index(&pod);
        let api: Api<Pod> = Api::namespaced(self.clients.for_node(index).clone(), &namespace);
        match next_step(&pod, &self.config) {
            Step::Nothing | Step::Finished => Ok(Action::Done),
            Step::StopAndRemove => {
                let status = finished_status(&pod, STOPPED_EXIT_CODE);
                patch_status(&api, &key.name, status).await?;
                remove(&api, &pod).await
            }
            Step::Remove => remove(&api, &pod).await,
            Step::StartEphemeral => {
                let statuses = ephemeral_statuses(&pod);
                patch_status(
                    &api,
                    &key.name,
                    json!({ "ephemeralContainerStatuses": statuses }),
                )
                .await?;
                Ok(Action::Done)
            }
            Step::Start => {
                let ip = self.ips.next(index).to_string();
                let status = running_status(&pod, &ip, &super::ips::node_ip(index).to_string());
                patch_status(&api, &key.name, status).await?;
                Ok(match finite_run(&pod, &self.config) {
                    Some(run) => Action::RequeueAfter(run),
                    None => Action::Done,
                })
            }
            Step::ExitAt(when) => {
                let now = Timestamp::now();
                if when > now {
                    let wait = (when - now)
                        .total(k8s_openapi::jiff::Unit::Millisecond)
                        .unwrap_or(0.0)
                        .max(0.0);
                    return Ok(Action::RequeueAfter(Duration::from_millis(wait as u64 + 1)));
                }
                let code = exit_code(&pod, &self.config);
                patch_status(&api, &key.name, finished_status(&pod, code)).await?;
                Ok(Action::Done)
            }
        }
    }

    fn node_index(&self, pod: &Pod) -> usize {
        pod.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .and_then(|n| n.strip_prefix(&self.config.name_prefix))
            .and_then(|i| i.parse().ok())
            .unwrap_or(0)
    }
}

/// The exit code a simulated container reports when its pod's deletion
/// stopped it: 128 + SIGTERM, as a process ended by the runtime's SIGTERM.
const STOPPED_EXIT_CODE: i32 = 143;

/// The final delete (grace 0), only of this very pod (its UID), so a new
/// pod of the same name is never removed.
async fn remove(api: &Api<Pod>, pod: &Pod) -> Result<Action, kube::Error> {
    delete_for_good(api, pod).await.map(|()| Action::Done)
}

async fn patch_status(api: &Api<Pod>, name: &str, status: Value) -> Result<(), kube::Error> {
    merge_pod_status(api, name, &json!({ "status": status }))
        .await
        .map(|_written| ())
}

fn next_step(pod: &Pod, config: &SimulatedConfig) -> Step {
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending");
    let finished = matches!(phase, "Succeeded" | "Failed");
    if pod.metadata.deletion_timestamp.is_some() {
        return if finished {
            Step::Remove
        } else {
            Step::StopAndRemove
        };
    }
    match phase {
        "Succeeded" | "Failed" => Step::Finished,
        "Running" if ephemeral_statuses(pod).len() > reported_ephemeral(pod) => {
            Step::StartEphemeral
        }
        "Running" => match (finite_run(pod, config), started_at(pod)) {
            (Some(run), Some(start)) => {
                let run = k8s_openapi::jiff::SignedDuration::try_from(run).unwrap_or_default();
                Step::ExitAt(start.checked_add(run).unwrap_or(start))
            }
            _ => Step::Nothing,
        },
        _ => Step::Start,
    }
}

fn started_at(pod: &Pod) -> Option<Timestamp> {
    pod.status.as_ref()?.start_time.as_ref().map(|t| t.0)
}

/// How long the pod's containers run, when they are not restarted forever.
fn finite_run(pod: &Pod, config: &SimulatedConfig) -> Option<Duration> {
    let policy = pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always");
    if policy == "Always" {
        return None;
    }
    let annotated = annotation(pod, RUN_SECONDS_ANNOTATION).and_then(|v| v.parse::<f64>().ok());
    Some(annotated.map_or(config.run_duration, |s| Duration::from_secs_f64(s.max(0.0))))
}

fn exit_code(pod: &Pod, config: &SimulatedConfig) -> i32 {
    annotation(pod, EXIT_CODE_ANNOTATION)
        .and_then(|v| v.parse().ok())
        .unwrap_or(config.exit_code)
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn container_names(pod: &Pod) -> Vec<(String, String)> {
    pod.spec
        .as_ref()
        .map(|s| {
            s.containers
                .iter()
                .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default()
}

fn condition(type_: &str, status: bool, now: &str) -> Value {
    json!({
        "type": type_,
        "status": if status { "True" } else { "False" },
        "lastProbeTime": null,
        "lastTransitionTime": now,
    })
}

/// Readiness gates must be set True by someone else before the pod is Ready.
fn gates_satisfied(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .is_none_or(|spec| readiness_gates_hold(spec, pod.status.as_ref()))
}

/// The status of each of the pod's containers, all in `state` (`running` or
/// `terminated`, as in a ContainerStatus); running containers are ready and started.
fn container_statuses(pod: &Pod, running: bool, state: Value) -> Vec<Value> {
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    container_names(pod)
        .into_iter()
        .map(|(name, image)| {
            json!({
                "name": name,
                "image": image,
                "imageID": format!("simulated://{image}"),
                "containerID": format!("simulated://{uid}-{name}"),
                "ready": running,
                "started": running,
                "restartCount": 0,
                "state": state,
            })
        })
        .collect()
}

/// Each ephemeral container running since it was first reported (never
/// ready: it has no part in the pod's readiness).
fn ephemeral_statuses(pod: &Pod) -> Vec<Value> {
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    let reported = pod
        .status
        .as_ref()
        .and_then(|s| s.ephemeral_container_statuses.clone())
        .unwrap_or_default();
    let now = Timestamp::now().to_string();
    pod.spec
        .iter()
        .flat_map(|s| s.ephemeral_containers.iter().flatten())
        .map(|c| {
            let image = c.image.clone().unwrap_or_default();
            let state = reported
                .iter()
                .find(|r| r.name == c.name)
                .and_then(|r| serde_json::to_value(&r.state).ok())
                .unwrap_or_else(|| json!({ "running": { "startedAt": now } }));
            json!({
                "name": c.name,
                "image": image,
                "imageID": format!("simulated://{image}"),
                "containerID": format!("simulated://{uid}-{}", c.name),
                "ready": false,
                "restartCount": 0,
                "state": state,
            })
        })
        .collect()
}

fn reported_ephemeral(pod: &Pod) -> usize {
    pod.status
        .as_ref()
        .and_then(|s| s.ephemeral_container_statuses.as_ref())
        .map_or(0, Vec::len)
}

/// A simulated pod's conditions: scheduled and initialized always, its sandbox
/// and containers ready while `running`, Ready when `ready`.
fn pod_conditions(running: bool, ready: bool, now: &str) -> Value {
    json!([
        condition("PodReadyToStartContainers", running, now),
        condition("Initialized", true, now),
        condition("Ready", ready, now),
        condition("ContainersReady", running, now),
        condition("PodScheduled", true, now),
    ])
}

fn running_status(pod: &Pod, pod_ip: &str, host_ip: &str) -> Value {
    let now = Timestamp::now().to_string();
    let ready = gates_satisfied(pod);
    let statuses = container_statuses(pod, true, json!({ "running": { "startedAt": now } }));
    json!({
        "phase": "Running",
        "podIP": pod_ip,
        "podIPs": [{ "ip": pod_ip }],
        "hostIP": host_ip,
        "hostIPs": [{ "ip": host_ip }],
        "startTime": now,
        "qosClass": skiff_common::qos::qos_class(pod),
        "conditions": pod_conditions(true, ready, &now),
        "containerStatuses": statuses,
    })
}

fn finished_status(pod: &Pod, exit_code: i32) -> Value {
    let now = Timestamp::now().to_string();
    let started = started_at(pod)
        .map(|t| t.to_string())
        .unwrap_or_else(|| now.clone());
    let (phase, reason) = if exit_code == 0 {
        ("Succeeded", "Completed")
    } else {
        ("Failed", "Error")
    };
    let statuses = container_statuses(
        pod,
        false,
        json!({ "terminated": {
            "exitCode": exit_code, "reason": reason,
            "startedAt": started, "finishedAt": now,
        }}),
    );
    json!({
        "phase": phase,
        "conditions": pod_conditions(false, false, &now),
        "containerStatuses": statuses,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: Value) -> Pod {
        serde_json::from_value(json).expect("pod")
    }

    #[test]
    fn steps_follow_the_pod_lifecycle() {
        let config = SimulatedConfig::new(1);
        let bound = pod(
            json!({"metadata": {"name": "p"}, "spec": {"nodeName": "sim-node-0", "containers": [{"name": "c"}]}}),
        );
        assert_eq!(next_step(&bound, &config), Step::Start);
        let running_forever = pod(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}}));
        assert_eq!(next_step(&running_forever, &config), Step::Nothing);
        let debugged = pod(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c"}],
                     "ephemeralContainers": [{"name": "debugger", "image": "busybox"}]},
            "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}}));
        assert_eq!(next_step(&debugged, &config), Step::StartEphemeral);
        let statuses = ephemeral_statuses(&debugged);
        assert_eq!(statuses[0]["name"], "debugger");
        assert_eq!(statuses[0]["ready"], false);
        assert!(statuses[0]["state"]["running"].is_object());
        let mut reported = debugged.clone();
        reported
            .status
            .as_mut()
            .unwrap()
            .ephemeral_container_statuses = Some(serde_json::from_value(json!(statuses)).unwrap());
        assert_eq!(next_step(&reported, &config), Step::Nothing);
        let job_pod = pod(json!({
            "metadata": {"name": "p", "annotations": {RUN_SECONDS_ANNOTATION: "5"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]},
            "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}}));
        assert_eq!(
            next_step(&job_pod, &config),
            Step::ExitAt("2026-01-01T00:00:05Z".parse().expect("ts"))
        );
        let deleting = pod(json!({
            "metadata": {"name": "p", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"phase": "Running"}}));
        assert_eq!(next_step(&deleting, &config), Step::StopAndRemove);
        let deleting_done = pod(json!({
            "metadata": {"name": "p", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"phase": "Succeeded"}}));
        assert_eq!(next_step(&deleting_done, &config), Step::Remove);
        let done = pod(json!({"metadata": {"name": "p"}, "status": {"phase": "Succeeded"}}));
        assert_eq!(next_step(&done, &config), Step::Finished);
    }

    #[test]
    fn readiness_gates_hold_ready_until_their_condition_is_true() {
        let gated = pod(
            json!({"spec": {"containers": [{"name": "c"}], "readinessGates": [{"conditionType": "example.com/ok"}]}}),
        );
        let status = running_status(&gated, "100.64.0.1", "100.64.0.0");
        let ready = status["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
            .cloned()
            .expect("Ready condition");
        assert_eq!(ready["status"], "False");
        let opened = pod(
            json!({"spec": {"containers": [{"name": "c"}], "readinessGates": [{"conditionType": "example.com/ok"}]},
            "status": {"conditions": [{"type": "example.com/ok", "status": "True"}]}}),
        );
        assert!(gates_satisfied(&opened));
    }

    #[test]
    fn a_failing_exit_code_makes_the_pod_failed() {
        let p = pod(
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
        );
        let status = finished_status(&p, 3);
        assert_eq!(status["phase"], "Failed");
        assert_eq!(
            status["containerStatuses"][0]["state"]["terminated"]["exitCode"],
            3
        );
        assert_eq!(
            status["containerStatuses"][0]["state"]["terminated"]["reason"],
            "Error"
        );
    }
}
