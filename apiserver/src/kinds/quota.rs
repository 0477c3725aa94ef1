//! ResourceQuotas and LimitRanges: a quota's resource names, hard amounts
//! and scopes are checked as upstream validates them; a LimitRange gets upstream's item
//! defaults (a Container item's `default` from `max`, `defaultRequest` from
//! `default`, then from `min`) and its bounds must be ordered. What they
//! enforce is admission's
//! (`admission_plugins::limit_ranger`, `admission_plugins::resource_quota`).

use serde_json::{Map, Value, json};
use skiff_common::amount::Amount;
use skiff_common::quota::pods::COMPUTE_RESOURCES;

use super::KindStrategy;
use crate::kinds::Written;
use crate::object::items_mut;
use crate::registry::ResourceInfo;
use crate::status::FieldError;
use crate::validation::{resource_names, validate_qualified_name};

/// Core `resourcequotas`.
#[derive(Debug)]
pub(crate) struct ResourceQuotas;

impl KindStrategy for ResourceQuotas {
    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let Written { object, .. } = *written;
        for field in ["spec.hard", "status.hard", "status.used"] {
            let (section, key) = field.split_once('.').unwrap_or((field, ""));
            quota_names(&object[section][key], field, errors);
            quantities(&object[section][key], field, errors);
            whole_counts(&object[section][key], field, errors);
        }
        scopes(&object["spec"], errors);
    }
}

/// Core `limitranges`.
#[derive(Debug)]
pub(crate) struct LimitRanges;

impl KindStrategy for LimitRanges {
    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        for item in items_mut(object, &["spec", "limits"]).filter(|i| i["type"] == "Container") {
            fill_from(item, "default", "max");
            fill_from(item, "defaultRequest", "default");
            fill_from(item, "defaultRequest", "min");
        }
    }

    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let Written { object, .. } = *written;
        let items = object["spec"]["limits"].as_array();
        for (i, item) in items.into_iter().flatten().enumerate() {
            limit_item(item, &format!("spec.limits[{i}]"), errors);
        }
    }
}

const SCOPES: &[&str] = &[
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
];

/// Every value of a resource map is at least zero. That each is a quantity
/// at all was checked when the body was decoded (upstream's decoder
/// refuses the rest), and a JSON number is a quantity too.
pub(super) fn quantities(map: &Value, field: &str, errors: &mut Vec<FieldError>) {
    for (name, value) in map.as_object().into_iter().flatten() {
        let amount = crate::validation::quantity(value);
        if amount.is_some_and(|a| a.milli() < 0) {
            errors.push(FieldError::invalid(
                format!("{field}[{name}]"),
                value.clone(),
                "must be greater than or equal to 0",
            ));
        }
    }
}

/// Each name a quota counts is a qualified name, and without a domain
/// prefix one upstream knows for quota: a misspelt `request.cpu` would
/// otherwise be stored and limit nothing.
fn quota_names(map: &Value, field: &str, errors: &mut Vec<FieldError>) {
    for name in map.as_object().into_iter().flatten().map(|(name, _)| name) {
        let at = format!("{field}[{name}]");
        let malformed = validate_qualified_name(name, &at);
        let bare = !name.contains('/');
        if !malformed.is_empty() {
            errors.extend(malformed);
        } else if bare && !resource_names::is_standard(name) {
            errors.push(FieldError::invalid(
                &at,
                name.as_str(),
                "must be a standard resource type or fully qualified",
            ));
        }
        if bare && !resource_names::is_standard_for_quota(name) {
            errors.push(FieldError::invalid(
                &at,
                name.as_str(),
                "must be a standard resource for quota",
            ));
        }
    }
}

/// Object counts and extended resources are whole numbers.
fn whole_counts(map: &Value, field: &str, errors: &mut Vec<FieldError>) {
    for (name, value) in map.as_object().into_iter().flatten() {
        let amount = crate::validation::quantity(value);
        let fraction = amount.is_some_and(|a| a.milli() % 1000 != 0);
        if fraction && resource_names::is_integer(name) {
            errors.push(FieldError::invalid(
                format!("{field}[{name}]"),
                value.clone(),
                "must be an integer",
            ));
        }
    }
}

