//! Finds what a node-server request names: the pod (from the agent's pod
//! cache, for its UID and spec) and its container or sandbox in the runtime
//! (by the labels the agent put on them).

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use skiff_informer::Cache;

use crate::agent::pod::labels;
use crate::runtime::{Runtime, RuntimeError, cri_api};

/// Why a request's target could not be found.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TargetError {
    /// The pod is not bound to this node (or not known yet).
    #[error("pod {namespace}/{name} not found on this node")]
    PodNotFound {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// The pod has no such container.
    #[error("container {container} is not valid for pod {pod}")]
    NoSuchContainer {
        /// The container asked for.
        container: String,
        /// The pod.
        pod: String,
    },
    /// The container has no running instance to exec in or attach to:
    /// a kubelet's words, which kubectl shows after "unable to upgrade
    /// connection: ".
    #[error("container not found ({container:?})")]
    ContainerNotFound {
        /// The container.
        container: String,
    },
    /// The pod's sandbox has no running instance.
    #[error("container {container:?} in pod {pod:?} is not running")]
    NotRunning {
        /// The container (empty for the sandbox).
        container: String,
        /// The pod.
        pod: String,
    },
    /// The runtime failed.
    #[error("container runtime: {0}")]
    Runtime(#[from] RuntimeError),
}

/// A pod bound to this node, as the agent's cache holds it.
pub(crate) fn pod(
    cache: &Cache<Pod>,
    namespace: &str,
    name: &str,
) -> Result<Arc<Pod>, TargetError> {
    cache
        .get(namespace, name)
        .ok_or_else(|| TargetError::PodNotFound {
            namespace: namespace.to_string(),
            name: name.to_string(),
        })
}

/// The pod's UID.
pub(crate) fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

/// Checks that `container` is one of the pod's (init, regular or ephemeral)
/// containers.
pub(crate) fn check_container(pod: &Pod, container: &str) -> Result<(), TargetError> {
    let spec = pod.spec.as_ref();
    let known = spec.is_some_and(|s| {
        s.containers.iter().any(|c| c.name == container)
            || s.init_containers
                .iter()
                .flatten()
                .any(|c| c.name == container)
            || s.ephemeral_containers
                .iter()
                .flatten()
                .any(|c| c.name == container)
    });
    if known {
        Ok(())
    } else {
        Err(TargetError::NoSuchContainer {
            container: container.to_string(),
            pod: pod.metadata.name.clone().unwrap_or_default(),
        })
    }
}

/// The newest instance of the pod's `container` in the runtime, if any.
pub(crate) async fn newest_container(
    runtime: &dyn Runtime,
    pod_uid: &str,
    container: &str,
) -> Result<Option<cri_api::Container>, TargetError> {
    let filter = cri_api::ContainerFilter {
        label_selector: HashMap::from([
            (labels::POD_UID.to_string(), pod_uid.to_string()),
            (labels::CONTAINER_NAME.to_string(), container.to_string()),
        ]),
        ..Default::default()
    };
    let containers = runtime.list_containers(Some(filter)).await?;
    Ok(containers
        .into_iter()
        .max_by_key(|c| (c.metadata.as_ref().map_or(0, |m| m.attempt), c.created_at)))
}

/// The running instance of the pod's `container`.
pub(crate) async fn running_container(
    runtime: &dyn Runtime,
    pod: &Pod,
    container: &str,
) -> Result<String, TargetError> {
    check_container(pod, container)?;
    match newest_container(runtime, uid(pod), container).await? {
        Some(c) if c.state == cri_api::ContainerState::ContainerRunning as i32 => Ok(c.id),
        _ => Err(TargetError::ContainerNotFound {
            container: container.to_string(),
        }),
    }
}

/// The pod's ready sandbox.
pub(crate) async fn ready_sandbox(runtime: &dyn Runtime, pod: &Pod) -> Result<String, TargetError> {
    let filter = cri_api::PodSandboxFilter {
        label_selector: HashMap::from([(labels::POD_UID.to_string(), uid(pod).to_string())]),
        ..Default::default()
    };
    let sandboxes = runtime.list_pod_sandboxes(Some(filter)).await?;
    sandboxes
        .into_iter()
        .filter(|s| s.state == cri_api::PodSandboxState::SandboxReady as i32)
        .max_by_key(|s| s.created_at)
        .map(|s| s.id)
        .ok_or_else(|| TargetError::NotRunning {
            container: String::new(),
            pod: pod.metadata.name.clone().unwrap_or_default(),
        })
}
