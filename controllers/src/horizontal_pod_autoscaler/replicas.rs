//! The replica calculator: from the pods a target selects and their
//! resource usage, the replica count that brings the average to its
//! target, with upstream's treatment of pods that are not ready yet or have
//! no figures (`GetResourceReplicas` and `GetRawResourceReplicas`).
//!
//! Pure functions of their inputs and `now`, so every rule is tested
//! without a cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use skiff_common::containers;
use skiff_common::quantity::milli_value;

/// One pod's usage of one resource, in thousandths of its unit, with when
/// and over how long it was measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PodMetric {
    /// The end of the measurement window.
    pub timestamp: Timestamp,
    /// How long the usage was averaged over.
    pub window: Duration,
    /// Usage in thousandths (millicores, millibytes).
    pub value: i64,
}

/// Usage per pod name.
pub type PodMetrics = BTreeMap<String, PodMetric>;

/// The calculator's tunables (upstream's controller-manager flags).
#[derive(Debug, Clone, Copy)]
pub struct Tuning {
    /// A usage ratio within this of 1.0 changes nothing
    /// (`--horizontal-pod-autoscaler-tolerance`).
    pub tolerance: f64,
    /// How long after a pod starts its CPU samples are distrusted unless
    /// the pod is ready and was measured after becoming so
    /// (`--horizontal-pod-autoscaler-cpu-initialization-period`).
    pub cpu_initialization_period: Duration,
    /// How long after start a pod that never became ready counts as still
    /// starting (`--horizontal-pod-autoscaler-initial-readiness-delay`).
    pub initial_readiness_delay: Duration,
}

impl Default for Tuning {
    fn default() -> Self {
        Self {
            tolerance: 0.1,
            cpu_initialization_period: Duration::from_secs(300),
            initial_readiness_delay: Duration::from_secs(30),
        }
    }
}

impl Tuning {
    fn within(&self, ratio: f64) -> bool {
        (1.0 - self.tolerance) <= ratio && ratio <= (1.0 + self.tolerance)
    }
}

/// Why no replica count could be proposed (upstream's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalcError {
    /// The selector matched no pod.
    #[error("no pods returned by selector while calculating replica count")]
    NoPods,
    /// Every pod with figures was left out (not ready, deleted, failed).
    #[error("did not receive metrics for targeted pods (pods might be unready)")]
    NoUsableMetrics,
    /// A container names no request for the resource, so a percentage of
    /// the request means nothing.
    #[error("missing request for {resource} in container {container} of Pod {pod}")]
    MissingRequest {
        /// The resource, e.g. `cpu`.
        resource: String,
        /// The container without the request.
        container: String,
        /// The pod holding the container.
        pod: String,
    },
    /// The figures are for pods the selector did not return.
    #[error("no metrics returned matched known pods")]
    NoMatchingPods,
}

/// A proposal for one resource metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proposal {
    /// The replica count proposed.
    pub replicas: i32,
    /// The average utilisation in percent of the requests (Utilization
    /// targets only).
    pub utilization: Option<i32>,
    /// The average usage per pod, in thousandths.
    pub average: i64,
}

/// The pods sorted by how their figures count.
#[derive(Debug, Default, PartialEq)]
struct Groups {
    ready: usize,
    unready: BTreeSet<String>,
    missing: BTreeSet<String>,
    ignored: BTreeSet<String>,
}

