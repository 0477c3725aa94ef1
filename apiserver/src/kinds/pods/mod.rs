//! Pods: the defaults every pod spec gets (also those inside workload
//! templates), upstream's DefaultTolerationSeconds, the spec fields an update
//! may change, graceful deletion, the AppArmor annotations kept in step with
//! the fields ([`apparmor`]) and the create-time admission that reads the
//! cluster ([`admission`]), and what an in-place resize may change
//! ([`resize`]).

mod admission;
mod apparmor;
mod resize;
mod runtime_class;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{InitialStatus, KindStrategy, NodeWrites, PodSecurityCheck, set_default};
use crate::kinds::Written;
use crate::object::{items_mut, path_mut};
use crate::registry::{ResourceInfo, Subresource};
use crate::server::Inner;
use crate::status::{ApiError, FieldError};

/// Grace period of a pod that sets none.
const DEFAULT_POD_GRACE_SECONDS: i64 = 30;

/// How long a pod stays on a node that turned not-ready or unreachable, as
/// upstream's DefaultTolerationSeconds admission gives every pod.
const DEFAULT_TOLERATION_SECONDS: i64 = 300;

named_kind! {
    /// The `pods` resource.
    Pods = k8s_openapi::api::core::v1::Pod;
}

#[async_trait]
impl KindStrategy for Pods {
    fn initial_status(&self) -> InitialStatus {
        InitialStatus::Phase("Pending")
    }

    fn pod_security(&self) -> PodSecurityCheck {
        PodSecurityCheck::Pod
    }

    fn node_writes(&self) -> NodeWrites {
        NodeWrites::OwnPods
    }

    fn on_create(&self, object: &mut Value, notes: &crate::request_notes::RequestNotes) {
        apparmor::sync_on_create(object, notes);
    }

    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        if let Some(spec) = path_mut(object, &["spec"]) {
            default_pod_spec(spec);
            default_toleration_seconds(spec);
            default_requests_to_limits(spec);
            default_host_network_ports(spec);
            default_resize_policy(spec);
        }
    }

    /// A new pod's status names its QoS class, from its resources as
    /// defaulting and admission (LimitRanger, webhooks) left them.
    fn finish_create(&self, object: &mut Value) {
        let Ok(pod) = serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(object.clone())
        else {
            // Validation reports what does not decode.
            return;
        };
        let class = skiff_common::qos::qos_class(&pod);
        if let Some(status) = path_mut(object, &["status"]).filter(|s| s.is_object()) {
            set_default(status, "qosClass", json!(class));
        }
    }

    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let Written {
            info,
            object,
            old,
            subresource,
        } = *written;
        if written.status_only() {
            return;
        }
        // The stored pod is compared as it reads today, as upstream defaults
        // what it decodes from storage: a default added since it was written
        // is not a change the update made to an immutable field.
        let old = old.map(|o| {
            let mut o = o.clone();
            self.apply_defaults(info, &mut o);
            o
        });
        if let (Some(Subresource::Resize), Some(old)) = (subresource, &old) {
            resize::validate(object, old, errors);
            return;
        }
        crate::validation::workloads::pod(object, old.as_ref(), errors);
        if old.is_none() {
            apparmor::validate_on_create(object, errors);
        }
    }

    /// On create only: upstream skips them on updates, which come from
    /// controllers and the kubelet far more than from people.
    fn warnings(&self, written: &Written<'_>) -> Vec<String> {
        if written.old.is_some() {
            return Vec::new();
        }
        let name = super::name_warning(written.object, "the Pod's hostname");
        name.into_iter()
            .chain(crate::validation::pod_warnings::warnings(
                written.object,
                "",
            ))
            .collect()
    }

    /// A main-resource update keeps the ephemeral containers: they are
    /// added through `pods/ephemeralcontainers` only.
    fn carry_on_update(&self, old: &Value, new: &mut Value) {
        let kept = old["spec"]["ephemeralContainers"].clone();
        if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
            if kept.is_null() {
                spec.remove("ephemeralContainers");
            } else {
                spec.insert("ephemeralContainers".into(), kept);
            }
        }
    }

    async fn admit_create(
        &self,
        inner: &Inner,
        info: &ResourceInfo,
        object: &mut Value,
    ) -> Result<(), ApiError> {
        admission::admit(inner, info, object).await
    }

    /// The request's grace period, else the spec's, else 30 s; zero for pods
    /// never scheduled or already finished, which no node agent will stop.
    fn deletion_grace(&self, pod: &Value, requested: Option<i64>) -> Option<i64> {
        let unscheduled = pod["spec"]["nodeName"].as_str().is_none_or(str::is_empty);
        let finished = matches!(
            pod["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        );
        if unscheduled || finished {
            return Some(0);
        }
        Some(
            requested
                .or_else(|| pod["spec"]["terminationGracePeriodSeconds"].as_i64())
                .unwrap_or(DEFAULT_POD_GRACE_SECONDS)
                .max(0),
        )
    }
}

/// Defaults of a pod spec, wherever it appears (pods and pod templates).
pub(super) fn default_pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "securityContext", json!({}));
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for c in items_mut(spec, &[list]) {
            let latest = c["image"].as_str().is_some_and(|i| {
                let tail = i.rsplit('/').next().unwrap_or(i);
                !tail.contains(':') && !i.contains('@') || tail.ends_with(":latest")
            });
            set_default(
                c,
                "imagePullPolicy",
                json!(if latest { "Always" } else { "IfNotPresent" }),
            );
            set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
            set_default(c, "terminationMessagePolicy", json!("File"));
            set_default(c, "resources", json!({}));
            default_container_fields(c);
        }
    }
    for volume in items_mut(spec, &["volumes"]) {
        default_volume(volume);
    }
}

