//! The rules a Job runs by, checked as upstream checks them: a known
//! completion mode (Indexed with a count of completions), its
//! `podFailurePolicy` (actions, exit-code operators and values, only with
//! pods that are never restarted in place), the per-index backoff
//! (`backoffLimitPerIndex`, `maxFailedIndexes`) and `successPolicy`, which
//! both need an Indexed Job.

use serde_json::Value;

use crate::status::FieldError;

const ACTIONS: &[&str] = &["Count", "FailIndex", "FailJob", "Ignore"];
const OPERATORS: &[&str] = &["In", "NotIn"];

/// Checks the Job spec `spec`, found at `path` (`spec` in a Job,
/// `spec.jobTemplate.spec` in a CronJob).
pub(crate) fn validate(spec: &Value, path: &str, errors: &mut Vec<FieldError>) {
    super::one_of(
        spec,
        "completionMode",
        &["NonIndexed", "Indexed"],
        path,
        errors,
    );
    let indexed = spec["completionMode"] == "Indexed";
    if indexed && spec["completions"].is_null() {
        errors.push(FieldError::required(
            format!("{path}.completions"),
            "when completion mode is Indexed",
        ));
    }
    let needs_index = |field: &str, errors: &mut Vec<FieldError>| {
        let value = &spec[field];
        if !value.is_null() && !indexed {
            errors.push(FieldError::invalid(
                format!("{path}.{field}"),
                value.clone(),
                "requires indexed completion mode",
            ));
        }
    };
    needs_index("backoffLimitPerIndex", errors);
    needs_index("maxFailedIndexes", errors);
    needs_index("successPolicy", errors);
    if let Some(max) = spec["maxFailedIndexes"].as_i64() {
        if spec["backoffLimitPerIndex"].is_null() {
            errors.push(FieldError::required(
                format!("{path}.backoffLimitPerIndex"),
                "when maxFailedIndexes is specified",
            ));
        }
        if let Some(completions) = spec["completions"].as_i64()
            && max > completions
        {
            errors.push(FieldError::invalid(
                format!("{path}.maxFailedIndexes"),
                max,
                "must be less than or equal to completions",
            ));
        }
    }
    pod_failure_policy(spec, path, errors);
}

fn pod_failure_policy(spec: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let Some(rules) = spec["podFailurePolicy"]["rules"].as_array() else {
        return;
    };
    let restart = spec["template"]["spec"]["restartPolicy"]
        .as_str()
        .unwrap_or_default();
    if restart != "Never" {
        errors.push(FieldError::invalid(
            format!("{path}.template.spec.restartPolicy"),
            restart,
            "only \"Never\" is supported when podFailurePolicy is specified",
        ));
    }
    for (i, rule) in rules.iter().enumerate() {
        let at = format!("{path}.podFailurePolicy.rules[{i}]");
        let action = rule["action"].as_str().unwrap_or_default();
        if !ACTIONS.contains(&action) {
            errors.push(FieldError::not_supported(
                format!("{at}.action"),
                action,
                ACTIONS,
            ));
        } else if action == "FailIndex" && spec["backoffLimitPerIndex"].is_null() {
            errors.push(FieldError::invalid(
                format!("{at}.action"),
                action,
                "requires the backoffLimitPerIndex to be set",
            ));
        }
        let codes = &rule["onExitCodes"];
        let conditions = &rule["onPodConditions"];
        let has_conditions = conditions.as_array().is_some_and(|c| !c.is_empty());
        match (codes.is_null(), has_conditions) {
            (false, true) => errors.push(FieldError::invalid(
                &at,
                Value::String(String::new()),
                "specifying both OnExitCodes and OnPodConditions is not supported",
            )),
            (true, false) => errors.push(FieldError::invalid(
                &at,
                Value::String(String::new()),
                "specifying one of OnExitCodes and OnPodConditions is required",
            )),
            _ => {}
        }
        if !codes.is_null() {
            exit_codes(codes, &format!("{at}.onExitCodes"), errors);
        }
    }
}

fn exit_codes(codes: &Value, at: &str, errors: &mut Vec<FieldError>) {
    let operator = codes["operator"].as_str().unwrap_or_default();
    if !OPERATORS.contains(&operator) {
        errors.push(FieldError::not_supported(
            format!("{at}.operator"),
            operator,
            OPERATORS,
        ));
    }
    let values: Vec<i64> = (codes["values"].as_array().into_iter().flatten())
        .filter_map(Value::as_i64)
        .collect();
    if values.is_empty() {
        errors.push(FieldError::required(
            format!("{at}.values"),
            "at least one value is required",
        ));
    }
    for (j, value) in values.iter().enumerate() {
        if operator == "In" && *value == 0 {
            errors.push(FieldError::invalid(
                format!("{at}.values[{j}]"),
                *value,
                "must not be 0 for the In operator",
            ));
        }
        if j > 0 && values[j - 1] >= *value {
            let why = if values[j - 1] == *value {
                FieldError::duplicate(format!("{at}.values[{j}]"), *value)
            } else {
                FieldError::invalid(format!("{at}.values[{j}]"), *value, "must be ordered")
            };
            errors.push(why);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rendered(spec: Value) -> Vec<String> {
        let mut errors = Vec::new();
        validate(&spec, "spec", &mut errors);
        errors.iter().map(FieldError::render).collect()
    }

    #[test]
    fn policies_are_checked_in_upstreams_words() {
        let bad = json!({
            "completionMode": "NonIndexed",
            "backoffLimitPerIndex": 1,
            "successPolicy": {"rules": [{"succeededCount": 1}]},
            "podFailurePolicy": {"rules": [
                {"action": "Explode", "onExitCodes": {"operator": "Maybe", "values": [0, 2, 1]}},
                {"action": "Ignore"}]},
            "template": {"spec": {"restartPolicy": "OnFailure"}}
        });
        assert_eq!(
            rendered(bad),
            [
                "spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode",
                "spec.successPolicy: Invalid value: {\"rules\":[{\"succeededCount\":1}]}: requires indexed completion mode",
                "spec.template.spec.restartPolicy: Invalid value: \"OnFailure\": only \"Never\" is supported when podFailurePolicy is specified",
                "spec.podFailurePolicy.rules[0].action: Unsupported value: \"Explode\": supported values: \"Count\", \"FailIndex\", \"FailJob\", \"Ignore\"",
                "spec.podFailurePolicy.rules[0].onExitCodes.operator: Unsupported value: \"Maybe\": supported values: \"In\", \"NotIn\"",
                "spec.podFailurePolicy.rules[0].onExitCodes.values[2]: Invalid value: 1: must be ordered",
                "spec.podFailurePolicy.rules[1]: Invalid value: \"\": specifying one of OnExitCodes and OnPodConditions is required",
            ]
        );
        let good = json!({
            "completionMode": "Indexed", "completions": 3,
            "backoffLimitPerIndex": 1, "maxFailedIndexes": 1,
            "successPolicy": {"rules": [{"succeededIndexes": "0-1"}]},
            "podFailurePolicy": {"rules": [
                {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [1, 42]}},
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
            "template": {"spec": {"restartPolicy": "Never"}}
        });
        assert_eq!(rendered(good), Vec::<String>::new());
    }
}
