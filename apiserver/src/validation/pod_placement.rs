//! Where a pod may run, as upstream's ValidateTolerations,
//! ValidateAffinity and validateTopologySpreadConstraints rule it: each
//! toleration's operator, value and effect agree; node selector
//! requirements carry the values their operator needs; term weights are
//! 1–100 and pod affinity terms name a topology key; spread constraints
//! have a positive skew, a key, a known action and no repeated pair.
//! Paths and words are upstream's, quirks included (a toleration's bad
//! value is reported on its `operator`).

use serde_json::Value;

use super::{validate_label_value, validate_qualified_name};
use crate::go_format;
use crate::status::FieldError;

/// The toleration operators and taint effects upstream knows, in its order.
const TOLERATION_OPERATORS: &[&str] = &["Equal", "Exists"];
const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];
const SPREAD_ACTIONS: &[&str] = &["DoNotSchedule", "ScheduleAnyway"];
const SPREAD_POLICIES: &[&str] = &["Honor", "Ignore"];

/// Everything of a pod spec at `path` that says where it may run.
pub(crate) fn pod_spec(spec: &Value, path: &str, errors: &mut Vec<FieldError>) {
    tolerations(&spec["tolerations"], &format!("{path}.tolerations"), errors);
    let affinity = &spec["affinity"];
    let at = format!("{path}.affinity");
    node_affinity(
        &affinity["nodeAffinity"],
        &format!("{at}.nodeAffinity"),
        errors,
    );
    for kind in ["podAffinity", "podAntiAffinity"] {
        pod_affinity(&affinity[kind], &format!("{at}.{kind}"), errors);
    }
    spread_constraints(
        &spec["topologySpreadConstraints"],
        &format!("{path}.topologySpreadConstraints"),
        errors,
    );
}

