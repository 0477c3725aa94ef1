//! A ValidatingAdmissionPolicy and its bindings as objects: upstream's
//! defaults, the checks that refuse a bad one at create/update (every CEL
//! expression must compile, with a field error naming where it sits), and
//! the compiled form the plugin evaluates. Compiling here and only here
//! keeps what is refused at write time and what runs at admission the same.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::cel::{self, CompileError, Declarations, Program};
use crate::object::str_items;
use crate::status::FieldError;
use crate::validation::one_of;

/// The variables a policy's expressions may name.
const ROOTS: &[&str] = &[
    "object",
    "oldObject",
    "request",
    "params",
    "namespaceObject",
    "authorizer",
    "variables",
];

const REASONS: &[&str] = &[
    "Unauthorized",
    "Forbidden",
    "Invalid",
    "RequestEntityTooLarge",
];
const ACTIONS: &[&str] = &["Deny", "Warn", "Audit"];

/// What happens when an expression fails to evaluate (or a parameter
/// cannot be found for a reason other than absence).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailurePolicy {
    Fail,
    Ignore,
}

/// One compiled `spec.validations` entry.
#[derive(Debug)]
pub(crate) struct Validation {
    pub expression: Arc<Program>,
    pub message: Option<String>,
    pub message_expression: Option<Arc<Program>>,
    pub reason: Option<String>,
}

/// A policy's expressions, compiled.
#[derive(Debug)]
pub(crate) struct CompiledPolicy {
    pub failure_policy: FailurePolicy,
    pub match_conditions: Vec<(String, Arc<Program>)>,
    pub variables: Vec<(String, Arc<Program>)>,
    pub validations: Vec<Validation>,
    pub audit_annotations: Vec<(String, Arc<Program>)>,
}

/// Upstream's defaults for a policy.
pub(crate) fn default_policy(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    spec.entry("failurePolicy").or_insert(json!("Fail"));
    if let Some(constraints) = spec.get_mut("matchConstraints") {
        default_match_resources(constraints);
    }
}

/// Upstream's defaults for a binding.
pub(crate) fn default_binding(object: &mut Value) {
    if let Some(resources) = object
        .get_mut("spec")
        .and_then(|spec| spec.get_mut("matchResources"))
    {
        default_match_resources(resources);
    }
}

fn default_match_resources(resources: &mut Value) {
    let Some(map) = resources.as_object_mut() else {
        return;
    };
    map.entry("matchPolicy").or_insert(json!("Equivalent"));
    map.entry("namespaceSelector").or_insert(json!({}));
    map.entry("objectSelector").or_insert(json!({}));
    for rules in ["resourceRules", "excludeResourceRules"] {
        for rule in map
            .get_mut(rules)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(rule) = rule.as_object_mut() {
                rule.entry("scope").or_insert(json!("*"));
            }
        }
    }
}

/// The declarations for a policy whose `spec.variables` are `spec`'s.
fn declarations(spec: &Value) -> Declarations {
    let names = spec["variables"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str().map(String::from))
        .collect();
    Declarations {
        roots: ROOTS.to_vec(),
        fields: Some(("variables", names)),
    }
}

/// The items of the list `object.<list>` (none when it is not a list),
/// each with its field path `<path>.<list>[i]`.
fn entries<'a>(
    object: &'a Value,
    path: &'a str,
    list: &'a str,
) -> impl Iterator<Item = (String, &'a Value)> {
    object[list]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(move |(i, entry)| (format!("{path}.{list}[{i}]"), entry))
}

/// Compiles the expression in `entry`'s `field` (at `<path>.<field>`), or
/// notes why it does not.
fn compile_field(
    entry: &Value,
    path: &str,
    field: &str,
    declared: &Declarations,
    errors: &mut Vec<FieldError>,
) -> Option<Arc<Program>> {
    let source = entry[field].as_str().unwrap_or("");
    let path = format!("{path}.{field}");
    if source.trim().is_empty() {
        errors.push(FieldError::required(path, ""));
        return None;
    }
    match cel::compile(source, declared) {
        Ok(program) => Some(program),
        Err(error) => {
            errors.push(compile_error(path, source, &error));
            None
        }
    }
}