/// Scope names are known, opposite scopes are not combined, and a scoped
/// quota limits only what scopes can select (pods).
fn scopes(spec: &Value, errors: &mut Vec<FieldError>) {
    let mut named: Vec<(&str, String)> = Vec::new();
    for (i, scope) in spec["scopes"].as_array().into_iter().flatten().enumerate() {
        named.push((scope.as_str().unwrap_or(""), format!("spec.scopes[{i}]")));
    }
    let expressions = spec["scopeSelector"]["matchExpressions"].as_array();
    for (i, expr) in expressions.into_iter().flatten().enumerate() {
        let path = format!("spec.scopeSelector.matchExpressions[{i}]");
        let scope = expr["scopeName"].as_str().unwrap_or("");
        let operator = expr["operator"].as_str().unwrap_or("");
        let values = expr["values"].as_array().map_or(0, Vec::len);
        let ok = match operator {
            "In" | "NotIn" => scope == "PriorityClass" && values > 0,
            "Exists" | "DoesNotExist" => values == 0,
            _ => false,
        };
        if !ok {
            errors.push(FieldError::invalid(
                format!("{path}.operator"),
                operator,
                "not a valid selector operator for this scope",
            ));
        }
        named.push((scope, format!("{path}.scopeName")));
    }
    for (scope, path) in &named {
        if !SCOPES.contains(scope) {
            errors.push(FieldError::not_supported(path.clone(), *scope, SCOPES));
        }
    }
    let has = |s: &str| named.iter().any(|(n, _)| *n == s);
    for (a, b) in [
        ("Terminating", "NotTerminating"),
        ("BestEffort", "NotBestEffort"),
    ] {
        if has(a) && has(b) {
            errors.push(FieldError::invalid(
                "spec.scopes",
                json!([a, b]),
                "conflicting scopes",
            ));
        }
    }
    if named.is_empty() {
        return;
    }
    for name in spec["hard"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(n, _)| n)
    {
        let allowed = if has("BestEffort") {
            name == "pods"
        } else {
            // A scoped quota limits pods' count and compute only.
            name == "pods" || COMPUTE_RESOURCES.contains(&name.as_str())
        };
        if !allowed {
            errors.push(FieldError::invalid(
                format!("spec.hard[{name}]"),
                name.as_str(),
                "unsupported scope applied to resource",
            ));
        }
    }
}

/// Copies into `item[to]` each entry of `item[from]` it lacks.
fn fill_from(item: &mut Value, to: &str, from: &str) {
    let Some(source) = item[from].as_object().cloned() else {
        return;
    };
    if !item[to].is_object() {
        item[to] = Value::Object(Map::new());
    }
    if let Some(target) = item[to].as_object_mut() {
        for (name, value) in source {
            target.entry(name).or_insert(value);
        }
    }
}

fn limit_item(item: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let kind = item["type"].as_str().unwrap_or("");
    const TYPES: &[&str] = &["Pod", "Container", "PersistentVolumeClaim"];
    if !TYPES.contains(&kind) {
        errors.push(FieldError::not_supported(
            format!("{path}.type"),
            kind,
            TYPES,
        ));
    }
    let fields = [
        "min",
        "max",
        "default",
        "defaultRequest",
        "maxLimitRequestRatio",
    ];
    for field in fields {
        quantities(&item[field], &format!("{path}.{field}"), errors);
    }
    if kind == "Pod" {
        for field in ["default", "defaultRequest"] {
            if item[field].as_object().is_some_and(|m| !m.is_empty()) {
                errors.push(FieldError::forbidden(
                    format!("{path}.{field}"),
                    "may not be specified when `type` is 'Pod'",
                ));
            }
        }
    }
    let read = |field: &str, name: &str| item[field][name].as_str().and_then(Amount::parse);
    let names: std::collections::BTreeSet<&String> = fields
        .iter()
        .flat_map(|f| item[*f].as_object().into_iter().flatten().map(|(n, _)| n))
        .collect();
    for name in names {
        let (min, max) = (read("min", name), read("max", name));
        let (default, request) = (read("default", name), read("defaultRequest", name));
        let mut order = |field: &str, value: Option<Amount>, detail: Option<String>| {
            if let (Some(v), Some(detail)) = (value, detail) {
                errors.push(FieldError::invalid(
                    format!("{path}.{field}[{name}]"),
                    v.to_string(),
                    detail,
                ));
            }
        };
        let above =
            |a: Option<Amount>, b: Option<Amount>| matches!((a, b), (Some(a), Some(b)) if a > b);
        order(
            "min",
            min,
            above(min, max).then(|| {
                format!(
                    "min value {} is greater than max value {}",
                    fmt(min),
                    fmt(max)
                )
            }),
        );
        order(
            "defaultRequest",
            request,
            above(min, request).then(|| {
                format!(
                    "min value {} is greater than default request value {}",
                    fmt(min),
                    fmt(request)
                )
            }),
        );
        order(
            "defaultRequest",
            request,
            above(request, max).then(|| {
                format!(
                    "default request value {} is greater than max value {}",
                    fmt(request),
                    fmt(max)
                )
            }),
        );
        order(
            "defaultRequest",
            request,
            above(request, default).then(|| {
                format!(
                    "default request value {} is greater than default limit value {}",
                    fmt(request),
                    fmt(default)
                )
            }),
        );
        order(
            "default",
            default,
            above(min, default).then(|| {
                format!(
                    "min value {} is greater than default value {}",
                    fmt(min),
                    fmt(default)
                )
            }),
        );
        order(
            "default",
            default,
            above(default, max).then(|| {
                format!(
                    "default value {} is greater than max value {}",
                    fmt(default),
                    fmt(max)
                )
            }),
        );
    }
}

