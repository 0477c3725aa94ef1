//! The labels and annotations skiff puts on CRI sandboxes and containers.
//! They are the agent's only memory across restarts: a restarted agent finds
//! the sandboxes and containers of a pod by its UID and adopts them.

use std::collections::HashMap;

/// Pod UID on sandboxes and containers.
pub const POD_UID: &str = "io.kubernetes.pod.uid";
/// Pod name on sandboxes and containers.
pub const POD_NAME: &str = "io.kubernetes.pod.name";
/// Pod namespace on sandboxes and containers.
pub const POD_NAMESPACE: &str = "io.kubernetes.pod.namespace";
/// Container name (as in the pod spec) on containers.
pub const CONTAINER_NAME: &str = "io.kubernetes.container.name";
/// Restart count of a container instance (annotation).
pub const RESTART_COUNT: &str = "io.kubernetes.container.restartCount";
/// Marks init containers (annotation `true`).
pub const INIT_CONTAINER: &str = "skiff.dev/init-container";

/// Labels identifying a pod's objects in the runtime.
pub fn pod_labels(namespace: &str, name: &str, uid: &str) -> HashMap<String, String> {
    HashMap::from([
        (POD_UID.to_string(), uid.to_string()),
        (POD_NAME.to_string(), name.to_string()),
        (POD_NAMESPACE.to_string(), namespace.to_string()),
    ])
}

/// The pod-spec name of a runtime container: its `CONTAINER_NAME` label, else the
/// name in its CRI metadata, else empty (a container skiff did not create).
pub fn container_name(container: &crate::cri_api::Container) -> String {
    container
        .labels
        .get(CONTAINER_NAME)
        .cloned()
        .or_else(|| container.metadata.as_ref().map(|m| m.name.clone()))
        .unwrap_or_default()
}

/// The restart count stored on a container, 0 when absent or unreadable.
pub fn restart_count(annotations: &HashMap<String, String>) -> u32 {
    annotations
        .get(RESTART_COUNT)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
