//! Pod Security admission, as upstream's `PodSecurity` plugin: each
//! namespace's `pod-security.kubernetes.io/*` labels (over the configured
//! defaults) choose a Pod Security Standard to enforce, to audit and to
//! warn about. A pod that fails the enforced level is refused with
//! upstream's 403; the warn level's failures come back as `Warning`
//! headers and the audit level's as audit annotations (see
//! [`crate::request_notes`]). Workloads with pod templates are warned and
//! audited, never refused. Namespace writes must carry valid labels, and a
//! stricter enforce level is answered with warnings naming the existing
//! pods that would fail it. Exempt users, namespaces and runtime classes
//! (from the configuration file) are never checked.
//!
//! Modules: `policy` (levels, versions, labels), `checks` (the standards),
//! `messages` (upstream's wording), `config` (defaults and exemptions),
//! `templates` (reading a workload's pod template; where it is, is the
//! kind's strategy's to say), `namespaces` (label changes).
//!
//! It reads namespaces and pods from the watch caches and never writes:
//! its only outputs are a refusal, warnings and audit annotations.

mod checks;
mod config;
mod messages;
mod namespaces;
mod policy;
mod templates;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::{Operation, WriteRequest};
use crate::handlers::storage;
use crate::kinds::PodSecurityCheck;
use crate::object::meta_str;
use crate::registry::Subresource;
use crate::request_notes::RequestNotes;
use crate::server::Inner;
use crate::status::{ApiError, FieldError, render_causes};
use checks::Violation;
use policy::{LevelVersion, Policy};

pub(crate) use config::PodSecurityConfig;

/// The plugin's name in an `AdmissionConfiguration`.
pub(crate) const PLUGIN_NAME: &str = "PodSecurity";

/// Audit annotation keys (upstream prefixes them with the label prefix).
const ENFORCE_POLICY_ANNOTATION: &str = "pod-security.kubernetes.io/enforce-policy";
const AUDIT_VIOLATIONS_ANNOTATION: &str = "pod-security.kubernetes.io/audit-violations";
const EXEMPT_ANNOTATION: &str = "pod-security.kubernetes.io/exempt";
const ERROR_ANNOTATION: &str = "pod-security.kubernetes.io/error";

/// Checks one write; refuses only pods that fail the enforced level and
/// namespaces with labels it cannot read.
pub(crate) async fn admit(inner: &Inner, request: &WriteRequest<'_>) -> Result<(), ApiError> {
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return Ok(());
    }
    let Some(new) = request.new else {
        return Ok(());
    };
    let config = &inner.admission.pod_security;
    match request.info.strategy.pod_security() {
        PodSecurityCheck::NamespaceLabels => namespaces::admit(inner, config, request, new),
        PodSecurityCheck::Pod => admit_pod(inner, config, request, new).await,
        PodSecurityCheck::Template(path) => admit_template(inner, config, request, new, path).await,
        PodSecurityCheck::Nothing => Ok(()),
    }
}

/// Pod subresources that cannot change what the checks look at.
fn ignored_pod_subresource(subresource: Option<Subresource>) -> bool {
    matches!(
        subresource,
        Some(
            Subresource::Status
                | Subresource::Binding
                | Subresource::Eviction
                | Subresource::Log
                | Subresource::Exec
                | Subresource::Attach
                | Subresource::PortForward
        )
    )
}

/// A pod create, or an update that changes what the checks look at.
async fn admit_pod(
    inner: &Inner,
    config: &PodSecurityConfig,
    request: &WriteRequest<'_>,
    new: &Value,
) -> Result<(), ApiError> {
    if ignored_pod_subresource(request.subresource) {
        return Ok(());
    }
    let namespace = meta_str(new, "namespace").unwrap_or("");
    if exempt(config, request, namespace) {
        return Ok(());
    }
    let labels = namespaces::labels(inner, namespace)
        .await?
        .ok_or_else(|| ApiError::Internal(format!("failed to lookup namespace \"{namespace}\"")))?;
    let (policy, errors) = Policy::from_labels(&labels, &config.defaults);
    if errors.is_empty() && policy.fully_privileged() {
        return Ok(());
    }
    let pod = decode_pod(new)?;
    if request.operation == Operation::Update
        && let Some(old) = request.old
        && !significant_update(&pod, &decode_pod(old)?)
    {
        return Ok(());
    }
    let target = Target {
        request,
        name: meta_str(new, "name").unwrap_or(""),
        namespace,
    };
    let meta = pod.metadata;
    let spec = pod.spec.unwrap_or_default();
    evaluate(config, &target, &policy, &errors, &meta, &spec, true)
}

