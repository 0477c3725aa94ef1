//! What a pod's RuntimeClass adds to it at create, as upstream's
//! RuntimeClass admission plugin: the class's overhead, node selector and
//! tolerations, or a refusal when the pod does not fit the class. Reads the
//! class, writes nothing.

use serde_json::Value;

use crate::handlers::storage;
use crate::object::{path_mut, set_field};
use crate::registry::ResourceInfo;
use crate::server::Inner;
use crate::status::ApiError;

/// Upstream's RuntimeClass admission: a pod naming a class that does not
/// exist is refused; the class's `overhead.podFixed` becomes the pod's
/// overhead (a pod that sets an overhead of its own must match it, and may
/// not set one without a class that defines it); the class's node selector
/// joins the pod's (a key both set differently is refused) and its
/// tolerations are added to the pod's.
pub(super) async fn admit(
    inner: &Inner,
    pods: &ResourceInfo,
    name: &str,
    pod: &mut Value,
) -> Result<(), ApiError> {
    let refuse = |detail: String| storage::forbidden(pods, name, detail);
    let Some(spec) = path_mut(pod, &["spec"]).filter(|s| s.is_object()) else {
        return Ok(());
    };
    let pod_overhead = spec
        .get("overhead")
        .filter(|o| o.as_object().is_some_and(|m| !m.is_empty()))
        .cloned();
    let Some(class_name) = spec["runtimeClassName"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
    else {
        if pod_overhead.is_some() {
            return Err(refuse(
                "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"
                    .into(),
            ));
        }
        return Ok(());
    };
    let Some(classes) = inner.registry.get("node.k8s.io", "v1", "runtimeclasses") else {
        return Ok(());
    };
    let key = classes.key(None, &class_name);
    let Some(class) = storage::lookup(inner, &classes, &key).await? else {
        return Err(refuse(format!(
            "pod rejected: RuntimeClass \"{class_name}\" not found"
        )));
    };
    let class_overhead = class["overhead"]["podFixed"]
        .as_object()
        .filter(|m| !m.is_empty())
        .map(|m| Value::Object(m.clone()));
    match (&class_overhead, &pod_overhead) {
        (Some(wanted), Some(given)) if !same_quantities(wanted, given) => {
            return Err(refuse(
                "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead".into(),
            ));
        }
        (None, Some(_)) => {
            return Err(refuse(
                "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"
                    .into(),
            ));
        }
        (Some(wanted), _) => set_field(spec, "overhead", wanted.clone()),
        (None, None) => {}
    }
    let scheduling = &class["scheduling"];
    if let Some(selector) = scheduling["nodeSelector"].as_object() {
        let mut merged = spec["nodeSelector"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for (key, value) in selector {
            match merged.get(key) {
                Some(own) if own != value => {
                    return Err(refuse(format!(
                        "conflict: runtimeClass.scheduling.nodeSelector[{key}] = {}; pod.spec.nodeSelector[{key}] = {}",
                        value.as_str().unwrap_or(""),
                        own.as_str().unwrap_or("")
                    )));
                }
                _ => {
                    merged.insert(key.clone(), value.clone());
                }
            }
        }
        set_field(spec, "nodeSelector", Value::Object(merged));
    }
    if let Some(extra) = scheduling["tolerations"].as_array() {
        let own = spec["tolerations"].as_array().cloned().unwrap_or_default();
        set_field(
            spec,
            "tolerations",
            Value::Array(merge_tolerations(own, extra)),
        );
    }
    Ok(())
}

/// Both lists in one, as upstream merges them: a toleration another one
/// covers is left out (of two equal ones, the first stays).
fn merge_tolerations(first: Vec<Value>, second: &[Value]) -> Vec<Value> {
    let all: Vec<Value> = first.into_iter().chain(second.iter().cloned()).collect();
    let mut merged: Vec<Value> = Vec::new();
    for (i, t) in all.iter().enumerate() {
        let covered_by_kept = merged.iter().any(|kept| covers(kept, t));
        let covered_later = all[i + 1..]
            .iter()
            .any(|later| later != t && covers(later, t));
        if !covered_by_kept && !covered_later {
            merged.push(t.clone());
        }
    }
    merged
}

/// Whether toleration `wide` tolerates every taint `narrow` does.
fn covers(wide: &Value, narrow: &Value) -> bool {
    if wide == narrow {
        return true;
    }
    let text = |t: &Value, field: &str| t[field].as_str().unwrap_or("").to_string();
    // An empty operator is Equal.
    let operator = |t: &Value| match text(t, "operator").as_str() {
        "" => "Equal".to_string(),
        other => other.to_string(),
    };
    let any_key = text(wide, "key").is_empty() && operator(wide) == "Exists";
    if text(wide, "key") != text(narrow, "key") && !any_key {
        return false;
    }
    let effect = text(wide, "effect");
    if effect != text(narrow, "effect") && !effect.is_empty() {
        return false;
    }
    if effect == "NoExecute"
        && let Some(limit) = wide["tolerationSeconds"].as_i64()
        && narrow["tolerationSeconds"]
            .as_i64()
            .is_none_or(|s| s > limit)
    {
        return false;
    }
    match operator(wide).as_str() {
        "Equal" => operator(narrow) == "Equal" && text(wide, "value") == text(narrow, "value"),
        "Exists" => true,
        _ => false,
    }
}

/// Whether two resource maps name the same quantities (`1000m` is `1`).
fn same_quantities(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return false;
    };
    let amount = |v: &Value| v.as_str().and_then(skiff_common::amount::Amount::parse);
    a.len() == b.len()
        && a.iter().all(|(name, value)| {
            b.get(name)
                .is_some_and(|other| match (amount(value), amount(other)) {
                    (Some(x), Some(y)) => x.milli() == y.milli(),
                    _ => value == other,
                })
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Upstream's MergeTolerations cases: a covered toleration goes, equal
    /// ones stay once, unrelated ones all stay.
    #[test]
    fn tolerations_merge_without_the_covered_ones() {
        let exists_key = json!({"key": "gpu", "operator": "Exists"});
        let equal_value =
            json!({"key": "gpu", "operator": "Equal", "value": "a", "effect": "NoSchedule"});
        let other = json!({"key": "zone", "value": "x"});
        let everything = json!({"operator": "Exists"});
        assert_eq!(
            merge_tolerations(vec![equal_value.clone()], std::slice::from_ref(&exists_key)),
            vec![exists_key.clone()]
        );
        assert_eq!(
            merge_tolerations(
                vec![exists_key.clone(), other.clone()],
                std::slice::from_ref(&exists_key)
            ),
            vec![exists_key.clone(), other.clone()]
        );
        assert_eq!(
            merge_tolerations(
                vec![other.clone(), equal_value.clone()],
                std::slice::from_ref(&everything)
            ),
            vec![everything.clone()]
        );
        let short = json!({"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10});
        let long = json!({"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60});
        // A shorter stay does not cover a longer one, but the other way round.
        assert_eq!(
            merge_tolerations(vec![long.clone()], std::slice::from_ref(&short)),
            vec![long.clone()]
        );
        assert_eq!(
            merge_tolerations(vec![short.clone()], std::slice::from_ref(&long)),
            vec![long]
        );
    }
}
