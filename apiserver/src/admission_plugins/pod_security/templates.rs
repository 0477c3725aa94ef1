//! Which kinds carry a pod template, and the template itself: the
//! workloads upstream's Pod Security warns and audits about (Deployments,
//! ReplicaSets, StatefulSets, DaemonSets, Jobs, CronJobs,
//! ReplicationControllers, PodTemplates) but never refuses, since the pods
//! they make are checked when they are created.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::Value;

/// Where `group`/`resource` keeps its pod template; `None` for kinds
/// without one.
pub(super) fn template_path(group: &str, resource: &str) -> Option<&'static [&'static str]> {
    match (group, resource) {
        ("", "replicationcontrollers")
        | ("apps", "replicasets" | "deployments" | "statefulsets" | "daemonsets")
        | ("batch", "jobs") => Some(&["spec", "template"]),
        ("", "podtemplates") => Some(&["template"]),
        ("batch", "cronjobs") => Some(&["spec", "jobTemplate", "spec", "template"]),
        _ => None,
    }
}

/// The pod template at `path` in `object`: `Ok(None)` when the object has
/// none (a ReplicationController's is optional), `Err` with the decoding
/// error when it is not a pod template.
pub(super) fn extract(object: &Value, path: &[&str]) -> Result<Option<PodTemplateSpec>, String> {
    let mut at = object;
    for step in path {
        match at.get(step) {
            Some(next) if !next.is_null() => at = next,
            _ => return Ok(None),
        }
    }
    serde::Deserialize::deserialize(at)
        .map(Some)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_upstream_workload_kind_has_its_template_found() {
        let deployment = json!({"spec": {"template": {"spec": {"containers": [{"name": "a"}]}}}});
        let template = extract(&deployment, template_path("apps", "deployments").unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(template.spec.unwrap().containers[0].name, "a");
        let cronjob = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "b"}]}}}}}});
        let template = extract(&cronjob, template_path("batch", "cronjobs").unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(template.spec.unwrap().containers[0].name, "b");
        let rc = json!({"spec": {"replicas": 1}});
        assert!(
            extract(&rc, template_path("", "replicationcontrollers").unwrap())
                .unwrap()
                .is_none()
        );
        for (group, resource) in [
            ("", "podtemplates"),
            ("apps", "replicasets"),
            ("apps", "statefulsets"),
            ("apps", "daemonsets"),
            ("batch", "jobs"),
        ] {
            assert!(template_path(group, resource).is_some(), "{resource}");
        }
        assert!(template_path("", "pods").is_none());
        assert!(template_path("", "configmaps").is_none());
    }
}