/// A workload's pod template: warned and audited, never refused.
async fn admit_template(
    inner: &Inner,
    config: &PodSecurityConfig,
    request: &WriteRequest<'_>,
    new: &Value,
    path: &[&str],
) -> Result<(), ApiError> {
    if request.subresource.is_some() {
        return Ok(());
    }
    let namespace = meta_str(new, "namespace").unwrap_or("");
    if exempt(config, request, namespace) {
        return Ok(());
    }
    // Trouble reading the namespace or the template never blocks a
    // workload: its pods are checked when they are made.
    let labels = match namespaces::labels(inner, namespace).await {
        Ok(Some(labels)) => labels,
        Ok(None) | Err(_) => {
            request.notes.annotate(
                ERROR_ANNOTATION,
                format!("failed to lookup namespace \"{namespace}\""),
            );
            return Ok(());
        }
    };
    let (policy, errors) = Policy::from_labels(&labels, &config.defaults);
    if errors.is_empty()
        && policy.warn.level == policy::Level::Privileged
        && policy.audit.level == policy::Level::Privileged
    {
        return Ok(());
    }
    let template = match templates::extract(new, path) {
        Ok(Some(template)) => template,
        Ok(None) => return Ok(()),
        Err(e) => {
            request.notes.annotate(
                ERROR_ANNOTATION,
                format!("failed to extract pod template: {e}"),
            );
            return Ok(());
        }
    };
    let target = Target {
        request,
        name: meta_str(new, "name").unwrap_or(""),
        namespace,
    };
    let meta = template.metadata.unwrap_or_default();
    let spec = template.spec.unwrap_or_default();
    evaluate(config, &target, &policy, &errors, &meta, &spec, false)
}

/// Whether a request is not checked at all, by its namespace or its user;
/// an exempt one is noted so for the audit log.
fn exempt(config: &PodSecurityConfig, request: &WriteRequest<'_>, namespace: &str) -> bool {
    let reason = if config.exempt_namespace(namespace) {
        "namespace"
    } else if config.exempt_user(&request.user.name) {
        "user"
    } else {
        return false;
    };
    request.notes.annotate(EXEMPT_ANNOTATION, reason);
    true
}

fn decode_pod(value: &Value) -> Result<Pod, ApiError> {
    // Read from the borrowed tree: no copy of the pod is made to decode it.
    <Pod as serde::Deserialize>::deserialize(value)
        .map_err(|e| ApiError::BadRequest(format!("failed to decode pod: {e}")))
}

/// Whether an update touches what the checks see. Upstream lets through,
/// unchecked, updates that keep every container's image (and its legacy
/// seccomp annotation) and add no container: what else a pod update may
/// change (labels, annotations, tolerations, deadlines) cannot weaken it.
fn significant_update(pod: &Pod, old: &Pod) -> bool {
    let empty = PodSpec::default();
    let spec = pod.spec.as_ref().unwrap_or(&empty);
    let old_spec = old.spec.as_ref().unwrap_or(&empty);
    let annotations = pod.metadata.annotations.as_ref();
    let old_annotations = old.metadata.annotations.as_ref();
    let changed = |name: &str, image: &Option<String>, old_image: &Option<String>| {
        let key = format!("container.seccomp.security.alpha.kubernetes.io/{name}");
        image != old_image
            || annotations.and_then(|a| a.get(&key)) != old_annotations.and_then(|a| a.get(&key))
    };
    let list_changed = |new: &[Container], old: &[Container]| {
        new.len() != old.len()
            || new
                .iter()
                .zip(old)
                .any(|(n, o)| changed(&n.name, &n.image, &o.image))
    };
    if list_changed(&spec.containers, &old_spec.containers)
        || list_changed(
            spec.init_containers.as_deref().unwrap_or_default(),
            old_spec.init_containers.as_deref().unwrap_or_default(),
        )
    {
        return true;
    }
    let old_ephemeral = old_spec.ephemeral_containers.as_deref().unwrap_or_default();
    spec.ephemeral_containers.iter().flatten().any(|c| {
        match old_ephemeral.iter().find(|o| o.name == c.name) {
            None => true,
            Some(o) => changed(&c.name, &c.image, &o.image),
        }
    })
}

/// What is being checked, for messages and logs.
struct Target<'a> {
    request: &'a WriteRequest<'a>,
    name: &'a str,
    namespace: &'a str,
}

