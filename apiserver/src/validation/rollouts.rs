//! How Deployments, DaemonSets and StatefulSets roll out, checked as
//! upstream's apps validation checks them: the strategy's type, the
//! surge and unavailability bounds (integers or percentages), and the
//! counters beside them (`minReadySeconds`, `revisionHistoryLimit` but for
//! StatefulSets, a StatefulSet's `ordinals.start`,
//! `progressDeadlineSeconds`, a StatefulSet's `partition`).

use serde_json::Value;

use super::int_or_percent::{at_most_all, int_or_percent, invalid, is_zero};
use super::non_negative;
use crate::status::FieldError;

/// A Deployment's `spec`: its strategy and counters.
pub(crate) fn deployment(spec: &Value, errors: &mut Vec<FieldError>) {
    for field in [
        "minReadySeconds",
        "revisionHistoryLimit",
        "progressDeadlineSeconds",
    ] {
        non_negative(spec, field, errors);
    }
    if let Some(deadline) = spec["progressDeadlineSeconds"].as_i64()
        && deadline <= spec["minReadySeconds"].as_i64().unwrap_or(0)
    {
        errors.push(FieldError::invalid(
            "spec.progressDeadlineSeconds",
            deadline,
            "must be greater than minReadySeconds",
        ));
    }
    let strategy = &spec["strategy"];
    let rolling = &strategy["rollingUpdate"];
    match strategy["type"].as_str() {
        Some("Recreate") if !rolling.is_null() => {
            errors.push(FieldError::forbidden(
                "spec.strategy.rollingUpdate",
                "may not be specified when strategy `type` is 'Recreate'",
            ));
        }
        Some("Recreate") => {}
        Some("RollingUpdate") => {
            let unavailable_at = "spec.strategy.rollingUpdate.maxUnavailable";
            let (unavailable, surge) = (&rolling["maxUnavailable"], &rolling["maxSurge"]);
            int_or_percent(unavailable, unavailable_at, errors);
            int_or_percent(surge, "spec.strategy.rollingUpdate.maxSurge", errors);
            if is_zero(unavailable) && is_zero(surge) {
                errors.push(invalid(
                    unavailable_at,
                    unavailable,
                    "may not be 0 when `maxSurge` is 0",
                ));
            }
            at_most_all(unavailable, unavailable_at, errors);
        }
        Some(other) => errors.push(FieldError::not_supported(
            "spec.strategy.type",
            other,
            &["Recreate", "RollingUpdate"],
        )),
        None => {}
    }
}

/// A DaemonSet's `spec`: its update strategy and counters.
pub(crate) fn daemon_set(spec: &Value, errors: &mut Vec<FieldError>) {
    for field in ["minReadySeconds", "revisionHistoryLimit"] {
        non_negative(spec, field, errors);
    }
    let strategy = &spec["updateStrategy"];
    match strategy["type"].as_str() {
        Some("OnDelete") | None => {}
        Some("RollingUpdate") => {
            let path = "spec.updateStrategy.rollingUpdate";
            let rolling = &strategy["rollingUpdate"];
            let (unavailable, surge) = (&rolling["maxUnavailable"], &rolling["maxSurge"]);
            let (unavailable_at, surge_at) =
                (format!("{path}.maxUnavailable"), format!("{path}.maxSurge"));
            int_or_percent(unavailable, &unavailable_at, errors);
            int_or_percent(surge, &surge_at, errors);
            at_most_all(unavailable, &unavailable_at, errors);
            at_most_all(surge, &surge_at, errors);
            match (
                is_zero(unavailable) || unavailable.is_null(),
                is_zero(surge) || surge.is_null(),
            ) {
                (false, false) => errors.push(invalid(
                    &surge_at,
                    surge,
                    "may not be set when maxUnavailable is non-zero",
                )),
                (true, true) => errors.push(FieldError::required(
                    unavailable_at,
                    "cannot be 0 when maxSurge is 0",
                )),
                _ => {}
            }
        }
        Some(other) => errors.push(FieldError::not_supported(
            "spec.updateStrategy.type",
            other,
            &["OnDelete", "RollingUpdate"],
        )),
    }
}

