//! ValidatingAdmissionPolicy: upstream's in-process, CEL-based validating
//! admission. For every write, each ValidatingAdmissionPolicyBinding whose
//! policy exists and whose policy's `matchConstraints` and own
//! `matchResources` take the request in is evaluated, once per parameter
//! object (`paramKind` + `paramRef`): `matchConditions` first (all must
//! hold), then `variables` in order, then each validation; a failed
//! validation (or an expression error under `failurePolicy: Fail`) is acted
//! on by the binding's `validationActions`: Deny refuses the request with
//! the validation's reason, Warn adds a warning, Audit an audit annotation.
//! `auditAnnotations` become audit annotations `<policy>/<key>`.
//!
//! Policies and bindings are read from their watch caches, parameters and
//! namespaces too; nothing here writes. Policies never apply to the
//! admissionregistration.k8s.io resources themselves, so a bad policy can
//! always be fixed.
//!
//! Not supported: `authorizer` (an expression naming it fails at
//! evaluation), `matchPolicy: Equivalent` across versions (rules match the
//! exact group/version/resource written), and the policy's status
//! (type checking warnings).

pub(crate) mod definition;
mod matching;

use std::sync::Arc;

use serde_json::{Value, json};

use super::WriteRequest;
use crate::cel::{self, Budget, EvalError};
use crate::object::str_items;
use crate::registry::{ResourceInfo, Subresource};
use crate::server::Inner;
use crate::status::ApiError;
use definition::{CompiledPolicy, FailurePolicy};
use matching::RequestShape;

/// The group both kinds are served in.
pub(crate) const GROUP: &str = "admissionregistration.k8s.io";

/// The audit annotation key Audit-action failures are recorded under.
const VALIDATION_FAILURE_KEY: &str = "validation.policy.admission.k8s.io/validation_failure";

/// One failed validation, ready to be acted on.
#[derive(Debug)]
struct Failure {
    message: String,
    reason: Option<String>,
    expression_index: Option<usize>,
}

/// Evaluates every matching policy binding on `request`.
pub(crate) fn admit(inner: &Inner, request: &WriteRequest<'_>) -> Result<(), ApiError> {
    if request.info.group == GROUP {
        return Ok(());
    }
    let bindings = all_objects(inner, "validatingadmissionpolicybindings");
    if bindings.is_empty() {
        return Ok(());
    }
    let policies = all_objects(inner, "validatingadmissionpolicies");
    let object = request.new.or(request.old);
    let name = object
        .and_then(|o| o["metadata"]["name"].as_str())
        .unwrap_or("");
    let namespace = object
        .and_then(|o| o["metadata"]["namespace"].as_str())
        .filter(|_| request.info.namespaced)
        .unwrap_or("");
    let namespace_object = (!namespace.is_empty())
        .then(|| namespace_object(inner, namespace))
        .flatten();
    let operation = request.operation.name();
    let mut audited = Vec::new();
    let subresource = request.subresource.map(Subresource::name).unwrap_or("");
    let shape = RequestShape {
        operation,
        group: request.info.group,
        version: request.info.version,
        resource: request.info.resource,
        subresource,
        name,
        namespaced: request.info.namespaced,
        is_namespace: request.info.is(crate::kinds::Namespaces::RESOURCE),
        namespace_labels: namespace_object.as_deref(),
        new: request.new,
        old: request.old,
    };
    let base = Activation {
        object: request.new.map(cel::from_json).unwrap_or(cel::Value::Null),
        old_object: request.old.map(cel::from_json).unwrap_or(cel::Value::Null),
        request: cel::from_json(&request_variable(
            request,
            name,
            namespace,
            operation,
            subresource,
        )),
        namespace_object: namespace_object
            .as_deref()
            .map(cel::from_json)
            .unwrap_or(cel::Value::Null),
    };
    for binding in &bindings {
        let policy_name = binding["spec"]["policyName"].as_str().unwrap_or("");
        let Some(policy) = policies
            .iter()
            .find(|p| p["metadata"]["name"].as_str() == Some(policy_name))
        else {
            continue;
        };
        let Some(constraints) = policy["spec"].get("matchConstraints") else {
            continue;
        };
        if !matching::matches(constraints, &shape, true) {
            continue;
        }
        if let Some(resources) = binding["spec"]
            .get("matchResources")
            .filter(|m| m.is_object())
            && !matching::matches(resources, &shape, false)
        {
            continue;
        }
        let binding_name = binding["metadata"]["name"].as_str().unwrap_or("");
        let failures = evaluate_binding(inner, request, policy, binding, namespace, &base);
        let acted = act(
            request,
            policy_name,
            binding_name,
            binding,
            failures,
            &mut audited,
        );
        if acted.is_err() {
            record_audited(request, &audited);
            return acted;
        }
    }
    record_audited(request, &audited);
    Ok(())
}

