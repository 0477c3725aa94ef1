//! The status a ReplicaSet (or ReplicationController) reports for its pods.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use super::owner::ReplicaOwner;
use crate::controller_utils::now;
use crate::pod_control::{is_available, is_ready};

/// Why the last attempt to reach the desired count failed, for the
/// ReplicaFailure condition.
#[derive(Debug, Clone)]
pub(crate) struct ManageFailure {
    /// FailedCreate or FailedDelete.
    pub reason: &'static str,
    /// The API's error.
    pub message: String,
}

/// The new status for `owner` given its active pods and the outcome of
/// managing replicas (None when nothing failed).
pub(super) fn calculate<K: ReplicaOwner>(
    owner: &K,
    pods: &[Arc<Pod>],
    failure: Option<&ManageFailure>,
    at: &Time,
) -> Value {
    let template_labels = owner
        .pod_template()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let fully_labeled = pods
        .iter()
        .filter(|p| {
            let labels = p.metadata.labels.as_ref();
            template_labels
                .iter()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        })
        .count();
    let ready = pods.iter().filter(|p| is_ready(p)).count();
    let min_ready = owner.min_ready_seconds();
    let available = pods
        .iter()
        .filter(|p| is_available(p, min_ready, at))
        .count();
    let old = owner.status_json();
    let mut conditions: Vec<Value> = old["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c["type"] != "ReplicaFailure")
        .collect();
    if let Some(f) = failure {
        let previous = old["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "ReplicaFailure"))
            .cloned();
        conditions.push(previous.unwrap_or_else(|| {
            json!({
                "type": "ReplicaFailure",
                "status": "True",
                "reason": f.reason,
                "message": f.message,
                "lastTransitionTime": now(),
            })
        }));
    }
    json!({
        "replicas": pods.len(),
        "fullyLabeledReplicas": fully_labeled,
        "readyReplicas": ready,
        "availableReplicas": available,
        "observedGeneration": owner.meta().generation.unwrap_or(0),
        "conditions": if conditions.is_empty() { Value::Null } else { Value::Array(conditions) },
    })
}

/// True when `new` (as built by [`calculate`]) differs from `old`, with
/// absent fields read as zero / empty.
pub(super) fn changed(old: &Value, new: &Value) -> bool {
    [
        "replicas",
        "fullyLabeledReplicas",
        "readyReplicas",
        "availableReplicas",
        "observedGeneration",
    ]
    .iter()
    .any(|f| old[f].as_i64().unwrap_or(0) != new[f].as_i64().unwrap_or(0))
        || old["conditions"].as_array().map_or(0, Vec::len)
            != new["conditions"].as_array().map_or(0, Vec::len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus, PodTemplateSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8s_openapi::jiff::Timestamp;

    fn pod(labels: &[(&str, &str)], ready_for: Option<i64>) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                labels: Some(skiff_common::labels::from_pairs(labels)),
                ..Default::default()
            },
            spec: None,
            status: Some(PodStatus {
                conditions: ready_for.map(|s| {
                    vec![PodCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        last_transition_time: Some(Time(
                            Timestamp::from_second(Timestamp::now().as_second() - s).unwrap(),
                        )),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
        })
    }

    #[test]
    fn counts_labels_readiness_and_availability() {
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                generation: Some(3),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                min_ready_seconds: Some(10),
                template: Some(PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(
                            [("app".into(), "a".into()), ("tier".into(), "b".into())].into(),
                        ),
                        ..Default::default()
                    }),
                    spec: None,
                }),
                ..Default::default()
            }),
            status: None,
        };
        let pods = vec![
            pod(&[("app", "a"), ("tier", "b")], Some(60)),
            pod(&[("app", "a"), ("tier", "b")], Some(1)),
            pod(&[("app", "a")], None),
        ];
        let failure = ManageFailure {
            reason: "FailedCreate",
            message: "quota".into(),
        };
        let s = calculate(&rs, &pods, Some(&failure), &now());
        assert_eq!(s["replicas"], 3);
        assert_eq!(s["fullyLabeledReplicas"], 2);
        assert_eq!(s["readyReplicas"], 2);
        assert_eq!(s["availableReplicas"], 1);
        assert_eq!(s["observedGeneration"], 3);
        assert_eq!(s["conditions"][0]["reason"], "FailedCreate");
        assert!(changed(&Value::Null, &s));
        assert!(!changed(&s, &s));
    }
}
