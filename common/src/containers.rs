//! Which of a pod's containers run for as long as the pod does: its
//! containers and its sidecars, the init containers with `restartPolicy:
//! Always` that start before the containers and keep running beside them.
//! Resources those hold (ports, requests counted per running pod) are held
//! by all of them together, which the scheduler's host-port check and the
//! HPA's per-pod requests both rely on.

use k8s_openapi::api::core::v1::{Container, PodSpec};

/// Whether `container`, one of a pod's init containers, is a sidecar: one
/// that is restarted (`restartPolicy: Always`) instead of run to completion.
pub fn is_sidecar(container: &Container) -> bool {
    container.restart_policy.as_deref() == Some("Always")
}

/// The containers of `spec` that run beside each other once the pod is
/// started: the containers, then the sidecars.
pub fn running(spec: &PodSpec) -> impl Iterator<Item = &Container> {
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| is_sidecar(c));
    spec.containers.iter().chain(sidecars)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(name: &str, restart_policy: Option<&str>) -> Container {
        Container {
            name: name.into(),
            restart_policy: restart_policy.map(Into::into),
            ..Default::default()
        }
    }

    #[test]
    fn running_containers_are_the_containers_then_the_sidecars() {
        let spec = PodSpec {
            containers: vec![container("app", None)],
            init_containers: Some(vec![
                container("setup", None),
                container("proxy", Some("Always")),
                container("once", Some("Never")),
            ]),
            ..Default::default()
        };
        let names: Vec<&str> = running(&spec).map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["app", "proxy"]);
    }
}
