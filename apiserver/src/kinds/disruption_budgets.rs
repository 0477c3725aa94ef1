//! `policy/v1` PodDisruptionBudgets: how many pods a budget keeps or may
//! lose (a count or a percentage, not both), its selector and its
//! unhealthy-pod eviction policy, checked as upstream validates them.

use super::{KindStrategy, Written};
use crate::status::FieldError;
use crate::validation::int_or_percent::{at_most_all, int_or_percent};
use crate::validation::workloads::label_selector;

/// `policy` poddisruptionbudgets.
#[derive(Debug)]
pub(crate) struct PodDisruptionBudgets;

impl KindStrategy for PodDisruptionBudgets {
    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let spec = &written.object["spec"];
        let (min, max) = (&spec["minAvailable"], &spec["maxUnavailable"]);
        if !min.is_null() && !max.is_null() {
            // Upstream shows the spec as Go prints it, pointers and all;
            // the spec as sent says the same.
            errors.push(FieldError::invalid(
                "spec",
                spec.clone(),
                "minAvailable and maxUnavailable cannot be both set",
            ));
        }
        for (field, value) in [("minAvailable", min), ("maxUnavailable", max)] {
            let path = format!("spec.{field}");
            int_or_percent(value, &path, errors);
            at_most_all(value, &path, errors);
        }
        if spec["selector"].is_object() {
            label_selector(&spec["selector"], "spec.selector", errors);
        }
        crate::validation::one_of(
            spec,
            "unhealthyPodEvictionPolicy",
            &["AlwaysAllow", "IfHealthyBudget"],
            "spec",
            errors,
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rendered(spec: serde_json::Value) -> Vec<String> {
        let info = crate::registry::Registry::builtin()
            .get("policy", "v1", "poddisruptionbudgets")
            .expect("registered");
        let object = json!({"spec": spec});
        let written = Written {
            info: &info,
            object: &object,
            old: None,
            subresource: None,
        };
        let mut errors = Vec::new();
        PodDisruptionBudgets.validate(&written, &mut errors);
        errors.iter().map(FieldError::render).collect()
    }

    #[test]
    fn a_budget_is_a_count_or_a_percentage_of_one_kind() {
        assert!(rendered(json!({"minAvailable": "50%"})).is_empty());
        assert!(rendered(json!({"maxUnavailable": 1})).is_empty());
        let both = rendered(json!({"minAvailable": 1, "maxUnavailable": 1}));
        assert_eq!(both.len(), 1, "{both:?}");
        assert!(both[0].contains("minAvailable and maxUnavailable cannot be both set"));
        assert_eq!(
            rendered(json!({"minAvailable": "150%", "unhealthyPodEvictionPolicy": "Never"})),
            [
                "spec.minAvailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"150%\"}: must not be greater than 100%",
                "spec.unhealthyPodEvictionPolicy: Unsupported value: \"Never\": supported values: \"AlwaysAllow\", \"IfHealthyBudget\"",
            ]
        );
        assert_eq!(
            rendered(json!({"maxUnavailable": -1})),
            ["spec.maxUnavailable: Invalid value: -1: must be greater than or equal to 0"]
        );
    }
}
