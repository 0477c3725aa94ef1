//! The HorizontalPodAutoscaler controller (upstream's
//! `horizontal-pod-autoscaler`, `autoscaling/v2` on resource metrics):
//! every sync period it reads each autoscaler's target through the target's
//! `/scale` subresource (any kind serving one: Deployments, ReplicaSets,
//! StatefulSets, ReplicationControllers, custom resources), the pods its
//! `status.selector` picks and their usage from the metrics API, proposes a
//! replica count per metric (`replicas`), stabilises and limits it
//! (`normalize`), writes the new count to the Scale and reports status,
//! conditions and Events as upstream does.
//!
//! It acts as `kube-system/horizontal-pod-autoscaler` with upstream's
//! `system:controller:horizontal-pod-autoscaler` role: autoscalers are
//! read from the shared informer, pods and PodMetrics listed through the
//! API with the Scale's selector (its query syntax is the API server's to
//! parse), and it writes only `*/scale` and `horizontalpodautoscalers/status`.

pub mod metrics;
pub mod normalize;
pub mod replicas;
mod sync;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use skiff_informer::{Controller, HandlerFns, ObjectKey, WorkQueue};

use crate::events::EventRecorder;
use crate::manager::{Context, Stop, run_until_stopped};

pub use metrics::{ApiMetrics, ResourceMetrics};
pub use sync::HpaError;

/// The controller name in events and logs (upstream's event source).
const CONTROLLER: &str = "horizontal-pod-autoscaler";

/// The controller's settings (upstream's
/// `--horizontal-pod-autoscaler-*` flags).
#[derive(Debug, Clone, Copy)]
pub struct HpaConfig {
    /// How often each autoscaler is reconciled (`sync-period`, 15 s).
    pub sync_period: Duration,
    /// How far back scale-downs look for a higher recommendation when the
    /// autoscaler has no behaviour, or its scale-down rules name no window
    /// (`downscale-stabilization`, 5 min).
    pub downscale_stabilization: Duration,
    /// Tolerance and readiness rules of the calculator.
    pub tuning: replicas::Tuning,
}

impl Default for HpaConfig {
    fn default() -> Self {
        Self {
            sync_period: Duration::from_secs(15),
            downscale_stabilization: Duration::from_secs(300),
            tuning: replicas::Tuning::default(),
        }
    }
}

/// Runs the controller with the default settings, reading the metrics API.
pub async fn run(ctx: Context, stop: Stop) {
    run_with(ctx, stop, HpaConfig::default()).await;
}

/// Runs the controller with `config`, reading the metrics API.
pub async fn run_with(ctx: Context, stop: Stop, config: HpaConfig) {
    let metrics = Arc::new(ApiMetrics::new(ctx.client.clone()));
    run_with_metrics(ctx, stop, config, metrics).await;
}

/// Runs the controller with `config`, taking usage figures from `metrics`.
pub async fn run_with_metrics(
    ctx: Context,
    stop: Stop,
    config: HpaConfig,
    metrics: Arc<dyn ResourceMetrics>,
) {
    let autoscalers = ctx.factory.informer::<HorizontalPodAutoscaler>();
    let queue = WorkQueue::<ObjectKey>::new();
    let histories: sync::Histories = Arc::new(Mutex::new(HashMap::new()));
    let syncer = Arc::new(sync::Syncer {
        client: ctx.client.clone(),
        autoscalers: autoscalers.cache().clone(),
        metrics,
        events: EventRecorder::new(ctx.client.clone(), CONTROLLER),
        config,
        histories: histories.clone(),
        targets: Mutex::new(HashMap::new()),
    });
    // As upstream, a new or changed autoscaler is looked at one period
    // later, never at once: the controller's own status writes would
    // otherwise bring every autoscaler straight back.
    let period = config.sync_period;
    let (on_add, on_update) = (queue.clone(), queue.clone());
    let handler = HandlerFns::new()
        .on_add(move |hpa: &Arc<HorizontalPodAutoscaler>| {
            on_add.add_after(ObjectKey::from_object(hpa.as_ref()), period)
        })
        .on_update(move |_, hpa: &Arc<HorizontalPodAutoscaler>| {
            on_update.add_after(ObjectKey::from_object(hpa.as_ref()), period)
        })
        .on_delete(move |hpa: &Arc<HorizontalPodAutoscaler>| {
            let key = ObjectKey::from_object(hpa.as_ref());
            if let Ok(mut histories) = histories.lock() {
                histories.remove(&key);
            }
        });
    let controller = Controller::new(CONTROLLER, queue)
        .workers(2)
        .watch(&autoscalers, handler);
    run_until_stopped(controller, syncer, stop).await;
}
