//! Defaults and checks of `flowcontrol.apiserver.k8s.io/v1` FlowSchemas and
//! PriorityLevelConfigurations, as upstream's defaulting and validation
//! have them. Objects are JSON trees here (the registry's form); this
//! module only fills and checks them, it never reads server state.

use serde_json::{Value, json};

use crate::object::str_items;
use crate::status::FieldError;

/// The FlowSchema name upstream reserves for the exempt schema.
pub(crate) const EXEMPT: &str = "exempt";
/// The name of the mandatory catch-all schema and priority level.
pub(crate) const CATCH_ALL: &str = "catch-all";

/// Upstream's default `matchingPrecedence`.
const DEFAULT_PRECEDENCE: i64 = 1000;
/// Upstream's default nominal shares of a Limited level.
const DEFAULT_SHARES: i64 = 30;
/// Upstream's default queuing: queues, hand size, queue length limit.
const DEFAULT_QUEUES: i64 = 64;
const DEFAULT_HAND_SIZE: i64 = 8;
const DEFAULT_QUEUE_LENGTH: i64 = 50;
/// The largest precedence a schema may have.
const MAX_PRECEDENCE: i64 = 10_000;
/// Shuffle sharding's deal may not need more than this many bits of
/// entropy (upstream's bound on `queues` and `handSize` together).
const MAX_HASH_BITS: f64 = 60.0;

fn set_default(object: &mut Value, key: &str, value: Value) {
    if let Some(map) = object.as_object_mut()
        && map.get(key).is_none_or(Value::is_null)
    {
        map.insert(key.to_string(), value);
    }
}

/// Fills a FlowSchema's defaults (idempotent).
pub(crate) fn default_flow_schema(object: &mut Value) {
    if let Some(spec) = object.get_mut("spec").filter(|s| s.is_object()) {
        set_default(spec, "matchingPrecedence", json!(DEFAULT_PRECEDENCE));
    }
}

/// Fills a PriorityLevelConfiguration's defaults (idempotent).
pub(crate) fn default_priority_level(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    if let Some(limited) = spec.get_mut("limited").filter(|l| l.is_object()) {
        set_default(limited, "nominalConcurrencyShares", json!(DEFAULT_SHARES));
        set_default(limited, "lendablePercent", json!(0));
        if let Some(response) = limited.get_mut("limitResponse").filter(|r| r.is_object())
            && response["type"] == "Queue"
        {
            set_default(response, "queuing", json!({}));
            if let Some(queuing) = response.get_mut("queuing").filter(|q| q.is_object()) {
                set_default(queuing, "queues", json!(DEFAULT_QUEUES));
                set_default(queuing, "handSize", json!(DEFAULT_HAND_SIZE));
                set_default(queuing, "queueLengthLimit", json!(DEFAULT_QUEUE_LENGTH));
            }
        }
    }
    if let Some(exempt) = spec.get_mut("exempt").filter(|e| e.is_object()) {
        set_default(exempt, "nominalConcurrencyShares", json!(0));
        set_default(exempt, "lendablePercent", json!(0));
    }
}

/// `*` must stand alone in a list that holds it.
fn check_wildcard_alone(list: &[&str], field: &str, errors: &mut Vec<FieldError>) {
    if list.len() > 1 && list.contains(&"*") {
        errors.push(FieldError::invalid(
            field,
            json!(list),
            "if '*' is present, must not specify other entries",
        ));
    }
}

/// Checks a FlowSchema.
pub(crate) fn validate_flow_schema(object: &Value, errors: &mut Vec<FieldError>) {
    let spec = &object["spec"];
    let precedence = spec["matchingPrecedence"].as_i64().unwrap_or(0);
    if !(1..=MAX_PRECEDENCE).contains(&precedence) {
        errors.push(FieldError::invalid(
            "spec.matchingPrecedence",
            precedence,
            "must be between 1 and 10000, inclusive",
        ));
    }
    if let Some(method) = spec.get("distinguisherMethod").filter(|m| !m.is_null()) {
        let kind = method["type"].as_str().unwrap_or("");
        if kind.is_empty() {
            errors.push(FieldError::required("spec.distinguisherMethod.type", ""));
        } else if !matches!(kind, "ByUser" | "ByNamespace") {
            errors.push(FieldError::not_supported(
                "spec.distinguisherMethod.type",
                kind,
                &["ByNamespace", "ByUser"],
            ));
        }
    }
    if spec["priorityLevelConfiguration"]["name"]
        .as_str()
        .is_none_or(str::is_empty)
    {
        errors.push(FieldError::required(
            "spec.priorityLevelConfiguration.name",
            "must reference a priority level",
        ));
    }
    for (i, rule) in spec["rules"].as_array().into_iter().flatten().enumerate() {
        validate_rule(rule, &format!("spec.rules[{i}]"), errors);
    }
}

