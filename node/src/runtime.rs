//! The container runtime as the pod workers see it: the `Runtime` trait,
//! implemented by `CriRuntime` (containerd) and by the simulated runtime.
//!
//! Requests and answers are CRI v1 messages, re-exported as
//! `runtime::cri_api`, because CRI is already the vocabulary of pod sandboxes
//! and containers; a second model would only add translation.

use std::time::Duration;

use async_trait::async_trait;

pub use k8s_cri::v1 as cri_api;

use crate::cri::CriError;

/// Name and versions of a runtime, as reported in the Node's `nodeInfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeVersion {
    /// e.g. `containerd` or `simulated`.
    pub runtime_name: String,
    /// e.g. `1.6.20~ds1`.
    pub runtime_version: String,
    /// The CRI version spoken, e.g. `v1`.
    pub runtime_api_version: String,
}

impl RuntimeVersion {
    /// `name://version`, the form of `nodeInfo.containerRuntimeVersion`.
    pub fn node_runtime_version(&self) -> String {
        format!("{}://{}", self.runtime_name, self.runtime_version)
    }
}

/// The runtime's two required conditions (CRI `RuntimeReady`, `NetworkReady`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeHealth {
    /// Containers can be run.
    pub runtime_ready: bool,
    /// Pod networking (CNI) is set up.
    pub network_ready: bool,
    /// Reasons and messages of the conditions that are not true.
    pub message: String,
}

impl RuntimeHealth {
    /// Reads the conditions of a CRI `Status` answer; a missing condition
    /// counts as false.
    pub fn from_conditions(conditions: &[cri_api::RuntimeCondition]) -> Self {
        let find = |kind: &str| conditions.iter().find(|c| c.r#type == kind);
        let ready = |kind: &str| find(kind).is_some_and(|c| c.status);
        let mut problems = Vec::new();
        for kind in ["RuntimeReady", "NetworkReady"] {
            match find(kind) {
                Some(c) if c.status => {}
                Some(c) => problems.push(format!("{kind}: {} {}", c.reason, c.message)),
                None => problems.push(format!("{kind}: not reported")),
            }
        }
        Self {
            runtime_ready: ready("RuntimeReady"),
            network_ready: ready("NetworkReady"),
            message: problems.join("; "),
        }
    }

    /// Both conditions hold.
    pub fn is_ready(&self) -> bool {
        self.runtime_ready && self.network_ready
    }
}

/// What a synchronous exec produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    /// Everything written to stdout.
    pub stdout: Vec<u8>,
    /// Everything written to stderr.
    pub stderr: Vec<u8>,
    /// The command's exit code.
    pub exit_code: i32,
}

/// A failed runtime operation.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The CRI runtime failed or could not be reached.
    #[error(transparent)]
    Cri(#[from] CriError),
    /// A runtime without gRPC (the simulated one) does not know the object.
    #[error("{kind} {id:?} not found")]
    NotFound {
        /// `sandbox`, `container` or `image`.
        kind: &'static str,
        /// The id or reference asked for.
        id: String,
    },
    /// A runtime without gRPC refused the request.
    #[error("{0}")]
    Failed(String),
    /// The pod's RuntimeClass gave no handler (gone, or unreadable).
    #[error("{0}")]
    RuntimeClass(String),
}

impl RuntimeError {
    /// The sandbox, container or image does not exist (any more).
    pub fn is_not_found(&self) -> bool {
        match self {
            Self::Cri(e) => e.is_not_found(),
            Self::NotFound { .. } => true,
            Self::Failed(_) | Self::RuntimeClass(_) => false,
        }
    }

    /// The runtime is down or not answering; retry later.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Cri(e) if e.is_unavailable())
    }
}