/// Every binding's Audit-action failures as one annotation (a JSON list),
/// as upstream records them.
fn record_audited(request: &WriteRequest<'_>, audited: &[Value]) {
    if !audited.is_empty() {
        request.notes.annotate(
            VALIDATION_FAILURE_KEY,
            Value::Array(audited.to_vec()).to_string(),
        );
    }
}

/// The variables every evaluation of one request shares.
struct Activation {
    object: cel::Value,
    old_object: cel::Value,
    request: cel::Value,
    namespace_object: cel::Value,
}

/// The failures of one binding on one request (for every parameter).
fn evaluate_binding(
    inner: &Inner,
    request: &WriteRequest<'_>,
    policy: &Value,
    binding: &Value,
    namespace: &str,
    base: &Activation,
) -> Vec<Failure> {
    let policy_name = policy["metadata"]["name"].as_str().unwrap_or("");
    let compiled = match definition::compile_policy(&policy["spec"]) {
        Ok(compiled) => compiled,
        Err(errors) => {
            // Validation refuses such policies; one stored before that
            // rule existed fails as upstream's unusable policy does.
            let detail = errors
                .iter()
                .map(|e| e.render())
                .collect::<Vec<_>>()
                .join(", ");
            return failure_policy_of(&policy["spec"])
                .then_some(Failure {
                    message: format!("failed to compile policy {policy_name}: {detail}"),
                    reason: None,
                    expression_index: None,
                })
                .into_iter()
                .collect();
        }
    };
    let params = match resolve_params(inner, &policy["spec"], &binding["spec"], namespace) {
        Ok(params) => params,
        Err(ParamError::NotFoundDeny) => {
            return vec![Failure {
                message: "failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction".into(),
                reason: None,
                expression_index: None,
            }];
        }
        Err(ParamError::Misconfigured(message)) => {
            return match compiled.failure_policy {
                FailurePolicy::Fail => vec![Failure {
                    message: format!("failed to configure binding: {message}"),
                    reason: None,
                    expression_index: None,
                }],
                FailurePolicy::Ignore => Vec::new(),
            };
        }
    };
    let mut failures = Vec::new();
    for param in params {
        evaluate_once(request, policy_name, &compiled, base, param, &mut failures);
    }
    failures
}

fn failure_policy_of(spec: &Value) -> bool {
    spec["failurePolicy"].as_str() != Some("Ignore")
}

