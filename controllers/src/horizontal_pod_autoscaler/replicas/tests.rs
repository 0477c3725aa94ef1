//! The calculator's rules, one case each: figures in, replica count out.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::*;

const NOW: i64 = 1_800_000_000;

fn at(seconds_ago: i64) -> Timestamp {
    Timestamp::from_second(NOW - seconds_ago).unwrap()
}

fn now() -> Timestamp {
    at(0)
}

/// A running pod started `started` seconds ago and ready since `ready`
/// seconds ago, requesting `cpu` millicores.
fn pod(name: &str, cpu: i64, started: i64, ready: Option<i64>) -> Pod {
    let conditions = match ready {
        Some(since) => json!([{"type": "Ready", "status": "True",
            "lastTransitionTime": at(since).to_string()}]),
        None => json!([{"type": "Ready", "status": "False",
            "lastTransitionTime": at(started).to_string()}]),
    };
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"containers": [{"name": "app", "image": "busybox",
            "resources": {"requests": {"cpu": format!("{cpu}m"), "memory": "100Mi"}}}]},
        "status": {"phase": "Running", "startTime": at(started).to_string(),
            "conditions": conditions},
    }))
    .unwrap()
}

/// A pod running for an hour, ready for most of it.
fn settled(name: &str, cpu: i64) -> Pod {
    pod(name, cpu, 3600, Some(3500))
}

/// `pod` (one made unready) with its Ready condition turned False
/// `seconds_ago`.
fn unready_since(mut pod: Pod, seconds_ago: i64) -> Pod {
    let conditions = pod.status.as_mut().unwrap().conditions.as_mut().unwrap();
    conditions[0].last_transition_time = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(seconds_ago)),
    );
    pod
}

fn with_phase(mut pod: Pod, phase: &str) -> Pod {
    pod.status.as_mut().unwrap().phase = Some(phase.into());
    pod
}

fn metrics(figures: &[(&str, i64)]) -> PodMetrics {
    figures
        .iter()
        .map(|(name, value)| {
            (
                name.to_string(),
                PodMetric {
                    timestamp: at(5),
                    window: Duration::from_secs(30),
                    value: *value,
                },
            )
        })
        .collect()
}

fn cpu(
    current: i32,
    target: i32,
    pods: &[Pod],
    figures: &[(&str, i64)],
) -> Result<Proposal, CalcError> {
    resource_replicas(
        current,
        Target::Utilization {
            percent: target,
            container: None,
        },
        "cpu",
        pods,
        metrics(figures),
        &Tuning::default(),
        now(),
    )
}

/// The proposed count alone, which is all most cases check; an error stops
/// the test.
fn replicas_for(current: i32, target: i32, pods: &[Pod], figures: &[(&str, i64)]) -> i32 {
    cpu(current, target, pods, figures).unwrap().replicas
}

#[test]
fn scales_up_to_bring_utilization_to_target() {
    let pods = [settled("a", 1000), settled("b", 1000), settled("c", 1000)];
    let proposal = cpu(3, 50, &pods, &[("a", 900), ("b", 1000), ("c", 1100)]).unwrap();
    assert_eq!(
        proposal,
        Proposal {
            replicas: 6,
            utilization: Some(100),
            average: 1000
        }
    );
}

#[test]
fn a_change_within_the_tolerance_keeps_the_count() {
    let pods = [settled("a", 1000), settled("b", 1000)];
    // 55 % of a 50 % target is a ratio of 1.1: within 0.1.
    assert_eq!(replicas_for(2, 50, &pods, &[("a", 550), ("b", 550)]), 2);
    // 56 % is not.
    assert_eq!(replicas_for(2, 50, &pods, &[("a", 560), ("b", 560)]), 3);
    // Nor is 44 %.
    assert_eq!(replicas_for(2, 50, &pods, &[("a", 440), ("b", 440)]), 2);
    assert_eq!(replicas_for(5, 50, &pods, &[("a", 440), ("b", 440)]), 2);
}

#[test]
fn scales_down_on_low_use() {
    let pods = [
        settled("a", 1000),
        settled("b", 1000),
        settled("c", 1000),
        settled("d", 1000),
    ];
    let figures = [("a", 100), ("b", 100), ("c", 100), ("d", 100)];
    let proposal = cpu(4, 50, &pods, &figures).unwrap();
    assert_eq!(proposal.replicas, 1);
    assert_eq!(proposal.utilization, Some(10));
}