/// Mode upstream gives files projected from a Secret, ConfigMap or the
/// downward API when the volume names none (0644).
const DEFAULT_VOLUME_MODE: i64 = 0o644;

/// Container defaults beyond the top-level ones: port protocols, the
/// `apiVersion` of `fieldRef`s in env, and probe timings.
fn default_container_fields(container: &mut Value) {
    for port in items_mut(container, &["ports"]) {
        set_default(port, "protocol", json!("TCP"));
    }
    for var in items_mut(container, &["env"]) {
        if let Some(field_ref) = path_mut(var, &["valueFrom", "fieldRef"]) {
            set_default(field_ref, "apiVersion", json!("v1"));
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(probe) = path_mut(container, &[probe]).filter(|p| p.is_object()) {
            set_default(probe, "timeoutSeconds", json!(1));
            set_default(probe, "periodSeconds", json!(10));
            set_default(probe, "successThreshold", json!(1));
            set_default(probe, "failureThreshold", json!(3));
            default_http_get(probe);
        }
    }
    // Lifecycle hooks are the same handler type as probes' actions.
    for hook in ["postStart", "preStop"] {
        if let Some(hook) = path_mut(container, &["lifecycle", hook]) {
            default_http_get(hook);
        }
    }
}

/// An `httpGet` action (probe or lifecycle hook) asks for `/` over HTTP
/// unless it says otherwise.
fn default_http_get(handler: &mut Value) {
    if let Some(get) = path_mut(handler, &["httpGet"]).filter(|g| g.is_object()) {
        set_default(get, "path", json!("/"));
        set_default(get, "scheme", json!("HTTP"));
    }
}

/// A pod on the host's network listens on the host's ports: each container
/// port without a `hostPort` gets its `containerPort` (pods only; upstream
/// no longer does this for templates).
fn default_host_network_ports(spec: &mut Value) {
    if spec["hostNetwork"] != json!(true) {
        return;
    }
    for list in ["initContainers", "containers"] {
        for port in items_mut(spec, &[list]).flat_map(|c| items_mut(c, &["ports"])) {
            let container_port = port["containerPort"].clone();
            if !container_port.is_null() {
                set_default(port, "hostPort", container_port);
            }
        }
    }
}

/// Upstream v1.33 (in-place resize on by default): a container that
/// requests or limits CPU or memory may have it resized without a restart
/// unless its `resizePolicy` says otherwise (pods only, regular containers).
fn default_resize_policy(spec: &mut Value) {
    for container in items_mut(spec, &["containers"]) {
        let named = |resource: &str| {
            ["requests", "limits"]
                .iter()
                .any(|k| container["resources"][*k].get(resource).is_some())
        };
        let wanted: Vec<&str> = ["cpu", "memory"].into_iter().filter(|r| named(r)).collect();
        if wanted.is_empty() {
            continue;
        }
        set_default(container, "resizePolicy", json!([]));
        let Some(policies) = container["resizePolicy"].as_array_mut() else {
            continue;
        };
        for resource in wanted {
            if !policies.iter().any(|p| p["resourceName"] == resource) {
                policies.push(json!({"resourceName": resource, "restartPolicy": "NotRequired"}));
            }
        }
    }
}

/// A volume that names no source is an `emptyDir`; file-projecting sources
/// get their default mode and `fieldRef` API version.
fn default_volume(volume: &mut Value) {
    let Some(map) = volume.as_object_mut() else {
        return;
    };
    if map.keys().all(|k| k == "name") {
        map.insert("emptyDir".into(), json!({}));
        return;
    }
    for source in ["secret", "configMap", "downwardAPI"] {
        if let Some(source) = map.get_mut(source).filter(|s| s.is_object()) {
            set_default(source, "defaultMode", json!(DEFAULT_VOLUME_MODE));
        }
    }
    default_volume_source(volume);
    if let Some(claim) =
        path_mut(volume, &["ephemeral", "volumeClaimTemplate", "spec"]).filter(|s| s.is_object())
    {
        super::volumes::default_claim_spec(claim);
    }
    if let Some(items) = path_mut(volume, &["downwardAPI", "items"]).and_then(Value::as_array_mut) {
        default_field_refs(items);
    }
    if let Some(projected) = path_mut(volume, &["projected"]).filter(|p| p.is_object()) {
        set_default(projected, "defaultMode", json!(DEFAULT_VOLUME_MODE));
        if let Some(sources) = path_mut(projected, &["sources"]).and_then(Value::as_array_mut) {
            for source in sources {
                if let Some(token) = path_mut(source, &["serviceAccountToken"]) {
                    set_default(token, "expirationSeconds", json!(3600));
                }
                if let Some(items) =
                    path_mut(source, &["downwardAPI", "items"]).and_then(Value::as_array_mut)
                {
                    default_field_refs(items);
                }
            }
        }
    }
}

/// Defaults of the storage sources a pod volume and a PersistentVolume
/// share (upstream defaults both the same way): hostPath's empty type,
/// iSCSI's interface, RBD's pool, user and keyring, Azure Disk's caching,
/// kind and filesystem, ScaleIO's provisioning and filesystem.
pub(super) fn default_volume_source(source: &mut Value) {
    let defaults: [(&str, &[(&str, Value)]); 5] = [
        ("hostPath", &[("type", json!(""))]),
        ("iscsi", &[("iscsiInterface", json!("default"))]),
        (
            "rbd",
            &[
                ("pool", json!("rbd")),
                ("user", json!("admin")),
                ("keyring", json!("/etc/ceph/keyring")),
            ],
        ),
        (
            "azureDisk",
            &[
                ("cachingMode", json!("ReadWrite")),
                ("kind", json!("Shared")),
                ("fsType", json!("ext4")),
                ("readOnly", json!(false)),
            ],
        ),
        (
            "scaleIO",
            &[
                ("storageMode", json!("ThinProvisioned")),
                ("fsType", json!("xfs")),
            ],
        ),
    ];
    for (name, fields) in defaults {
        if let Some(source) = path_mut(source, &[name]).filter(|s| s.is_object()) {
            for (field, value) in fields {
                set_default(source, field, value.clone());
            }
        }
    }
}

/// `fieldRef.apiVersion` of downward-API items defaults to `v1`.
fn default_field_refs(items: &mut [Value]) {
    for item in items {
        if let Some(field_ref) = path_mut(item, &["fieldRef"]) {
            set_default(field_ref, "apiVersion", json!("v1"));
        }
    }
}

/// A container that limits a resource without requesting it requests its
/// limit (pods only: a template's containers are defaulted in the pods
/// made from it).
fn default_requests_to_limits(spec: &mut Value) {
    for list in ["initContainers", "containers"] {
        for resources in items_mut(spec, &[list]).filter_map(|c| path_mut(c, &["resources"])) {
            let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() else {
                continue;
            };
            if !resources.get("requests").is_some_and(Value::is_object) {
                resources["requests"] = json!({});
            }
            if let Some(requests) = resources["requests"].as_object_mut() {
                for (name, value) in limits {
                    requests.entry(name).or_insert(value);
                }
            }
        }
    }
}

/// Upstream's DefaultTolerationSeconds admission (pods only, not templates):
/// a pod that does not already tolerate the `not-ready` or `unreachable`
/// NoExecute taint (an empty key or effect matches any) gets a toleration of
/// it for [`DEFAULT_TOLERATION_SECONDS`].
fn default_toleration_seconds(spec: &mut Value) {
    let Some(map) = spec.as_object_mut() else {
        return;
    };
    let tolerated = |key: &str| {
        map.get("tolerations")
            .and_then(Value::as_array)
            .is_some_and(|list| {
                list.iter().any(|t| {
                    let t_key = t["key"].as_str().unwrap_or("");
                    let effect = t["effect"].as_str().unwrap_or("");
                    (t_key == key || t_key.is_empty())
                        && (effect == "NoExecute" || effect.is_empty())
                })
            })
    };
    let missing: Vec<Value> = [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ]
    .into_iter()
    .filter(|key| !tolerated(key))
    .map(|key| {
        json!({
            "key": key,
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
        })
    })
    .collect();
    if missing.is_empty() {
        return;
    }
    match map.get_mut("tolerations").and_then(Value::as_array_mut) {
        Some(list) => list.extend(missing),
        None => {
            map.insert("tolerations".into(), Value::Array(missing));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_get_default_not_ready_and_unreachable_tolerations() {
        // The tolerations' keys and seconds, in order.
        let assert_seconds = |spec: &Value, expected: &[(&str, i64)]| {
            let keys: Vec<(&str, Value)> = spec["tolerations"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| {
                    (
                        t["key"].as_str().unwrap_or(""),
                        t["tolerationSeconds"].clone(),
                    )
                })
                .collect();
            let expected: Vec<(&str, Value)> =
                expected.iter().map(|(k, s)| (*k, json!(s))).collect();
            assert_eq!(keys, expected);
        };
        let mut plain = json!({"containers": []});
        default_toleration_seconds(&mut plain);
        assert_seconds(
            &plain,
            &[
                ("node.kubernetes.io/not-ready", 300),
                ("node.kubernetes.io/unreachable", 300),
            ],
        );
        // Applying twice adds nothing.
        let again = plain.clone();
        default_toleration_seconds(&mut plain);
        assert_eq!(plain, again);
        // A pod's own toleration of one taint is kept; only the other is added.
        let mut own = json!({"tolerations": [{"key": "node.kubernetes.io/unreachable",
            "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 6000}]});
        default_toleration_seconds(&mut own);
        assert_seconds(
            &own,
            &[
                ("node.kubernetes.io/unreachable", 6000),
                ("node.kubernetes.io/not-ready", 300),
            ],
        );
        // Tolerating everything (empty key, any effect) needs nothing added.
        let mut all = json!({"tolerations": [{"operator": "Exists"}]});
        default_toleration_seconds(&mut all);
        assert_eq!(all["tolerations"].as_array().unwrap().len(), 1);
        // A NoSchedule toleration of the key does not count.
        let mut schedule = json!({"tolerations": [{"key": "node.kubernetes.io/not-ready",
            "operator": "Exists", "effect": "NoSchedule"}]});
        default_toleration_seconds(&mut schedule);
        assert_eq!(schedule["tolerations"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn only_scheduled_running_pods_get_a_grace_period() {
        let pod = |node: &str, phase: &str, grace: Option<i64>| {
            json!({"spec": {"nodeName": node, "terminationGracePeriodSeconds": grace},
                "status": {"phase": phase}})
        };
        assert_eq!(
            Pods.deletion_grace(&pod("", "Pending", None), None),
            Some(0)
        );
        assert_eq!(
            Pods.deletion_grace(&pod("n", "Succeeded", Some(5)), Some(9)),
            Some(0)
        );
        assert_eq!(
            Pods.deletion_grace(&pod("n", "Running", None), None),
            Some(DEFAULT_POD_GRACE_SECONDS)
        );
        assert_eq!(
            Pods.deletion_grace(&pod("n", "Running", Some(5)), None),
            Some(5)
        );
        assert_eq!(
            Pods.deletion_grace(&pod("n", "Running", Some(5)), Some(-3)),
            Some(0),
            "the request wins, never below zero"
        );
    }
}
