//! What upstream's ServiceAccount admission adds to a new pod whose account
//! exists: unless the pod or its account opts out
//! (`automountServiceAccountToken: false`), a
//! `kube-api-access-<random>` projected volume (a bound token, the cluster
//! CA and the namespace) mounted read-only at [`MOUNT_PATH`] in every
//! container.

use serde_json::{Value, json};

use crate::object::{meta_str, path_mut};
use crate::server::Inner;

/// Where programs find their service-account credentials.
pub(crate) const MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Token lifetime of the injected volume (upstream's 3607 s: one hour plus
/// a few seconds, which lets the API server tell such tokens apart).
const INJECTED_EXPIRATION_SECONDS: i64 = 3607;

/// Adds the API access volume and its mounts to `pod` when it wants them.
pub(crate) fn inject_api_access(inner: &Inner, pod: &mut Value) {
    let namespace = meta_str(pod, "namespace").unwrap_or("default").to_string();
    let Some(spec) = path_mut(pod, &["spec"]).filter(|s| s.is_object()) else {
        return;
    };
    let account = spec["serviceAccountName"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    // Upstream refuses pods whose account does not exist yet; skiff admits
    // them without credentials instead (a control plane without the
    // serviceaccount controller, or a pod racing its new namespace's
    // `default` account, still runs).
    let Ok(Some(sa)) = super::read_core(inner, "serviceaccounts", &namespace, &account) else {
        return;
    };
    let wanted = spec["automountServiceAccountToken"]
        .as_bool()
        .or_else(|| sa["automountServiceAccountToken"].as_bool())
        .unwrap_or(true);
    if !wanted || mounts_credentials_already(spec) {
        return;
    }
    let volume_name = crate::admission::generate_name("kube-api-access-");
    let volume = json!({
        "name": volume_name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": INJECTED_EXPIRATION_SECONDS, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
            ]
        }
    });
    push(spec, "volumes", volume);
    let mount = json!({"name": volume_name, "readOnly": true, "mountPath": MOUNT_PATH});
    for list in ["initContainers", "containers"] {
        if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for container in containers.iter_mut().filter(|c| c.is_object()) {
                push(container, "volumeMounts", mount.clone());
            }
        }
    }
}

/// A pod that mounts something at the credentials path chose its own.
fn mounts_credentials_already(spec: &Value) -> bool {
    ["initContainers", "containers"]
        .iter()
        .filter_map(|list| spec[*list].as_array())
        .flatten()
        .filter_map(|c| c["volumeMounts"].as_array())
        .flatten()
        .any(|m| m["mountPath"].as_str() == Some(MOUNT_PATH))
}

fn push(object: &mut Value, field: &str, item: Value) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    match map.get_mut(field).and_then(Value::as_array_mut) {
        Some(list) => list.push(item),
        None => {
            map.insert(field.to_string(), json!([item]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_existing_mount_at_the_credentials_path_is_respected() {
        let spec = json!({"containers": [{"name": "a", "volumeMounts": [{"name": "x", "mountPath": MOUNT_PATH}]}]});
        assert!(mounts_credentials_already(&spec));
        let spec = json!({"containers": [{"name": "a"}]});
        assert!(!mounts_credentials_already(&spec));
    }
}
