//! One reconcile of one autoscaler, upstream's `reconcileAutoscaler`: read
//! the Scale, propose a count from every metric, normalise it, write the
//! Scale when it changes, then the status when it changed; Events and
//! conditions carry upstream's reasons and messages.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::{
    ContainerResourceMetricStatus, HorizontalPodAutoscaler, HorizontalPodAutoscalerCondition,
    HorizontalPodAutoscalerStatus, MetricSpec, MetricStatus, MetricTarget, MetricValueStatus,
    ResourceMetricStatus,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use skiff_common::amount::Amount;
use skiff_informer::{Action, Cache, ObjectKey};

use super::HpaConfig;
use super::metrics::{ResourceMetrics, pod_usage};
use super::normalize::{self, Bounds, History};
use super::replicas::{self, Proposal};
use crate::controller_utils::api_message;
use crate::events::{EventRecorder, object_reference};
use crate::manager::Reconciler;

/// Each autoscaler's history, by key.
pub(super) type Histories = Arc<Mutex<HashMap<ObjectKey, History>>>;

/// Why a reconcile did not finish; the autoscaler is looked at again one
/// sync period later either way, as upstream.
#[derive(Debug, thiserror::Error)]
pub enum HpaError {
    /// The target's Scale could not be read.
    #[error("failed to query scale subresource for {reference}: {message}")]
    GetScale {
        /// The scale target, as `Kind/namespace/name`.
        reference: String,
        /// Why it could not be read.
        message: String,
    },
    /// No metric gave a usable proposal.
    #[error(
        "failed to compute desired number of replicas based on listed metrics for {reference}: {message}"
    )]
    Metrics {
        /// The scale target, as `Kind/namespace/name`.
        reference: String,
        /// Why no metric gave a proposal.
        message: String,
    },
    /// The new count could not be written.
    #[error("failed to rescale {reference}: {message}")]
    Rescale {
        /// The scale target, as `Kind/namespace/name`.
        reference: String,
        /// Why the write failed.
        message: String,
    },
    /// The status could not be written.
    #[error("failed to update status for {name}: {message}")]
    Status {
        /// The autoscaler's name.
        name: String,
        /// Why the write failed.
        message: String,
    },
}

/// What a sync needs.
pub(super) struct Syncer {
    pub client: kube::Client,
    pub autoscalers: Arc<Cache<HorizontalPodAutoscaler>>,
    pub metrics: Arc<dyn ResourceMetrics>,
    pub events: EventRecorder,
    pub config: HpaConfig,
    pub histories: Histories,
    /// Resolved scale targets by `(apiVersion, kind)`; an entry goes when
    /// a Scale read through it fails, so a removed or changed kind is
    /// discovered again.
    pub targets: Mutex<HashMap<(String, String), ApiResource>>,
}

/// Sets (or adds) a condition; its transition time moves only when its
/// status does.
fn set_condition(
    hpa: &mut HorizontalPodAutoscaler,
    type_: &str,
    status: bool,
    reason: &str,
    message: impl Into<String>,
    now: Timestamp,
) {
    let conditions = hpa
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new);
    let status = if status { "True" } else { "False" };
    let index = match conditions.iter().position(|c| c.type_ == type_) {
        Some(i) => i,
        None => {
            conditions.push(HorizontalPodAutoscalerCondition {
                type_: type_.into(),
                ..Default::default()
            });
            conditions.len() - 1
        }
    };
    let condition = &mut conditions[index];
    if condition.status != status {
        condition.last_transition_time = Some(Time(now));
    }
    condition.status = status.into();
    condition.reason = Some(reason.into());
    condition.message = Some(message.into());
}

/// One metric's failure: the Warning reason (also the condition's reason)
/// and the error.
struct MetricFailure {
    reason: &'static str,
    error: String,
}

/// What the metrics together propose.
struct Computed {
    /// The highest proposal, or None when the metrics cannot be trusted.
    replicas: Option<i32>,
    /// The metric that proposed it (for the Event's reason).
    metric: String,
    statuses: Vec<MetricStatus>,
    /// The first failure, summarised (some metrics may still have counted).
    error: Option<String>,
}

