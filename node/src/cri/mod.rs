//! A typed CRI v1 client (`CriRuntime`) over a unix socket: every call has a
//! deadline, every failure keeps its gRPC code and message.

mod connect;
mod error;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use k8s_cri::v1 as api;
use k8s_cri::v1::image_service_client::ImageServiceClient;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use tonic::transport::Channel;

pub(crate) use connect::socket_path;
pub use error::CriError;

use crate::runtime::{ExecOutput, Runtime, RuntimeError, RuntimeHealth, RuntimeVersion};

/// Deadlines for CRI calls. A call that takes its own duration (stopping with
/// a grace period, a synchronous exec) gets that duration on top.
#[derive(Debug, Clone, Copy)]
pub struct CriTimeouts {
    /// Every call except image pulls (the kubelet's runtime request timeout).
    pub default: Duration,
    /// Image pulls, which may move large amounts of data.
    pub pull: Duration,
}

impl Default for CriTimeouts {
    fn default() -> Self {
        Self {
            default: Duration::from_secs(120),
            pull: Duration::from_secs(600),
        }
    }
}

/// A client of one CRI runtime (containerd), shared by cloning: clones use
/// the same connection, which is re-established after the runtime restarts.
#[derive(Debug, Clone)]
pub struct CriRuntime {
    socket: PathBuf,
    runtime: RuntimeServiceClient<Channel>,
    images: ImageServiceClient<Channel>,
    timeouts: CriTimeouts,
}

impl CriRuntime {
    /// A client for the runtime at `endpoint` (`unix:///path` or `/path`).
    /// Nothing is dialled until the first call, so this succeeds while the
    /// runtime is still starting.
    pub fn new(endpoint: &str, timeouts: CriTimeouts) -> Result<Self, CriError> {
        let socket = socket_path(endpoint)?;
        let channel = connect::lazy_unix_channel(&socket, Duration::from_secs(5));
        Ok(Self {
            socket,
            runtime: RuntimeServiceClient::new(channel.clone()),
            images: ImageServiceClient::new(channel),
            timeouts,
        })
    }

    /// The unix socket this client talks to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The deadlines in use.
    pub fn timeouts(&self) -> CriTimeouts {
        self.timeouts
    }

    /// A copy of this client whose calls have other deadlines.
    pub fn with_timeouts(&self, timeouts: CriTimeouts) -> Self {
        Self {
            timeouts,
            ..self.clone()
        }
    }

    async fn call<T>(
        method: &'static str,
        deadline: Duration,
        rpc: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, CriError> {
        // One local deadline for connecting, sending and answering. No
        // `grpc-timeout` header is sent: tonic would enforce it itself and
        // report expiry as `Cancelled`. Dropping the call on expiry resets
        // its HTTP/2 stream, which cancels the work in the runtime too.
        match tokio::time::timeout(deadline, rpc).await {
            Ok(Ok(response)) => Ok(response.into_inner()),
            Ok(Err(status)) => Err(CriError::rpc(method, status)),
            Err(_) => Err(CriError::Timeout {
                method,
                after: deadline,
            }),
        }
    }

    /// `Status`: the raw response, including the runtime's conditions.
    pub async fn status(&self, verbose: bool) -> Result<api::StatusResponse, CriError> {
        let d = self.timeouts.default;
        let mut c = self.runtime.clone();
        Self::call("Status", d, c.status(api::StatusRequest { verbose })).await
    }
}

/// The CRI calls themselves; each answer's failure keeps its gRPC code in
/// [`RuntimeError::Cri`].
#[async_trait]
impl Runtime for CriRuntime {
    /// `Version`: runtime name and versions.
    async fn version(&self) -> Result<RuntimeVersion, RuntimeError> {
        let d = self.timeouts.default;
        let mut c = self.runtime.clone();
        let r = Self::call("Version", d, c.version(api::VersionRequest::default())).await?;
        Ok(RuntimeVersion {
            runtime_name: r.runtime_name,
            runtime_version: r.runtime_version,
            runtime_api_version: r.runtime_api_version,
        })
    }

    /// `Status`, reduced to the two conditions every runtime must report.
    async fn health(&self) -> Result<RuntimeHealth, RuntimeError> {
        let status = self.status(false).await?;
        let status = status.status.ok_or(CriError::MissingField {
            method: "Status",
            field: "status",
        })?;
        Ok(RuntimeHealth::from_conditions(&status.conditions))
    }

