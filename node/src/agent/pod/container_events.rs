//! How the events a node reports about a pod's containers name them, as a
//! kubelet's do: the pod, with the container's place in its spec as the
//! field path (`spec.containers{web}`), which `kubectl describe pod` shows
//! under Events; and the pod as the kubelet writes it in messages
//! (`name_namespace(uid)`).

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use skiff_common::events::object_reference;

/// The pod, pointing at its container `name`.
pub(crate) fn container_reference(pod: &Pod, name: &str) -> ObjectReference {
    let spec = pod.spec.as_ref();
    let named = |list: Option<&Vec<k8s_openapi::api::core::v1::Container>>| {
        list.is_some_and(|l| l.iter().any(|c| c.name == name))
    };
    let list = if named(spec.map(|s| &s.containers)) {
        "containers"
    } else if named(spec.and_then(|s| s.init_containers.as_ref())) {
        "initContainers"
    } else {
        "ephemeralContainers"
    };
    ObjectReference {
        field_path: Some(format!("spec.{list}{{{name}}}")),
        ..object_reference(pod)
    }
}

/// The pod as a kubelet's messages name it: `name_namespace(uid)`.
pub(crate) fn pod_name(pod: &Pod) -> String {
    let meta = &pod.metadata;
    format!(
        "{}_{}({})",
        meta.name.as_deref().unwrap_or_default(),
        meta.namespace.as_deref().unwrap_or_default(),
        meta.uid.as_deref().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_field_path_names_the_containers_list() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {"initContainers": [{"name": "setup"}], "containers": [{"name": "web"}]}
        }))
        .unwrap();
        let path = |name| container_reference(&pod, name).field_path;
        assert_eq!(path("web").as_deref(), Some("spec.containers{web}"));
        assert_eq!(path("setup").as_deref(), Some("spec.initContainers{setup}"));
        assert_eq!(
            path("debugger").as_deref(),
            Some("spec.ephemeralContainers{debugger}")
        );
        assert_eq!(container_reference(&pod, "web").name.as_deref(), Some("p"));
        assert_eq!(pod_name(&pod), "p_ns(u)");
    }
}
