//! `scheduling.k8s.io/v1` PriorityClasses: a class that does not say
//! otherwise lets its pods preempt lower-priority ones; a class users
//! define stays at or below 1,000,000,000, above which only the `system-`
//! classes sit.

use serde_json::{Value, json};

use super::{KindStrategy, Written, set_default};
use crate::registry::ResourceInfo;
use crate::status::FieldError;

/// The highest priority a user-defined class may have (upstream's
/// HighestUserDefinablePriority).
const HIGHEST_USER_PRIORITY: i64 = 1_000_000_000;

/// The `priorityclasses` resource.
#[derive(Debug)]
pub(crate) struct PriorityClasses;

impl KindStrategy for PriorityClasses {
    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        set_default(object, "preemptionPolicy", json!("PreemptLowerPriority"));
    }

    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let object = written.object;
        let system = object["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("system-"));
        if !system
            && object["value"]
                .as_i64()
                .is_some_and(|v| v > HIGHEST_USER_PRIORITY)
        {
            errors.push(FieldError::forbidden(
                "value",
                format!(
                    "maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}"
                ),
            ));
        }
        crate::validation::one_of(
            object,
            "preemptionPolicy",
            &["PreemptLowerPriority", "Never"],
            "",
            errors,
        );
    }
}