/// Upstream's field error for an expression that does not compile.
pub(crate) fn compile_error(path: String, source: &str, error: &CompileError) -> FieldError {
    FieldError::invalid(path, source, format!("compilation failed: {error}"))
}

/// Compiles every expression of a policy's `spec`; the field errors name
/// each one that does not compile, or is missing.
pub(crate) fn compile_policy(spec: &Value) -> Result<CompiledPolicy, Vec<FieldError>> {
    let mut errors = Vec::new();
    let declared = declarations(spec);
    let failure_policy = match spec["failurePolicy"].as_str() {
        None | Some("Fail") => FailurePolicy::Fail,
        Some("Ignore") => FailurePolicy::Ignore,
        Some(other) => {
            errors.push(FieldError::not_supported(
                "spec.failurePolicy",
                other,
                &["Fail", "Ignore"],
            ));
            FailurePolicy::Fail
        }
    };
    let mut named = |list: &str, expression: &str| -> Vec<(String, Arc<Program>)> {
        let mut out = Vec::new();
        for (path, entry) in entries(spec, "spec", list) {
            let name = entry["name"].as_str().unwrap_or("");
            if name.is_empty() {
                errors.push(FieldError::required(format!("{path}.name"), ""));
            } else if list == "variables" && !is_identifier(name) {
                errors.push(FieldError::invalid(
                    format!("{path}.name"),
                    name,
                    "name is not a valid CEL identifier",
                ));
            }
            if let Some(program) = compile_field(entry, &path, expression, &declared, &mut errors) {
                out.push((name.to_string(), program));
            }
        }
        out
    };
    let match_conditions = named("matchConditions", "expression");
    let variables = named("variables", "expression");
    let mut validations = Vec::new();
    for (path, entry) in entries(spec, "spec", "validations") {
        let expression = compile_field(entry, &path, "expression", &declared, &mut errors);
        let message_expression = entry["messageExpression"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
            .then(|| compile_field(entry, &path, "messageExpression", &declared, &mut errors))
            .flatten();
        let message = entry["message"].as_str().map(String::from);
        if message.as_deref().is_some_and(|m| m.contains('\n')) {
            errors.push(FieldError::invalid(
                format!("{path}.message"),
                message.clone().unwrap_or_default(),
                "message must not contain line breaks",
            ));
        }
        one_of(entry, "reason", REASONS, &path, &mut errors);
        let reason = entry["reason"].as_str().map(String::from);
        if let Some(expression) = expression {
            validations.push(Validation {
                expression,
                message,
                message_expression,
                reason,
            });
        }
    }
    let mut audit_annotations = Vec::new();
    for (path, entry) in entries(spec, "spec", "auditAnnotations") {
        let key = entry["key"].as_str().unwrap_or("");
        if key.is_empty() {
            errors.push(FieldError::required(format!("{path}.key"), ""));
        }
        if let Some(program) =
            compile_field(entry, &path, "valueExpression", &declared, &mut errors)
        {
            audit_annotations.push((key.to_string(), program));
        }
    }
    if errors.is_empty() {
        Ok(CompiledPolicy {
            failure_policy,
            match_conditions,
            variables,
            validations,
            audit_annotations,
        })
    } else {
        Err(errors)
    }
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Every field error of a policy.
pub(crate) fn validate_policy(object: &Value, errors: &mut Vec<FieldError>) {
    let spec = &object["spec"];
    let has = |field: &str| spec[field].as_array().is_some_and(|l| !l.is_empty());
    if !has("validations") && !has("auditAnnotations") {
        errors.push(FieldError::required(
            "spec.validations",
            "validations or auditAnnotations must contain at least one item",
        ));
    }
    match spec.get("matchConstraints") {
        Some(constraints) if constraints.is_object() => {
            if constraints["resourceRules"]
                .as_array()
                .is_none_or(|l| l.is_empty())
            {
                errors.push(FieldError::required(
                    "spec.matchConstraints.resourceRules",
                    "",
                ));
            }
            validate_match_resources(constraints, "spec.matchConstraints", errors);
        }
        _ => errors.push(FieldError::required("spec.matchConstraints", "")),
    }
    if let Some(param_kind) = spec.get("paramKind").filter(|p| !p.is_null()) {
        for field in ["apiVersion", "kind"] {
            if param_kind[field].as_str().is_none_or(str::is_empty) {
                errors.push(FieldError::required(format!("spec.paramKind.{field}"), ""));
            }
        }
    }
    if let Err(compile_errors) = compile_policy(spec) {
        errors.extend(compile_errors);
    }
}

/// Every field error of a binding.
pub(crate) fn validate_binding(object: &Value, errors: &mut Vec<FieldError>) {
    let spec = &object["spec"];
    if spec["policyName"].as_str().is_none_or(str::is_empty) {
        errors.push(FieldError::required("spec.policyName", ""));
    }
    let actions: Vec<&str> = str_items(&spec["validationActions"]).collect();
    if actions.is_empty() {
        errors.push(FieldError::required(
            "spec.validationActions",
            "at least one validation action is required",
        ));
    }
    for (i, action) in actions.iter().enumerate() {
        let path = format!("spec.validationActions[{i}]");
        if !ACTIONS.contains(action) {
            errors.push(FieldError::not_supported(path, *action, ACTIONS));
        } else if actions[..i].contains(action) {
            errors.push(FieldError::duplicate(path, *action));
        }
    }
    if actions.contains(&"Deny") && actions.contains(&"Warn") {
        errors.push(FieldError::invalid(
            "spec.validationActions",
            json!(actions),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
    if let Some(param_ref) = spec.get("paramRef").filter(|p| !p.is_null()) {
        let named = param_ref["name"].as_str().is_some_and(|n| !n.is_empty());
        let selected = param_ref["selector"].is_object();
        if named && selected {
            errors.push(FieldError::forbidden(
                "spec.paramRef.name",
                "name and selector are mutually exclusive",
            ));
        } else if !named && !selected {
            errors.push(FieldError::required(
                "spec.paramRef",
                "one of name or selector must be set",
            ));
        }
        match param_ref["parameterNotFoundAction"].as_str() {
            Some("Allow" | "Deny") => {}
            Some(other) => errors.push(FieldError::not_supported(
                "spec.paramRef.parameterNotFoundAction",
                other,
                &["Allow", "Deny"],
            )),
            None => errors.push(FieldError::required(
                "spec.paramRef.parameterNotFoundAction",
                "",
            )),
        }
    }
    if let Some(resources) = spec.get("matchResources").filter(|m| m.is_object()) {
        validate_match_resources(resources, "spec.matchResources", errors);
    }
}

fn validate_match_resources(resources: &Value, path: &str, errors: &mut Vec<FieldError>) {
    one_of(
        resources,
        "matchPolicy",
        &["Equivalent", "Exact"],
        path,
        errors,
    );
    for rules in ["resourceRules", "excludeResourceRules"] {
        for (at, rule) in entries(resources, path, rules) {
            for field in ["apiGroups", "apiVersions", "operations", "resources"] {
                if rule[field].as_array().is_none_or(|l| l.is_empty()) {
                    errors.push(FieldError::required(format!("{at}.{field}"), ""));
                }
            }
            for (op_path, op) in entries(rule, &at, "operations") {
                let op = op.as_str().unwrap_or("");
                if !["*", "CREATE", "UPDATE", "DELETE", "CONNECT"].contains(&op) {
                    errors.push(FieldError::not_supported(
                        op_path,
                        op,
                        &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"],
                    ));
                }
            }
            one_of(rule, "scope", &["*", "Cluster", "Namespaced"], &at, errors);
        }
    }
    for selector in ["namespaceSelector", "objectSelector"] {
        if let Some(value) = resources.get(selector).filter(|v| !v.is_null())
            && let Err(error) = crate::selectors::label::LabelSelector::from_object(value)
        {
            errors.push(FieldError::invalid(
                format!("{path}.{selector}"),
                value.clone(),
                error.to_string(),
            ));
        }
    }
}
