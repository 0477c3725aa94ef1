//! What the server itself sets on objects before they are stored: system
//! metadata (uid, creationTimestamp, generation, managedFields), the few
//! defaults other components rely on, and the rules that keep spec and
//! status writes apart.

use rand::Rng;
use serde_json::{Value, json};

use crate::object::{meta_mut, now_rfc3339, path_mut, set_field};
use crate::registry::{ResourceInfo, Subresource};

/// Characters upstream uses for generateName suffixes (no vowels, no
/// look-alikes).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `prefix` plus five random characters.
pub fn generate_name(prefix: &str) -> String {
    let mut rng = rand::rng();
    let suffix: String = (0..5)
        .map(|_| NAME_ALPHABET[rng.random_range(0..NAME_ALPHABET.len())] as char)
        .collect();
    format!("{prefix}{suffix}")
}

/// Who wrote and how, for the managedFields entry.
#[derive(Debug, Clone)]
pub struct WriteInfo {
    pub manager: String,
    pub subresource: Option<Subresource>,
    /// Recorded as operation `Apply` rather than `Update`.
    pub apply: bool,
    /// Who asked for the write, for the admission plugins that care.
    pub user: crate::authn::UserInfo,
}

/// Sets system metadata and defaults on an object about to be created.
pub fn prepare_create(info: &ResourceInfo, object: &mut Value, write: &WriteInfo) {
    let meta = meta_mut(object);
    let provided_managers = meta.remove("managedFields");
    for field in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        meta.remove(field);
    }
    meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
    if info.tracks_generation {
        meta.insert("generation".into(), json!(1));
    } else {
        meta.remove("generation");
    }
    if !info.namespaced {
        meta.remove("namespace");
    }
    reset_status_on_create(info, object);
    crate::crd::prepare_create(info, object);
    apply_defaults(info, object);
    crate::managed_fields::on_create(info, object, provided_managers.as_ref(), write);
}

/// Upstream clears client-set status on create for resources with a status
/// subresource (status belongs to controllers), except nodes.
fn reset_status_on_create(info: &ResourceInfo, object: &mut Value) {
    if !info.has(Subresource::Status) || info.resource == "nodes" {
        return;
    }
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let status = match (info.group, info.resource) {
        ("", "pods") => Some(json!({ "phase": "Pending" })),
        ("", "namespaces") => Some(json!({ "phase": "Active" })),
        ("", "persistentvolumes" | "persistentvolumeclaims") => Some(json!({ "phase": "Pending" })),
        _ => None,
    };
    match status {
        Some(s) => {
            map.insert("status".into(), s);
        }
        None => {
            map.remove("status");
        }
    }
}