fn milli_quantity(milli: i64) -> k8s_openapi::apimachinery::pkg::api::resource::Quantity {
    Amount::parse(&format!("{milli}m"))
        .unwrap_or(Amount::ZERO)
        .to_quantity()
}

impl Reconciler for Syncer {
    type Error = HpaError;

    /// Reconciles the autoscaler under `key`; comes back one sync period
    /// later while it exists.
    async fn sync(&self, key: ObjectKey) -> Result<Action, HpaError> {
        let namespace = key.namespace.clone().unwrap_or_default();
        let Some(hpa) = self.autoscalers.get(&namespace, &key.name) else {
            if let Ok(mut histories) = self.histories.lock() {
                histories.remove(&key);
            }
            return Ok(Action::Done);
        };
        if let Err(error) = self.reconcile(&key, (*hpa).clone(), Timestamp::now()).await {
            tracing::warn!(autoscaler = %key, %error, "horizontal pod autoscaler");
        }
        Ok(Action::RequeueAfter(self.config.sync_period))
    }
}

impl Syncer {
    fn history<T>(&self, key: &ObjectKey, f: impl FnOnce(&mut History) -> T) -> T {
        let mut histories = self
            .histories
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(histories.entry(key.clone()).or_default())
    }

    async fn reconcile(
        &self,
        key: &ObjectKey,
        mut hpa: HorizontalPodAutoscaler,
        now: Timestamp,
    ) -> Result<(), HpaError> {
        let original = hpa.status.clone();
        let spec = hpa.spec.clone().unwrap_or_default();
        let target = spec.scale_target_ref.clone();
        let namespace = key.namespace.clone().unwrap_or_default();
        let reference = format!("{}/{}/{}", target.kind, namespace, target.name);
        let regarding = object_reference(&hpa);

        let (mut scale, resource) = match self
            .get_scale(
                &namespace,
                target.api_version.as_deref().unwrap_or_default(),
                &target.kind,
                &target.name,
            )
            .await
        {
            Ok(found) => found,
            Err(message) => {
                self.events
                    .warning(&regarding, "FailedGetScale", "GetScale", message.clone());
                set_condition(
                    &mut hpa,
                    "AbleToScale",
                    false,
                    "FailedGetScale",
                    format!(
                        "the HPA controller was unable to get the target's current scale: {message}"
                    ),
                    now,
                );
                self.write_status(&original, &hpa).await?;
                return Err(HpaError::GetScale { reference, message });
            }
        };
        set_condition(
            &mut hpa,
            "AbleToScale",
            true,
            "SucceededGetScale",
            "the HPA controller was able to get the target's current scale",
            now,
        );
        let current = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        self.history(key, |h| h.start(current, now));

        let min = spec.min_replicas.unwrap_or(1);
        let max = spec.max_replicas;
        let mut statuses = Vec::new();
        let mut reason = String::new();
        let mut metrics_error = None;
        let (desired, rescale) = if current == 0 && min != 0 {
            set_condition(
                &mut hpa,
                "ScalingActive",
                false,
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero",
                now,
            );
            (0, false)
        } else if current > max {
            reason = "Current number of replicas above Spec.MaxReplicas".into();
            (max, true)
        } else if current < min {
            reason = "Current number of replicas below Spec.MinReplicas".into();
            (min, true)
        } else {
            let computed = self
                .compute(&mut hpa, &regarding, &namespace, &scale, current, now)
                .await;
            statuses = computed.statuses;
            let Some(proposed) = computed.replicas else {
                let message = computed.error.unwrap_or_default();
                self.set_status(&mut hpa, current, None, statuses, false, now);
                self.write_status(&original, &hpa).await?;
                self.events.warning(
                    &regarding,
                    "FailedComputeMetricsReplicas",
                    "ComputeReplicas",
                    message.clone(),
                );
                return Err(HpaError::Metrics { reference, message });
            };
            metrics_error = computed.error;
            if proposed > current {
                reason = format!("{} above target", computed.metric);
            } else if proposed < current {
                reason = "All metrics below target".into();
            }
            let bounds = Bounds { min, max };
            let window = self.config.downscale_stabilization;
            let normalized = self.history(key, |h| match spec.behavior.as_ref() {
                None => normalize::legacy(h, current, proposed, bounds, window, now),
                Some(b) => normalize::with_behavior(h, b, current, proposed, bounds, window, now),
            });
            set_condition(
                &mut hpa,
                "AbleToScale",
                true,
                normalized.able.0,
                normalized.able.1,
                now,
            );
            let (limited, why, message) = normalized.limited;
            set_condition(&mut hpa, "ScalingLimited", limited, why, message, now);
            (normalized.replicas, normalized.replicas != current)
        };

        if rescale {
            scale.spec.get_or_insert_with(Default::default).replicas = Some(desired);
            let api =
                Api::<DynamicObject>::namespaced_with(self.client.clone(), &namespace, &resource);
            if let Err(error) = api
                .replace_scale(&target.name, &PostParams::default(), &scale)
                .await
            {
                let message = api_message(&error);
                self.events.warning(
                    &regarding,
                    "FailedRescale",
                    "Scale",
                    format!("New size: {desired}; reason: {reason}; error: {message}"),
                );
                set_condition(
                    &mut hpa,
                    "AbleToScale",
                    false,
                    "FailedUpdateScale",
                    format!("the HPA controller was unable to update the target scale: {message}"),
                    now,
                );
                self.set_status(&mut hpa, current, None, statuses, false, now);
                self.write_status(&original, &hpa).await?;
                return Err(HpaError::Rescale { reference, message });
            }
            set_condition(
                &mut hpa,
                "AbleToScale",
                true,
                "SucceededRescale",
                format!("the HPA controller was able to update the target scale to {desired}"),
                now,
            );
            self.events.normal(
                &regarding,
                "SuccessfulRescale",
                "Scale",
                format!("New size: {desired}; reason: {reason}"),
            );
            self.history(key, |h| {
                h.scaled(spec.behavior.as_ref(), current, desired, now)
            });
            tracing::info!(autoscaler = %key, from = current, to = desired, %reason, "rescaled");
        }
        let desired = if rescale { desired } else { current };
        self.set_status(&mut hpa, current, Some(desired), statuses, rescale, now);
        self.write_status(&original, &hpa).await?;
        match metrics_error {
            Some(message) => Err(HpaError::Metrics { reference, message }),
            None => Ok(()),
        }
    }

