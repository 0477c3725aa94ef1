//! Pods of a Job: what the controller adds to the template, and how it reads
//! pods back (phase, completion index).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, Pod};

use crate::controller_utils::controller_owner_ref;
use crate::pod_control::pod_from_template;

/// The finalizer that keeps a finished pod until the Job has counted it.
pub(super) const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// Annotation (and label) with an Indexed Job pod's completion index.
pub(super) const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// True for Indexed Jobs.
pub(super) fn is_indexed(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.completion_mode.as_deref()) == Some("Indexed")
}

/// A pod for `job` (with `index` for Indexed Jobs): the template plus the
/// Job's labels, the tracking finalizer and the completion index.
pub(super) fn new_pod(job: &Job, index: Option<i32>) -> Pod {
    let spec = job.spec.clone().unwrap_or_default();
    let name = job.metadata.name.clone().unwrap_or_default();
    let uid = job.metadata.uid.clone().unwrap_or_default();
    let ns = job.metadata.namespace.clone().unwrap_or_default();
    let generate_name = match index {
        Some(i) => format!("{name}-{i}-"),
        None => format!("{name}-"),
    };
    let mut pod = pod_from_template(
        &spec.template,
        &ns,
        &generate_name,
        Some(controller_owner_ref(job)),
    );
    let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
    for (k, v) in [
        ("batch.kubernetes.io/controller-uid", &uid),
        ("batch.kubernetes.io/job-name", &name),
        ("controller-uid", &uid),
        ("job-name", &name),
    ] {
        labels.entry(k.to_owned()).or_insert_with(|| v.clone());
    }
    pod.metadata
        .finalizers
        .get_or_insert_with(Vec::new)
        .push(TRACKING_FINALIZER.to_owned());
    if let Some(i) = index {
        labels.insert(COMPLETION_INDEX.to_owned(), i.to_string());
        pod.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(COMPLETION_INDEX.to_owned(), i.to_string());
        if let Some(pod_spec) = pod.spec.as_mut() {
            pod_spec.hostname = Some(format!("{name}-{i}"));
            for c in pod_spec
                .init_containers
                .iter_mut()
                .flatten()
                .chain(pod_spec.containers.iter_mut())
            {
                let env = c.env.get_or_insert_with(Vec::new);
                if !env.iter().any(|e| e.name == "JOB_COMPLETION_INDEX") {
                    env.push(EnvVar {
                        name: "JOB_COMPLETION_INDEX".into(),
                        value: None,
                        value_from: Some(EnvVarSource {
                            field_ref: Some(ObjectFieldSelector {
                                api_version: Some("v1".into()),
                                field_path: format!("metadata.annotations['{COMPLETION_INDEX}']"),
                            }),
                            ..Default::default()
                        }),
                    });
                }
            }
        }
    }
    pod
}

/// The completion index of a pod, if it has a valid one below `completions`.
pub(super) fn index_of(pod: &Pod, completions: i32) -> Option<i32> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(COMPLETION_INDEX)?
        .parse::<i32>()
        .ok()
        .filter(|i| (0..completions).contains(i))
}

/// True when the pod still carries the tracking finalizer.
pub(super) fn has_finalizer(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == TRACKING_FINALIZER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexed_pods_carry_index_hostname_labels_and_finalizer() {
        let job: Job = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pi", "namespace": "ns", "uid": "u1"},
            "spec": {
                "completionMode": "Indexed",
                "template": {"metadata": {"labels": {"a": "b"}},
                             "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
            }
        }))
        .unwrap();
        let pod = new_pod(&job, Some(3));
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("pi-3-"));
        let labels = pod.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["job-name"], "pi");
        assert_eq!(labels["batch.kubernetes.io/controller-uid"], "u1");
        assert_eq!(labels[COMPLETION_INDEX], "3");
        assert_eq!(labels["a"], "b");
        assert_eq!(index_of(&pod, 5), Some(3));
        assert_eq!(index_of(&pod, 3), None);
        assert!(has_finalizer(&pod));
        let spec = pod.spec.unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("pi-3"));
        assert_eq!(
            spec.containers[0].env.as_ref().unwrap()[0].name,
            "JOB_COMPLETION_INDEX"
        );
    }
}
