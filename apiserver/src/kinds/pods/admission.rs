//! What upstream's admission plugins add to a new Pod: the `default`
//! service account, the API-access token volume, its priority from its
//! PriorityClass, and what its RuntimeClass adds (`runtime_class.rs`).
//! Reads the cluster (priority and runtime classes), writes nothing.

use serde_json::{Value, json};

use super::runtime_class;
use crate::handlers::storage;
use crate::object::{meta_str, path_mut, set_field};
use crate::registry::ResourceInfo;
use crate::server::Inner;
use crate::status::ApiError;

/// Fills serviceAccountName, priority and preemptionPolicy of a pod.
pub(super) async fn admit(
    inner: &Inner,
    pods: &ResourceInfo,
    pod: &mut Value,
) -> Result<(), ApiError> {
    let name = meta_str(pod, "name")
        .or_else(|| meta_str(pod, "generateName"))
        .unwrap_or("")
        .to_string();
    // A mirror pod is the API's copy of a node's static pod: it runs with
    // no API credentials, so it gets no account and no token (upstream's
    // ServiceAccount admission skips it too).
    let mirror = !pod["metadata"]["annotations"]
        [crate::admission_plugins::node_restriction::MIRROR_POD_ANNOTATION]
        .is_null();
    let Some(spec) = path_mut(pod, &["spec"]).filter(|s| s.is_object()) else {
        return Ok(());
    };
    if mirror {
        priority(inner, pods, &name, pod).await?;
        return runtime_class::admit(inner, pods, &name, pod).await;
    }
    let account = spec["serviceAccountName"]
        .as_str()
        .or_else(|| spec["serviceAccount"].as_str())
        .filter(|s| !s.is_empty())
        .unwrap_or("default")
        .to_string();
    set_field(spec, "serviceAccountName", json!(account));
    set_field(spec, "serviceAccount", json!(account));
    if spec.get("enableServiceLinks").is_none() {
        set_field(spec, "enableServiceLinks", json!(true));
    }
    crate::tokens::admission::inject_api_access(inner, pod);
    pull_secrets_of_account(inner, &account, pod).await?;
    priority(inner, pods, &name, pod).await?;
    runtime_class::admit(inner, pods, &name, pod).await
}

/// Copies the service account's `imagePullSecrets` into a pod that names
/// none, as upstream's ServiceAccount admission does: the node then needs
/// only the secrets its pods name, which is all the Node authorizer lets it
/// read.
async fn pull_secrets_of_account(
    inner: &Inner,
    account: &str,
    pod: &mut Value,
) -> Result<(), ApiError> {
    let has_own = pod["spec"]["imagePullSecrets"]
        .as_array()
        .is_some_and(|s| !s.is_empty());
    let Some(namespace) = meta_str(pod, "namespace").map(str::to_string) else {
        return Ok(());
    };
    if has_own {
        return Ok(());
    }
    let Some(accounts) = inner.registry.get("", "v1", "serviceaccounts") else {
        return Ok(());
    };
    let key = accounts.key(Some(&namespace), account);
    let Some(account) = storage::lookup(inner, &accounts, &key).await? else {
        return Ok(());
    };
    let Some(secrets) = account["imagePullSecrets"]
        .as_array()
        .filter(|s| !s.is_empty())
    else {
        return Ok(());
    };
    if let Some(spec) = path_mut(pod, &["spec"]) {
        set_field(spec, "imagePullSecrets", Value::Array(secrets.clone()));
    }
    Ok(())
}

/// Fills priority and preemptionPolicy from the pod's (or the default)
/// PriorityClass.
async fn priority(
    inner: &Inner,
    pods: &ResourceInfo,
    name: &str,
    pod: &mut Value,
) -> Result<(), ApiError> {
    let Some(spec) = path_mut(pod, &["spec"]).filter(|s| s.is_object()) else {
        return Ok(());
    };
    let Some(classes) = inner
        .registry
        .get("scheduling.k8s.io", "v1", "priorityclasses")
    else {
        return Ok(());
    };
    let class = match spec["priorityClassName"].as_str().filter(|s| !s.is_empty()) {
        Some(class_name) => {
            let key = classes.key(None, class_name);
            match storage::lookup(inner, &classes, &key).await? {
                Some(class) => Some(class),
                None => {
                    return Err(storage::forbidden(
                        pods,
                        name,
                        format!("no PriorityClass with name {class_name} was found"),
                    ));
                }
            }
        }
        None => {
            let snapshot = inner.cache(&classes)?.snapshot();
            snapshot
                .objects
                .values()
                .map(|c| c.value())
                .find(|c| c["globalDefault"] == true)
        }
    };
    let priority = class
        .as_ref()
        .and_then(|c| c["value"].as_i64())
        .unwrap_or(0);
    set_field(spec, "priority", json!(priority));
    if let Some(class) = &class {
        if spec.get("priorityClassName").is_none()
            && let Some(class_name) = meta_str(class, "name")
        {
            set_field(spec, "priorityClassName", json!(class_name));
        }
        let policy = class["preemptionPolicy"]
            .as_str()
            .unwrap_or("PreemptLowerPriority");
        set_field(spec, "preemptionPolicy", json!(policy));
    } else {
        set_field(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
    }
    Ok(())
}