    /// Upstream's `setStatus`: counts, metrics, and the scale time when it
    /// scaled; `desired` None keeps the previous desired count.
    fn set_status(
        &self,
        hpa: &mut HorizontalPodAutoscaler,
        current: i32,
        desired: Option<i32>,
        statuses: Vec<MetricStatus>,
        rescaled: bool,
        now: Timestamp,
    ) {
        let status = hpa.status.get_or_insert_with(Default::default);
        let previous = std::mem::take(status);
        *status = HorizontalPodAutoscalerStatus {
            current_replicas: Some(current),
            desired_replicas: desired.unwrap_or(previous.desired_replicas),
            last_scale_time: if rescaled {
                Some(Time(now))
            } else {
                previous.last_scale_time
            },
            current_metrics: (!statuses.is_empty()).then_some(statuses),
            conditions: previous.conditions,
            observed_generation: previous.observed_generation,
        };
    }

    /// Writes the status when it differs from what was read.
    async fn write_status(
        &self,
        original: &Option<HorizontalPodAutoscalerStatus>,
        hpa: &HorizontalPodAutoscaler,
    ) -> Result<(), HpaError> {
        if &hpa.status == original {
            return Ok(());
        }
        let name = hpa.metadata.name.clone().unwrap_or_default();
        let namespace = hpa.metadata.namespace.clone().unwrap_or_default();
        let api: Api<HorizontalPodAutoscaler> = Api::namespaced(self.client.clone(), &namespace);
        if let Err(error) = api.replace_status(&name, &PostParams::default(), hpa).await {
            let message = api_message(&error);
            self.events.warning(
                &object_reference(hpa),
                "FailedUpdateStatus",
                "UpdateStatus",
                message.clone(),
            );
            return Err(HpaError::Status { name, message });
        }
        Ok(())
    }