/// A StatefulSet's `spec`: its update strategy, pod management policy,
/// claim retention policy and counters. Unlike the other workloads', its
/// `revisionHistoryLimit` may be negative (keep every revision): upstream
/// stores it and warns (`kinds::workloads`).
pub(crate) fn stateful_set(spec: &Value, errors: &mut Vec<FieldError>) {
    non_negative(spec, "minReadySeconds", errors);
    // Upstream's path names the field as one segment.
    super::non_negative_at(&spec["ordinals"], "spec.ordinals", "start", errors);
    if let Some(policy) = spec["podManagementPolicy"].as_str()
        && !matches!(policy, "OrderedReady" | "Parallel")
    {
        errors.push(FieldError::not_supported(
            "spec.podManagementPolicy",
            policy,
            &["OrderedReady", "Parallel"],
        ));
    }
    for when in ["whenDeleted", "whenScaled"] {
        super::one_of(
            &spec["persistentVolumeClaimRetentionPolicy"],
            when,
            &["Delete", "Retain"],
            "spec.persistentVolumeClaimRetentionPolicy",
            errors,
        );
    }
    let strategy = &spec["updateStrategy"];
    let rolling = &strategy["rollingUpdate"];
    match strategy["type"].as_str() {
        Some("OnDelete") if !rolling.is_null() => {
            errors.push(FieldError::invalid(
                "spec.updateStrategy.rollingUpdate",
                rolling.clone(),
                "only allowed for updateStrategy 'RollingUpdate'",
            ));
        }
        Some("OnDelete") => {}
        Some("RollingUpdate") => {
            if let Some(partition) = rolling["partition"].as_i64().filter(|p| *p < 0) {
                errors.push(FieldError::invalid(
                    "spec.updateStrategy.rollingUpdate.partition",
                    partition,
                    "must be greater than or equal to 0",
                ));
            }
        }
        Some(other) => errors.push(FieldError::invalid(
            "spec.updateStrategy",
            other,
            "must be 'RollingUpdate' or 'OnDelete'",
        )),
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rendered(check: fn(&Value, &mut Vec<FieldError>), spec: Value) -> Vec<String> {
        let mut errors = Vec::new();
        check(&spec, &mut errors);
        errors.iter().map(FieldError::render).collect()
    }

    #[test]
    fn a_deployment_must_be_able_to_make_progress() {
        let both_zero = json!({"strategy": {"type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "0%"}}});
        assert_eq!(
            rendered(deployment, both_zero),
            [
                "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: may not be 0 when `maxSurge` is 0"
            ]
        );
        let bad = json!({"minReadySeconds": 10, "progressDeadlineSeconds": 10,
            "strategy": {"type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": "150%", "maxSurge": "25"}}});
        assert_eq!(
            rendered(deployment, bad),
            [
                "spec.progressDeadlineSeconds: Invalid value: 10: must be greater than minReadySeconds",
                format!("spec.strategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{{Type:1, IntVal:0, StrVal:\"25\"}}: {}", super::super::int_or_percent::PERCENT_MSG).as_str(),
                "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"150%\"}: must not be greater than 100%",
            ]
        );
        let recreate = json!({"strategy": {"type": "Recreate", "rollingUpdate": {}}});
        assert_eq!(
            rendered(deployment, recreate),
            [
                "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"
            ]
        );
        let fine = json!({"progressDeadlineSeconds": 600, "strategy": {"type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}}});
        assert!(rendered(deployment, fine).is_empty());
    }

    #[test]
    fn a_daemon_set_surges_or_drains_but_not_both() {
        let both = json!({"updateStrategy": {"type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}}});
        assert_eq!(
            rendered(daemon_set, both),
            [
                "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{Type:0, IntVal:1, StrVal:\"\"}: may not be set when maxUnavailable is non-zero"
            ]
        );
        let neither = json!({"updateStrategy": {"type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}}});
        assert_eq!(
            rendered(daemon_set, neither),
            [
                "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0"
            ]
        );
        let fine = json!({"updateStrategy": {"type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}});
        assert!(rendered(daemon_set, fine).is_empty());
    }

    #[test]
    fn a_stateful_set_partition_is_not_negative() {
        let spec = json!({"updateStrategy": {"type": "RollingUpdate",
            "rollingUpdate": {"partition": -1}}, "podManagementPolicy": "Eager"});
        assert_eq!(
            rendered(stateful_set, spec),
            [
                "spec.podManagementPolicy: Unsupported value: \"Eager\": supported values: \"OrderedReady\", \"Parallel\"",
                "spec.updateStrategy.rollingUpdate.partition: Invalid value: -1: must be greater than or equal to 0",
            ]
        );
    }
}