/// One evaluation of a policy with one parameter (or none).
fn evaluate_once(
    request: &WriteRequest<'_>,
    policy_name: &str,
    compiled: &CompiledPolicy,
    base: &Activation,
    params: cel::Value,
    failures: &mut Vec<Failure>,
) {
    let budget = Budget::standard();
    let mut variables: Vec<(&str, cel::Value)> = vec![
        ("object", base.object.clone()),
        ("oldObject", base.old_object.clone()),
        ("request", base.request.clone()),
        ("params", params),
        ("namespaceObject", base.namespace_object.clone()),
    ];
    let on_error = |failures: &mut Vec<Failure>, message: String| {
        if compiled.failure_policy == FailurePolicy::Fail {
            failures.push(Failure {
                message,
                reason: None,
                expression_index: None,
            });
        }
    };
    for (name, program) in &compiled.match_conditions {
        match cel::evaluate(program, &variables, &budget).and_then(|v| cel::as_bool(&v)) {
            Ok(true) => {}
            Ok(false) => return,
            Err(error) => {
                on_error(
                    failures,
                    format!("failed to evaluate match condition '{name}': {error}"),
                );
                return;
            }
        }
    }
    // Variables are evaluated in order, each seeing the ones before it; one
    // that fails is left out, so only the expressions naming it fail.
    let mut composed = std::collections::HashMap::new();
    for (name, program) in &compiled.variables {
        let mut scope = variables.clone();
        scope.push(("variables", composed_value(&composed)));
        if let Ok(value) = cel::evaluate(program, &scope, &budget) {
            composed.insert(name.clone(), value);
        }
    }
    variables.push(("variables", composed_value(&composed)));
    for (index, validation) in compiled.validations.iter().enumerate() {
        let source = validation.expression.source();
        match cel::evaluate(&validation.expression, &variables, &budget)
            .and_then(|v| cel::as_bool(&v))
        {
            Ok(true) => {}
            Ok(false) => {
                let message = validation
                    .message_expression
                    .as_ref()
                    .and_then(|program| cel::evaluate(program, &variables, &budget).ok())
                    .and_then(|value| cel::as_string(&value).ok())
                    .map(|m| m.trim().to_string())
                    .filter(|m| !m.is_empty() && !m.contains('\n'))
                    .or_else(|| validation.message.clone().filter(|m| !m.is_empty()))
                    .unwrap_or_else(|| format!("failed expression: {source}"));
                failures.push(Failure {
                    message,
                    reason: validation.reason.clone(),
                    expression_index: Some(index),
                });
            }
            Err(error) => on_error(
                failures,
                format!(
                    "expression '{source}' resulted in error: {}",
                    error_text(&error)
                ),
            ),
        }
    }
    for (key, program) in &compiled.audit_annotations {
        match cel::evaluate(program, &variables, &budget) {
            Ok(cel::Value::Null) => {}
            Ok(value) => match cel::as_string(&value) {
                Ok(text) => request.notes.annotate(format!("{policy_name}/{key}"), text),
                Err(error) => on_error(
                    failures,
                    format!(
                        "valueExpression '{}' resulted in error: {error}",
                        program.source()
                    ),
                ),
            },
            Err(error) => on_error(
                failures,
                format!(
                    "valueExpression '{}' resulted in error: {error}",
                    program.source()
                ),
            ),
        }
    }
}

fn error_text(error: &EvalError) -> String {
    error.to_string()
}

fn composed_value(composed: &std::collections::HashMap<String, cel::Value>) -> cel::Value {
    let map: std::collections::HashMap<String, cel::Value> = composed.clone();
    cel::Value::from(map)
}

/// Acts on a binding's failures with its validation actions: the first
/// Deny refuses the request; Audit entries are added to `audited`.
fn act(
    request: &WriteRequest<'_>,
    policy: &str,
    binding_name: &str,
    binding: &Value,
    failures: Vec<Failure>,
    audited: &mut Vec<Value>,
) -> Result<(), ApiError> {
    if failures.is_empty() {
        return Ok(());
    }
    let actions: Vec<&str> = str_items(&binding["spec"]["validationActions"]).collect();
    if actions.contains(&"Warn") {
        for failure in &failures {
            request.notes.warn(format!(
                "Validation failed for ValidatingAdmissionPolicy '{policy}' with binding '{binding_name}': {}",
                failure.message
            ));
        }
    }
    if actions.contains(&"Audit") {
        audited.extend(failures.iter().map(|failure| {
            let mut entry = json!({
                "message": failure.message,
                "policy": policy,
                "binding": binding_name,
                "validationActions": actions,
            });
            if let Some(index) = failure.expression_index {
                entry["expressionIndex"] = json!(index);
            }
            entry
        }));
    }
    if actions.contains(&"Deny")
        && let Some(first) = failures.first()
    {
        return Err(denied(request, policy, binding_name, first));
    }
    Ok(())
}

/// Upstream's refusal: Forbidden's wording about the object, with the
/// validation's reason (Invalid when it names none) and that reason's code.
fn denied(request: &WriteRequest<'_>, policy: &str, binding: &str, failure: &Failure) -> ApiError {
    let object = request.new.or(request.old);
    let name = object
        .and_then(|o| o["metadata"]["name"].as_str())
        .unwrap_or("");
    let detail = format!(
        "ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied request: {}",
        failure.message
    );
    let reason = match failure.reason.as_deref() {
        Some("Unauthorized") => "Unauthorized",
        Some("Forbidden") => "Forbidden",
        Some("RequestEntityTooLarge") => "RequestEntityTooLarge",
        _ => "Invalid",
    };
    ApiError::AdmissionDenied {
        resource: request.info.qualified(),
        group: request.info.group.to_string(),
        name: name.to_string(),
        detail,
        reason,
    }
}