    /// `RunPodSandbox`: creates and starts a sandbox, returning its id.
    async fn run_pod_sandbox(
        &self,
        config: &api::PodSandboxConfig,
        runtime_handler: &str,
    ) -> Result<String, RuntimeError> {
        let d = self.timeouts.default;
        let mut c = self.runtime.clone();
        let message = api::RunPodSandboxRequest {
            config: Some(config.clone()),
            runtime_handler: runtime_handler.to_string(),
        };
        let r = Self::call("RunPodSandbox", d, c.run_pod_sandbox(message)).await?;
        Ok(r.pod_sandbox_id)
    }

    /// `StopPodSandbox`: stops every container of the sandbox and tears down
    /// its network. Idempotent in the runtime.
    async fn stop_pod_sandbox(&self, sandbox_id: &str) -> Result<(), RuntimeError> {
        let d = self.timeouts.default;
        let mut c = self.runtime.clone();
        let message = api::StopPodSandboxRequest {
            pod_sandbox_id: sandbox_id.to_string(),
        };
        Self::call("StopPodSandbox", d, c.stop_pod_sandbox(message)).await?;
        Ok(())
    }

    /// `RemovePodSandbox`: removes a stopped sandbox and its containers.
    async fn remove_pod_sandbox(&self, sandbox_id: &str) -> Result<(), RuntimeError> {
        let d = self.timeouts.default;
        let mut c = self.runtime.clone();
        let message = api::RemovePodSandboxRequest {
            pod_sandbox_id: sandbox_id.to_string(),
        };
        Self::call("RemovePodSandbox", d, c.remove_pod_sandbox(message)).await?;
        Ok(())
    }

    /// `PodSandboxStatus`.
    async fn pod_sandbox_status(
        &self,
        sandbox_id: &str,
    ) -> Result<api::PodSandboxStatus, RuntimeError> {
        let d = self.timeouts.default;
        let mut c = self.runtime.clone();
        let message = api::PodSandboxStatusRequest {
            pod_sandbox_id: sandbox_id.to_string(),
            verbose: false,
        };
        let r = Self::call("PodSandboxStatus", d, c.pod_sandbox_status(message)).await?;
        Ok(r.status.ok_or(CriError::MissingField {
            method: "PodSandboxStatus",
            field: "status",
        })?)
    }

    /// `ListPodSandbox`.
    async fn list_pod_sandboxes(
        &self,
        filter: Option<api::PodSandboxFilter>,
    ) -> Result<Vec<api::PodSandbox>, RuntimeError> {
        let d = self.timeouts.default;
        let mut c = self.runtime.clone();
        let message = api::ListPodSandboxRequest { filter };
        let r = Self::call("ListPodSandbox", d, c.list_pod_sandbox(message)).await?;
        Ok(r.items)
    }

    /// `CreateContainer` in a sandbox, returning the container id.
    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &api::ContainerConfig,
        sandbox_config: &api::PodSandboxConfig,
    ) -> Result<String, RuntimeError> {
        let d = self.timeouts.default;
        let mut c = self.runtime.clone();
        let message = api::CreateContainerRequest {
            pod_sandbox_id: sandbox_id.to_string(),
            config: Some(config.clone()),
            sandbox_config: Some(sandbox_config.clone()),
        };
        let r = Self::call("CreateContainer", d, c.create_container(message)).await?;
        Ok(r.container_id)
    }

    /// `StartContainer`.
    async fn start_container(&self, container_id: &str) -> Result<(), RuntimeError> {
        let d = self.timeouts.default;
        let mut c = self.runtime.clone();
        let message = api::StartContainerRequest {
            container_id: container_id.to_string(),
        };
        Self::call("StartContainer", d, c.start_container(message)).await?;
        Ok(())
    }

    /// `StopContainer`: SIGTERM (or the image's stop signal), then SIGKILL
    /// after `grace`.
    async fn stop_container(
        &self,
        container_id: &str,
        grace: Duration,
    ) -> Result<(), RuntimeError> {
        let d = self.timeouts.default + grace;
        let mut c = self.runtime.clone();
        let message = api::StopContainerRequest {
            container_id: container_id.to_string(),
            // CRI counts whole seconds; round a partial second up rather than
            // cut the grace short.
            timeout: i64::try_from(grace.as_secs() + u64::from(grace.subsec_nanos() > 0))
                .unwrap_or(i64::MAX),
        };
        Self::call("StopContainer", d, c.stop_container(message)).await?;
        Ok(())
    }

    /// `UpdateContainerResources`, Linux resources only.
    async fn update_container_resources(
        &self,
        container_id: &str,
        resources: &api::LinuxContainerResources,
    ) -> Result<(), RuntimeError> {
        let d = self.timeouts.default;
        let mut c = self.runtime.clone();
        let message = api::UpdateContainerResourcesRequest {
            container_id: container_id.to_string(),
            linux: Some(resources.clone()),
            ..Default::default()
        };
        Self::call(
            "UpdateContainerResources",
            d,
            c.update_container_resources(message),
        )
        .await?;
        Ok(())
    }