fn fmt(amount: Option<Amount>) -> String {
    amount.map(|a| a.to_string()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota_errors(spec: Value) -> Vec<String> {
        let mut errors = Vec::new();
        let info = crate::registry::Registry::builtin()
            .get("", "v1", "resourcequotas")
            .unwrap();
        let object = json!({"spec": spec});
        let written = Written {
            info: &info,
            object: &object,
            old: None,
            subresource: None,
        };
        ResourceQuotas.validate(&written, &mut errors);
        errors.iter().map(FieldError::render).collect()
    }

    #[test]
    fn quota_amounts_must_be_at_least_zero_numbers_too() {
        assert!(
            quota_errors(json!({"hard": {"pods": "2", "requests.cpu": "500m", "services": 3}}))
                .is_empty()
        );
        let errors = quota_errors(json!({"hard": {"pods": -2, "cpu": "-1"}}));
        assert_eq!(errors.len(), 2, "{errors:?}");
        for (error, field) in errors.iter().zip(["spec.hard[cpu]", "spec.hard[pods]"]) {
            assert!(
                error.contains(field) && error.contains("greater than or equal to 0"),
                "{error}"
            );
        }
    }

    #[test]
    fn quota_names_are_standard_or_qualified_and_counts_whole() {
        assert!(
            quota_errors(json!({"hard": {"count/deployments.apps": "2",
                "gold.storageclass.storage.k8s.io/requests.storage": "1Gi",
                "requests.nvidia.com/gpu": "1", "services.nodeports": "0"}}))
            .is_empty()
        );
        assert_eq!(
            quota_errors(json!({"hard": {"request.cpu": "1", "storage": "1Gi", "pods": "1.5"}})),
            [
                "spec.hard[request.cpu]: Invalid value: \"request.cpu\": must be a standard resource type or fully qualified",
                "spec.hard[request.cpu]: Invalid value: \"request.cpu\": must be a standard resource for quota",
                "spec.hard[storage]: Invalid value: \"storage\": must be a standard resource for quota",
                "spec.hard[pods]: Invalid value: \"1.5\": must be an integer",
            ]
        );
    }

    #[test]
    fn scoped_quotas_limit_pods_only_and_scopes_do_not_conflict() {
        assert!(quota_errors(json!({"hard": {"pods": "1"}, "scopes": ["BestEffort"]})).is_empty());
        let errors = quota_errors(
            json!({"hard": {"configmaps": "1", "cpu": "1"}, "scopes": ["BestEffort", "NotBestEffort"]}),
        );
        assert!(
            errors.iter().any(|e| e.contains("conflicting scopes")),
            "{errors:?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.contains("spec.hard[configmaps]") && e.contains("unsupported scope"))
        );
        let errors = quota_errors(
            json!({"hard": {"pods": "1"}, "scopeSelector": {"matchExpressions": [
                {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]},
                {"scopeName": "Everything", "operator": "Exists"}
            ]}}),
        );
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("Everything"));
    }

    #[test]
    fn container_items_default_from_max_default_and_min() {
        let mut range = json!({"spec": {"limits": [
            {"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "64Mi"}},
            {"type": "Pod", "max": {"cpu": "4"}}
        ]}});
        let info = crate::registry::Registry::builtin()
            .get("", "v1", "limitranges")
            .unwrap();
        LimitRanges.apply_defaults(&info, &mut range);
        assert_eq!(
            range["spec"]["limits"][0],
            json!({"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "64Mi"},
                   "default": {"cpu": "2"}, "defaultRequest": {"cpu": "2", "memory": "64Mi"}})
        );
        assert_eq!(
            range["spec"]["limits"][1],
            json!({"type": "Pod", "max": {"cpu": "4"}})
        );
    }

    #[test]
    fn limit_range_bounds_must_be_ordered() {
        let info = crate::registry::Registry::builtin()
            .get("", "v1", "limitranges")
            .unwrap();
        let mut errors = Vec::new();
        let range = json!({"spec": {"limits": [
            {"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}},
            {"type": "Pod", "default": {"cpu": "1"}}
        ]}});
        let written = Written {
            info: &info,
            object: &range,
            old: None,
            subresource: None,
        };
        LimitRanges.validate(&written, &mut errors);
        let rendered: Vec<String> = errors.iter().map(FieldError::render).collect();
        assert!(
            rendered
                .iter()
                .any(|e| e.contains("spec.limits[0].min[cpu]")
                    && e.contains("min value 2 is greater than max value 1")),
            "{rendered:?}"
        );
        assert!(
            rendered.iter().any(|e| e.contains("spec.limits[1].default")
                && e.contains("may not be specified when `type` is 'Pod'")),
            "{rendered:?}"
        );
    }
}