/// The `request` variable: upstream's AdmissionRequest fields.
fn request_variable(
    request: &WriteRequest<'_>,
    name: &str,
    namespace: &str,
    operation: &str,
    subresource: &str,
) -> Value {
    let info = request.info;
    let kind = json!({"group": info.group, "version": info.version, "kind": info.kind});
    let resource = json!({"group": info.group, "version": info.version, "resource": info.resource});
    json!({
        "kind": kind,
        "resource": resource,
        "subResource": subresource,
        "requestKind": kind,
        "requestResource": resource,
        "requestSubResource": subresource,
        "name": name,
        "namespace": namespace,
        "operation": operation,
        "userInfo": {
            "username": request.user.name,
            "uid": request.user.uid,
            "groups": request.user.groups,
            "extra": request.user.extra,
        },
        "dryRun": request.dry_run,
    })
}

/// Every stored object of one admissionregistration resource.
fn all_objects(inner: &Inner, resource: &str) -> Vec<Arc<Value>> {
    let Some(info) = inner.registry.get(GROUP, "v1", resource) else {
        return Vec::new();
    };
    all_of(inner, &info)
}

fn all_of(inner: &Inner, info: &ResourceInfo) -> Vec<Arc<Value>> {
    let Ok(cache) = inner.cache(info) else {
        return Vec::new();
    };
    cache
        .snapshot()
        .objects
        .values()
        .map(|o| o.value())
        .collect()
}

fn namespace_object(inner: &Inner, namespace: &str) -> Option<Arc<Value>> {
    let info = inner.registry.get("", "v1", "namespaces")?;
    let cache = inner.cache(&info).ok()?;
    cache
        .snapshot()
        .objects
        .get(&info.key(None, namespace))
        .map(|o| o.value())
}

/// Why no parameters could be found.
enum ParamError {
    /// None exist and the binding says to deny.
    NotFoundDeny,
    /// The policy or binding cannot be used as configured.
    Misconfigured(String),
}

/// The parameter objects one binding evaluates its policy with: `[null]`
/// for a policy without `paramKind`; none at all when none are found and
/// the binding allows that.
fn resolve_params(
    inner: &Inner,
    policy: &Value,
    binding: &Value,
    request_namespace: &str,
) -> Result<Vec<cel::Value>, ParamError> {
    let Some(param_kind) = policy.get("paramKind").filter(|p| p.is_object()) else {
        return Ok(vec![cel::Value::Null]);
    };
    let Some(param_ref) = binding.get("paramRef").filter(|p| p.is_object()) else {
        return Err(ParamError::Misconfigured(
            "paramKind is set on the policy but the binding has no paramRef".into(),
        ));
    };
    let api_version = param_kind["apiVersion"].as_str().unwrap_or("");
    let kind = param_kind["kind"].as_str().unwrap_or("");
    let (group, version) = match api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    };
    let registry = inner.registry.current();
    let Some(info) = registry
        .resources()
        .iter()
        .find(|r| r.group == group && r.version == version && r.kind == kind)
        .cloned()
    else {
        return Err(ParamError::Misconfigured(format!(
            "failed to find resource referenced by paramKind: '{api_version}, Kind={kind}'"
        )));
    };
    let namespace = match param_ref["namespace"].as_str().filter(|n| !n.is_empty()) {
        Some(namespace) => Some(namespace),
        None if info.namespaced && request_namespace.is_empty() => {
            return Err(ParamError::Misconfigured(
                "cannot use a namespaced paramKind for a cluster-scoped request without paramRef.namespace".into(),
            ));
        }
        None if info.namespaced => Some(request_namespace),
        None => None,
    };
    let found: Vec<Arc<Value>> = match param_ref["name"].as_str().filter(|n| !n.is_empty()) {
        Some(name) => inner
            .cache(&info)
            .ok()
            .and_then(|cache| {
                cache
                    .snapshot()
                    .objects
                    .get(&info.key(namespace, name))
                    .map(|o| o.value())
            })
            .into_iter()
            .collect(),
        None => {
            let selector = crate::selectors::LabelSelector::from_object(&param_ref["selector"])
                .map_err(|e| ParamError::Misconfigured(e.to_string()))?;
            let candidates = match namespace {
                Some(namespace) => super::cached_in_namespace(inner, &info, namespace),
                None => all_of(inner, &info),
            };
            candidates
                .into_iter()
                .filter(|object| selector.matches(object))
                .collect()
        }
    };
    if found.is_empty() {
        return match param_ref["parameterNotFoundAction"].as_str() {
            Some("Allow") => Ok(Vec::new()),
            _ => Err(ParamError::NotFoundDeny),
        };
    }
    Ok(found.iter().map(|object| cel::from_json(object)).collect())
}