    /// `RemoveContainer` (stops it first if it is running).
    async fn remove_container(&self, container_id: &str) -> Result<(), RuntimeError> {
        let d = self.timeouts.default;
        let mut c = self.runtime.clone();
        let message = api::RemoveContainerRequest {
            container_id: container_id.to_string(),
        };
        Self::call("RemoveContainer", d, c.remove_container(message)).await?;
        Ok(())
    }

    /// `ReopenContainerLog`.
    async fn reopen_container_log(&self, container_id: &str) -> Result<(), RuntimeError> {
        let d = self.timeouts.default;
        let mut c = self.runtime.clone();
        let message = api::ReopenContainerLogRequest {
            container_id: container_id.to_string(),
        };
        Self::call("ReopenContainerLog", d, c.reopen_container_log(message)).await?;
        Ok(())
    }

    /// `ContainerStatus`.
    async fn container_status(
        &self,
        container_id: &str,
    ) -> Result<api::ContainerStatus, RuntimeError> {
        let d = self.timeouts.default;
        let mut c = self.runtime.clone();
        let message = api::ContainerStatusRequest {
            container_id: container_id.to_string(),
            verbose: false,
        };
        let r = Self::call("ContainerStatus", d, c.container_status(message)).await?;
        let mut status = r.status.ok_or(CriError::MissingField {
            method: "ContainerStatus",
            field: "status",
        })?;
        clamp_start_to_finish(&mut status);
        Ok(status)
    }

    /// `ListContainers`.
    async fn list_containers(
        &self,
        filter: Option<api::ContainerFilter>,
    ) -> Result<Vec<api::Container>, RuntimeError> {
        let d = self.timeouts.default;
        let mut c = self.runtime.clone();
        let message = api::ListContainersRequest { filter };
        let r = Self::call("ListContainers", d, c.list_containers(message)).await?;
        Ok(r.containers)
    }

    /// `ListContainerStats`: CPU, memory and writable-layer usage of the
    /// containers matching `filter` (all when `None`).
    async fn list_container_stats(
        &self,
        filter: Option<api::ContainerStatsFilter>,
    ) -> Result<Vec<api::ContainerStats>, RuntimeError> {
        let d = self.timeouts.default;
        let mut c = self.runtime.clone();
        let message = api::ListContainerStatsRequest { filter };
        let r = Self::call("ListContainerStats", d, c.list_container_stats(message)).await?;
        Ok(r.stats)
    }

    /// `ListPodSandboxStats`: usage of whole pod sandboxes (their cgroup,
    /// network and processes); runtimes that predate it answer
    /// `Unimplemented`.
    async fn list_pod_sandbox_stats(
        &self,
        filter: Option<api::PodSandboxStatsFilter>,
    ) -> Result<Vec<api::PodSandboxStats>, RuntimeError> {
        let d = self.timeouts.default;
        let mut c = self.runtime.clone();
        let message = api::ListPodSandboxStatsRequest { filter };
        let r = Self::call("ListPodSandboxStats", d, c.list_pod_sandbox_stats(message)).await?;
        Ok(r.stats)
    }

    /// `ExecSync`: runs `cmd` in the container and collects its output.
    /// `timeout` is the command's own limit (zero: none); the call's deadline
    /// is that plus the default.
    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecOutput, RuntimeError> {
        let d = self.timeouts.default + timeout;
        let mut c = self.runtime.clone();
        let message = api::ExecSyncRequest {
            container_id: container_id.to_string(),
            cmd: cmd.to_vec(),
            timeout: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
        };
        let r = Self::call("ExecSync", d, c.exec_sync(message)).await?;
        Ok(ExecOutput {
            stdout: r.stdout,
            stderr: r.stderr,
            exit_code: r.exit_code,
        })
    }

    /// `Exec`: the URL of the runtime's streaming server for this exec.
    async fn exec_url(&self, message: api::ExecRequest) -> Result<String, RuntimeError> {
        let d = self.timeouts.default;
        let mut c = self.runtime.clone();
        let r = Self::call("Exec", d, c.exec(message)).await?;
        Ok(r.url)
    }

    /// `Attach`: the streaming URL to attach to the container's main process.
    async fn attach_url(&self, message: api::AttachRequest) -> Result<String, RuntimeError> {
        let d = self.timeouts.default;
        let mut c = self.runtime.clone();
        let r = Self::call("Attach", d, c.attach(message)).await?;
        Ok(r.url)
    }

