//! A Job's own rules for when it is done, as upstream's controller reads
//! them: `successPolicy` (an Indexed Job succeeds once the indexes a rule
//! names, or enough of them, succeeded; GA in 1.33) and `podFailurePolicy`
//! (a failed pod's exit codes or conditions fail the whole Job, are
//! ignored, or count against `backoffLimit` as any failure; GA in 1.31).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::batch::v1::{Job, PodFailurePolicyRule};
use k8s_openapi::api::core::v1::Pod;

use super::indexes;

/// The index of the first `successPolicy` rule `completed` satisfies.
pub(super) fn success_rule(job: &Job, completed: &BTreeSet<i32>) -> Option<usize> {
    let spec = job.spec.as_ref()?;
    let completions = spec.completions.unwrap_or(0);
    let rules = &spec.success_policy.as_ref()?.rules;
    rules.iter().position(|rule| {
        let named = rule
            .succeeded_indexes
            .as_deref()
            .map(|text| indexes::parse(Some(text), completions));
        match (named, rule.succeeded_count) {
            (Some(named), Some(count)) => named.intersection(completed).count() as i32 >= count,
            (Some(named), None) => !named.is_empty() && named.is_subset(completed),
            (None, Some(count)) => completed.len() as i32 >= count,
            (None, None) => false,
        }
    })
}

/// The annotation on each pod of a Job with `backoffLimitPerIndex`: how
/// often its index failed before it.
pub(super) const INDEX_FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-failure-count";

/// How often each index failed so far (failures the policy ignores aside):
/// each pod's count from its annotation, one more when it failed itself.
pub(super) fn index_failures(job: &Job, pods: &[std::sync::Arc<Pod>]) -> BTreeMap<i32, i32> {
    let completions = job.spec.as_ref().and_then(|s| s.completions).unwrap_or(0);
    let mut counts = BTreeMap::new();
    for pod in pods {
        let Some(index) = super::pods::index_of(pod, completions) else {
            continue;
        };
        let before = (pod.metadata.annotations.as_ref())
            .and_then(|a| a.get(INDEX_FAILURE_COUNT))
            .and_then(|n| n.parse::<i32>().ok())
            .unwrap_or(0);
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        let failed = (phase == Some("Failed") || pod.metadata.deletion_timestamp.is_some())
            && judge(job, pod) != Verdict::Ignore;
        let count = before + i32::from(failed);
        let entry = counts.entry(index).or_insert(0);
        *entry = (*entry).max(count);
    }
    counts
}

/// What a failed pod means for its Job under its `podFailurePolicy`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verdict {
    /// The Job fails now, with upstream's `PodFailurePolicy` message.
    FailJob(String),
    /// The failure does not count against `backoffLimit`.
    Ignore,
    /// The pod's index fails for good (with `backoffLimitPerIndex`).
    FailIndex,
    /// Counted as any failure.
    Count,
}

/// Judges the failed `pod` by the first rule of the Job's
/// `podFailurePolicy` it matches; a pod no rule matches counts.
pub(super) fn judge(job: &Job, pod: &Pod) -> Verdict {
    let rules = job
        .spec
        .as_ref()
        .and_then(|s| s.pod_failure_policy.as_ref())
        .map(|p| p.rules.as_slice())
        .unwrap_or_default();
    for (i, rule) in rules.iter().enumerate() {
        let Some(what) = matches(rule, pod) else {
            continue;
        };
        return match rule.action.as_str() {
            "FailJob" => Verdict::FailJob(format!("{what} matching FailJob rule at index {i}")),
            "Ignore" => Verdict::Ignore,
            "FailIndex" => Verdict::FailIndex,
            _ => Verdict::Count,
        };
    }
    Verdict::Count
}

/// How `pod` matches `rule`, in the words of upstream's message, if it does.
fn matches(rule: &PodFailurePolicyRule, pod: &Pod) -> Option<String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let status = pod.status.as_ref()?;
    if let Some(codes) = &rule.on_exit_codes {
        let statuses = (status.init_container_statuses.iter().flatten())
            .chain(status.container_statuses.iter().flatten());
        for container in statuses {
            if codes
                .container_name
                .as_ref()
                .is_some_and(|n| *n != container.name)
            {
                continue;
            }
            let Some(code) = container
                .state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .map(|t| t.exit_code)
                .filter(|code| *code != 0)
            else {
                continue;
            };
            let listed = codes.values.contains(&code);
            let hit = match codes.operator.as_str() {
                "In" => listed,
                "NotIn" => !listed,
                _ => false,
            };
            if hit {
                return Some(format!(
                    "Container {} for pod {namespace}/{name} failed with exit code {code}",
                    container.name
                ));
            }
        }
    }
    for wanted in rule.on_pod_conditions.iter().flatten() {
        // The API defaults the status to True.
        let want_status = match wanted.status.as_str() {
            "" => "True",
            status => status,
        };
        let held = (status.conditions.iter().flatten())
            .any(|c| c.type_ == wanted.type_ && c.status == want_status);
        if held {
            return Some(format!(
                "Pod {namespace}/{name} has condition {}",
                wanted.type_
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn job(spec: serde_json::Value) -> Job {
        let mut spec = spec;
        spec["template"] = json!({"spec": {"containers": []}});
        serde_json::from_value(json!({"metadata": {"name": "j"}, "spec": spec})).unwrap()
    }

    fn failed_pod(exit: i32, conditions: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "status": {
                "phase": "Failed",
                "conditions": conditions,
                "containerStatuses": [{"name": "main", "image": "i", "imageID": "", "ready": false,
                    "restartCount": 0, "state": {"terminated": {"exitCode": exit}}}]
            }
        }))
        .unwrap()
    }

    #[test]
    fn success_rules_name_indexes_a_count_or_both() {
        let j = job(
            json!({"completions": 5, "completionMode": "Indexed", "successPolicy": {"rules": [
            {"succeededIndexes": "0,1"},
            {"succeededCount": 3},
            {"succeededIndexes": "2-4", "succeededCount": 2}]}}),
        );
        let set = |v: &[i32]| v.iter().copied().collect::<BTreeSet<i32>>();
        assert_eq!(success_rule(&j, &set(&[0])), None);
        assert_eq!(success_rule(&j, &set(&[0, 1])), Some(0));
        assert_eq!(success_rule(&j, &set(&[3, 4])), Some(2));
        assert_eq!(success_rule(&j, &set(&[1, 2, 3])), Some(1));
        assert_eq!(
            success_rule(&job(json!({"completions": 2})), &set(&[0, 1])),
            None
        );
    }

    #[test]
    fn the_first_matching_failure_rule_decides() {
        let j = job(json!({"podFailurePolicy": {"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
            {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [1]}}]}}));
        assert_eq!(
            judge(&j, &failed_pod(42, json!([]))),
            Verdict::FailJob(
                "Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 1"
                    .into()
            )
        );
        let disrupted = json!([{"type": "DisruptionTarget", "status": "True"}]);
        assert_eq!(judge(&j, &failed_pod(42, disrupted)), Verdict::Ignore);
        assert_eq!(judge(&j, &failed_pod(7, json!([]))), Verdict::Count);
        assert_eq!(
            judge(&job(json!({})), &failed_pod(42, json!([]))),
            Verdict::Count
        );
    }
}
