//! HorizontalPodAutoscalers: `NAME REFERENCE TARGETS MINPODS MAXPODS
//! REPLICAS AGE`, the targets as current/target per metric (`cpu: 80%/50%`,
//! `memory: 10Mi/20Mi`), at most two and then `+ N more...`.

use serde_json::Value;

use super::columns::{Column, Printer, at, canonical, int, list, name_age_printer, text};

/// How many metrics the TARGETS cell shows before summarising.
const SHOWN_METRICS: usize = 2;

pub(crate) static HORIZONTALPODAUTOSCALERS: Printer = name_age_printer!(
    [
        Column::string("Reference", "The workload scaled: its kind and name.",),
        Column::string("Targets", "Each metric's current value and its target.",),
        Column::string(
            "MinPods",
            "The lowest replica count the autoscaler may set.",
        ),
        Column::integer(
            "MaxPods",
            "The highest replica count the autoscaler may set.",
        ),
        Column::integer("Replicas", "The replica count the autoscaler last saw.",),
    ],
    |hpa, _| {
        let reference = format!(
            "{}/{}",
            text(hpa, "spec/scaleTargetRef/kind").unwrap_or(""),
            text(hpa, "spec/scaleTargetRef/name").unwrap_or("")
        );
        let min_pods = at(hpa, "spec/minReplicas")
            .and_then(Value::as_i64)
            .map_or_else(|| "<unset>".to_string(), |n| n.to_string());
        vec![
            Value::from(reference),
            Value::from(targets(hpa)),
            Value::from(min_pods),
            Value::from(int(hpa, "spec/maxReplicas")),
            Value::from(int(hpa, "status/currentReplicas")),
        ]
    },
);

/// A quantity as upstream prints it (canonical form), `<unknown>` when absent.
fn quantity(value: Option<&Value>) -> String {
    let Some(text) = value.and_then(Value::as_str) else {
        return "<unknown>".into();
    };
    canonical(text)
}

fn percent(value: Option<&Value>) -> Option<String> {
    value.and_then(Value::as_i64).map(|n| format!("{n}%"))
}

/// The TARGETS cell of a v2 object, or of a v1 one (its CPU percentage).
fn targets(hpa: &Value) -> String {
    if let Some(target) = at(hpa, "spec/targetCPUUtilizationPercentage") {
        let current = percent(at(hpa, "status/currentCPUUtilizationPercentage"))
            .unwrap_or_else(|| "<unknown>".into());
        let target = percent(Some(target)).unwrap_or_else(|| "<auto>".into());
        return format!("cpu: {current}/{target}");
    }
    let specs = list(hpa, "spec/metrics");
    if specs.is_empty() {
        return "<none>".into();
    }
    let statuses = list(hpa, "status/currentMetrics");
    let shown: Vec<String> = specs
        .iter()
        .enumerate()
        .take(SHOWN_METRICS)
        .map(|(i, spec)| metric(spec, statuses.get(i)))
        .collect();
    let joined = shown.join(", ");
    if specs.len() > SHOWN_METRICS {
        format!("{joined} + {} more...", specs.len() - SHOWN_METRICS)
    } else {
        joined
    }
}

/// One metric's `current/target`.
fn metric(spec: &Value, status: Option<&Value>) -> String {
    let kind = spec["type"].as_str().unwrap_or("");
    // The status of this metric, when it is of the same source.
    let source_key = match kind {
        "Resource" => "resource",
        "ContainerResource" => "containerResource",
        "Pods" => "pods",
        "Object" => "object",
        "External" => "external",
        _ => return "<unknown type>".into(),
    };
    let source = &spec[source_key];
    let current = status.map(|s| &s[source_key]).filter(|c| c.is_object());
    let current_at = |field: &str| current.and_then(|c| c["current"].get(field));
    // A figure of the metric's status, `<unknown>` while it has none.
    let current_quantity = |field: &str| {
        if current.is_some() {
            quantity(current_at(field))
        } else {
            "<unknown>".into()
        }
    };
    let target = &source["target"];
    match kind {
        "Resource" | "ContainerResource" => {
            let resource = source["name"].as_str().unwrap_or("");
            if target.get("averageValue").is_some() {
                let now = current_quantity("averageValue");
                format!("{resource}: {now}/{}", quantity(target.get("averageValue")))
            } else {
                let now =
                    percent(current_at("averageUtilization")).unwrap_or_else(|| "<unknown>".into());
                let wanted =
                    percent(target.get("averageUtilization")).unwrap_or_else(|| "<auto>".into());
                format!("{resource}: {now}/{wanted}")
            }
        }
        "Pods" => {
            let now = current_quantity("averageValue");
            format!("{now}/{}", quantity(target.get("averageValue")))
        }
        _ => {
            // Object and External: an average or a plain value.
            if target.get("averageValue").is_some() {
                let now = quantity(current_at("averageValue"));
                format!("{now}/{} (avg)", quantity(target.get("averageValue")))
            } else {
                let now = current_quantity("value");
                format!("{now}/{}", quantity(target.get("value")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hpa(metrics: Value, current: Value) -> Value {
        json!({"spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 10, "metrics": metrics},
            "status": {"currentReplicas": 3, "currentMetrics": current}})
    }

    fn cpu(target: i64) -> Value {
        json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": target}}})
    }

    #[test]
    fn targets_show_current_over_target_per_metric() {
        let memory = json!({"type": "Resource", "resource": {"name": "memory",
            "target": {"type": "AverageValue", "averageValue": "20971520"}}});
        let object = hpa(
            json!([cpu(50), memory]),
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "current": {"averageUtilization": 80, "averageValue": "16m"}}},
                {"type": "Resource", "resource": {"name": "memory",
                "current": {"averageValue": "10485760000m"}}}]),
        );
        assert_eq!(targets(&object), "cpu: 80%/50%, memory: 10485760/20971520");
        let unknown = hpa(json!([cpu(50)]), Value::Null);
        assert_eq!(targets(&unknown), "cpu: <unknown>/50%");
        // A failed metric leaves an empty status in its place.
        let failed = hpa(json!([cpu(50)]), json!([{"type": ""}]));
        assert_eq!(targets(&failed), "cpu: <unknown>/50%");
        let many = hpa(json!([cpu(50), cpu(60), cpu(70)]), Value::Null);
        assert_eq!(
            targets(&many),
            "cpu: <unknown>/50%, cpu: <unknown>/60% + 1 more..."
        );
        let v1 = json!({"spec": {"targetCPUUtilizationPercentage": 50},
            "status": {"currentCPUUtilizationPercentage": 12}});
        assert_eq!(targets(&v1), "cpu: 12%/50%");
    }

    #[test]
    fn row_has_reference_bounds_and_replicas() {
        let object = hpa(json!([cpu(50)]), Value::Null);
        let now = k8s_openapi::jiff::Timestamp::now();
        let cells = (HORIZONTALPODAUTOSCALERS.cells)(&object, now);
        assert_eq!(cells[1], "Deployment/web");
        assert_eq!(cells[3], "1");
        assert_eq!(cells[4], 10);
        assert_eq!(cells[5], 3);
    }
}
