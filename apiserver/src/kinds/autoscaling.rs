//! HorizontalPodAutoscalers (`autoscaling/v2`, stored, and `v1`): at least
//! one replica; in v2 the CPU target upstream assumes when no metric is
//! named, and the scaling behaviour's defaults once a behaviour is given
//! (a missing one stays missing: the controller applies the same rules).

use serde_json::{Value, json};

use super::{KindStrategy, set_default};
use crate::kinds::Written;
use crate::object::path_mut;
use crate::registry::ResourceInfo;
use crate::status::FieldError;
use crate::validation::autoscaling_metrics as metrics;

/// Average CPU utilisation targeted when a v2 autoscaler names no metric.
const DEFAULT_CPU_UTILIZATION: i64 = 80;

/// How long scale-downs look back for the highest recommendation.
const SCALE_DOWN_STABILIZATION_SECONDS: i64 = 300;

/// The `horizontalpodautoscalers` resource in either version.
#[derive(Debug)]
pub(crate) struct HorizontalPodAutoscalers;

impl KindStrategy for HorizontalPodAutoscalers {
    fn apply_spec_defaults(&self, info: &ResourceInfo, spec: &mut Value) {
        set_default(spec, "minReplicas", json!(1));
        if info.version != "v2" {
            return;
        }
        let no_metrics = spec
            .get("metrics")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if no_metrics {
            spec["metrics"] = json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION}}}]);
        }
        if let Some(behavior) = path_mut(spec, &["behavior"]).filter(|b| b.is_object()) {
            default_rules(
                behavior,
                "scaleUp",
                0,
                json!([{"type": "Pods", "value": 4, "periodSeconds": 15},
                    {"type": "Percent", "value": 100, "periodSeconds": 15}]),
            );
            default_rules(
                behavior,
                "scaleDown",
                SCALE_DOWN_STABILIZATION_SECONDS,
                json!([{"type": "Percent", "value": 100, "periodSeconds": 15}]),
            );
        }
    }

    /// Upstream's bounds, target, metric and behaviour checks, on the v2
    /// form (a v1 request's CPU target is checked as the metric it is
    /// stored as). A minimum of zero needs the alpha `HPAScaleToZero` gate
    /// upstream, which skiff does not offer.
    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let stored = written.info.to_storage(written.object.clone());
        if written.status_only() {
            for field in ["currentReplicas", "desiredReplicas"] {
                crate::validation::non_negative_at(&stored["status"], "status", field, errors);
            }
            return;
        }
        let spec = &stored["spec"];
        let min = spec["minReplicas"].as_i64();
        if let Some(min) = min.filter(|m| *m < 1) {
            errors.push(FieldError::invalid(
                "spec.minReplicas",
                min,
                "must be greater than or equal to 1",
            ));
        }
        let max = spec["maxReplicas"].as_i64().unwrap_or(0);
        if max < 1 {
            errors.push(FieldError::invalid(
                "spec.maxReplicas",
                max,
                "must be greater than 0",
            ));
        }
        if min.is_some_and(|min| min > max) {
            errors.push(FieldError::invalid(
                "spec.maxReplicas",
                max,
                "must be greater than or equal to `minReplicas`",
            ));
        }
        metrics::object_reference(&spec["scaleTargetRef"], "spec.scaleTargetRef", errors);
        metrics::metrics(spec, errors);
        metrics::behavior(spec, errors);
    }
}

/// One direction of a behaviour: its window, the Max select policy, and
/// `policies` when it lists none.
fn default_rules(behavior: &mut Value, direction: &str, window: i64, policies: Value) {
    set_default(behavior, direction, json!({}));
    let Some(rules) = path_mut(behavior, &[direction]).filter(|r| r.is_object()) else {
        return;
    };
    set_default(rules, "stabilizationWindowSeconds", json!(window));
    set_default(rules, "selectPolicy", json!("Max"));
    set_default(rules, "policies", policies);
}