/// Runs the namespace's enforce (when `enforce`), audit and warn levels
/// over one pod (or template), reusing a result when two modes ask for the
/// same level and version, as upstream does. An enforce failure refuses
/// the write and then no warning is added.
fn evaluate(
    config: &PodSecurityConfig,
    target: &Target<'_>,
    policy: &Policy,
    policy_errors: &[FieldError],
    meta: &ObjectMeta,
    spec: &PodSpec,
    enforce: bool,
) -> Result<(), ApiError> {
    let notes: &RequestNotes = target.request.notes;
    if config.exempt_runtime_class(spec.runtime_class_name.as_deref()) {
        notes.annotate(EXEMPT_ANNOTATION, "runtimeClass");
        return Ok(());
    }
    if !policy_errors.is_empty() {
        notes.annotate(
            ERROR_ANNOTATION,
            format!("Failed to parse policy: {}", render_causes(policy_errors)),
        );
    }
    let mut results: Vec<(LevelVersion, Vec<Violation>)> = Vec::new();
    let mut result_for = |level: LevelVersion| -> Vec<Violation> {
        if let Some((_, found)) = results.iter().find(|(lv, _)| *lv == level) {
            return found.clone();
        }
        let found = checks::evaluate(level, meta, spec);
        results.push((level, found.clone()));
        found
    };
    let mut refusal = None;
    if enforce {
        notes.annotate(ENFORCE_POLICY_ANNOTATION, policy.enforce.to_string());
        let violations = result_for(policy.enforce);
        if !violations.is_empty() {
            let info = target.request.info;
            refusal = Some(storage::forbidden(
                info,
                target.name,
                messages::violates(policy.enforce, &violations),
            ));
        }
    }
    let audit = result_for(policy.audit);
    if !audit.is_empty() {
        let text = messages::would_violate(policy.audit, &audit);
        tracing::info!(
            user = %target.request.user.name,
            resource = %target.request.info.qualified(),
            namespace = target.namespace,
            name = target.name,
            violation = %text,
            "PodSecurity audit"
        );
        notes.annotate(AUDIT_VIOLATIONS_ANNOTATION, text);
    }
    if let Some(refusal) = refusal {
        return Err(refusal);
    }
    let warn = result_for(policy.warn);
    if !warn.is_empty() {
        notes.warn(messages::would_violate(policy.warn, &warn));
    }
    Ok(())
}

/// Labels as a map (absent or malformed labels read as none).
fn labels_of(object: &Value) -> BTreeMap<String, String> {
    object["metadata"]["labels"]
        .as_object()
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: Value, annotations: Value) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": "p", "annotations": annotations}, "spec": spec}),
        )
        .unwrap()
    }

    #[test]
    fn only_image_and_container_changes_are_significant() {
        let base = json!({"containers": [{"name": "a", "image": "x"}], "tolerations": []});
        let old = pod(base.clone(), json!({}));
        let relabeled = pod(
            json!({"containers": [{"name": "a", "image": "x"}], "tolerations": [{"key": "k", "operator": "Exists"}]}),
            json!({"note": "changed"}),
        );
        assert!(!significant_update(&relabeled, &old));
        let new_image = pod(
            json!({"containers": [{"name": "a", "image": "y"}]}),
            json!({}),
        );
        assert!(significant_update(&new_image, &old));
        let seccomp = pod(
            base.clone(),
            json!({"container.seccomp.security.alpha.kubernetes.io/a": "unconfined"}),
        );
        assert!(significant_update(&seccomp, &old));
        let more = pod(
            json!({"containers": [{"name": "a", "image": "x"}], "initContainers": [{"name": "i", "image": "x"}]}),
            json!({}),
        );
        assert!(significant_update(&more, &old));
        let debug = pod(
            json!({"containers": [{"name": "a", "image": "x"}], "ephemeralContainers": [{"name": "d", "image": "busybox"}]}),
            json!({}),
        );
        assert!(significant_update(&debug, &old));
        assert!(!significant_update(&debug, &debug));
    }

    #[test]
    fn policy_errors_aggregate_as_upstream() {
        let one = [FieldError::invalid("a", "x", "bad")];
        assert_eq!(render_causes(&one), "a: Invalid value: \"x\": bad");
        let two = [
            FieldError::invalid("a", "x", "bad"),
            FieldError::invalid("b", "y", "worse"),
        ];
        assert_eq!(
            render_causes(&two),
            "[a: Invalid value: \"x\": bad, b: Invalid value: \"y\": worse]"
        );
    }
}