#[test]
fn on_a_scale_down_a_pod_without_figures_counts_as_using_its_whole_request() {
    let pods = [
        settled("a", 1000),
        settled("b", 1000),
        settled("c", 1000),
        settled("d", 1000),
    ];
    // Without d: 10 %, ratio 0.2. With d at 100 %: 32.5 % → 32, ratio
    // 0.64, ceil(0.64 × 4) = 3.
    let proposal = cpu(4, 50, &pods, &[("a", 100), ("b", 100), ("c", 100)]).unwrap();
    assert_eq!(proposal.replicas, 3);
    // The status reports what was measured.
    assert_eq!(proposal.utilization, Some(10));
}

#[test]
fn on_a_scale_down_a_missing_pod_counts_at_the_target_when_that_is_above_100() {
    let pods = [settled("a", 1000), settled("b", 1000)];
    // a at 50 % of a 200 % target; b taken at 200 %: 125 % → ratio 0.625,
    // ceil(1.25) = 2, no change.
    assert_eq!(replicas_for(2, 200, &pods, &[("a", 500)]), 2);
    // Without the fallback a alone would propose 1.
    let one = [settled("a", 1000)];
    assert_eq!(replicas_for(2, 200, &one, &[("a", 500)]), 1);
}

#[test]
fn on_a_scale_up_a_pod_without_figures_counts_as_idle() {
    let pods = [settled("a", 1000), settled("b", 1000)];
    // a at 200 %: ratio 4; b idle: 100 %, ratio 2, ceil(2 × 2) = 4.
    assert_eq!(replicas_for(2, 50, &pods, &[("a", 2000)]), 4);
}

#[test]
fn a_pending_pod_counts_as_idle_on_a_scale_up_and_not_at_all_on_a_scale_down() {
    let pods = [
        settled("a", 1000),
        settled("b", 1000),
        with_phase(settled("c", 1000), "Pending"),
    ];
    // Up: 100 % over a, b; with c idle 66 % → ratio 1.32 → ceil(3.96) = 4.
    assert_eq!(replicas_for(3, 50, &pods, &[("a", 1000), ("b", 1000)]), 4);
    // Down: c is left out: 10 % over a and b → ceil(0.2 × 2) = 1.
    assert_eq!(
        replicas_for(3, 50, &pods, &[("a", 100), ("b", 100), ("c", 900)]),
        1
    );
}

#[test]
fn a_change_the_stand_ins_would_reverse_keeps_the_count() {
    let pods = [settled("a", 1000), settled("b", 1000), settled("c", 1000)];
    // a alone: 60 % of 50 % (ratio 1.2, up); b and c idle: 20 % (down).
    assert_eq!(replicas_for(3, 50, &pods, &[("a", 600)]), 3);
}

#[test]
fn deleted_and_failed_pods_are_left_out() {
    let mut deleted = settled("b", 1000);
    deleted.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(1)));
    let pods = [
        settled("a", 1000),
        deleted,
        with_phase(settled("c", 1000), "Failed"),
    ];
    // Only a counts: 100 % of 50 % → 2.
    let figures = [("a", 1000), ("b", 0), ("c", 0)];
    assert_eq!(replicas_for(3, 50, &pods, &figures), 2);
}

#[test]
fn cpu_of_a_starting_pod_counts_only_once_measured_a_window_after_it_turned_ready() {
    // Started a minute ago (inside the 5 min initialisation period), ready
    // 10 s ago: the sample (taken 5 s ago over 30 s) covers start-up work.
    let fresh = pod("b", 1000, 60, Some(10));
    let pods = [settled("a", 1000), fresh.clone()];
    // b is unready: a alone at 100 % → 2; b idle on the way up → ratio 1,
    // within tolerance, so the count stays.
    assert_eq!(replicas_for(2, 50, &pods, &[("a", 1000), ("b", 1000)]), 2);
    // Ready 50 s ago: its sample counts.
    let measured = pod("b", 1000, 60, Some(50));
    let pods = [settled("a", 1000), measured];
    assert_eq!(replicas_for(2, 50, &pods, &[("a", 1000), ("b", 1000)]), 4);
    // Memory has no such rule.
    let pods = [settled("a", 1000), fresh];
    let proposal = resource_replicas(
        2,
        Target::AverageValue(500),
        "memory",
        &pods,
        metrics(&[("a", 1000), ("b", 1000)]),
        &Tuning::default(),
        now(),
    )
    .unwrap();
    assert_eq!(proposal.replicas, 4);
}

#[test]
fn a_pod_that_never_became_ready_soon_after_start_is_unready_later_ones_count() {
    // Started 10 min ago and unready since 10 s after its start: still
    // starting as far as the autoscaler knows.
    let never_ready = unready_since(pod("b", 1000, 600, None), 590);
    let pods = [settled("a", 1000), never_ready];
    assert_eq!(replicas_for(2, 50, &pods, &[("a", 1000), ("b", 1000)]), 2);
    // Unready since 5 min after its start (it was ready before): its
    // figures count.
    let went_unready = unready_since(pod("b", 1000, 600, None), 300);
    let pods = [settled("a", 1000), went_unready];
    assert_eq!(replicas_for(2, 50, &pods, &[("a", 1000), ("b", 1000)]), 4);
}