fn name_of(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

/// Deleted and failed pods are ignored, pending ones unready, pods without
/// figures missing; for CPU, a pod is unready while its samples may still
/// show start-up work: not ready, or within the initialisation period and
/// measured before a full window since it turned ready, or never ready
/// within the readiness delay after start.
fn group_pods(
    pods: &[Pod],
    metrics: &PodMetrics,
    resource: &str,
    tuning: &Tuning,
    now: Timestamp,
) -> Groups {
    let mut groups = Groups::default();
    for pod in pods {
        let name = name_of(pod);
        let status = pod.status.as_ref();
        let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("");
        if pod.metadata.deletion_timestamp.is_some() || phase == "Failed" {
            groups.ignored.insert(name);
            continue;
        }
        if phase == "Pending" {
            groups.unready.insert(name);
            continue;
        }
        let Some(metric) = metrics.get(&name) else {
            groups.missing.insert(name);
            continue;
        };
        if resource == "cpu" && cpu_unready(pod, metric, tuning, now) {
            groups.unready.insert(name);
            continue;
        }
        groups.ready += 1;
    }
    groups
}

fn cpu_unready(pod: &Pod, metric: &PodMetric, tuning: &Tuning, now: Timestamp) -> bool {
    let status = pod.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    let start = status.and_then(|s| s.start_time.as_ref()).map(|t| t.0);
    let (Some(ready), Some(start)) = (ready, start) else {
        return true;
    };
    let transition = ready
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(start);
    let not_ready = ready.status == "False";
    if add(start, tuning.cpu_initialization_period) > now {
        not_ready || metric.timestamp < add(transition, metric.window)
    } else {
        not_ready && add(start, tuning.initial_readiness_delay) > transition
    }
}

fn add(at: Timestamp, by: Duration) -> Timestamp {
    let by = jiff::SignedDuration::try_from(by).unwrap_or(jiff::SignedDuration::MAX);
    at.checked_add(by).unwrap_or(Timestamp::MAX)
}

/// Each pod's summed request for `resource` (of `container` only, when
/// named) over its containers and restartable init containers.
fn pod_requests(
    pods: &[Pod],
    container: Option<&str>,
    resource: &str,
) -> Result<BTreeMap<String, i64>, CalcError> {
    let mut requests = BTreeMap::new();
    for pod in pods {
        let Some(spec) = pod.spec.as_ref() else {
            continue;
        };
        let mut sum = 0i64;
        for c in containers::running(spec) {
            if container.is_some_and(|wanted| wanted != c.name) {
                continue;
            }
            let request = c
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get(resource))
                .and_then(milli_value);
            match request {
                Some(milli) => sum = sum.saturating_add(milli),
                None => {
                    return Err(CalcError::MissingRequest {
                        resource: resource.to_owned(),
                        container: c.name.clone(),
                        pod: name_of(pod),
                    });
                }
            }
        }
        requests.insert(name_of(pod), sum);
    }
    Ok(requests)
}

/// Usage over requests of the pods with both: the ratio to the target,
/// the utilisation in percent and the average usage.
fn utilization_ratio(
    metrics: &PodMetrics,
    requests: &BTreeMap<String, i64>,
    target: i32,
) -> Result<(f64, i32, i64), CalcError> {
    let (mut used, mut requested, mut entries) = (0i64, 0i64, 0i64);
    for (pod, metric) in metrics {
        let Some(request) = requests.get(pod) else {
            continue;
        };
        used = used.saturating_add(metric.value);
        requested = requested.saturating_add(*request);
        entries += 1;
    }
    if requested == 0 {
        return Err(CalcError::NoMatchingPods);
    }
    let utilization = i32::try_from(used.saturating_mul(100) / requested).unwrap_or(i32::MAX);
    Ok((
        f64::from(utilization) / f64::from(target),
        utilization,
        used / entries,
    ))
}

/// Average usage over the pods with figures and its ratio to `target`.
fn usage_ratio(metrics: &PodMetrics, target: i64) -> (f64, i64) {
    let total: i64 = metrics.values().map(|m| m.value).sum();
    let average = total / i64::try_from(metrics.len().max(1)).unwrap_or(i64::MAX);
    (average as f64 / target as f64, average)
}

fn ceil_replicas(ratio: f64, pods: usize) -> i32 {
    let replicas = (ratio * pods as f64).ceil();
    if replicas >= f64::from(i32::MAX) {
        i32::MAX
    } else {
        replicas as i32
    }
}

/// What a resource metric's target asks of the pods' average.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// A utilisation in percent of the pods' requests.
    Utilization {
        /// The percentage.
        percent: i32,
        /// The one container whose usage and requests count, when named.
        container: Option<&'a str>,
    },
    /// A usage per pod, in thousandths.
    AverageValue(i64),
}

/// What a target makes of the pods' figures.
struct Reading {
    /// The figures' ratio to the target.
    ratio: f64,
    /// The utilisation in percent of the requests (Utilization targets
    /// only).
    utilization: Option<i32>,
    /// The average usage per pod, in thousandths.
    average: i64,
}

/// A target with what reading figures against it takes.
enum Measure {
    /// A utilisation of `percent` of each pod's `requests`.
    Utilization {
        requests: BTreeMap<String, i64>,
        percent: i32,
    },
    /// An average usage per pod, in thousandths.
    AverageValue(i64),
}

