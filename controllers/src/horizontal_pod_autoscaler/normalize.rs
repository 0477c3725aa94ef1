//! From the metrics' proposal to the replica count written: stabilisation
//! over recent recommendations, rate limits and the min/max bounds, either
//! upstream's legacy rules (no `spec.behavior`: scale-downs take the
//! highest recommendation of the downscale window, scale-ups at most
//! double or reach 4) or the behaviour's windows and policies. Each
//! autoscaler's recent recommendations and scale changes live in its
//! [`History`], kept by the controller between syncs.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::{
    HPAScalingPolicy, HPAScalingRules, HorizontalPodAutoscalerBehavior,
};

/// What normalising decided, with the conditions it explains itself by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalized {
    /// The replica count to have.
    pub replicas: i32,
    /// `AbleToScale` (always True here): reason and message.
    pub able: (&'static str, &'static str),
    /// `ScalingLimited`: whether the bounds or rates changed the count,
    /// reason and message.
    pub limited: (bool, &'static str, &'static str),
}

/// One autoscaler's memory between syncs.
#[derive(Debug, Default, Clone)]
pub struct History {
    /// Unstabilised recommendations and when they were made.
    recommendations: Vec<(Timestamp, i32)>,
    /// Replicas added by past scale-ups (behaviour only).
    ups: Vec<(Timestamp, i32)>,
    /// Replicas removed by past scale-downs (behaviour only).
    downs: Vec<(Timestamp, i32)>,
}

impl History {
    /// Remembers the current count as the first recommendation, so a fresh
    /// controller does not scale down at once.
    pub fn start(&mut self, current: i32, now: Timestamp) {
        if self.recommendations.is_empty() {
            self.recommendations.push((now, current));
        }
    }

    /// Records a scale change for the behaviour's rate policies, dropping
    /// changes older than the longest policy period of that direction.
    pub fn scaled(
        &mut self,
        behavior: Option<&HorizontalPodAutoscalerBehavior>,
        from: i32,
        to: i32,
        now: Timestamp,
    ) {
        let Some(behavior) = behavior else {
            return;
        };
        let (events, rules) = if to > from {
            (&mut self.ups, scale_up_rules(behavior))
        } else {
            (&mut self.downs, scale_down_rules(behavior, Duration::ZERO))
        };
        let longest = policies(&rules)
            .iter()
            .map(|p| p.period_seconds)
            .max()
            .unwrap_or(0);
        events.retain(|(at, _)| after(*at, now, longest));
        events.push((now, (to - from).abs()));
    }
}

fn seconds(n: i64) -> jiff::SignedDuration {
    jiff::SignedDuration::from_secs(n)
}

/// Whether `at` lies within the last `window` seconds before `now`.
fn after(at: Timestamp, now: Timestamp, window: i32) -> bool {
    now.checked_sub(seconds(i64::from(window)))
        .is_ok_and(|cutoff| at > cutoff)
}

/// Upstream's scale-up defaults: no window, the larger of +4 pods and
/// +100 % per 15 s.
fn scale_up_rules(behavior: &HorizontalPodAutoscalerBehavior) -> HPAScalingRules {
    let mut rules = behavior.scale_up.clone().unwrap_or_default();
    rules.stabilization_window_seconds.get_or_insert(0);
    rules.select_policy.get_or_insert_with(|| "Max".into());
    rules
        .policies
        .get_or_insert_with(|| vec![policy("Pods", 4, 15), policy("Percent", 100, 15)]);
    rules
}

/// Upstream's scale-down defaults: `window` (the controller's downscale
/// stabilisation), up to -100 % per 15 s.
fn scale_down_rules(
    behavior: &HorizontalPodAutoscalerBehavior,
    window: Duration,
) -> HPAScalingRules {
    let mut rules = behavior.scale_down.clone().unwrap_or_default();
    rules
        .stabilization_window_seconds
        .get_or_insert(i32::try_from(window.as_secs()).unwrap_or(i32::MAX));
    rules.select_policy.get_or_insert_with(|| "Max".into());
    rules
        .policies
        .get_or_insert_with(|| vec![policy("Percent", 100, 15)]);
    rules
}