fn tolerations(list: &Value, path: &str, errors: &mut Vec<FieldError>) {
    for (i, t) in list.as_array().into_iter().flatten().enumerate() {
        let at = format!("{path}[{i}]");
        let text = |field: &str| t[field].as_str().unwrap_or_default();
        let (key, operator, value, effect) =
            (text("key"), text("operator"), text("value"), text("effect"));
        if !key.is_empty() {
            errors.extend(validate_qualified_name(key, &format!("{at}.key")));
        }
        if key.is_empty() && operator != "Exists" {
            errors.push(FieldError::invalid(
                format!("{at}.operator"),
                operator,
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if !t["tolerationSeconds"].is_null() && effect != "NoExecute" {
            errors.push(FieldError::invalid(
                format!("{at}.effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        let operator_path = format!("{at}.operator");
        match operator {
            "Equal" | "" => {
                let problems: Vec<String> = validate_label_value(value, &operator_path)
                    .iter()
                    .map(|e| e.detail.clone())
                    .collect();
                if !problems.is_empty() {
                    errors.push(FieldError::invalid(
                        &operator_path,
                        value,
                        problems.join(";"),
                    ));
                }
            }
            "Exists" if !value.is_empty() => errors.push(FieldError::invalid(
                &operator_path,
                value,
                "value must be empty when `operator` is 'Exists'",
            )),
            "Exists" => {}
            other => errors.push(FieldError::not_supported(
                &operator_path,
                other,
                TOLERATION_OPERATORS,
            )),
        }
        if !effect.is_empty() && !TAINT_EFFECTS.contains(&effect) {
            errors.push(FieldError::not_supported(
                format!("{at}.effect"),
                effect,
                TAINT_EFFECTS,
            ));
        }
    }
}

fn node_affinity(affinity: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let required = &affinity["requiredDuringSchedulingIgnoredDuringExecution"];
    if required.is_object() {
        let terms_path =
            format!("{path}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms");
        let terms = required["nodeSelectorTerms"].as_array();
        if terms.is_none_or(|t| t.is_empty()) {
            errors.push(FieldError::required(
                &terms_path,
                "must have at least one node selector term",
            ));
        }
        for (i, term) in terms.into_iter().flatten().enumerate() {
            node_selector_term(term, &format!("{terms_path}[{i}]"), true, errors);
        }
    }
    preferred_terms(affinity, path, "preference", errors, |term, at, errors| {
        node_selector_term(term, at, false, errors)
    });
}

/// The weighted terms of an affinity at `path`: each weight 1–100, and the
/// term under `field` checked by `check`.
fn preferred_terms(
    affinity: &Value,
    path: &str,
    field: &str,
    errors: &mut Vec<FieldError>,
    check: impl Fn(&Value, &str, &mut Vec<FieldError>),
) {
    let preferred = format!("{path}.preferredDuringSchedulingIgnoredDuringExecution");
    for (i, term) in affinity["preferredDuringSchedulingIgnoredDuringExecution"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        weight(&term["weight"], &format!("{preferred}[{i}].weight"), errors);
        check(&term[field], &format!("{preferred}[{i}].{field}"), errors);
    }
}

/// One node selector term; label values are checked in required terms only,
/// as upstream's.
fn node_selector_term(term: &Value, path: &str, check_values: bool, errors: &mut Vec<FieldError>) {
    for (j, rq) in term["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("{path}.matchExpressions[{j}]");
        super::workloads::selector_requirement(rq, &at, true, check_values, errors);
    }
}

fn weight(weight: &Value, path: &str, errors: &mut Vec<FieldError>) {
    if let Some(w) = weight.as_i64().filter(|w| !(1..=100).contains(w)) {
        errors.push(FieldError::invalid(path, w, "must be in the range 1-100"));
    }
}

fn pod_affinity(affinity: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let required = format!("{path}.requiredDuringSchedulingIgnoredDuringExecution");
    for (i, term) in affinity["requiredDuringSchedulingIgnoredDuringExecution"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        pod_affinity_term(term, &format!("{required}[{i}]"), errors);
    }
    preferred_terms(affinity, path, "podAffinityTerm", errors, pod_affinity_term);
}

fn pod_affinity_term(term: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let key = term["topologyKey"].as_str().unwrap_or_default();
    let at = format!("{path}.topologyKey");
    if key.is_empty() {
        errors.push(FieldError::required(&at, "can not be empty"));
    }
    // Upstream checks the key as a label name even when it is empty.
    errors.extend(validate_qualified_name(key, &at));
}

fn spread_constraints(list: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let constraints = list.as_array().map_or(&[][..], Vec::as_slice);
    for (i, c) in constraints.iter().enumerate() {
        let at = format!("{path}[{i}]");
        if let Some(skew) = c["maxSkew"].as_i64().filter(|s| *s <= 0) {
            errors.push(FieldError::invalid(
                format!("{at}.maxSkew"),
                skew,
                "must be greater than zero",
            ));
        }
        let key = c["topologyKey"].as_str().unwrap_or_default();
        if key.is_empty() {
            errors.push(FieldError::required(
                format!("{at}.topologyKey"),
                "can not be empty",
            ));
        }
        let action = c["whenUnsatisfiable"].as_str().unwrap_or_default();
        if !SPREAD_ACTIONS.contains(&action) {
            errors.push(FieldError::not_supported(
                format!("{at}.whenUnsatisfiable"),
                action,
                SPREAD_ACTIONS,
            ));
        }
        if let Some(min) = c["minDomains"].as_i64() {
            if min <= 0 {
                errors.push(FieldError::invalid(
                    format!("{at}.minDomains"),
                    min,
                    "must be greater than zero",
                ));
            }
            if action != "DoNotSchedule" {
                errors.push(FieldError::invalid(
                    format!("{at}.minDomains"),
                    min,
                    format!(
                        "can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {action}"
                    ),
                ));
            }
        }
        for policy in ["nodeAffinityPolicy", "nodeTaintsPolicy"] {
            super::one_of(c, policy, SPREAD_POLICIES, &at, errors);
        }
        // A repeated pair is reported on the earlier constraint.
        let repeated = constraints[i + 1..].iter().any(|later| {
            later["topologyKey"].as_str().unwrap_or_default() == key
                && later["whenUnsatisfiable"].as_str().unwrap_or_default() == action
        });
        if repeated {
            errors.push(FieldError::duplicate(
                format!("{at}.{{topologyKey, whenUnsatisfiable}}"),
                format!("{{{key}, {action}}}"),
            ));
        }
    }
}

/// Whether a pod spec still waits on scheduling gates: only then may its
/// placement narrow on update (see [`gated_update`]).
pub(crate) fn is_gated(spec: &Value) -> bool {
    spec["schedulingGates"]
        .as_array()
        .is_some_and(|gates| !gates.is_empty())
}

/// An update of a pod that was gated (`old` had scheduling gates) may
/// narrow where it runs, as upstream lets queueing controllers do before
/// they lift a gate: `nodeSelector` may gain entries (never change or lose
/// one), and each required node affinity term may gain requirements after
/// the ones it had. Everything else of the placement is left to the
/// general pod update rule, which ignores these two fields for such pods.
pub(crate) fn gated_update(old: &Value, new: &Value, errors: &mut Vec<FieldError>) {
    let selector = &new["nodeSelector"];
    let kept = |(key, value): (&String, &Value)| selector.get(key) == Some(value);
    if !old["nodeSelector"]
        .as_object()
        .is_none_or(|old| old.iter().all(kept))
    {
        errors.push(
            FieldError::invalid(
                "spec.nodeSelector",
                selector.clone(),
                "only additions to spec.nodeSelector are allowed (no mutations or deletions)",
            )
            .shown_as(go_format::go_string_map(selector)),
        );
    }
    fn required(spec: &Value) -> &Value {
        &spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    }
    let Some(old_terms) = required(old)
        .as_object()
        .map(|r| r.get("nodeSelectorTerms").and_then(Value::as_array))
    else {
        // No required node affinity before: any may be set now.
        return;
    };
    let old_terms = old_terms.map(Vec::as_slice).unwrap_or_default();
    let new_terms_value = &required(new)["nodeSelectorTerms"];
    let new_terms = new_terms_value
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
    if !old_terms.is_empty() && old_terms.len() != new_terms.len() {
        errors.push(
            FieldError::invalid(
                path,
                new_terms_value.clone(),
                "no additions/deletions to non-empty NodeSelectorTerms list are allowed",
            )
            .shown_as(go_format::go_node_selector_terms(new_terms_value)),
        );
        return;
    }
    for (i, (was, now)) in old_terms.iter().zip(new_terms).enumerate() {
        if !term_only_extended(was, now) {
            errors.push(
                FieldError::invalid(
                    format!("{path}[{i}]"),
                    now.clone(),
                    "only additions are allowed (no mutations or deletions)",
                )
                .shown_as(go_format::go_node_selector_term(now)),
            );
        }
    }
}

/// Whether `now` is `was` with requirements appended: each list keeps the
/// old entries first and in order. A term that had none may not gain any,
/// since an empty term matches no node and requirements would widen it.
fn term_only_extended(was: &Value, now: &Value) -> bool {
    let list = |term: &Value, field: &str| -> Vec<Value> {
        term[field].as_array().cloned().unwrap_or_default()
    };
    let fields = ["matchExpressions", "matchFields"];
    let had_none = fields.iter().all(|f| list(was, f).is_empty());
    if had_none {
        return fields.iter().all(|f| list(now, f).is_empty());
    }
    fields.iter().all(|f| {
        let (before, after) = (list(was, f), list(now, f));
        after.len() >= before.len() && after[..before.len()] == before[..]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rendered(spec: Value) -> Vec<String> {
        crate::validation::rendered(pod_spec, spec)
    }

    #[test]
    fn tolerations_are_refused_as_upstream_words_them() {
        assert_eq!(
            rendered(json!({"tolerations": [
                {"key": "a", "operator": "Exists", "value": "b"},
                {"operator": "Equal", "value": "x"},
                {"key": "a", "operator": "Equal", "value": "x", "effect": "Sometimes"},
                {"key": "a", "operator": "In", "effect": "NoSchedule", "tolerationSeconds": 5},
                {"key": "a", "value": "has space"},
                {"operator": "Exists"},
            ]})),
            [
                "spec.tolerations[0].operator: Invalid value: \"b\": value must be empty when `operator` is 'Exists'",
                "spec.tolerations[1].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
                "spec.tolerations[2].effect: Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
                "spec.tolerations[3].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set",
                "spec.tolerations[3].operator: Unsupported value: \"In\": supported values: \"Equal\", \"Exists\"",
                "spec.tolerations[4].operator: Invalid value: \"has space\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            ]
        );
    }

    #[test]
    fn node_affinity_needs_terms_and_the_values_each_operator_takes() {
        let required = |terms: Value| {
            json!({"affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}})
        };
        let prefix = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
        assert_eq!(
            rendered(required(json!([]))),
            [format!(
                "{prefix}: Required value: must have at least one node selector term"
            )]
        );
        assert_eq!(
            rendered(required(json!([{"matchExpressions": [
                {"key": "a", "operator": "In"},
                {"key": "a", "operator": "Exists", "values": ["x"]},
                {"key": "a", "operator": "Gt", "values": ["1", "2"]},
                {"key": "a", "operator": "Near", "values": ["x"]},
            ]}]))),
            [
                format!(
                    "{prefix}[0].matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
                ),
                format!(
                    "{prefix}[0].matchExpressions[1].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                ),
                format!(
                    "{prefix}[0].matchExpressions[2].values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"
                ),
                format!(
                    "{prefix}[0].matchExpressions[3].operator: Invalid value: \"Near\": not a valid selector operator"
                ),
            ]
        );
        let preferred = json!({"affinity": {"nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 0, "preference": {"matchExpressions": [{"key": "a", "operator": "In", "values": ["not valid"]}]}}]}}});
        assert_eq!(
            rendered(preferred),
            [
                "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: must be in the range 1-100"
            ]
        );
    }

    #[test]
    fn pod_affinity_terms_name_a_topology_key() {
        let spec = json!({"affinity": {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {}}],
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 101, "podAffinityTerm": {"topologyKey": "zone"}}]}}});
        let errors = rendered(spec);
        let at = "spec.affinity.podAntiAffinity";
        assert_eq!(
            errors[0],
            format!(
                "{at}.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Required value: can not be empty"
            )
        );
        assert_eq!(
            errors.last().map(String::as_str),
            Some(format!("{at}.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 101: must be in the range 1-100").as_str())
        );
    }

    #[test]
    fn spread_constraints_are_refused_as_upstream_words_them() {
        let constraint = |skew: i64, key: &str, action: &str| json!({"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": action});
        let mut with_min = constraint(1, "host", "ScheduleAnyway");
        with_min["minDomains"] = json!(2);
        assert_eq!(
            rendered(json!({"topologySpreadConstraints": [
                constraint(0, "zone", "DoNotSchedule"),
                constraint(1, "zone", "DoNotSchedule"),
                constraint(1, "", "Sometimes"),
                with_min,
            ]})),
            [
                "spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero",
                "spec.topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}: Duplicate value: \"{zone, DoNotSchedule}\"",
                "spec.topologySpreadConstraints[2].topologyKey: Required value: can not be empty",
                "spec.topologySpreadConstraints[2].whenUnsatisfiable: Unsupported value: \"Sometimes\": supported values: \"DoNotSchedule\", \"ScheduleAnyway\"",
                "spec.topologySpreadConstraints[3].minDomains: Invalid value: 2: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway",
            ]
        );
    }

    #[test]
    fn a_well_placed_pod_passes() {
        assert!(rendered(json!({
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                "effect": "NoExecute", "tolerationSeconds": 300}, {"operator": "Exists"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
        }))
        .is_empty());
    }
}