/// Everything the pod workers ask of a container runtime.
///
/// Ids are the runtime's; sandboxes and containers carry the pod's labels
/// and annotations (set in their configs), which is how a restarted agent
/// finds them again with the `list_*` calls.
#[async_trait]
pub trait Runtime: Send + Sync + 'static {
    /// Name and versions.
    async fn version(&self) -> Result<RuntimeVersion, RuntimeError>;
    /// Whether containers and pod networking are ready.
    async fn health(&self) -> Result<RuntimeHealth, RuntimeError>;

    /// Creates and starts a pod sandbox (network namespace with an IP)
    /// under the runtime's `handler` (its default for ""), returning its
    /// id.
    async fn run_pod_sandbox(
        &self,
        config: &cri_api::PodSandboxConfig,
        handler: &str,
    ) -> Result<String, RuntimeError>;
    /// Stops the sandbox's containers and releases its network.
    async fn stop_pod_sandbox(&self, sandbox_id: &str) -> Result<(), RuntimeError>;
    /// Removes a stopped sandbox and everything in it.
    async fn remove_pod_sandbox(&self, sandbox_id: &str) -> Result<(), RuntimeError>;
    /// State, IP, labels of one sandbox.
    async fn pod_sandbox_status(
        &self,
        sandbox_id: &str,
    ) -> Result<cri_api::PodSandboxStatus, RuntimeError>;
    /// Sandboxes matching `filter` (all when `None`).
    async fn list_pod_sandboxes(
        &self,
        filter: Option<cri_api::PodSandboxFilter>,
    ) -> Result<Vec<cri_api::PodSandbox>, RuntimeError>;

    /// Creates a container in a sandbox, returning its id.
    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &cri_api::ContainerConfig,
        sandbox_config: &cri_api::PodSandboxConfig,
    ) -> Result<String, RuntimeError>;
    /// Starts a created container.
    async fn start_container(&self, container_id: &str) -> Result<(), RuntimeError>;
    /// Stops a container: stop signal, then SIGKILL after `grace`.
    async fn stop_container(&self, container_id: &str, grace: Duration)
    -> Result<(), RuntimeError>;
    /// Removes a container.
    async fn remove_container(&self, container_id: &str) -> Result<(), RuntimeError>;
    /// Changes a running container's CPU and memory in place (an in-place
    /// pod resize); the runtime must not restart it to do so.
    async fn update_container_resources(
        &self,
        container_id: &str,
        resources: &cri_api::LinuxContainerResources,
    ) -> Result<(), RuntimeError>;
    /// Makes the runtime reopen a running container's log at its path, once
    /// the agent has rotated the old file away.
    async fn reopen_container_log(&self, container_id: &str) -> Result<(), RuntimeError>;
    /// State, exit code, timestamps, log path of one container.
    async fn container_status(
        &self,
        container_id: &str,
    ) -> Result<cri_api::ContainerStatus, RuntimeError>;
    /// Containers matching `filter` (all when `None`).
    async fn list_containers(
        &self,
        filter: Option<cri_api::ContainerFilter>,
    ) -> Result<Vec<cri_api::Container>, RuntimeError>;

    /// Resource usage of the containers matching `filter` (all when `None`).
    async fn list_container_stats(
        &self,
        filter: Option<cri_api::ContainerStatsFilter>,
    ) -> Result<Vec<cri_api::ContainerStats>, RuntimeError>;
    /// Resource usage of whole pod sandboxes matching `filter`.
    async fn list_pod_sandbox_stats(
        &self,
        filter: Option<cri_api::PodSandboxStatsFilter>,
    ) -> Result<Vec<cri_api::PodSandboxStats>, RuntimeError>;

    /// Runs a command in a container and waits for it (exec probes).
    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecOutput, RuntimeError>;
    /// URL of a streaming exec session.
    async fn exec_url(&self, request: cri_api::ExecRequest) -> Result<String, RuntimeError>;
    /// URL of a streaming attach session.
    async fn attach_url(&self, request: cri_api::AttachRequest) -> Result<String, RuntimeError>;
    /// URL of a port-forward session into a sandbox.
    async fn port_forward_url(
        &self,
        sandbox_id: &str,
        ports: &[i32],
    ) -> Result<String, RuntimeError>;

    /// The image, or `None` when it is not present.
    async fn image_status(&self, image: &str) -> Result<Option<cri_api::Image>, RuntimeError>;
    /// Pulls an image, returning its resolved reference.
    async fn pull_image(
        &self,
        image: &str,
        auth: Option<cri_api::AuthConfig>,
        sandbox_config: Option<&cri_api::PodSandboxConfig>,
    ) -> Result<String, RuntimeError>;
    /// Every image present.
    async fn list_images(&self) -> Result<Vec<cri_api::Image>, RuntimeError>;
    /// Removes an image.
    async fn remove_image(&self, image: &str) -> Result<(), RuntimeError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(kind: &str, status: bool, reason: &str) -> cri_api::RuntimeCondition {
        cri_api::RuntimeCondition {
            r#type: kind.to_string(),
            status,
            reason: reason.to_string(),
            message: String::new(),
        }
    }

    #[test]
    fn health_needs_both_conditions_and_says_what_is_missing() {
        let ok = RuntimeHealth::from_conditions(&[
            condition("RuntimeReady", true, ""),
            condition("NetworkReady", true, ""),
        ]);
        assert!(ok.is_ready());
        assert_eq!(ok.message, "");

        let no_net = RuntimeHealth::from_conditions(&[
            condition("RuntimeReady", true, ""),
            condition("NetworkReady", false, "NetworkPluginNotReady"),
        ]);
        assert!(no_net.runtime_ready && !no_net.network_ready && !no_net.is_ready());
        assert!(no_net.message.contains("NetworkPluginNotReady"));

        let empty = RuntimeHealth::from_conditions(&[]);
        assert!(!empty.runtime_ready && !empty.network_ready);
        assert!(empty.message.contains("RuntimeReady: not reported"));
    }

    #[test]
    fn node_runtime_version_is_name_scheme_version() {
        let v = RuntimeVersion {
            runtime_name: "containerd".into(),
            runtime_version: "1.6.20".into(),
            runtime_api_version: "v1".into(),
        };
        assert_eq!(v.node_runtime_version(), "containerd://1.6.20");
    }

    #[test]
    fn not_found_is_recognised_from_grpc_and_simulated_errors() {
        let grpc = RuntimeError::from(CriError::Rpc {
            method: "ContainerStatus",
            code: tonic::Code::NotFound,
            message: "an error occurred when try to find container".into(),
        });
        assert!(grpc.is_not_found() && !grpc.is_unavailable());
        let sim = RuntimeError::NotFound {
            kind: "container",
            id: "c1".into(),
        };
        assert!(sim.is_not_found());
        assert!(!RuntimeError::Failed("boom".into()).is_not_found());
    }
}