fn validate_rule(rule: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let subjects = rule["subjects"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if subjects.is_empty() {
        errors.push(FieldError::required(
            format!("{path}.subjects"),
            "subjects must contain at least one value",
        ));
    }
    for (i, subject) in subjects.iter().enumerate() {
        validate_subject(subject, &format!("{path}.subjects[{i}]"), errors);
    }
    let resource_rules = rule["resourceRules"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let non_resource_rules = rule["nonResourceRules"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if resource_rules.is_empty() && non_resource_rules.is_empty() {
        errors.push(FieldError::required(
            path,
            "at least one of resourceRules and nonResourceRules has to be non-empty",
        ));
    }
    for (i, r) in resource_rules.iter().enumerate() {
        let at = format!("{path}.resourceRules[{i}]");
        check_rule_lists(r, &at, &["verbs", "apiGroups", "resources"], errors);
        let namespaces: Vec<&str> = str_items(&r["namespaces"]).collect();
        if namespaces.is_empty() && r["clusterScope"] != true {
            errors.push(FieldError::required(
                format!("{at}.namespaces"),
                "resource rules that are not cluster scoped must supply at least one namespace",
            ));
        }
        check_wildcard_alone(&namespaces, &format!("{at}.namespaces"), errors);
    }
    for (i, r) in non_resource_rules.iter().enumerate() {
        let at = format!("{path}.nonResourceRules[{i}]");
        check_rule_lists(r, &at, &["verbs", "nonResourceURLs"], errors);
    }
}

/// A rule's lists `fields` (at `path`) must each hold a value, and a `*`
/// only alone.
fn check_rule_lists(rule: &Value, path: &str, fields: &[&str], errors: &mut Vec<FieldError>) {
    for field in fields {
        let list: Vec<&str> = str_items(&rule[field]).collect();
        if list.is_empty() {
            errors.push(FieldError::required(
                format!("{path}.{field}"),
                format!("{field} must contain at least one value"),
            ));
        }
        check_wildcard_alone(&list, &format!("{path}.{field}"), errors);
    }
}

fn validate_subject(subject: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let kind = subject["kind"].as_str().unwrap_or("");
    let (field, required): (&str, &[&str]) = match kind {
        "User" => ("user", &["name"]),
        "Group" => ("group", &["name"]),
        "ServiceAccount" => ("serviceAccount", &["name", "namespace"]),
        other => {
            errors.push(unknown_type(
                &format!("{path}.kind"),
                other,
                &["Group", "ServiceAccount", "User"],
            ));
            return;
        }
    };
    if !subject[field].is_object() {
        errors.push(FieldError::required(
            format!("{path}.{field}"),
            format!("{field} is required when subject kind is '{kind}'"),
        ));
        return;
    }
    for key in required {
        if subject[field][key].as_str().is_none_or(str::is_empty) {
            errors.push(FieldError::required(format!("{path}.{field}.{key}"), ""));
        }
    }
    for other in ["user", "group", "serviceAccount"] {
        if other != field && subject.get(other).is_some_and(|v| !v.is_null()) {
            errors.push(FieldError::forbidden(
                format!("{path}.{other}"),
                format!(
                    "{other} is forbidden when subject kind is not '{}'",
                    kind_of(other)
                ),
            ));
        }
    }
}

fn kind_of(field: &str) -> &'static str {
    match field {
        "user" => "User",
        "group" => "Group",
        _ => "ServiceAccount",
    }
}

/// Checks a PriorityLevelConfiguration.
pub(crate) fn validate_priority_level(object: &Value, errors: &mut Vec<FieldError>) {
    let spec = &object["spec"];
    let name = object["metadata"]["name"].as_str().unwrap_or("");
    let kind = spec["type"].as_str().unwrap_or("");
    match kind {
        "Exempt" => {
            if spec.get("limited").is_some_and(|l| !l.is_null()) {
                errors.push(FieldError::forbidden(
                    "spec.limited",
                    "must be nil if the type is not Limited",
                ));
            }
            if let Some(exempt) = spec.get("exempt").filter(|e| !e.is_null()) {
                check_shares_and_percent(exempt, "spec.exempt", errors);
            }
        }
        "Limited" => {
            if spec.get("exempt").is_some_and(|e| !e.is_null()) {
                errors.push(FieldError::forbidden(
                    "spec.exempt",
                    "must be nil if the type is Limited",
                ));
            }
            match spec.get("limited").filter(|l| l.is_object()) {
                Some(limited) => validate_limited(limited, errors),
                None => errors.push(FieldError::required(
                    "spec.limited",
                    "must not be empty when type is Limited",
                )),
            }
        }
        other => errors.push(unknown_type("spec.type", other, &["Exempt", "Limited"])),
    }
    if (name == EXEMPT) != (kind == "Exempt") {
        errors.push(FieldError::invalid(
            "spec.type",
            kind,
            "type must be 'Exempt' if and only if name is 'exempt'",
        ));
    }
}

/// The error for a union's `type` at `path` that is none of `supported`:
/// required when empty, not supported otherwise, as upstream's.
fn unknown_type(path: &str, kind: &str, supported: &[&str]) -> FieldError {
    if kind.is_empty() {
        FieldError::required(path, "")
    } else {
        FieldError::not_supported(path, kind, supported)
    }
}

fn check_shares_and_percent(level: &Value, path: &str, errors: &mut Vec<FieldError>) {
    if let Some(shares) = level["nominalConcurrencyShares"].as_i64()
        && shares < 0
    {
        errors.push(FieldError::invalid(
            format!("{path}.nominalConcurrencyShares"),
            shares,
            "must be a non-negative integer",
        ));
    }
    if let Some(percent) = level["lendablePercent"].as_i64()
        && !(0..=100).contains(&percent)
    {
        errors.push(FieldError::invalid(
            format!("{path}.lendablePercent"),
            percent,
            "must be between 0 and 100, inclusive",
        ));
    }
}

fn validate_limited(limited: &Value, errors: &mut Vec<FieldError>) {
    check_shares_and_percent(limited, "spec.limited", errors);
    if let Some(percent) = limited["borrowingLimitPercent"].as_i64()
        && percent < 0
    {
        errors.push(FieldError::invalid(
            "spec.limited.borrowingLimitPercent",
            percent,
            "if specified, must be a non-negative integer",
        ));
    }
    let response = &limited["limitResponse"];
    match response["type"].as_str().unwrap_or("") {
        "Queue" => match response.get("queuing").filter(|q| q.is_object()) {
            Some(queuing) => validate_queuing(queuing, errors),
            None => errors.push(FieldError::required(
                "spec.limited.limitResponse.queuing",
                "must not be empty if the type is Queue",
            )),
        },
        "Reject" => {
            if response.get("queuing").is_some_and(|q| !q.is_null()) {
                errors.push(FieldError::forbidden(
                    "spec.limited.limitResponse.queuing",
                    "must be nil if limited.limitResponse.type is not Limited",
                ));
            }
        }
        other => errors.push(unknown_type(
            "spec.limited.limitResponse.type",
            other,
            &["Queue", "Reject"],
        )),
    }
}

fn validate_queuing(queuing: &Value, errors: &mut Vec<FieldError>) {
    let path = "spec.limited.limitResponse.queuing";
    let queues = queuing["queues"].as_i64().unwrap_or(0);
    let hand_size = queuing["handSize"].as_i64().unwrap_or(0);
    let length = queuing["queueLengthLimit"].as_i64().unwrap_or(0);
    if length <= 0 {
        errors.push(FieldError::invalid(
            format!("{path}.queueLengthLimit"),
            length,
            "must be positive",
        ));
    }
    if queues <= 0 {
        errors.push(FieldError::invalid(
            format!("{path}.queues"),
            queues,
            "must be positive",
        ));
    }
    if hand_size <= 0 {
        errors.push(FieldError::invalid(
            format!("{path}.handSize"),
            hand_size,
            "should be positive",
        ));
    } else if hand_size > queues && queues > 0 {
        errors.push(FieldError::invalid(
            format!("{path}.handSize"),
            hand_size,
            format!("should not be greater than queues ({queues})"),
        ));
    } else if queues > 0 && deal_bits(queues, hand_size) > MAX_HASH_BITS {
        errors.push(FieldError::invalid(
            format!("{path}.handSize"),
            hand_size,
            format!(
                "required entropy bits of deckSize {queues} and handSize {hand_size} should not be greater than {MAX_HASH_BITS}"
            ),
        ));
    }
}

/// Bits of hash a hand of `hand_size` out of `queues` consumes.
fn deal_bits(queues: i64, hand_size: i64) -> f64 {
    (hand_size as f64) * (queues as f64).log2()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn causes(errors: &[FieldError]) -> Vec<&str> {
        errors.iter().map(|e| e.field.as_str()).collect()
    }

    #[test]
    fn defaults_fill_precedence_shares_and_queuing() {
        let mut fs = json!({"metadata": {"name": "a"}, "spec": {"priorityLevelConfiguration": {"name": "x"}}});
        default_flow_schema(&mut fs);
        assert_eq!(fs["spec"]["matchingPrecedence"], 1000);
        let mut pl = json!({"metadata": {"name": "a"}, "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue"}}}});
        default_priority_level(&mut pl);
        assert_eq!(pl["spec"]["limited"]["nominalConcurrencyShares"], 30);
        assert_eq!(pl["spec"]["limited"]["lendablePercent"], 0);
        assert_eq!(
            pl["spec"]["limited"]["limitResponse"]["queuing"],
            json!({"queues": 64, "handSize": 8, "queueLengthLimit": 50})
        );
        let again = pl.clone();
        default_priority_level(&mut pl);
        assert_eq!(pl, again);
    }

    #[test]
    fn bad_flow_schemas_are_refused_at_their_fields() {
        let fs = json!({"metadata": {"name": "a"}, "spec": {
            "matchingPrecedence": 20000,
            "priorityLevelConfiguration": {"name": ""},
            "distinguisherMethod": {"type": "ByPod"},
            "rules": [{"subjects": [{"kind": "ServiceAccount", "serviceAccount": {"name": "x"}}],
                       "resourceRules": [{"verbs": ["get", "*"], "apiGroups": [""], "resources": ["pods"]}]}]
        }});
        let mut errors = Vec::new();
        validate_flow_schema(&fs, &mut errors);
        assert_eq!(
            causes(&errors),
            [
                "spec.matchingPrecedence",
                "spec.distinguisherMethod.type",
                "spec.priorityLevelConfiguration.name",
                "spec.rules[0].subjects[0].serviceAccount.namespace",
                "spec.rules[0].resourceRules[0].verbs",
                "spec.rules[0].resourceRules[0].namespaces",
            ]
        );
    }

    #[test]
    fn bad_priority_levels_are_refused_at_their_fields() {
        let mut errors = Vec::new();
        validate_priority_level(
            &json!({"metadata": {"name": "p"}, "spec": {"type": "Limited", "limited": {
                "nominalConcurrencyShares": 5, "lendablePercent": 101,
                "limitResponse": {"type": "Queue", "queuing": {"queues": 4, "handSize": 5, "queueLengthLimit": 0}}}}}),
            &mut errors,
        );
        assert_eq!(
            causes(&errors),
            [
                "spec.limited.lendablePercent",
                "spec.limited.limitResponse.queuing.queueLengthLimit",
                "spec.limited.limitResponse.queuing.handSize",
            ]
        );
        errors.clear();
        validate_priority_level(
            &json!({"metadata": {"name": "p"}, "spec": {"type": "Exempt", "exempt": {}}}),
            &mut errors,
        );
        assert_eq!(causes(&errors), ["spec.type"]);
        errors.clear();
        validate_priority_level(
            &json!({"metadata": {"name": "p"}, "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Reject"}}}}),
            &mut errors,
        );
        assert!(errors.is_empty(), "{errors:?}");
    }
}