fn policy(type_: &str, value: i32, period_seconds: i32) -> HPAScalingPolicy {
    HPAScalingPolicy {
        type_: type_.into(),
        value,
        period_seconds,
    }
}

fn policies(rules: &HPAScalingRules) -> &[HPAScalingPolicy] {
    rules.policies.as_deref().unwrap_or_default()
}

const READY: (&str, &str) = ("ReadyForNewScale", "recommended size matches current size");
const DOWN_STABILIZED: (&str, &str) = (
    "ScaleDownStabilized",
    "recent recommendations were higher than current one, applying the highest recent recommendation",
);
const UP_STABILIZED: (&str, &str) = (
    "ScaleUpStabilized",
    "recent recommendations were lower than current one, applying the lowest recent recommendation",
);
const WITHIN: (&str, &str) = (
    "DesiredWithinRange",
    "the desired count is within the acceptable range",
);
const TOO_FEW: (&str, &str) = (
    "TooFewReplicas",
    "the desired replica count is less than the minimum replica count",
);
const TOO_MANY: (&str, &str) = (
    "TooManyReplicas",
    "the desired replica count is more than the maximum replica count",
);
const UP_LIMIT: (&str, &str) = (
    "ScaleUpLimit",
    "the desired replica count is increasing faster than the maximum scale rate",
);
const DOWN_LIMIT: (&str, &str) = (
    "ScaleDownLimit",
    "the desired replica count is decreasing faster than the maximum scale rate",
);

/// The bounds an autoscaler's count must stay in.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// The lowest count (`minReplicas`).
    pub min: i32,
    /// The highest count (`maxReplicas`).
    pub max: i32,
}

impl Bounds {
    /// The most a scale-up may reach when its rate allows `limit`: the lower
    /// of `limit` and `maxReplicas`, with the condition naming which one
    /// holds (`maxReplicas` on a tie, as upstream).
    fn ceiling(self, limit: i32) -> (i32, (&'static str, &'static str)) {
        if self.max > limit {
            (limit, UP_LIMIT)
        } else {
            (self.max, TOO_MANY)
        }
    }

    /// The least a scale-down may reach when its rate allows `limit`: the
    /// higher of `limit` and `minReplicas`, with the condition naming which
    /// one holds (`minReplicas` on a tie, as upstream).
    fn floor(self, limit: i32) -> (i32, (&'static str, &'static str)) {
        if self.min < limit {
            (limit, DOWN_LIMIT)
        } else {
            (self.min, TOO_FEW)
        }
    }
}

impl Normalized {
    /// The decision to have `bounded`'s count: `able` explains the
    /// stabilisation, and `bounded`'s reason the bounds and rates, which
    /// limited the count when it is not the `stabilized` one.
    fn new(
        able: (&'static str, &'static str),
        stabilized: i32,
        (replicas, (reason, message)): (i32, (&'static str, &'static str)),
    ) -> Self {
        Normalized {
            replicas,
            able,
            limited: (replicas != stabilized, reason, message),
        }
    }
}

/// Without a behaviour: the highest recommendation of the last
/// `downscale_window` (this one included), then at most twice the current
/// count (or 4) and within the bounds.
pub fn legacy(
    history: &mut History,
    current: i32,
    proposed: i32,
    bounds: Bounds,
    downscale_window: Duration,
    now: Timestamp,
) -> Normalized {
    let window = i32::try_from(downscale_window.as_secs()).unwrap_or(i32::MAX);
    let mut stabilized = proposed;
    let mut stale = None;
    for (i, (at, recommendation)) in history.recommendations.iter().enumerate() {
        if !after(*at, now, window) {
            stale = Some(i);
        } else if *recommendation > stabilized {
            stabilized = *recommendation;
        }
    }
    record(history, stale, proposed, now);
    let able = if stabilized != proposed {
        DOWN_STABILIZED
    } else {
        READY
    };
    let scale_up_limit = (current.saturating_mul(2)).max(4);
    let (max_allowed, over) = bounds.ceiling(scale_up_limit);
    let bounded = if stabilized < bounds.min {
        (bounds.min, TOO_FEW)
    } else if stabilized > max_allowed {
        (max_allowed, over)
    } else {
        (stabilized, WITHIN)
    };
    Normalized::new(able, stabilized, bounded)
}

