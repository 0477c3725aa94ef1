//! In-place pod resizes (`pods/resize`), as upstream's kubelet carries them
//! out. A pod's spec says what its containers should have ("desired"); the
//! node keeps what it admitted ("allocated") and what each running
//! container instance was given ("applied") in a checkpoint in the pod's
//! directory, so a restarted agent neither forgets a resize nor repeats one.
//!
//! Each sync: a desired change is admitted when the node can hold it
//! ([`admission::admit_resize`]; else `PodResizePending`, `Infeasible` or
//! `Deferred`, and the containers keep what they have); an admitted one is
//! applied to each running container whose instance has other values —
//! in place (`UpdateContainerResources`, the pod's cgroup widened first and
//! fitted after), or by restarting the container where its `resizePolicy`
//! says `RestartContainer` for a resource that changed. Everything after
//! this step sees the pod as the node runs it: with the allocated
//! resources, which new containers are created with and the status reports.

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Container, Pod, ResourceRequirements};
use serde::{Deserialize, Serialize};
use skiff_common::containers::is_sidecar;
use skiff_common::events::object_reference;

use super::admission;
use super::context::AgentContext;
use super::cri_config;
use super::runtime_view::PodRuntimeView;
use super::termination;
use crate::agent::volumes;

/// Where a resize stands, for the pod's conditions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ResizeStatus {
    /// Not admitted (`PodResizePending`): upstream's reason and message.
    Pending {
        /// `Infeasible` or `Deferred`.
        reason: String,
        /// Why.
        message: String,
    },
    /// Admitted and not yet applied to every running container
    /// (`PodResizeInProgress`); with the runtime's error when applying failed.
    InProgress {
        /// Why the last attempt failed.
        error: Option<String>,
    },
}

/// What the node remembers of a pod's resources.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
struct Checkpoint {
    /// What the node admitted for each container, by name.
    allocated: BTreeMap<String, ResourceRequirements>,
    /// What each container instance runs with, by runtime id.
    applied: BTreeMap<String, ResourceRequirements>,
}

fn checkpoint_path(ctx: &AgentContext, pod: &Pod) -> PathBuf {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    volumes::pod_dir(&ctx.agent_dir, uid).join("resources.json")
}

impl Checkpoint {
    fn load(path: &std::path::Path) -> Self {
        std::fs::read(path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// Written beside and renamed, so a crash leaves the old one or the new.
    fn save(&self, path: &std::path::Path) {
        let Ok(bytes) = serde_json::to_vec(self) else {
            return;
        };
        let staged = path.with_extension("json.new");
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&staged, bytes))
            .and_then(|()| std::fs::rename(&staged, path));
        if let Err(error) = written {
            tracing::warn!(path = %path.display(), %error, "pod resources checkpoint not written");
        }
    }
}

/// The containers whose resources a resize may change: the pod's
/// containers and its sidecars.
fn resizable(pod: &Pod) -> impl Iterator<Item = &Container> {
    let spec = pod.spec.as_ref();
    let init = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default()
        .iter()
        .filter(|c| is_sidecar(c));
    spec.map(|s| s.containers.as_slice())
        .unwrap_or_default()
        .iter()
        .chain(init)
}

fn resources(container: &Container) -> ResourceRequirements {
    container.resources.clone().unwrap_or_default()
}

/// `pod` with each container's resources those `allocated` to it.
fn with_allocated(pod: &Pod, allocated: &BTreeMap<String, ResourceRequirements>) -> Pod {
    let mut pod = pod.clone();
    if let Some(spec) = pod.spec.as_mut() {
        let init = spec.init_containers.iter_mut().flatten();
        for container in spec.containers.iter_mut().chain(init) {
            if let Some(given) = allocated.get(&container.name) {
                container.resources = Some(given.clone());
            }
        }
    }
    pod
}

/// Whether the container must restart to go from `from` to `to`: a
/// resource that changed has `resizePolicy: RestartContainer`.
fn needs_restart(
    container: &Container,
    from: &ResourceRequirements,
    to: &ResourceRequirements,
) -> bool {
    let value = |r: &ResourceRequirements, section: bool, name: &str| {
        let list = if section { &r.requests } else { &r.limits };
        list.as_ref().and_then(|l| l.get(name)).map(|q| q.0.clone())
    };
    (container.resize_policy.iter().flatten())
        .filter(|p| p.restart_policy == "RestartContainer")
        .any(|p| {
            let name = p.resource_name.as_str();
            value(from, true, name) != value(to, true, name)
                || value(from, false, name) != value(to, false, name)
        })
}

