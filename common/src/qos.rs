//! A pod's quality-of-service class, as upstream derives it from the
//! requests and limits of its containers (init containers included).

use k8s_openapi::api::core::v1::Pod;

use crate::quantity;

/// The class recorded in the pod's status (set by the API server on
/// create), else [`qos_class`] of its spec: what the node acts on.
pub fn recorded_qos_class(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.qos_class.as_deref())
        .unwrap_or_else(|| qos_class(pod))
}

/// `Guaranteed` when every container limits CPU and memory and requests what
/// it limits, `BestEffort` when no container asks for either, else
/// `Burstable`. Requests and limits compare by value (`1` equals `1000m`).
pub fn qos_class(pod: &Pod) -> &'static str {
    let Some(spec) = pod.spec.as_ref() else {
        return "BestEffort";
    };
    let mut any = false;
    let mut guaranteed = true;
    for c in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        let resources = c.resources.as_ref();
        let requests = resources.and_then(|r| r.requests.as_ref());
        let limits = resources.and_then(|r| r.limits.as_ref());
        for name in ["cpu", "memory"] {
            let request = requests.and_then(|r| r.get(name));
            let limit = limits.and_then(|l| l.get(name));
            if request.is_some() || limit.is_some() {
                any = true;
            }
            match (request, limit) {
                (_, None) => guaranteed = false,
                (Some(r), Some(l)) if quantity::milli_value(r) != quantity::milli_value(l) => {
                    guaranteed = false
                }
                _ => {}
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(resources: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "spec": {"containers": [{"name": "c", "resources": resources}]}
        }))
        .unwrap()
    }

    #[test]
    fn classes_follow_requests_and_limits() {
        assert_eq!(qos_class(&Pod::default()), "BestEffort");
        assert_eq!(qos_class(&pod(serde_json::json!({}))), "BestEffort");
        let both = serde_json::json!({"cpu": "1", "memory": "1Gi"});
        assert_eq!(
            qos_class(&pod(serde_json::json!({"limits": both, "requests": both}))),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&pod(serde_json::json!({"limits": both}))),
            "Guaranteed",
            "requests default to limits"
        );
        assert_eq!(
            qos_class(&pod(serde_json::json!({
                "limits": {"cpu": "1", "memory": "1Gi"},
                "requests": {"cpu": "1000m", "memory": "1Gi"}
            }))),
            "Guaranteed",
            "equal by value, not by spelling"
        );
        assert_eq!(
            qos_class(&pod(serde_json::json!({"requests": {"cpu": "100m"}}))),
            "Burstable"
        );
        assert_eq!(
            qos_class(&pod(serde_json::json!({"limits": {"cpu": "1"}}))),
            "Burstable",
            "memory unlimited"
        );
    }
}