/// The defaults other components (and kubectl's output) depend on.
fn apply_defaults(info: &ResourceInfo, object: &mut Value) {
    match (info.group, info.resource) {
        ("", "namespaces") => {
            set_field(object, "spec", json!({ "finalizers": ["kubernetes"] }));
        }
        ("", "pods") => {
            if let Some(spec) = path_mut(object, &["spec"]) {
                default_pod_spec(spec);
                default_toleration_seconds(spec);
            }
        }
        ("", "services") => {
            if let Some(spec) = path_mut(object, &["spec"]).filter(|s| s.is_object()) {
                set_default(spec, "type", json!("ClusterIP"));
                set_default(spec, "sessionAffinity", json!("None"));
                if let Some(ports) = spec["ports"].as_array_mut() {
                    for p in ports {
                        set_default(p, "protocol", json!("TCP"));
                        let port = p["port"].clone();
                        set_default(p, "targetPort", port);
                    }
                }
            }
        }
        ("apps", "deployments") => {
            if let Some(spec) = path_mut(object, &["spec"]).filter(|s| s.is_object()) {
                set_default(spec, "replicas", json!(1));
                set_default(spec, "revisionHistoryLimit", json!(10));
                set_default(spec, "progressDeadlineSeconds", json!(600));
                set_default(spec, "strategy", json!({}));
                if let Some(strategy) = path_mut(spec, &["strategy"]).filter(|s| s.is_object()) {
                    set_default(strategy, "type", json!("RollingUpdate"));
                    if strategy["type"] == "RollingUpdate" {
                        set_default(strategy, "rollingUpdate", json!({}));
                        if let Some(rolling) = path_mut(strategy, &["rollingUpdate"]) {
                            set_default(rolling, "maxUnavailable", json!("25%"));
                            set_default(rolling, "maxSurge", json!("25%"));
                        }
                    }
                }
                if let Some(pod) = path_mut(spec, &["template", "spec"]) {
                    default_pod_spec(pod);
                }
            }
        }
        ("apps", "replicasets") | ("", "replicationcontrollers") => {
            if let Some(spec) = path_mut(object, &["spec"]).filter(|s| s.is_object()) {
                set_default(spec, "replicas", json!(1));
                if let Some(pod) = path_mut(spec, &["template", "spec"]) {
                    default_pod_spec(pod);
                }
            }
        }
        ("", "secrets") => set_default(object, "type", json!("Opaque")),
        ("apps", "statefulsets") => {
            if let Some(spec) = path_mut(object, &["spec"]).filter(|s| s.is_object()) {
                set_default(spec, "replicas", json!(1));
                set_default(spec, "podManagementPolicy", json!("OrderedReady"));
                set_default(spec, "revisionHistoryLimit", json!(10));
                set_default(spec, "updateStrategy", json!({}));
                if let Some(strategy) =
                    path_mut(spec, &["updateStrategy"]).filter(|s| s.is_object())
                {
                    set_default(strategy, "type", json!("RollingUpdate"));
                    if strategy["type"] == "RollingUpdate" {
                        set_default(strategy, "rollingUpdate", json!({ "partition": 0 }));
                    }
                }
                if let Some(pod) = path_mut(spec, &["template", "spec"]) {
                    default_pod_spec(pod);
                }
            }
        }
        ("apps", "daemonsets") => {
            if let Some(spec) = path_mut(object, &["spec"]).filter(|s| s.is_object()) {
                set_default(spec, "revisionHistoryLimit", json!(10));
                set_default(spec, "updateStrategy", json!({}));
                if let Some(strategy) =
                    path_mut(spec, &["updateStrategy"]).filter(|s| s.is_object())
                {
                    set_default(strategy, "type", json!("RollingUpdate"));
                    if strategy["type"] == "RollingUpdate" {
                        set_default(
                            strategy,
                            "rollingUpdate",
                            json!({ "maxUnavailable": 1, "maxSurge": 0 }),
                        );
                    }
                }
                if let Some(pod) = path_mut(spec, &["template", "spec"]) {
                    default_pod_spec(pod);
                }
            }
        }
        ("batch", "cronjobs") => {
            if let Some(spec) = path_mut(object, &["spec"]).filter(|s| s.is_object()) {
                set_default(spec, "concurrencyPolicy", json!("Allow"));
                set_default(spec, "suspend", json!(false));
                set_default(spec, "successfulJobsHistoryLimit", json!(3));
                set_default(spec, "failedJobsHistoryLimit", json!(1));
                if let Some(pod) = path_mut(spec, &["jobTemplate", "spec", "template", "spec"]) {
                    default_pod_spec(pod);
                }
            }
        }
        ("batch", "jobs") => {
            let uid = object["metadata"]["uid"].as_str().map(String::from);
            let name = object["metadata"]["name"].as_str().map(String::from);
            if let Some(spec) = path_mut(object, &["spec"]).filter(|s| s.is_object()) {
                set_default(spec, "backoffLimit", json!(6));
                // Both unset: one pod to one completion. Only parallelism set:
                // a work queue, so completions stays unset.
                if spec.get("parallelism").is_none() && spec.get("completions").is_none() {
                    set_default(spec, "completions", json!(1));
                }
                set_default(spec, "parallelism", json!(1));
                set_default(spec, "completionMode", json!("NonIndexed"));
                set_default(spec, "suspend", json!(false));
                set_default(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
                let manual = spec.get("manualSelector").and_then(Value::as_bool) == Some(true);
                if let (false, Some(uid), Some(name)) = (manual, uid, name) {
                    default_job_selector(spec, &uid, &name);
                }
                if let Some(pod) = path_mut(spec, &["template", "spec"]) {
                    default_pod_spec(pod);
                }
            }
        }
        _ => crate::crd::apply_defaults(info, object),
    }
}

/// A Job without a manual selector selects its pods by its own uid, and its
/// pod template carries the labels that say so, as upstream generates them.
fn default_job_selector(spec: &mut Value, uid: &str, name: &str) {
    let labels = json!({
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": name,
        "controller-uid": uid,
        "job-name": name,
    });
    set_default(
        spec,
        "selector",
        json!({ "matchLabels": { "batch.kubernetes.io/controller-uid": uid } }),
    );
    set_default(spec, "template", json!({}));
    if let Some(template) = path_mut(spec, &["template"]) {
        set_default(template, "metadata", json!({}));
        if let Some(meta) = path_mut(template, &["metadata"]) {
            set_default(meta, "labels", json!({}));
            if let (Some(existing), Some(add)) =
                (meta["labels"].as_object_mut(), labels.as_object())
            {
                for (k, v) in add {
                    existing.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
        }
    }
}

fn set_default(target: &mut Value, field: &str, value: Value) {
    if let Some(map) = target.as_object_mut() {
        map.entry(field).or_insert(value);
    }
}

/// How long a pod stays on a node that turned not-ready or unreachable, as
/// upstream's DefaultTolerationSeconds admission gives every pod.
const DEFAULT_TOLERATION_SECONDS: i64 = 300;

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

fn default_pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "securityContext", json!({}));
    for list in ["initContainers", "containers"] {
        if let Some(containers) = path_mut(spec, &[list]).and_then(Value::as_array_mut) {
            for c in containers {
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
            }
        }
    }
}

/// Carries what a main-resource update may not change from `old` into `new`,
/// and bumps generation when the spec changed.
pub fn prepare_update(info: &ResourceInfo, old: &Value, new: &mut Value) {
    carry_system_metadata(old, new);
    apply_defaults(info, new);
    if info.has(Subresource::Status) {
        match old.get("status") {
            Some(s) => set_field(new, "status", s.clone()),
            None => {
                if let Some(m) = new.as_object_mut() {
                    m.remove("status");
                }
            }
        }
    }
    if info.group.is_empty() && info.resource == "namespaces" {
        let mut spec = new
            .get("spec")
            .filter(|s| s.is_object())
            .cloned()
            .unwrap_or_else(|| json!({}));
        match old["spec"].get("finalizers") {
            Some(f) => set_field(&mut spec, "finalizers", f.clone()),
            None => {
                if let Some(m) = spec.as_object_mut() {
                    m.remove("finalizers");
                }
            }
        }
        set_field(new, "spec", spec);
    }
    if info.group.is_empty() && info.resource == "services" {
        crate::service_alloc::keep_allocations(old, new);
    }
    if info.tracks_generation {
        let old_generation = old["metadata"]["generation"].as_i64().unwrap_or(1);
        // Compare against the old object defaulted the same way, so a default
        // added since it was stored is not taken for a change.
        let mut old_defaulted = old.clone();
        apply_defaults(info, &mut old_defaulted);
        let changed = spec_without_metadata(&old_defaulted) != spec_without_metadata(new);
        meta_mut(new).insert(
            "generation".into(),
            json!(old_generation + i64::from(changed)),
        );
    }
}

/// The new object for a status write: `old` with only `status` taken from `new`.
pub fn prepare_status_update(old: &Value, new: &Value) -> Value {
    let mut result = old.clone();
    match new.get("status") {
        Some(s) => set_field(&mut result, "status", s.clone()),
        None => {
            if let Some(m) = result.as_object_mut() {
                m.remove("status");
            }
        }
    }
    result
}

fn carry_system_metadata(old: &Value, new: &mut Value) {
    let old_meta = old["metadata"].clone();
    let meta = meta_mut(new);
    for field in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "managedFields",
        "namespace",
        "name",
    ] {
        match old_meta.get(field) {
            Some(v) => {
                meta.insert(field.into(), v.clone());
            }
            None => {
                meta.remove(field);
            }
        }
    }
}

