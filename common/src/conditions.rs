//! Comparing an object's status across writes. A status is rewritten only
//! when something in it changed; the `lastTransitionTime` of its conditions
//! is set anew each time one is built, so it must not count as a change.
//! The node agent (a pod's status) and the API server's CRD controller (a
//! definition's status) compare through here.

use serde_json::Value;

/// `status` without its conditions' `lastTransitionTime`s.
pub fn without_transition_times(status: &Value) -> Value {
    let mut copy = status.clone();
    if let Some(conditions) = copy.get_mut("conditions").and_then(Value::as_array_mut) {
        for condition in conditions.iter_mut().filter_map(Value::as_object_mut) {
            condition.remove("lastTransitionTime");
        }
    }
    copy
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_transition_times_are_dropped() {
        let status = serde_json::json!({"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"},
            {"type": "Initialized", "status": "True"}]});
        assert_eq!(
            without_transition_times(&status),
            serde_json::json!({"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "Initialized", "status": "True"}]})
        );
        assert_eq!(without_transition_times(&Value::Null), Value::Null);
    }
}