    /// The target's Scale and the resource it was read from.
    async fn get_scale(
        &self,
        namespace: &str,
        api_version: &str,
        kind: &str,
        name: &str,
    ) -> Result<(Scale, ApiResource), String> {
        let resource = self.resolve(api_version, kind).await?;
        let api = Api::<DynamicObject>::namespaced_with(self.client.clone(), namespace, &resource);
        match api.get_scale(name).await {
            Ok(scale) => Ok((scale, resource)),
            Err(error) => {
                if let Ok(mut targets) = self.targets.lock() {
                    targets.remove(&(api_version.to_owned(), kind.to_owned()));
                }
                Err(api_message(&error))
            }
        }
    }

    /// The resource serving `kind` in `api_version`, from discovery.
    async fn resolve(&self, api_version: &str, kind: &str) -> Result<ApiResource, String> {
        let cache_key = (api_version.to_owned(), kind.to_owned());
        if let Some(found) = self
            .targets
            .lock()
            .ok()
            .and_then(|t| t.get(&cache_key).cloned())
        {
            return Ok(found);
        }
        let (group, version) = match api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", api_version),
        };
        if version.is_empty() || api_version.matches('/').count() > 1 {
            return Err(format!("unexpected GroupVersion string: {api_version}"));
        }
        let gvk = GroupVersionKind::gvk(group, version, kind);
        match kube::discovery::pinned_kind(&self.client, &gvk).await {
            Ok((resource, _)) => {
                if let Ok(mut targets) = self.targets.lock() {
                    targets.insert(cache_key, resource.clone());
                }
                Ok(resource)
            }
            Err(kube::Error::Discovery(_)) => Err(format!(
                "no matches for kind \"{kind}\" in group \"{group}\""
            )),
            Err(kube::Error::Api(status)) if status.code == 404 => Err(format!(
                "no matches for kind \"{kind}\" in group \"{group}\""
            )),
            Err(error) => Err(api_message(&error)),
        }
    }

    /// Gives up on the metrics because the target's selector cannot pick
    /// its pods: a Warning Event with `reason` and `message`, ScalingActive
    /// False for `InvalidSelector` with `condition`, and no proposal, the
    /// Event's message being the sync's error.
    fn selector_unusable(
        &self,
        hpa: &mut HorizontalPodAutoscaler,
        regarding: &k8s_openapi::api::core::v1::ObjectReference,
        (reason, message): (&str, String),
        condition: String,
        now: Timestamp,
    ) -> Computed {
        self.events
            .warning(regarding, reason, "ComputeReplicas", message.clone());
        set_condition(
            hpa,
            "ScalingActive",
            false,
            "InvalidSelector",
            condition,
            now,
        );
        Computed {
            replicas: None,
            metric: String::new(),
            statuses: Vec::new(),
            error: Some(message),
        }
    }

    /// Upstream's `computeReplicasForMetrics`: a proposal per metric, the
    /// highest wins; the autoscaler gives up (None) when every metric
    /// failed, or some failed and the others would scale down.
    async fn compute(
        &self,
        hpa: &mut HorizontalPodAutoscaler,
        regarding: &k8s_openapi::api::core::v1::ObjectReference,
        namespace: &str,
        scale: &Scale,
        current: i32,
        now: Timestamp,
    ) -> Computed {
        let specs = hpa
            .spec
            .as_ref()
            .and_then(|s| s.metrics.clone())
            .unwrap_or_default();
        let selector = scale
            .status
            .as_ref()
            .and_then(|s| s.selector.clone())
            .unwrap_or_default();
        if selector.is_empty() {
            return self.selector_unusable(
                hpa,
                regarding,
                ("SelectorRequired", "selector is required".into()),
                "the HPA target's scale is missing a selector".into(),
                now,
            );
        }
        let pods = Api::<Pod>::namespaced(self.client.clone(), namespace)
            .list(&ListParams::default().labels(&selector))
            .await;
        let pods = match pods {
            Ok(list) => Ok(list.items),
            Err(kube::Error::Api(status)) if status.code == 400 => {
                let message = format!(
                    "couldn't convert selector into a corresponding internal selector object: {}",
                    status.message
                );
                return self.selector_unusable(
                    hpa,
                    regarding,
                    ("InvalidSelector", message.clone()),
                    message,
                    now,
                );
            }
            Err(error) => Err(format!(
                "unable to get pods while calculating replica count: {}",
                api_message(&error)
            )),
        };

        let mut statuses = vec![MetricStatus::default(); specs.len()];
        let mut best: Option<(i32, String)> = None;
        let mut failures: Vec<MetricFailure> = Vec::new();
        let inputs = MetricInputs {
            namespace,
            selector: &selector,
            pods: &pods,
            current,
            now,
        };
        for (i, spec) in specs.iter().enumerate() {
            match self.metric_proposal(spec, &inputs).await {
                Ok((replicas, name, status)) => {
                    statuses[i] = status;
                    if best.as_ref().is_none_or(|(r, _)| replicas > *r) {
                        best = Some((replicas, name));
                    }
                }
                Err(failure) => failures.push(failure),
            }
        }
        let proposed = best.as_ref().map(|(r, _)| *r).unwrap_or(0);
        let error = failures.first().map(|first| {
            format!(
                "invalid metrics ({} invalid out of {}), first error is: {}",
                failures.len(),
                specs.len(),
                first.error
            )
        });
        // The Warning of each failure, as each metric reported it.
        for failure in &failures {
            let detail = failure
                .error
                .split_once(": ")
                .map(|(_, rest)| rest)
                .unwrap_or(&failure.error);
            self.events.warning(
                regarding,
                failure.reason,
                "ComputeReplicas",
                detail.to_owned(),
            );
        }
        let give_up = !failures.is_empty() && (failures.len() >= specs.len() || proposed < current);
        if let Some(first) = failures.first().filter(|_| give_up) {
            let detail = first
                .error
                .split_once(": ")
                .map(|(_, rest)| rest)
                .unwrap_or(&first.error);
            set_condition(
                hpa,
                "ScalingActive",
                false,
                first.reason,
                format!("the HPA was unable to compute the replica count: {detail}"),
                now,
            );
            return Computed {
                replicas: None,
                metric: String::new(),
                statuses,
                error,
            };
        }
        let metric = best.map(|(_, name)| name).unwrap_or_default();
        set_condition(
            hpa,
            "ScalingActive",
            true,
            "ValidMetricFound",
            format!("the HPA was able to successfully calculate a replica count from {metric}"),
            now,
        );
        Computed {
            replicas: Some(proposed),
            metric,
            statuses,
            error,
        }
    }

    /// One metric's proposal, the name its Event uses and its status.
    async fn metric_proposal(
        &self,
        spec: &MetricSpec,
        inputs: &MetricInputs<'_>,
    ) -> Result<(i32, String, MetricStatus), MetricFailure> {
        match spec.type_.as_str() {
            kind @ ("Resource" | "ContainerResource") => {
                // The two differ only in the container they narrow to and
                // in their words.
                let (name, container, target, reason, what) = match (kind, spec) {
                    (
                        "Resource",
                        MetricSpec {
                            resource: Some(r), ..
                        },
                    ) => (
                        &r.name,
                        None,
                        &r.target,
                        "FailedGetResourceMetric",
                        "resource",
                    ),
                    (
                        _,
                        MetricSpec {
                            container_resource: Some(c),
                            ..
                        },
                    ) => (
                        &c.name,
                        Some(c.container.as_str()),
                        &c.target,
                        "FailedGetContainerResourceMetric",
                        "container",
                    ),
                    _ => return Err(invalid_source(kind)),
                };
                let (proposal, metric, value) = self
                    .resource_proposal(name, container, target, inputs)
                    .await
                    .map_err(|error| MetricFailure {
                        reason,
                        error: format!("failed to get {name} {what} metric value: {error}"),
                    })?;
                let status = match container {
                    None => MetricStatus {
                        type_: kind.into(),
                        resource: Some(ResourceMetricStatus {
                            name: name.clone(),
                            current: value,
                        }),
                        ..Default::default()
                    },
                    Some(container) => MetricStatus {
                        type_: kind.into(),
                        container_resource: Some(ContainerResourceMetricStatus {
                            name: name.clone(),
                            container: container.to_owned(),
                            current: value,
                        }),
                        ..Default::default()
                    },
                };
                Ok((proposal.replicas, metric, status))
            }
            // The custom and external metrics APIs are not served by skiff.
            "Pods" => Err(MetricFailure {
                reason: "FailedGetPodsMetric",
                error: format!(
                    "failed to get pods metric value: unable to get metric {}: unable to fetch metrics from custom metrics API: the custom metrics API (custom.metrics.k8s.io) is not served",
                    spec.pods
                        .as_ref()
                        .map(|p| p.metric.name.as_str())
                        .unwrap_or_default()
                ),
            }),
            "Object" => Err(MetricFailure {
                reason: "FailedGetObjectMetric",
                error: format!(
                    "failed to get object metric value: unable to get metric {}: unable to fetch metrics from custom metrics API: the custom metrics API (custom.metrics.k8s.io) is not served",
                    spec.object
                        .as_ref()
                        .map(|o| o.metric.name.as_str())
                        .unwrap_or_default()
                ),
            }),
            "External" => Err(MetricFailure {
                reason: "FailedGetExternalMetric",
                error: format!(
                    "failed to get external metric value: unable to get external metric {}: unable to fetch metrics from external metrics API: the external metrics API (external.metrics.k8s.io) is not served",
                    spec.external
                        .as_ref()
                        .map(|e| e.metric.name.as_str())
                        .unwrap_or_default()
                ),
            }),
            other => Err(MetricFailure {
                reason: "InvalidMetricSourceType",
                error: format!("failed to compute metric: unknown metric source type \"{other}\""),
            }),
        }
    }

    /// A resource metric's proposal (`container` for ContainerResource),
    /// the metric's name for Events and its current value.
    async fn resource_proposal(
        &self,
        resource: &str,
        container: Option<&str>,
        target: &MetricTarget,
        inputs: &MetricInputs<'_>,
    ) -> Result<(Proposal, String, MetricValueStatus), String> {
        let &MetricInputs {
            namespace,
            selector,
            pods,
            current,
            now,
        } = inputs;
        let tuning = &self.config.tuning;
        let fetch = || async {
            let items = self
                .metrics
                .pod_metrics(namespace, selector)
                .await
                .map_err(|e| format!("unable to fetch metrics from resource metrics API: {e}"))?;
            if items.is_empty() {
                return Err("no metrics returned from resource metrics API".to_owned());
            }
            pod_usage(&items, resource, container)
                .map_err(|e| format!("failed to get container metrics: {e}"))
        };
        // An average value target is read as usage, and wins over a
        // utilization one.
        let (goal, what) = if let Some(average) = target.average_value.as_ref() {
            let wanted = skiff_common::quantity::milli_value(average).unwrap_or(0);
            (replicas::Target::AverageValue(wanted), "usage")
        } else if let Some(percent) = target.average_utilization {
            (
                replicas::Target::Utilization { percent, container },
                "utilization",
            )
        } else {
            return Err("invalid resource metric source: neither an average utilization target nor an average value (usage) target was set".into());
        };
        let failed = |e: &dyn std::fmt::Display| format!("failed to get {resource} {what}: {e}");
        let metrics = fetch().await.map_err(|e| {
            failed(&format_args!(
                "unable to get metrics for resource {resource}: {e}"
            ))
        })?;
        let pods = pods.as_ref().map_err(|e| failed(e))?;
        let name = match (&goal, container) {
            (replicas::Target::AverageValue(_), _) => format!("{resource} resource"),
            (_, Some(_)) => {
                format!("{resource} container resource utilization (percentage of request)")
            }
            (_, None) => format!("{resource} resource utilization (percentage of request)"),
        };
        let proposal =
            replicas::resource_replicas(current, goal, resource, pods, metrics, tuning, now)
                .map_err(|e| failed(&e))?;
        // An average value target's proposal has no utilization: none is reported.
        let status = MetricValueStatus {
            average_utilization: proposal.utilization,
            average_value: Some(milli_quantity(proposal.average)),
            ..Default::default()
        };
        Ok((proposal, name, status))
    }
}

/// What each metric of an autoscaler is read against in one sync: the
/// target's pods (those `selector` picks in `namespace`, or why they could
/// not be listed), its current replica count and the sync's time.
struct MetricInputs<'a> {
    namespace: &'a str,
    selector: &'a str,
    pods: &'a Result<Vec<Pod>, String>,
    current: i32,
    now: Timestamp,
}

fn invalid_source(type_: &str) -> MetricFailure {
    MetricFailure {
        reason: "InvalidMetricSourceType",
        error: format!("failed to compute metric: the {type_} metric names no source"),
    }
}