/// Everything but metadata and status: what a generation bump watches.
fn spec_without_metadata(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(m) = copy.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
    }
    copy
}

/// Manager name upstream derives from a User-Agent (`kubectl/v1.32 ...` → `kubectl`).
pub fn manager_from_user_agent(user_agent: Option<&str>) -> String {
    user_agent
        .and_then(|ua| ua.split('/').next())
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .unwrap_or("unknown")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    #[test]
    fn generation_bumps_only_on_spec_change() {
        let reg = Registry::builtin();
        let info = reg.get("apps", "v1", "deployments").unwrap();
        let old = json!({"metadata": {"name": "d", "generation": 3, "uid": "u"}, "spec": {"replicas": 1}, "status": {"replicas": 1}});
        let mut same = json!({"metadata": {"name": "d", "labels": {"a": "b"}}, "spec": {"replicas": 1}, "status": {"replicas": 9}});
        prepare_update(&info, &old, &mut same);
        assert_eq!(same["metadata"]["generation"], 3);
        assert_eq!(same["metadata"]["uid"], "u");
        assert_eq!(
            same["status"]["replicas"], 1,
            "status is not writable through the main resource"
        );
        let mut changed = json!({"metadata": {"name": "d"}, "spec": {"replicas": 2}});
        prepare_update(&info, &old, &mut changed);
        assert_eq!(changed["metadata"]["generation"], 4);
    }

    #[test]
    fn pods_get_default_not_ready_and_unreachable_tolerations() {
        let keys = |spec: &Value| -> Vec<(String, Value)> {
            spec["tolerations"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| {
                    (
                        t["key"].as_str().unwrap_or("").to_string(),
                        t["tolerationSeconds"].clone(),
                    )
                })
                .collect()
        };
        let mut plain = json!({"containers": []});
        default_toleration_seconds(&mut plain);
        assert_eq!(
            keys(&plain),
            vec![
                ("node.kubernetes.io/not-ready".to_string(), json!(300)),
                ("node.kubernetes.io/unreachable".to_string(), json!(300)),
            ]
        );
        // Applying twice adds nothing.
        let again = plain.clone();
        default_toleration_seconds(&mut plain);
        assert_eq!(plain, again);
        // A pod's own toleration of one taint is kept; only the other is added.
        let mut own = json!({"tolerations": [{"key": "node.kubernetes.io/unreachable",
            "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 6000}]});
        default_toleration_seconds(&mut own);
        assert_eq!(
            keys(&own),
            vec![
                ("node.kubernetes.io/unreachable".to_string(), json!(6000)),
                ("node.kubernetes.io/not-ready".to_string(), json!(300)),
            ]
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
    fn generated_names_use_prefix() {
        let n = generate_name("web-");
        assert!(n.starts_with("web-") && n.len() == 9);
        assert!(n[4..].bytes().all(|b| NAME_ALPHABET.contains(&b)));
    }
}
