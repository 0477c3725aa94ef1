//! Stabilisation windows, rate policies and bounds over a sequence of syncs.

use std::time::Duration;

use jiff::Timestamp;
use serde_json::json;

use super::*;

const FIVE_MINUTES: Duration = Duration::from_secs(300);

fn t(second: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + second).unwrap()
}

fn bounds(min: i32, max: i32) -> Bounds {
    Bounds { min, max }
}

fn behavior(value: serde_json::Value) -> HorizontalPodAutoscalerBehavior {
    serde_json::from_value(value).unwrap()
}

#[test]
fn legacy_scale_down_waits_for_the_highest_recommendation_of_the_window() {
    let mut history = History::default();
    history.start(10, t(0));
    // Metrics propose 2 right away: the initial 10 holds.
    let n = legacy(&mut history, 10, 2, bounds(1, 20), FIVE_MINUTES, t(15));
    assert_eq!(n.replicas, 10);
    assert_eq!(n.able.0, "ScaleDownStabilized");
    assert_eq!(
        n.limited,
        (
            false,
            "DesiredWithinRange",
            "the desired count is within the acceptable range"
        )
    );
    // A proposal of 6 inside the window.
    let n = legacy(&mut history, 10, 6, bounds(1, 20), FIVE_MINUTES, t(100));
    assert_eq!(n.replicas, 10);
    // Once the first recommendation is out of the window, the highest left
    // (6) is applied.
    let n = legacy(&mut history, 10, 2, bounds(1, 20), FIVE_MINUTES, t(301));
    assert_eq!(n.replicas, 6);
    // And once that one has aged out too, 2.
    let n = legacy(&mut history, 6, 2, bounds(1, 20), FIVE_MINUTES, t(401));
    assert_eq!(n.replicas, 2);
    assert_eq!(
        n.able,
        ("ReadyForNewScale", "recommended size matches current size")
    );
}

#[test]
fn legacy_scale_up_is_immediate_but_at_most_doubles_or_reaches_four() {
    let mut history = History::default();
    history.start(1, t(0));
    let n = legacy(&mut history, 1, 10, bounds(1, 20), FIVE_MINUTES, t(15));
    assert_eq!(n.replicas, 4);
    assert_eq!(
        n.limited,
        (
            true,
            "ScaleUpLimit",
            "the desired replica count is increasing faster than the maximum scale rate"
        )
    );
    let n = legacy(&mut history, 4, 10, bounds(1, 20), FIVE_MINUTES, t(30));
    assert_eq!(n.replicas, 8);
    let n = legacy(&mut history, 8, 30, bounds(1, 10), FIVE_MINUTES, t(45));
    assert_eq!(n.replicas, 10);
    assert_eq!(n.limited.1, "TooManyReplicas");
}

#[test]
fn legacy_bounds_hold_the_minimum() {
    let mut history = History::default();
    let n = legacy(&mut history, 3, 1, bounds(2, 5), Duration::ZERO, t(0));
    assert_eq!(n.replicas, 2);
    assert_eq!(
        n.limited,
        (
            true,
            "TooFewReplicas",
            "the desired replica count is less than the minimum replica count"
        )
    );
}

/// What the API server defaults a behaviour of `{}` to.
fn defaults() -> HorizontalPodAutoscalerBehavior {
    behavior(json!({
        "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
            {"type": "Pods", "value": 4, "periodSeconds": 15},
            {"type": "Percent", "value": 100, "periodSeconds": 15}]},
        "scaleDown": {"stabilizationWindowSeconds": 300, "selectPolicy": "Max", "policies": [
            {"type": "Percent", "value": 100, "periodSeconds": 15}]},
    }))
}

