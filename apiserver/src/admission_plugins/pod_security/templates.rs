//! The pod template of a workload, read where its kind's strategy says it
//! is (`KindStrategy::pod_template`): the workloads upstream's Pod Security
//! warns and audits about (Deployments, ReplicaSets, StatefulSets,
//! DaemonSets, Jobs, CronJobs, ReplicationControllers, PodTemplates) but
//! never refuses, since the pods they make are checked when they are
//! created.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::Value;

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
    use crate::kinds::{self, KindStrategy, PodSecurityCheck};
    use serde_json::json;

    fn template_path(strategy: &dyn KindStrategy) -> &'static [&'static str] {
        match strategy.pod_security() {
            PodSecurityCheck::Template(path) => path,
            other => panic!("{strategy:?} is checked as {other:?}"),
        }
    }

    #[test]
    fn every_upstream_workload_kind_has_its_template_found() {
        let deployment = json!({"spec": {"template": {"spec": {"containers": [{"name": "a"}]}}}});
        let template = extract(&deployment, template_path(&kinds::DEPLOYMENTS))
            .unwrap()
            .unwrap();
        assert_eq!(template.spec.unwrap().containers[0].name, "a");
        let cronjob = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "b"}]}}}}}});
        let template = extract(&cronjob, template_path(&kinds::CronJobs))
            .unwrap()
            .unwrap();
        assert_eq!(template.spec.unwrap().containers[0].name, "b");
        let rc = json!({"spec": {"replicas": 1}});
        assert!(
            extract(&rc, template_path(&kinds::ReplicationControllers))
                .unwrap()
                .is_none()
        );
        let pod_template = json!({"template": {"spec": {"containers": [{"name": "c"}]}}});
        let template = extract(&pod_template, template_path(&kinds::PodTemplates))
            .unwrap()
            .unwrap();
        assert_eq!(template.spec.unwrap().containers[0].name, "c");
        for strategy in [
            &kinds::REPLICA_SETS as &dyn KindStrategy,
            &kinds::STATEFUL_SETS,
            &kinds::DAEMON_SETS,
            &kinds::Jobs,
        ] {
            assert_eq!(template_path(strategy), ["spec", "template"]);
        }
        assert_eq!(kinds::Pods.pod_security(), PodSecurityCheck::Pod);
        assert_eq!(kinds::ConfigMaps.pod_security(), PodSecurityCheck::Nothing);
    }
}
