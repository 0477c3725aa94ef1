//! Ephemeral containers, which `kubectl debug` adds to a running pod: each
//! runs once in the pod's sandbox (never restarted, probed or counted in
//! the pod's readiness) and may join the process namespace of the
//! container it targets.

use k8s_openapi::api::core::v1::{Container, EphemeralContainer, Pod};

/// One ephemeral container, as the container it runs as.
pub(crate) struct Ephemeral {
    /// Its fields that a container has too.
    pub container: Container,
    /// The container whose process namespace it joins, if any.
    pub target: Option<String>,
}

fn as_container(ephemeral: &EphemeralContainer) -> Option<Container> {
    // The two types share every field but the target, which a Container
    // does not know (and so drops).
    serde_json::to_value(ephemeral)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
}

/// The pod's ephemeral containers, in the order they were added.
pub(crate) fn of(pod: &Pod) -> Vec<Ephemeral> {
    pod.spec
        .iter()
        .flat_map(|s| s.ephemeral_containers.iter().flatten())
        .filter_map(|e| {
            Some(Ephemeral {
                container: as_container(e)?,
                target: e.target_container_name.clone().filter(|t| !t.is_empty()),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ephemeral_containers_run_as_containers_with_their_target() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "spec": {"containers": [{"name": "app"}],
                     "ephemeralContainers": [
                         {"name": "debugger", "image": "busybox", "stdin": true, "tty": true,
                          "command": ["sh"], "targetContainerName": "app"},
                         {"name": "plain", "image": "busybox"}]}
        }))
        .unwrap();
        let found = of(&pod);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].container.name, "debugger");
        assert_eq!(found[0].container.image.as_deref(), Some("busybox"));
        assert_eq!(found[0].container.tty, Some(true));
        assert_eq!(found[0].container.command, Some(vec!["sh".to_string()]));
        assert_eq!(found[0].target.as_deref(), Some("app"));
        assert_eq!(found[1].target, None);
    }
}