#[test]
fn default_behavior_scales_up_by_the_larger_of_four_pods_and_double_per_period() {
    let b = defaults();
    let mut history = History::default();
    history.start(1, t(0));
    let n = with_behavior(&mut history, &b, 1, 20, bounds(1, 50), FIVE_MINUTES, t(0));
    assert_eq!(n.replicas, 5);
    assert_eq!(n.limited.1, "ScaleUpLimit");
    history.scaled(Some(&b), 1, 5, t(0));
    // Within the same 15 s the period started at 1: nothing more.
    let n = with_behavior(&mut history, &b, 5, 20, bounds(1, 50), FIVE_MINUTES, t(10));
    assert_eq!(n.replicas, 5);
    // The next period starts at 5: +100 % = 10 beats +4.
    let n = with_behavior(&mut history, &b, 5, 20, bounds(1, 50), FIVE_MINUTES, t(16));
    assert_eq!(n.replicas, 10);
    history.scaled(Some(&b), 5, 10, t(16));
    let n = with_behavior(&mut history, &b, 10, 20, bounds(1, 12), FIVE_MINUTES, t(32));
    assert_eq!(n.replicas, 12);
    assert_eq!(n.limited.1, "TooManyReplicas");
}

#[test]
fn default_behavior_scale_down_waits_out_the_window_then_goes_all_the_way() {
    let b = defaults();
    let mut history = History::default();
    history.start(8, t(0));
    let n = with_behavior(&mut history, &b, 8, 2, bounds(1, 10), FIVE_MINUTES, t(15));
    assert_eq!(n.replicas, 8);
    assert_eq!(n.able.0, "ScaleDownStabilized");
    let n = with_behavior(&mut history, &b, 8, 2, bounds(1, 10), FIVE_MINUTES, t(301));
    assert_eq!(n.replicas, 2);
    assert_eq!(n.able.0, "ReadyForNewScale");
}

#[test]
fn scale_up_window_takes_the_lowest_recent_recommendation() {
    let b = behavior(json!({
        "scaleUp": {"stabilizationWindowSeconds": 60, "selectPolicy": "Max", "policies": [
            {"type": "Pods", "value": 100, "periodSeconds": 15}]},
        "scaleDown": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
            {"type": "Percent", "value": 100, "periodSeconds": 15}]},
    }));
    let mut history = History::default();
    history.start(2, t(0));
    let n = with_behavior(&mut history, &b, 2, 6, bounds(1, 50), FIVE_MINUTES, t(15));
    assert_eq!(n.replicas, 2);
    assert_eq!(n.able.0, "ScaleUpStabilized");
    let n = with_behavior(&mut history, &b, 2, 8, bounds(1, 50), FIVE_MINUTES, t(61));
    assert_eq!(n.replicas, 6);
}

#[test]
fn pods_policies_limit_scale_down_and_min_select_takes_the_smaller_change() {
    let b = behavior(json!({
        "scaleDown": {"stabilizationWindowSeconds": 0, "selectPolicy": "Min", "policies": [
            {"type": "Pods", "value": 2, "periodSeconds": 60},
            {"type": "Percent", "value": 50, "periodSeconds": 60}]},
    }));
    let mut history = History::default();
    let n = with_behavior(&mut history, &b, 10, 1, bounds(1, 20), FIVE_MINUTES, t(0));
    assert_eq!(n.replicas, 8);
    assert_eq!(n.limited.1, "ScaleDownLimit");
    history.scaled(Some(&b), 10, 8, t(0));
    // Still within the 60 s period: the period began at 10, so 8 is all.
    let n = with_behavior(&mut history, &b, 8, 1, bounds(1, 20), FIVE_MINUTES, t(30));
    assert_eq!(n.replicas, 8);
    let n = with_behavior(&mut history, &b, 8, 1, bounds(1, 20), FIVE_MINUTES, t(61));
    assert_eq!(n.replicas, 6);
}

#[test]
fn a_disabled_direction_never_moves() {
    let b = behavior(json!({"scaleUp": {"selectPolicy": "Disabled"}}));
    let mut history = History::default();
    let n = with_behavior(&mut history, &b, 3, 9, bounds(1, 20), FIVE_MINUTES, t(0));
    assert_eq!(n.replicas, 3);
    assert_eq!(n.limited.1, "ScaleUpLimit");
    // Scale-downs still follow the defaults (after the window).
    let n = with_behavior(&mut history, &b, 3, 1, bounds(1, 20), Duration::ZERO, t(1));
    assert_eq!(n.replicas, 1);
}
