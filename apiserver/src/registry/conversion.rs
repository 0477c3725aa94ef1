//! Conversions for resources served in a version other than the stored one:
//! events.k8s.io/v1 events are stored as core/v1 events, autoscaling/v1
//! HorizontalPodAutoscalers as autoscaling/v2. Field renames follow upstream's
//! conversion functions; v2-only HPA fields do not survive a v1 write.

use serde_json::{Map, Value, json};

/// A pair of conversion functions between a served and the stored version.
#[derive(Debug, Clone, Copy)]
pub struct Conversion {
    /// From the served version to the stored one.
    pub to_storage: fn(Value) -> Value,
    /// From the stored version to the served one.
    pub from_storage: fn(Value) -> Value,
}

/// Marks custom resources: their per-version work (apiVersion, schema
/// defaults) is done by `ResourceInfo::from_storage`/`to_storage` from the
/// CRD version they serve; the marker only tells readers that stored
/// objects are not served as they are.
impl Conversion {
    /// The marker of custom resources (both directions identity).
    pub const CUSTOM: Conversion = Conversion {
        to_storage: identity,
        from_storage: identity,
    };
}

fn identity(object: Value) -> Value {
    object
}

/// events.k8s.io/v1 Event <-> core/v1 Event.
pub(super) const EVENTS_V1: Conversion = Conversion {
    to_storage: event_v1_to_core,
    from_storage: core_event_to_v1,
};

/// autoscaling/v1 HorizontalPodAutoscaler <-> autoscaling/v2.
pub(super) const HPA_V1: Conversion = Conversion {
    to_storage: hpa_v1_to_v2,
    from_storage: hpa_v2_to_v1,
};

/// Field pairs (core/v1 name, events.k8s.io/v1 name).
const EVENT_RENAMES: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

fn rename(
    object: Value,
    api_version: &str,
    pairs: impl Iterator<Item = (&'static str, &'static str)>,
) -> Value {
    let Value::Object(mut map) = object else {
        return object;
    };
    for (from, to) in pairs {
        if let Some(v) = map.remove(from) {
            map.insert(to.to_string(), v);
        }
    }
    map.insert("apiVersion".into(), json!(api_version));
    Value::Object(map)
}

fn core_event_to_v1(object: Value) -> Value {
    rename(object, "events.k8s.io/v1", EVENT_RENAMES.iter().copied())
}

/// An events.k8s.io/v1 Event as the core/v1 Event it is stored as.
pub(crate) fn event_v1_to_core(object: Value) -> Value {
    rename(object, "v1", EVENT_RENAMES.iter().map(|(a, b)| (*b, *a)))
}

fn is_cpu_utilization(metric: &Value) -> bool {
    metric["type"] == "Resource" && metric["resource"]["name"] == "cpu"
}

/// The CPU utilization percentage (`resource.<field>.averageUtilization`)
/// among v2 `metrics`, the one metric autoscaling/v1 has.
fn cpu_utilization(metrics: Option<&Value>, field: &str) -> Option<i64> {
    metrics
        .and_then(Value::as_array)
        .and_then(|m| m.iter().find(|m| is_cpu_utilization(m)))
        .and_then(|m| m["resource"][field]["averageUtilization"].as_i64())
}

fn hpa_v2_to_v1(object: Value) -> Value {
    let Value::Object(mut map) = object else {
        return object;
    };
    map.insert("apiVersion".into(), json!("autoscaling/v1"));
    cpu_percentage_for_v1(
        map.get_mut("spec"),
        ["metrics", "behavior"],
        "target",
        "targetCPUUtilizationPercentage",
    );
    cpu_percentage_for_v1(
        map.get_mut("status"),
        ["currentMetrics", "conditions"],
        "current",
        "currentCPUUtilizationPercentage",
    );
    Value::Object(map)
}

/// In a v2 `spec` or `status`: drops the `metrics` list and the field v1
/// has no room for (`dropped`), keeping of them only the CPU utilization
/// (`resource.<field>`) as v1's `percentage` field.
fn cpu_percentage_for_v1(
    section: Option<&mut Value>,
    [metrics, dropped]: [&str; 2],
    field: &str,
    percentage: &str,
) {
    let Some(Value::Object(section)) = section else {
        return;
    };
    let metrics = section.remove(metrics);
    section.remove(dropped);
    if let Some(cpu) = cpu_utilization(metrics.as_ref(), field) {
        section.insert(percentage.into(), json!(cpu));
    }
}

fn hpa_v1_to_v2(object: Value) -> Value {
    let Value::Object(mut map) = object else {
        return object;
    };
    map.insert("apiVersion".into(), json!("autoscaling/v2"));
    let cpu_metric = |field: &str, value: Value| {
        let mut inner = Map::new();
        inner.insert("name".into(), json!("cpu"));
        if field == "target" {
            inner.insert(
                "target".into(),
                json!({ "type": "Utilization", "averageUtilization": value }),
            );
        } else {
            inner.insert("current".into(), json!({ "averageUtilization": value }));
        }
        json!([{ "type": "Resource", "resource": inner }])
    };
    if let Some(Value::Object(spec)) = map.get_mut("spec")
        && let Some(t) = spec.remove("targetCPUUtilizationPercentage")
    {
        spec.insert("metrics".into(), cpu_metric("target", t));
    }
    if let Some(Value::Object(status)) = map.get_mut("status")
        && let Some(c) = status.remove("currentCPUUtilizationPercentage")
    {
        status.insert("currentMetrics".into(), cpu_metric("current", c));
    }
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_through_core() {
        let v1 = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "note": "hi", "regarding": {"name": "p"}});
        let core = event_v1_to_core(v1.clone());
        assert_eq!(core["message"], "hi");
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core_event_to_v1(core), v1);
    }

    #[test]
    fn hpa_cpu_target_survives_v1_round_trip() {
        let v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "spec": {"maxReplicas": 3, "targetCPUUtilizationPercentage": 50}});
        let v2 = hpa_v1_to_v2(v1.clone());
        assert_eq!(
            v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            50
        );
        assert_eq!(hpa_v2_to_v1(v2), v1);
    }

    #[test]
    fn hpa_v2_status_keeps_only_the_cpu_utilization_in_v1() {
        let v2 = json!({"apiVersion": "autoscaling/v2", "status": {"currentReplicas": 2,
            "conditions": [{"type": "AbleToScale", "status": "True"}],
            "currentMetrics": [{"type": "Resource",
                "resource": {"name": "cpu", "current": {"averageUtilization": 40}}}]}});
        assert_eq!(
            hpa_v2_to_v1(v2),
            json!({"apiVersion": "autoscaling/v1",
                "status": {"currentReplicas": 2, "currentCPUUtilizationPercentage": 40}})
        );
    }
}