impl Measure {
    /// The figures' ratio to the target, with the averages it comes from.
    fn read(&self, metrics: &PodMetrics) -> Result<Reading, CalcError> {
        Ok(match self {
            Measure::Utilization { requests, percent } => {
                let (ratio, utilization, average) = utilization_ratio(metrics, requests, *percent)?;
                Reading {
                    ratio,
                    utilization: Some(utilization),
                    average,
                }
            }
            Measure::AverageValue(target) => {
                let (ratio, average) = usage_ratio(metrics, *target);
                Reading {
                    ratio,
                    utilization: None,
                    average,
                }
            }
        })
    }

    /// What a missing pod is taken to use on a scale-down: the larger of
    /// the target and its whole request, or the target value.
    fn missing_on_scale_down(&self, pod: &str) -> i64 {
        match self {
            Measure::Utilization { requests, percent } => {
                requests.get(pod).copied().unwrap_or(0) * i64::from((*percent).max(100)) / 100
            }
            Measure::AverageValue(target) => *target,
        }
    }
}

/// The count the pods' first `ratio` to the target leads to: with no
/// unready or missing pods the ratio decides; otherwise missing
/// pods are assumed to use their fallback on a scale-down and nothing on a
/// scale-up, unready pods nothing on a scale-up, and the count is
/// recomputed unless that would reverse the direction.
fn settle(
    current: i32,
    ratio: f64,
    groups: &Groups,
    mut metrics: PodMetrics,
    measure: &Measure,
    tuning: &Tuning,
) -> Result<i32, CalcError> {
    let scale_up_with_unready = !groups.unready.is_empty() && ratio > 1.0;
    if !scale_up_with_unready && groups.missing.is_empty() {
        if tuning.within(ratio) {
            return Ok(current);
        }
        return Ok(ceil_replicas(ratio, groups.ready));
    }
    let filler = |value: i64| PodMetric {
        timestamp: Timestamp::UNIX_EPOCH,
        window: Duration::ZERO,
        value,
    };
    if ratio < 1.0 {
        for pod in &groups.missing {
            metrics.insert(pod.clone(), filler(measure.missing_on_scale_down(pod)));
        }
    } else if ratio > 1.0 {
        for pod in &groups.missing {
            metrics.insert(pod.clone(), filler(0));
        }
    }
    if scale_up_with_unready {
        for pod in &groups.unready {
            metrics.insert(pod.clone(), filler(0));
        }
    }
    let new_ratio = measure.read(&metrics)?.ratio;
    if tuning.within(new_ratio)
        || (ratio < 1.0 && new_ratio > 1.0)
        || (ratio > 1.0 && new_ratio < 1.0)
    {
        return Ok(current);
    }
    let replicas = ceil_replicas(new_ratio, metrics.len());
    if (new_ratio < 1.0 && replicas > current) || (new_ratio > 1.0 && replicas < current) {
        return Ok(current);
    }
    Ok(replicas)
}

/// Groups the pods and keeps the figures of those that count.
fn counted(
    pods: &[Pod],
    mut metrics: PodMetrics,
    resource: &str,
    tuning: &Tuning,
    now: Timestamp,
) -> Result<(Groups, PodMetrics), CalcError> {
    if pods.is_empty() {
        return Err(CalcError::NoPods);
    }
    let groups = group_pods(pods, &metrics, resource, tuning, now);
    metrics.retain(|pod, _| !groups.ignored.contains(pod) && !groups.unready.contains(pod));
    if metrics.is_empty() {
        return Err(CalcError::NoUsableMetrics);
    }
    Ok((groups, metrics))
}

/// The replica count that brings the pods' average usage of `resource`
/// to `target`.
pub fn resource_replicas(
    current: i32,
    target: Target<'_>,
    resource: &str,
    pods: &[Pod],
    metrics: PodMetrics,
    tuning: &Tuning,
    now: Timestamp,
) -> Result<Proposal, CalcError> {
    let (groups, metrics) = counted(pods, metrics, resource, tuning, now)?;
    let measure = match target {
        Target::Utilization { percent, container } => Measure::Utilization {
            requests: pod_requests(pods, container, resource)?,
            percent,
        },
        Target::AverageValue(value) => Measure::AverageValue(value),
    };
    let reading = measure.read(&metrics)?;
    let replicas = settle(current, reading.ratio, &groups, metrics, &measure, tuning)?;
    Ok(Proposal {
        replicas,
        utilization: reading.utilization,
        average: reading.average,
    })
}

#[cfg(test)]
mod tests;