    /// `PortForward`: the streaming URL to forward to `ports` of the sandbox.
    async fn port_forward_url(
        &self,
        sandbox_id: &str,
        ports: &[i32],
    ) -> Result<String, RuntimeError> {
        let d = self.timeouts.default;
        let mut c = self.runtime.clone();
        let message = api::PortForwardRequest {
            pod_sandbox_id: sandbox_id.to_string(),
            port: ports.to_vec(),
        };
        let r = Self::call("PortForward", d, c.port_forward(message)).await?;
        Ok(r.url)
    }

    /// `PullImage`, returning the image reference the runtime resolved.
    async fn pull_image(
        &self,
        image: &str,
        auth: Option<api::AuthConfig>,
        sandbox_config: Option<&api::PodSandboxConfig>,
    ) -> Result<String, RuntimeError> {
        let d = self.timeouts.pull;
        let mut c = self.images.clone();
        let message = api::PullImageRequest {
            image: Some(image_spec(image)),
            auth,
            sandbox_config: sandbox_config.cloned(),
        };
        let r = Self::call("PullImage", d, c.pull_image(message)).await?;
        Ok(r.image_ref)
    }

    /// `ImageStatus`: `None` when the image is not present.
    async fn image_status(&self, image: &str) -> Result<Option<api::Image>, RuntimeError> {
        let d = self.timeouts.default;
        let mut c = self.images.clone();
        let message = api::ImageStatusRequest {
            image: Some(image_spec(image)),
            verbose: false,
        };
        let r = Self::call("ImageStatus", d, c.image_status(message)).await?;
        Ok(r.image)
    }

    /// `ListImages`: every image the runtime can run.
    async fn list_images(&self) -> Result<Vec<api::Image>, RuntimeError> {
        let d = self.timeouts.default;
        let mut c = self.images.clone();
        let message = api::ListImagesRequest { filter: None };
        let r = Self::call("ListImages", d, c.list_images(message)).await?;
        Ok(r.images)
    }

    /// `RemoveImage`.
    async fn remove_image(&self, image: &str) -> Result<(), RuntimeError> {
        let d = self.timeouts.default;
        let mut c = self.images.clone();
        let message = api::RemoveImageRequest {
            image: Some(image_spec(image)),
        };
        Self::call("RemoveImage", d, c.remove_image(message)).await?;
        Ok(())
    }
}

/// containerd 1.6 stamps `started_at` after the start call returns, while
/// `finished_at` comes from the exit event; a process that exits at once can
/// thus appear to finish before it started. A container cannot, so the start
/// is moved back to the finish.
fn clamp_start_to_finish(status: &mut api::ContainerStatus) {
    if status.finished_at > 0 && status.started_at > status.finished_at {
        status.started_at = status.finished_at;
    }
}

fn image_spec(image: &str) -> api::ImageSpec {
    api::ImageSpec {
        image: image.to_string(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_container_never_finishes_before_it_started() {
        let mut quick = api::ContainerStatus {
            started_at: 1_000_500,
            finished_at: 1_000_000,
            ..Default::default()
        };
        clamp_start_to_finish(&mut quick);
        assert_eq!(
            (quick.started_at, quick.finished_at),
            (1_000_000, 1_000_000)
        );
        let mut running = api::ContainerStatus {
            started_at: 1_000_500,
            finished_at: 0,
            ..Default::default()
        };
        clamp_start_to_finish(&mut running);
        assert_eq!(running.started_at, 1_000_500);
    }

    #[tokio::test]
    async fn calls_to_a_missing_socket_fail_as_unavailable_within_the_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("none.sock");
        let timeouts = CriTimeouts {
            default: Duration::from_secs(5),
            pull: Duration::from_secs(5),
        };
        let cri = CriRuntime::new(&format!("unix://{}", socket.display()), timeouts).unwrap();
        let err = cri.version().await.unwrap_err();
        assert!(err.is_unavailable(), "{err}");
        assert!(!err.is_not_found());
    }

    #[tokio::test]
    async fn a_socket_that_never_answers_hits_the_local_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("silent.sock");
        // Accepts connections but never speaks HTTP/2.
        let listener = tokio::net::UnixListener::bind(&socket).unwrap();
        let _held = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        });
        let timeouts = CriTimeouts {
            default: Duration::from_millis(300),
            pull: Duration::from_millis(300),
        };
        let cri = CriRuntime::new(socket.to_str().unwrap(), timeouts).unwrap();
        let err = cri.list_containers(None).await.unwrap_err();
        assert!(err.is_unavailable(), "{err}");
        assert!(
            matches!(
                err,
                RuntimeError::Cri(CriError::Timeout {
                    method: "ListContainers",
                    ..
                })
            ),
            "{err:?}"
        );
    }
}
