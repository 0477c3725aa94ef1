//! One pod as the runtime sees it: its sandboxes and every container
//! instance (with full status), found by the pod-UID label.

use std::collections::HashMap;

use crate::runtime::{Runtime, RuntimeError, cri_api as api};

use super::labels;

/// A container instance with its status.
#[derive(Debug, Clone)]
pub(crate) struct ContainerInstance {
    /// Runtime id.
    pub id: String,
    /// Container name in the pod spec.
    pub name: String,
    /// Restart count of this instance (0 for the first).
    pub restart_count: u32,
    /// The sandbox it was created in.
    pub sandbox_id: String,
    /// Full CRI status (state, exit code, times, reason, image ref).
    pub status: api::ContainerStatus,
}

impl ContainerInstance {
    /// The process runs.
    pub(crate) fn is_running(&self) -> bool {
        self.status.state == api::ContainerState::ContainerRunning as i32
    }

    /// The process ran and exited.
    pub(crate) fn is_exited(&self) -> bool {
        self.status.state == api::ContainerState::ContainerExited as i32
    }

    /// The runtime does not know whether the process runs: containerd
    /// marks so a container whose start it was killed in the middle of.
    pub(crate) fn is_unknown(&self) -> bool {
        self.status.state == api::ContainerState::ContainerUnknown as i32
    }
}

/// The pod's objects in the runtime.
#[derive(Debug, Clone, Default)]
pub(crate) struct PodRuntimeView {
    /// Every sandbox of the pod, newest first.
    pub sandboxes: Vec<api::PodSandbox>,
    /// Every container instance, grouped by container name, newest first.
    pub containers: HashMap<String, Vec<ContainerInstance>>,
}

impl PodRuntimeView {
    /// Reads the pod's sandboxes and containers from the runtime.
    pub(crate) async fn load(runtime: &dyn Runtime, uid: &str) -> Result<Self, RuntimeError> {
        let selector = HashMap::from([(labels::POD_UID.to_string(), uid.to_string())]);
        let mut sandboxes = runtime
            .list_pod_sandboxes(Some(api::PodSandboxFilter {
                label_selector: selector.clone(),
                ..Default::default()
            }))
            .await?;
        sandboxes.sort_by_key(|s| std::cmp::Reverse(s.created_at));
        let listed = runtime
            .list_containers(Some(api::ContainerFilter {
                label_selector: selector,
                ..Default::default()
            }))
            .await?;
        let mut containers: HashMap<String, Vec<ContainerInstance>> = HashMap::new();
        for c in listed {
            let status = match runtime.container_status(&c.id).await {
                Ok(s) => s,
                // Removed between the list and the status: it no longer counts.
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e),
            };
            let name = labels::container_name(&c);
            containers
                .entry(name.clone())
                .or_default()
                .push(ContainerInstance {
                    id: c.id,
                    name,
                    restart_count: labels::restart_count(&c.annotations),
                    sandbox_id: c.pod_sandbox_id,
                    status,
                });
        }
        for instances in containers.values_mut() {
            instances.sort_by(|a, b| {
                b.restart_count
                    .cmp(&a.restart_count)
                    .then(b.status.created_at.cmp(&a.status.created_at))
            });
        }
        Ok(Self {
            sandboxes,
            containers,
        })
    }

    /// The newest sandbox if it is ready.
    pub(crate) fn ready_sandbox(&self) -> Option<&api::PodSandbox> {
        self.sandboxes
            .first()
            .filter(|s| s.state == api::PodSandboxState::SandboxReady as i32)
    }

    /// The newest instance of a container.
    pub(crate) fn latest(&self, name: &str) -> Option<&ContainerInstance> {
        self.containers.get(name).and_then(|v| v.first())
    }

    /// The instance before the newest one (for `lastState` and `--previous`).
    pub(crate) fn previous(&self, name: &str) -> Option<&ContainerInstance> {
        self.containers.get(name).and_then(|v| v.get(1))
    }

    /// Every running container instance.
    pub(crate) fn running(&self) -> impl Iterator<Item = &ContainerInstance> {
        self.containers
            .values()
            .flatten()
            .filter(|c| c.is_running())
    }
}
