//! What a HorizontalPodAutoscaler's v2 `metrics` and `behavior` must be, as
//! upstream rules them: each metric names one source of its type, with a
//! target of a known type and positive values of the kinds its source
//! takes; each scaling rule has a window of at most an hour and at least
//! one policy of a positive value over at most half an hour.

use serde_json::Value;

use crate::status::FieldError;

/// Metric source types, sorted as upstream lists them.
const SOURCE_TYPES: &[&str] = &[
    "ContainerResource",
    "External",
    "Object",
    "Pods",
    "Resource",
];

/// A source type and the field holding that source.
const SOURCES: &[(&str, &str)] = &[
    ("Object", "object"),
    ("External", "external"),
    ("Pods", "pods"),
    ("Resource", "resource"),
    ("ContainerResource", "containerResource"),
];

/// Longest scaling policy period.
const MAX_PERIOD_SECONDS: i64 = 1800;
/// Longest stabilization window.
const MAX_STABILIZATION_WINDOW_SECONDS: i64 = 3600;

const POPULATE: &str = "must populate information for the given metric source";

/// The `spec.metrics` of a v2 autoscaler.
pub(crate) fn metrics(spec: &Value, errors: &mut Vec<FieldError>) {
    let metrics = spec["metrics"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    for (i, metric) in metrics.iter().enumerate() {
        metric_spec(metric, &format!("spec.metrics[{i}]"), errors);
    }
    let scales_from_objects = metrics
        .iter()
        .any(|m| m["type"] == "Object" || m["type"] == "External");
    if spec["minReplicas"].as_i64() == Some(0) && !scales_from_objects {
        errors.push(FieldError::forbidden(
            "spec.metrics",
            "must specify at least one Object or External metric to support scaling to zero replicas",
        ));
    }
}

fn metric_spec(metric: &Value, at: &str, errors: &mut Vec<FieldError>) {
    let kind = metric["type"].as_str().unwrap_or("");
    if kind.is_empty() {
        errors.push(FieldError::required(
            format!("{at}.type"),
            "must specify a metric source type",
        ));
    }
    let known = SOURCE_TYPES.contains(&kind);
    if !known {
        errors.push(FieldError::not_supported(
            format!("{at}.type"),
            kind,
            SOURCE_TYPES,
        ));
    }
    let present: Vec<&str> = SOURCES
        .iter()
        .map(|(_, field)| *field)
        .filter(|field| metric[*field].is_object())
        .collect();
    // Only the first source given is checked, as upstream does.
    if let Some(first) = present.first() {
        let source = &metric[*first];
        let here = format!("{at}.{first}");
        match *first {
            "object" => object_source(source, &here, errors),
            "external" => external_source(source, &here, errors),
            "pods" => pods_source(source, &here, errors),
            "resource" => resource_source(source, &here, false, errors),
            _ => resource_source(source, &here, true, errors),
        }
    }
    let expected = SOURCES.iter().find(|(t, _)| *t == kind).map(|(_, f)| *f);
    match expected {
        Some(field) if !metric[field].is_object() => {
            errors.push(FieldError::required(format!("{at}.{field}"), POPULATE));
        }
        Some(_) => {}
        // Upstream reports an unknown type twice.
        None => errors.push(FieldError::not_supported(
            format!("{at}.type"),
            kind,
            SOURCE_TYPES,
        )),
    }
    if present.len() != 1 {
        for field in present.iter().filter(|f| Some(**f) != expected) {
            errors.push(FieldError::forbidden(
                format!("{at}.{field}"),
                "must populate the given metric source only",
            ));
        }
    }
}

fn object_source(source: &Value, at: &str, errors: &mut Vec<FieldError>) {
    object_reference(
        &source["describedObject"],
        &format!("{at}.describedObject"),
        errors,
    );
    metric_identifier(&source["metric"], &format!("{at}.metric"), errors);
    let target = &source["target"];
    metric_target(target, &format!("{at}.target"), errors);
    if target["value"].is_null() && target["averageValue"].is_null() {
        errors.push(FieldError::required(
            format!("{at}.target.averageValue"),
            "must set either a target value or averageValue",
        ));
    }
}

fn external_source(source: &Value, at: &str, errors: &mut Vec<FieldError>) {
    metric_identifier(&source["metric"], &format!("{at}.metric"), errors);
    let target = &source["target"];
    metric_target(target, &format!("{at}.target"), errors);
    match (target["value"].is_null(), target["averageValue"].is_null()) {
        (true, true) => errors.push(FieldError::required(
            format!("{at}.target.averageValue"),
            "must set either a target value for metric or a per-pod target",
        )),
        (false, false) => errors.push(FieldError::forbidden(
            format!("{at}.target.value"),
            "may not set both a target value for metric and a per-pod target",
        )),
        _ => {}
    }
}

fn pods_source(source: &Value, at: &str, errors: &mut Vec<FieldError>) {
    metric_identifier(&source["metric"], &format!("{at}.metric"), errors);
    let target = &source["target"];
    metric_target(target, &format!("{at}.target"), errors);
    if target["averageValue"].is_null() {
        errors.push(FieldError::required(
            format!("{at}.target.averageValue"),
            "must specify a positive target averageValue",
        ));
    }
}

/// A `resource` source, or with `container` a `containerResource` one.
fn resource_source(source: &Value, at: &str, container: bool, errors: &mut Vec<FieldError>) {
    let name = source["name"].as_str().unwrap_or("");
    if name.is_empty() {
        errors.push(FieldError::required(
            format!("{at}.name"),
            "must specify a resource name",
        ));
    }
    if container {
        match source["container"].as_str().unwrap_or("") {
            "" => errors.push(FieldError::required(
                format!("{at}.container"),
                "must specify a container",
            )),
            c => errors.extend(super::validate_name(
                super::NameRule::Label,
                c,
                &format!("{at}.container"),
            )),
        }
    }
    let target = &source["target"];
    metric_target(target, &format!("{at}.target"), errors);
    match (
        target["averageUtilization"].is_null(),
        target["averageValue"].is_null(),
    ) {
        (true, true) => errors.push(FieldError::required(
            format!("{at}.target.averageUtilization"),
            "must set either a target raw value or a target utilization",
        )),
        (false, false) => errors.push(FieldError::forbidden(
            format!("{at}.target.averageValue"),
            "may not set both a target raw value and a target utilization",
        )),
        _ => {}
    }
}

fn metric_target(target: &Value, at: &str, errors: &mut Vec<FieldError>) {
    let kind = target["type"].as_str().unwrap_or("");
    if kind.is_empty() {
        errors.push(FieldError::required(
            format!("{at}.type"),
            "must specify a metric target type",
        ));
    }
    if !["Utilization", "Value", "AverageValue"].contains(&kind) {
        errors.push(FieldError::invalid(
            format!("{at}.type"),
            kind,
            "must be either Utilization, Value, or AverageValue",
        ));
    }
    for field in ["value", "averageValue"] {
        let quantity = &target[field];
        if quantity.is_null() {
            continue;
        }
        if super::quantity(quantity).is_none_or(|a| a.milli() <= 0) {
            errors.push(FieldError::invalid(
                format!("{at}.{field}"),
                quantity.clone(),
                "must be positive",
            ));
        }
    }
    if let Some(utilization) = target["averageUtilization"].as_i64().filter(|u| *u < 1) {
        errors.push(FieldError::invalid(
            format!("{at}.averageUtilization"),
            utilization,
            "must be greater than 0",
        ));
    }
}

fn metric_identifier(id: &Value, at: &str, errors: &mut Vec<FieldError>) {
    match id["name"].as_str().unwrap_or("") {
        "" => errors.push(FieldError::required(
            format!("{at}.name"),
            "must specify a metric name",
        )),
        name => errors.extend(super::validate_name(
            super::NameRule::PathSegment,
            name,
            &format!("{at}.name"),
        )),
    }
}

/// A `scaleTargetRef` or `describedObject`: a kind and a name, each a path
/// segment.
pub(crate) fn object_reference(reference: &Value, at: &str, errors: &mut Vec<FieldError>) {
    for field in ["kind", "name"] {
        match reference[field].as_str().unwrap_or("") {
            "" => errors.push(FieldError::required(format!("{at}.{field}"), "")),
            value => errors.extend(super::validate_name(
                super::NameRule::PathSegment,
                value,
                &format!("{at}.{field}"),
            )),
        }
    }
}

/// `spec.behavior`: each direction's rules.
pub(crate) fn behavior(spec: &Value, errors: &mut Vec<FieldError>) {
    for direction in ["scaleUp", "scaleDown"] {
        let rules = &spec["behavior"][direction];
        if rules.is_object() {
            scaling_rules(rules, &format!("spec.behavior.{direction}"), errors);
        }
    }
}

fn scaling_rules(rules: &Value, at: &str, errors: &mut Vec<FieldError>) {
    if let Some(window) = rules["stabilizationWindowSeconds"].as_i64() {
        if window < 0 {
            errors.push(FieldError::invalid(
                format!("{at}.stabilizationWindowSeconds"),
                window,
                "must be greater than or equal to zero",
            ));
        }
        if window > MAX_STABILIZATION_WINDOW_SECONDS {
            errors.push(FieldError::invalid(
                format!("{at}.stabilizationWindowSeconds"),
                window,
                format!("must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}"),
            ));
        }
    }
    super::one_of(
        rules,
        "selectPolicy",
        &["Disabled", "Max", "Min"],
        at,
        errors,
    );
    let policies = rules["policies"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if policies.is_empty() {
        errors.push(FieldError::required(
            format!("{at}.policies"),
            "must specify at least one Policy",
        ));
    }
    for (i, policy) in policies.iter().enumerate() {
        let here = format!("{at}.policies[{i}]");
        let kind = policy["type"].as_str().unwrap_or("");
        if kind != "Pods" && kind != "Percent" {
            errors.push(FieldError::not_supported(
                format!("{here}.type"),
                kind,
                &["Percent", "Pods"],
            ));
        }
        for field in ["value", "periodSeconds"] {
            let n = policy[field].as_i64().unwrap_or(0);
            if n <= 0 {
                errors.push(FieldError::invalid(
                    format!("{here}.{field}"),
                    n,
                    "must be greater than zero",
                ));
            }
        }
        let period = policy["periodSeconds"].as_i64().unwrap_or(0);
        if period > MAX_PERIOD_SECONDS {
            errors.push(FieldError::invalid(
                format!("{here}.periodSeconds"),
                period,
                format!("must be less than or equal to {MAX_PERIOD_SECONDS}"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn checked(spec: Value) -> Vec<String> {
        let mut errors = Vec::new();
        metrics(&spec, &mut errors);
        behavior(&spec, &mut errors);
        errors.iter().map(FieldError::render).collect()
    }

    #[test]
    fn a_resource_metric_needs_a_target_value() {
        let spec = json!({"metrics": [{"type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization"}}}]});
        assert_eq!(
            checked(spec),
            [
                "spec.metrics[0].resource.target.averageUtilization: Required value: must set either a target raw value or a target utilization"
            ]
        );
        let ok = json!({"metrics": [{"type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]});
        assert!(checked(ok).is_empty());
    }

    #[test]
    fn targets_are_positive_and_of_a_known_type() {
        let spec = json!({"metrics": [{"type": "Pods", "pods": {"metric": {"name": "qps"},
            "target": {"type": "Average", "averageValue": "-1"}}}]});
        assert_eq!(
            checked(spec),
            [
                "spec.metrics[0].pods.target.type: Invalid value: \"Average\": must be either Utilization, Value, or AverageValue",
                "spec.metrics[0].pods.target.averageValue: Invalid value: \"-1\": must be positive",
            ]
        );
    }

    #[test]
    fn a_metric_names_the_one_source_of_its_type() {
        let spec = json!({"metrics": [{"type": "Object",
            "external": {"metric": {"name": "queue"}, "target": {"type": "Value", "value": "10"}}}]});
        assert_eq!(
            checked(spec),
            [
                "spec.metrics[0].object: Required value: must populate information for the given metric source"
            ]
        );
        let two = json!({"metrics": [{"type": "Pods",
            "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}},
            "external": {"metric": {"name": "queue"}, "target": {"type": "Value", "value": "10"}}}]});
        assert_eq!(
            checked(two),
            ["spec.metrics[0].external: Forbidden: must populate the given metric source only"]
        );
        let unknown = json!({"metrics": [{"type": "Memory"}]});
        let supported = "supported values: \"ContainerResource\", \"External\", \"Object\", \"Pods\", \"Resource\"";
        assert_eq!(
            checked(unknown),
            [
                format!("spec.metrics[0].type: Unsupported value: \"Memory\": {supported}"),
                format!("spec.metrics[0].type: Unsupported value: \"Memory\": {supported}"),
            ]
        );
    }

    #[test]
    fn scaling_policies_are_bounded() {
        let spec = json!({"behavior": {
            "scaleUp": {"stabilizationWindowSeconds": 4000, "selectPolicy": "Fastest", "policies": []},
            "scaleDown": {"policies": [{"type": "Pods", "value": 0, "periodSeconds": 3600}]}}});
        assert_eq!(
            checked(spec),
            [
                "spec.behavior.scaleUp.stabilizationWindowSeconds: Invalid value: 4000: must be less than or equal to 3600",
                "spec.behavior.scaleUp.selectPolicy: Unsupported value: \"Fastest\": supported values: \"Disabled\", \"Max\", \"Min\"",
                "spec.behavior.scaleUp.policies: Required value: must specify at least one Policy",
                "spec.behavior.scaleDown.policies[0].value: Invalid value: 0: must be greater than zero",
                "spec.behavior.scaleDown.policies[0].periodSeconds: Invalid value: 3600: must be less than or equal to 1800",
            ]
        );
    }
}