/// Admits and applies the pod's resize (see the module's text); returns
/// the pod as the node runs it and says in `status` where a resize stands.
/// Instances it stops to restart with new values join `stopped`: their
/// restart is not a crash's and waits no back-off.
pub(crate) async fn sync(
    ctx: &AgentContext,
    pod: &Pod,
    view: &PodRuntimeView,
    status: &mut Option<ResizeStatus>,
    stopped: &mut std::collections::HashSet<String>,
) -> Pod {
    let path = checkpoint_path(ctx, pod);
    let before = Checkpoint::load(&path);
    let mut checkpoint = before.clone();
    let desired: BTreeMap<String, ResourceRequirements> = resizable(pod)
        .map(|c| (c.name.clone(), resources(c)))
        .collect();
    // A pod new to the node (or to this checkpoint) was admitted as it is.
    for (name, wanted) in &desired {
        checkpoint
            .allocated
            .entry(name.clone())
            .or_insert_with(|| wanted.clone());
    }
    // Running instances not seen before were created with what was
    // allocated when they were: recorded before a new allocation counts.
    let mut running = BTreeMap::new();
    for container in resizable(pod) {
        if let Some(instance) = view.latest(&container.name).filter(|i| i.is_running()) {
            running.insert(instance.id.clone(), container.name.clone());
            if let Some(given) = checkpoint.allocated.get(&container.name).cloned() {
                checkpoint
                    .applied
                    .entry(instance.id.clone())
                    .or_insert(given);
            }
        }
    }
    checkpoint.applied.retain(|id, _| running.contains_key(id));

    *status = None;
    let changed = desired
        .iter()
        .any(|(name, wanted)| checkpoint.allocated.get(name) != Some(wanted));
    if changed {
        match admission::admit_resize(ctx, pod, &ctx.pods.list()) {
            Ok(()) => {
                tracing::info!(pod = ?pod.metadata.name, "resize admitted");
                checkpoint.allocated.extend(desired.clone());
            }
            Err(refusal) => {
                *status = Some(ResizeStatus::Pending {
                    reason: refusal.reason,
                    message: refusal.message,
                });
            }
        }
    }
    let allocated_pod = with_allocated(pod, &checkpoint.allocated);

    // Apply the allocation to each running instance that has other values.
    let mut errors = Vec::new();
    let mut in_progress = false;
    for container in resizable(&allocated_pod) {
        let Some(instance) = view.latest(&container.name).filter(|i| i.is_running()) else {
            continue;
        };
        let want = resources(container);
        let Some(had) = checkpoint.applied.get(&instance.id).cloned() else {
            continue;
        };
        if had == want {
            continue;
        }
        in_progress = true;
        if needs_restart(container, &had, &want) {
            // Stopped here; the restart that follows creates it with `want`.
            let grace = termination::grace_period(pod);
            match ctx.runtime.stop_container(&instance.id, grace).await {
                Ok(()) => {
                    checkpoint.applied.remove(&instance.id);
                    stopped.insert(instance.id.clone());
                }
                Err(e) => errors.push(format!("{}: {e}", container.name)),
            }
            continue;
        }
        // Wider first, so the container never asks more than the pod has.
        if let Some(cgroups) = &ctx.cgroups {
            let _ = cgroups.ensure(&allocated_pod);
        }
        let linux = cri_config::linux_resources(container);
        match ctx
            .runtime
            .update_container_resources(&instance.id, &linux)
            .await
        {
            Ok(()) => {
                checkpoint.applied.insert(instance.id.clone(), want);
            }
            Err(e) => errors.push(format!("{}: {e}", container.name)),
        }
    }
    if in_progress && let Some(cgroups) = &ctx.cgroups {
        let _ = cgroups.ensure(&allocated_pod);
    }
    if !errors.is_empty() {
        let message = errors.join("; ");
        ctx.events.warning(
            &object_reference(pod),
            "ResizeError",
            "",
            format!("Pod resize failed: {message}"),
        );
        *status = Some(ResizeStatus::InProgress {
            error: Some(message),
        });
    } else if status.is_none() && checkpoint.applied.len() < running.len() {
        // A container stopped to take its new values is not back yet.
        *status = Some(ResizeStatus::InProgress { error: None });
    }
    if checkpoint != before {
        checkpoint.save(&path);
    }
    allocated_pod
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(policy: &str) -> Container {
        serde_json::from_value(serde_json::json!({
            "name": "c",
            "resizePolicy": [
                {"resourceName": "cpu", "restartPolicy": "NotRequired"},
                {"resourceName": "memory", "restartPolicy": policy}]
        }))
        .unwrap()
    }

    fn req(cpu: &str, memory: &str) -> ResourceRequirements {
        serde_json::from_value(serde_json::json!({
            "requests": {"cpu": cpu, "memory": memory},
            "limits": {"memory": memory}
        }))
        .unwrap()
    }

    #[test]
    fn only_a_changed_resource_with_restart_container_restarts() {
        let c = container("RestartContainer");
        assert!(!needs_restart(&c, &req("1", "1Gi"), &req("2", "1Gi")));
        assert!(needs_restart(&c, &req("1", "1Gi"), &req("1", "2Gi")));
        assert!(!needs_restart(
            &container("NotRequired"),
            &req("1", "1Gi"),
            &req("1", "2Gi")
        ));
    }

    #[test]
    fn the_checkpoint_survives_a_restart_of_the_agent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pod").join("resources.json");
        let mut checkpoint = Checkpoint::default();
        checkpoint.allocated.insert("c".into(), req("1", "1Gi"));
        checkpoint.applied.insert("abc".into(), req("1", "1Gi"));
        checkpoint.save(&path);
        assert_eq!(Checkpoint::load(&path), checkpoint);
        std::fs::write(&path, b"not json").unwrap();
        assert_eq!(Checkpoint::load(&path), Checkpoint::default());
    }

    #[test]
    fn the_pod_as_run_carries_what_was_allocated() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
                "initContainers": [
                    {"name": "side", "restartPolicy": "Always"},
                    {"name": "init"}]
            }
        }))
        .unwrap();
        let names: Vec<&str> = resizable(&pod).map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["c", "side"]);
        let allocated = BTreeMap::from([("c".to_string(), req("1", "1Gi"))]);
        let run = with_allocated(&pod, &allocated);
        let spec = run.spec.unwrap();
        assert_eq!(spec.containers[0].resources, Some(req("1", "1Gi")));
    }
}