#[test]
fn a_pod_without_a_ready_condition_or_start_time_is_unready() {
    let mut bare = settled("b", 1000);
    bare.status.as_mut().unwrap().start_time = None;
    let pods = [settled("a", 1000), bare];
    assert_eq!(replicas_for(1, 50, &pods, &[("a", 100), ("b", 1000)]), 1);
}

#[test]
fn errors_name_what_is_missing() {
    let pods = [settled("a", 1000)];
    assert_eq!(cpu(1, 50, &[], &[("a", 1)]), Err(CalcError::NoPods));
    let pending = [with_phase(settled("a", 1000), "Pending")];
    assert_eq!(
        cpu(1, 50, &pending, &[("a", 1)]),
        Err(CalcError::NoUsableMetrics)
    );
    assert_eq!(
        CalcError::NoUsableMetrics.to_string(),
        "did not receive metrics for targeted pods (pods might be unready)"
    );
    let mut no_request = settled("a", 1000);
    no_request.spec.as_mut().unwrap().containers[0].resources = None;
    let error = cpu(1, 50, &[no_request], &[("a", 1)]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "missing request for cpu in container app of Pod a"
    );
    // An idle pod proposes zero; the bounds are applied later.
    assert_eq!(cpu(1, 50, &pods, &[("a", 1)]).map(|p| p.replicas), Ok(0));
    // Figures only for pods the selector did not return.
    let strangers = utilization_ratio(&metrics(&[("x", 5)]), &[("a".to_string(), 1000)].into(), 50);
    assert_eq!(strangers, Err(CalcError::NoMatchingPods));
}

#[test]
fn restartable_init_containers_count_and_a_named_container_counts_alone() {
    let mut two = settled("a", 400);
    let spec = two.spec.as_mut().unwrap();
    spec.init_containers = Some(vec![
        serde_json::from_value(json!({"name": "sidecar", "restartPolicy": "Always",
            "resources": {"requests": {"cpu": "600m"}}}))
        .unwrap(),
        // A plain init container has finished: its request is not counted.
        serde_json::from_value(json!({"name": "setup",
            "resources": {"requests": {"cpu": "5"}}}))
        .unwrap(),
    ]);
    // 1000m used of 1000m requested: 100 %.
    let whole = cpu(1, 50, std::slice::from_ref(&two), &[("a", 1000)]).unwrap();
    assert_eq!(whole.utilization, Some(100));
    let app_only = resource_replicas(
        1,
        Target::Utilization {
            percent: 50,
            container: Some("app"),
        },
        "cpu",
        &[two],
        metrics(&[("a", 200)]),
        &Tuning::default(),
        now(),
    )
    .unwrap();
    assert_eq!(app_only.utilization, Some(50));
    assert_eq!(app_only.replicas, 1);
}

#[test]
fn average_value_targets_divide_the_mean_by_the_target() {
    let pods = [settled("a", 100), settled("b", 100)];
    let tuning = Tuning::default();
    let value = |figures: &[(&str, i64)], current| {
        let target = Target::AverageValue(200);
        resource_replicas(
            current,
            target,
            "cpu",
            &pods,
            metrics(figures),
            &tuning,
            now(),
        )
    };
    let up = value(&[("a", 300), ("b", 500)], 2).unwrap();
    assert_eq!(
        up,
        Proposal {
            replicas: 4,
            utilization: None,
            average: 400
        }
    );
    // On the way down a pod without figures counts at the target: 50 and
    // 200 → 125 → ratio 0.625 → ceil(1.25) = 2.
    assert_eq!(value(&[("a", 50)], 2).unwrap().replicas, 2);
    // On the way up it counts as idle: 600 and 0 → ratio 1.5 → 3.
    assert_eq!(value(&[("a", 600)], 2).unwrap().replicas, 3);
}

#[test]
fn tolerance_is_a_tunable() {
    let pods = [settled("a", 1000), settled("b", 1000)];
    let wide = Tuning {
        tolerance: 0.5,
        ..Tuning::default()
    };
    let proposal = resource_replicas(
        2,
        Target::Utilization {
            percent: 50,
            container: None,
        },
        "cpu",
        &pods,
        metrics(&[("a", 700), ("b", 700)]),
        &wide,
        now(),
    )
    .unwrap();
    assert_eq!(proposal.replicas, 2);
}