/// Keeps `proposed` as a recommendation, in the place of a stale one when
/// there is one.
fn record(history: &mut History, stale: Option<usize>, proposed: i32, now: Timestamp) {
    match stale {
        Some(i) => history.recommendations[i] = (now, proposed),
        None => history.recommendations.push((now, proposed)),
    }
}

/// With a behaviour: the count is held between the lowest recommendation
/// of the scale-up window and the highest of the scale-down window, then
/// limited by the direction's policies (over the changes of each policy's
/// period) and the bounds.
pub fn with_behavior(
    history: &mut History,
    behavior: &HorizontalPodAutoscalerBehavior,
    current: i32,
    proposed: i32,
    bounds: Bounds,
    downscale_window: Duration,
    now: Timestamp,
) -> Normalized {
    let up = scale_up_rules(behavior);
    let down = scale_down_rules(behavior, downscale_window);
    let up_window = up.stabilization_window_seconds.unwrap_or(0);
    let down_window = down.stabilization_window_seconds.unwrap_or(0);
    let (mut up_recommendation, mut down_recommendation) = (proposed, proposed);
    let mut stale = None;
    for (i, (at, recommendation)) in history.recommendations.iter().enumerate() {
        let in_up = after(*at, now, up_window);
        let in_down = after(*at, now, down_window);
        if in_up {
            up_recommendation = up_recommendation.min(*recommendation);
        }
        if in_down {
            down_recommendation = down_recommendation.max(*recommendation);
        }
        if !in_up && !in_down {
            stale = Some(i);
        }
    }
    let stabilized = current.max(up_recommendation).min(down_recommendation);
    record(history, stale, proposed, now);
    let able = if stabilized == proposed {
        READY
    } else if proposed >= current {
        UP_STABILIZED
    } else {
        DOWN_STABILIZED
    };
    let bounded = rate_limited(history, &up, &down, current, stabilized, bounds, now);
    Normalized::new(able, stabilized, bounded)
}

/// Replicas changed in the last `period` seconds, by `events`.
fn changed_within(events: &[(Timestamp, i32)], period: i32, now: Timestamp) -> i32 {
    events
        .iter()
        .filter(|(at, _)| after(*at, now, period))
        .map(|(_, n)| *n)
        .sum()
}

fn rate_limited(
    history: &History,
    up: &HPAScalingRules,
    down: &HPAScalingRules,
    current: i32,
    desired: i32,
    bounds: Bounds,
    now: Timestamp,
) -> (i32, (&'static str, &'static str)) {
    // The count at the start of a policy's period: what the changes since
    // then are undone from.
    let start_of = |period: i32| {
        current - changed_within(&history.ups, period, now)
            + changed_within(&history.downs, period, now)
    };
    if desired > current {
        let limit = match up.select_policy.as_deref() {
            Some("Disabled") => current,
            select => {
                let proposals = policies(up).iter().map(|p| {
                    let start = start_of(p.period_seconds);
                    if p.type_ == "Pods" {
                        start.saturating_add(p.value)
                    } else {
                        (f64::from(start) * (1.0 + f64::from(p.value) / 100.0)).ceil() as i32
                    }
                });
                let chosen = if select == Some("Min") {
                    proposals.min()
                } else {
                    proposals.max()
                };
                chosen.unwrap_or(current).max(current)
            }
        };
        let (max_allowed, over) = bounds.ceiling(limit);
        if desired > max_allowed {
            return (max_allowed, over);
        }
    } else if desired < current {
        let limit = match down.select_policy.as_deref() {
            Some("Disabled") => current,
            select => {
                let proposals = policies(down).iter().map(|p| {
                    let start = start_of(p.period_seconds);
                    if p.type_ == "Pods" {
                        start.saturating_sub(p.value)
                    } else {
                        (f64::from(start) * (1.0 - f64::from(p.value) / 100.0)) as i32
                    }
                });
                // The largest change is the lowest count.
                let chosen = if select == Some("Min") {
                    proposals.max()
                } else {
                    proposals.min()
                };
                chosen.unwrap_or(current).min(current)
            }
        };
        let (min_allowed, under) = bounds.floor(limit);
        if desired < min_allowed {
            return (min_allowed, under);
        }
    }
    (desired, WITHIN)
}

#[cfg(test)]
mod tests;
