//! Namespaces as Pod Security sees them: where a pod's policy comes from
//! (the namespace's labels, read from the watch cache), and what a
//! namespace write must respect — labels Pod Security can read (a 422
//! otherwise, unless the same unreadable labels were already there) — and
//! what it is told: a stricter enforce level is tried on the pods already
//! in the namespace, and those that would fail are named in warnings (the
//! write still succeeds, as upstream: existing pods keep running).

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use super::messages::{self, PodGroup};
use super::policy::{Level, LevelVersion, Policy};
use super::{PodSecurityConfig, checks, labels_of};
use crate::admission_plugins::{Operation, WriteRequest};
use crate::handlers::storage;
use crate::object::meta_str;
use crate::server::Inner;
use crate::status::ApiError;

/// At most this many existing pods are tried against a new enforce level.
const MAX_PODS_TO_CHECK: usize = 3000;
/// And for at most this long.
const POD_CHECK_TIMEOUT: Duration = Duration::from_secs(1);

/// The labels of namespace `name`, `None` when it does not exist.
pub(super) async fn labels(
    inner: &Inner,
    name: &str,
) -> Result<Option<BTreeMap<String, String>>, ApiError> {
    let info = inner
        .registry
        .get("", "v1", "namespaces")
        .ok_or_else(|| ApiError::Internal("namespaces are not registered".into()))?;
    let found = storage::lookup(inner, &info, &info.key(None, name)).await?;
    Ok(found.map(|namespace| labels_of(&namespace)))
}

/// A namespace create or update.
pub(super) fn admit(
    inner: &Inner,
    config: &PodSecurityConfig,
    request: &WriteRequest<'_>,
    new: &Value,
) -> Result<(), ApiError> {
    if request.subresource.is_some() {
        return Ok(());
    }
    let name = meta_str(new, "name").unwrap_or("");
    let new_labels = labels_of(new);
    let (policy, errors) = Policy::from_labels(&new_labels, &config.defaults);
    let invalid = |errors| ApiError::Invalid {
        kind: "Namespace".into(),
        group: String::new(),
        name: name.to_string(),
        causes: errors,
    };
    let exempt_warning = || {
        if !config.exempt_namespace(name) {
            return;
        }
        let has_label = |label: &str| new_labels.contains_key(label);
        if let Some(warning) =
            messages::exempt_namespace(name, &policy, &config.defaults, has_label)
        {
            request.notes.warn(warning);
        }
    };
    match (request.operation, request.old) {
        (Operation::Create, _) => {
            if !errors.is_empty() {
                return Err(invalid(errors));
            }
            exempt_warning();
            Ok(())
        }
        (Operation::Update, Some(old)) => {
            let (old_policy, old_errors) = Policy::from_labels(&labels_of(old), &config.defaults);
            // Unreadable labels that were already there do not block other
            // changes to the namespace.
            if !errors.is_empty() && errors != old_errors {
                return Err(invalid(errors));
            }
            let (new_enforce, old_enforce) = (policy.enforce, old_policy.enforce);
            let stricter = new_enforce != old_enforce
                && new_enforce.level != Level::Privileged
                && !(new_enforce.version == old_enforce.version
                    && new_enforce.level <= old_enforce.level);
            if !stricter {
                return Ok(());
            }
            if config.exempt_namespace(name) {
                exempt_warning();
                return Ok(());
            }
            for warning in existing_pod_warnings(inner, config, name, new_enforce)? {
                request.notes.warn(warning);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Tries `enforce` on the namespace's pods (one per controller first, the
/// rest after; exempt runtime classes skipped; at most
/// [`MAX_PODS_TO_CHECK`] and [`POD_CHECK_TIMEOUT`]) and says which fail,
/// grouped by the checks they fail.
fn existing_pod_warnings(
    inner: &Inner,
    config: &PodSecurityConfig,
    namespace: &str,
    enforce: LevelVersion,
) -> Result<Vec<String>, ApiError> {
    let deadline = Instant::now() + POD_CHECK_TIMEOUT;
    let Some(info) = inner.registry.get("", "v1", "pods") else {
        return Ok(Vec::new());
    };
    let snapshot = inner.cache(&info)?.snapshot();
    let prefix = info.collection_prefix(Some(namespace));
    let pods: Vec<Pod> = snapshot
        .under(&prefix)
        .filter_map(|(_, pod)| serde_json::from_value::<Pod>(pod.to_value()).ok())
        .collect();
    let pods = prioritize(config, pods);
    let total = pods.len();
    let mut checked = 0;
    let mut groups: BTreeMap<String, PodGroup> = BTreeMap::new();
    for pod in pods.iter().take(MAX_PODS_TO_CHECK) {
        checked += 1;
        let empty = Default::default();
        let spec = pod.spec.as_ref().unwrap_or(&empty);
        let violations = checks::evaluate(enforce, &pod.metadata, spec);
        if !violations.is_empty() {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let group = groups
                .entry(messages::reasons(&violations))
                .or_insert_with(|| PodGroup {
                    first: name.clone(),
                    count: 0,
                });
            if name < group.first {
                group.first = name;
            }
            group.count += 1;
        }
        if Instant::now() >= deadline {
            break;
        }
    }
    let mut warnings = Vec::new();
    if checked < total {
        warnings.push(messages::only_checked(checked, total));
    }
    if !groups.is_empty() {
        warnings.push(messages::existing_pods_violate(namespace, enforce));
    }
    warnings.extend(messages::pod_warnings(&groups));
    Ok(warnings)
}

/// Pods worth checking first: every pod without a controller and the
/// first pod of each controller, then the other pods of controllers
/// (replicas mostly fail alike); pods of exempt runtime classes are left
/// out.
fn prioritize(config: &PodSecurityConfig, pods: Vec<Pod>) -> Vec<Pod> {
    let mut first = Vec::new();
    let mut rest = Vec::new();
    let mut seen = HashSet::new();
    for pod in pods {
        let runtime_class = pod
            .spec
            .as_ref()
            .and_then(|s| s.runtime_class_name.as_deref());
        if config.exempt_runtime_class(runtime_class) {
            continue;
        }
        let controller = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|owner| owner.controller == Some(true))
            .map(|owner| owner.uid.clone());
        let another_replica = controller.is_some_and(|uid| !seen.insert(uid));
        if another_replica {
            rest.push(pod);
        } else {
            first.push(pod);
        }
    }
    first.extend(rest);
    first
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, owner: Option<&str>, runtime_class: Option<&str>) -> Pod {
        let owners: Vec<Value> = owner
            .map(|uid| json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": uid, "controller": true}))
            .into_iter()
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": name, "ownerReferences": owners},
            "spec": {"runtimeClassName": runtime_class, "containers": [{"name": "c"}]}
        }))
        .unwrap()
    }

    #[test]
    fn one_pod_per_controller_comes_first_and_exempt_runtime_classes_are_skipped() {
        let config = PodSecurityConfig {
            exemptions: super::super::config::Exemptions {
                runtime_classes: vec!["kata".into()],
                ..Default::default()
            },
            ..Default::default()
        };
        let pods = vec![
            pod("a-1", Some("rs-a"), None),
            pod("a-2", Some("rs-a"), None),
            pod("b-1", Some("rs-b"), None),
            pod("kata", None, Some("kata")),
            pod("solo", None, None),
        ];
        let names: Vec<String> = prioritize(&config, pods)
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect();
        assert_eq!(names, ["a-1", "b-1", "solo", "a-2"]);
    }
}
