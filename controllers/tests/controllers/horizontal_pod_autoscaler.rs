//! The HorizontalPodAutoscaler controller, run as its own service account
//! with the role the default policy gives it and figures fed through its
//! metrics trait: it scales Deployments and custom resources through their
//! `/scale`, within the bounds and rates, reports status, conditions and
//! Events as upstream, and its account can do nothing else.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use skiff_apiserver::authn::UserInfo;
use skiff_controllers::horizontal_pod_autoscaler::metrics::{MetricsError, PodUsageFuture};
use skiff_controllers::horizontal_pod_autoscaler::{self as hpa, HpaConfig, ResourceMetrics};

use super::support::{
    OwnController, TestCluster, create_object, eventually, list_all, merge_patch,
    merge_patch_status, object,
};

const WAIT: Duration = Duration::from_secs(30);
const NS: &str = "shop";

/// Figures the test sets per pod name (millicores), served for any
/// selector; the selectors asked for are kept.
#[derive(Default)]
struct Figures {
    cpu: Mutex<BTreeMap<String, i64>>,
    failing: Mutex<Option<String>>,
    asked: Mutex<Vec<(String, String)>>,
}

impl Figures {
    fn set(&self, figures: &[(&str, i64)]) {
        *self.cpu.lock().unwrap() = figures.iter().map(|(n, v)| (n.to_string(), *v)).collect();
    }

    /// Whether the controller asked for the figures of the pods in `NS`
    /// that `selector` picks.
    fn asked_for(&self, selector: &str) -> bool {
        self.asked
            .lock()
            .unwrap()
            .contains(&(NS.to_string(), selector.to_string()))
    }
}

impl ResourceMetrics for Figures {
    fn pod_metrics<'a>(&'a self, namespace: &'a str, selector: &'a str) -> PodUsageFuture<'a> {
        Box::pin(async move {
            self.asked
                .lock()
                .unwrap()
                .push((namespace.to_owned(), selector.to_owned()));
            if let Some(message) = self.failing.lock().unwrap().clone() {
                return Err(MetricsError::Api(message));
            }
            let now = k8s_openapi::jiff::Timestamp::now().to_string();
            Ok(self
                .cpu
                .lock()
                .unwrap()
                .iter()
                .map(|(name, milli)| {
                    serde_json::from_value(json!({
                        "metadata": {"name": name, "namespace": namespace},
                        "timestamp": now, "window": "30s",
                        "containers": [{"name": "app", "usage": {"cpu": format!("{milli}m")}}],
                    }))
                    .unwrap()
                })
                .collect())
        })
    }
}

struct Harness {
    cluster: TestCluster,
    figures: Arc<Figures>,
    controller: OwnController,
}

impl Harness {
    /// A cluster with namespace `shop` and the autoscaler controller acting
    /// as `kube-system/horizontal-pod-autoscaler`, syncing every second.
    async fn start() -> Self {
        let cluster = TestCluster::start(Some(&[])).await;
        let figures = Arc::new(Figures::default());
        let source: Arc<dyn ResourceMetrics> = figures.clone();
        let config = HpaConfig {
            sync_period: Duration::from_secs(1),
            ..Default::default()
        };
        let controller = OwnController::start(
            cluster.client_as(autoscaler_account()),
            "horizontalpodautoscaling",
            "horizontal-pod-autoscaler",
            move |ctx, stop| hpa::run_with_metrics(ctx, stop, config, source),
        );
        create_object(
            &Api::<Namespace>::all(cluster.client.clone()),
            json!({"metadata": {"name": NS}}),
        )
        .await;
        Self {
            cluster,
            figures,
            controller,
        }
    }

    /// [`start`](Self::start)ed with Deployment `web` at `replicas` and its
    /// settled `pods`: where most tests begin. Hands back an admin client.
    async fn with_web(replicas: i32, pods: &[&str]) -> (Self, kube::Client) {
        let h = Self::start().await;
        let client = h.admin();
        deployment(&client, "web", replicas).await;
        for pod in pods {
            settled_pod(&client, "web", pod).await;
        }
        (h, client)
    }

    fn admin(&self) -> kube::Client {
        self.cluster.client.clone()
    }

    async fn shutdown(self) {
        self.controller.stop().await;
        self.cluster.shutdown().await;
    }
}

/// The account the autoscaler controller acts as.
fn autoscaler_account() -> UserInfo {
    UserInfo::service_account("kube-system", "horizontal-pod-autoscaler")
}

/// A Deployment of `replicas` with app=`name` pods requesting 100m CPU;
/// with no Deployment controller running, the test makes the pods.
async fn deployment(client: &kube::Client, name: &str, replicas: i32) {
    create_object(
        &Api::<Deployment>::namespaced(client.clone(), NS),
        json!({"metadata": {"name": name}, "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                {"name": "app", "image": "busybox",
                 "resources": {"requests": {"cpu": "100m"}}}]}}}}),
    )
    .await;
}

/// A pod labelled app=`app` requesting 100m, running and ready for an
/// hour (past CPU initialisation).
async fn settled_pod(client: &kube::Client, app: &str, name: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    create_object(
        &pods,
        json!({"metadata": {"name": name, "labels": {"app": app}}, "spec": {
            "containers": [{"name": "app", "image": "busybox",
                "resources": {"requests": {"cpu": "100m"}}}]}}),
    )
    .await;
    let hour_ago = (k8s_openapi::jiff::Timestamp::now()
        - k8s_openapi::jiff::SignedDuration::from_secs(3600))
    .to_string();
    merge_patch_status(
        &pods,
        name,
        json!({"status": {"phase": "Running", "startTime": hour_ago,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": hour_ago}]}}),
    )
    .await;
}

async fn autoscaler(client: &kube::Client, spec: Value) {
    create_object(
        &autoscalers(client),
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web"}, "spec": spec}),
    )
    .await;
}

/// The autoscalers in `NS`.
fn autoscalers(client: &kube::Client) -> Api<HorizontalPodAutoscaler> {
    Api::namespaced(client.clone(), NS)
}

/// Merges `patch` into autoscaler `web`.
async fn patch_autoscaler(client: &kube::Client, patch: Value) {
    merge_patch(&autoscalers(client), "web", patch).await;
}

/// The autoscaler most tests use: Deployment `web` at 50% of its pods' CPU
/// requests, with at most 10 replicas.
async fn web_autoscaler(client: &kube::Client) {
    autoscaler(
        client,
        json!({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "maxReplicas": 10, "metrics": cpu_target(50)}),
    )
    .await;
}

fn cpu_target(percent: i32) -> Value {
    json!([{"type": "Resource", "resource": {"name": "cpu",
        "target": {"type": "Utilization", "averageUtilization": percent}}}])
}

/// Waits until Deployment `web` has `replicas`.
async fn web_scaled_to(client: &kube::Client, replicas: i32, what: &str) {
    eventually(WAIT, what, || async {
        (replicas_of(client, "web").await == replicas).then_some(())
    })
    .await;
}

async fn replicas_of(client: &kube::Client, name: &str) -> i32 {
    Api::<Deployment>::namespaced(client.clone(), NS)
        .get(name)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.replicas)
        .unwrap_or(0)
}

/// The autoscaler's status as JSON.
async fn hpa_status(client: &kube::Client) -> Value {
    let hpa = autoscalers(client).get("web").await.unwrap();
    serde_json::to_value(hpa.status).unwrap()
}

/// Polls the autoscaler's status until `ready` holds for it and returns it:
/// the status is what the controller reports, so most checks wait on it.
async fn status_when(client: &kube::Client, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    eventually(WAIT, what, || async {
        let status = hpa_status(client).await;
        ready(&status).then_some(status)
    })
    .await
}

fn condition(status: &Value, type_: &str) -> (String, String, String) {
    let found = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == type_)
        .cloned()
        .unwrap_or_default();
    let text = |k: &str| found[k].as_str().unwrap_or_default().to_owned();
    (text("status"), text("reason"), text("message"))
}

/// Notes of the autoscaler's Events with `reason`.
async fn notes(client: &kube::Client, reason: &str) -> Vec<String> {
    list_all(&Api::<Event>::namespaced(client.clone(), NS))
        .await
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("HorizontalPodAutoscaler")
                && e.reason.as_deref() == Some(reason)
        })
        .filter_map(|e| e.note)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scales_a_deployment_up_on_cpu_and_reports_why() {
    let (h, client) = Harness::with_web(2, &["web-a", "web-b"]).await;
    // 100 % of the request against a 50 % target: twice as many pods.
    h.figures.set(&[("web-a", 100), ("web-b", 100)]);
    web_autoscaler(&client).await;
    web_scaled_to(&client, 4, "the deployment scaled to 4").await;
    let note = eventually(WAIT, "a SuccessfulRescale event", || async {
        notes(&client, "SuccessfulRescale").await.into_iter().next()
    })
    .await;
    assert_eq!(
        note,
        "New size: 4; reason: cpu resource utilization (percentage of request) above target"
    );
    let status = status_when(&client, "the status after the rescale", |s| {
        s["desiredReplicas"] == 4
    })
    .await;
    assert_eq!(status["currentReplicas"], 2);
    assert!(status["lastScaleTime"].is_string());
    assert_eq!(
        status["currentMetrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu",
            "current": {"averageUtilization": 100, "averageValue": "100m"}}}])
    );
    assert_eq!(
        condition(&status, "AbleToScale"),
        (
            "True".into(),
            "SucceededRescale".into(),
            "the HPA controller was able to update the target scale to 4".into()
        )
    );
    assert_eq!(
        condition(&status, "ScalingActive"),
        (
            "True".into(),
            "ValidMetricFound".into(),
            "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)".into()
        )
    );
    assert_eq!(condition(&status, "ScalingLimited").1, "DesiredWithinRange");
    // It read the pods the Deployment's Scale selects.
    assert!(h.figures.asked_for("app=web"));

    // The two new pods start idle: 50 % over four pods is on target.
    settled_pod(&client, "web", "web-c").await;
    settled_pod(&client, "web", "web-d").await;
    h.figures
        .set(&[("web-a", 50), ("web-b", 50), ("web-c", 50), ("web-d", 50)]);
    status_when(&client, "the status to see four pods at 50 %", |s| {
        s["currentReplicas"] == 4
            && s["currentMetrics"][0]["resource"]["current"]["averageUtilization"] == 50
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(replicas_of(&client, "web").await, 4);
    assert_eq!(
        condition(&hpa_status(&client).await, "AbleToScale").1,
        "ReadyForNewScale"
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounds_and_the_scale_down_window_hold() {
    let (h, client) = Harness::with_web(3, &["web-a", "web-b", "web-c"]).await;
    // 500 % of a 50 % target would ask for 30 pods; the maximum is 5.
    h.figures
        .set(&[("web-a", 500), ("web-b", 500), ("web-c", 500)]);
    autoscaler(
        &client,
        json!({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2, "maxReplicas": 5, "metrics": cpu_target(50),
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}}}),
    )
    .await;
    web_scaled_to(&client, 5, "scaled to the maximum").await;
    let status = status_when(&client, "limited at the maximum", |s| {
        condition(s, "ScalingLimited").1 == "TooManyReplicas"
    })
    .await;
    assert_eq!(
        condition(&status, "ScalingLimited"),
        (
            "True".into(),
            "TooManyReplicas".into(),
            "the desired replica count is more than the maximum replica count".into()
        )
    );
    // Idle: with no scale-down window it goes straight to the minimum.
    h.figures.set(&[("web-a", 1), ("web-b", 1), ("web-c", 1)]);
    web_scaled_to(&client, 2, "scaled to the minimum").await;
    let note = eventually(WAIT, "the scale-down event", || async {
        notes(&client, "SuccessfulRescale")
            .await
            .into_iter()
            .find(|n| n.starts_with("New size: 2"))
    })
    .await;
    assert_eq!(note, "New size: 2; reason: All metrics below target");
    status_when(&client, "limited at the minimum", |s| {
        condition(s, "ScalingLimited").1 == "TooFewReplicas"
    })
    .await;
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_conditions_and_warnings_and_change_nothing() {
    let (h, client) = Harness::with_web(2, &["web-a"]).await;
    *h.figures.failing.lock().unwrap() =
        Some("the server could not find the requested resource".into());
    web_autoscaler(&client).await;
    let status = status_when(&client, "ScalingActive False", |s| {
        condition(s, "ScalingActive").0 == "False"
    })
    .await;
    let detail = "failed to get cpu utilization: unable to get metrics for resource cpu: unable to fetch metrics from resource metrics API: the server could not find the requested resource";
    assert_eq!(
        condition(&status, "ScalingActive"),
        (
            "False".into(),
            "FailedGetResourceMetric".into(),
            format!("the HPA was unable to compute the replica count: {detail}")
        )
    );
    assert_eq!(status["currentReplicas"], 2);
    let warnings = eventually(WAIT, "the warnings", || async {
        let metric = notes(&client, "FailedGetResourceMetric").await;
        let compute = notes(&client, "FailedComputeMetricsReplicas").await;
        (!metric.is_empty() && !compute.is_empty()).then_some((metric, compute))
    })
    .await;
    assert_eq!(warnings.0, [detail]);
    assert_eq!(
        warnings.1,
        [format!(
            "invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: {detail}"
        )]
    );
    assert_eq!(replicas_of(&client, "web").await, 2);

    // Figures back, but for no pod the selector returns.
    *h.figures.failing.lock().unwrap() = None;
    h.figures.set(&[("someone-else", 100)]);
    status_when(&client, "no figures for known pods", |s| {
        condition(s, "ScalingActive")
            .2
            .ends_with("failed to get cpu utilization: no metrics returned matched known pods")
    })
    .await;

    // A target that does not exist.
    patch_autoscaler(
        &client,
        json!({"spec": {"scaleTargetRef": {"name": "gone"}}}),
    )
    .await;
    let status = status_when(&client, "AbleToScale False", |s| {
        condition(s, "AbleToScale").1 == "FailedGetScale"
    })
    .await;
    assert_eq!(condition(&status, "AbleToScale").0, "False");
    assert!(
        condition(&status, "AbleToScale")
            .2
            .starts_with("the HPA controller was unable to get the target's current scale: ")
    );
    // A kind nobody serves.
    patch_autoscaler(
        &client,
        json!({"spec": {"scaleTargetRef": {"kind": "Nonesuch", "name": "web"}}}),
    )
    .await;
    eventually(WAIT, "no matches for the kind", || async {
        notes(&client, "FailedGetScale")
            .await
            .contains(&"no matches for kind \"Nonesuch\" in group \"apps\"".to_string())
            .then_some(())
    })
    .await;
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_at_zero_replicas_is_left_alone() {
    let (h, client) = Harness::with_web(0, &[]).await;
    web_autoscaler(&client).await;
    let status = status_when(&client, "scaling disabled", |s| {
        condition(s, "ScalingActive").1 == "ScalingDisabled"
    })
    .await;
    assert_eq!(
        condition(&status, "ScalingActive").2,
        "scaling is disabled since the replica count of the target is zero"
    );
    assert_eq!(replicas_of(&client, "web").await, 0);
    // And an autoscaler may not ask for zero (no scale-to-zero gate).
    let refused = autoscalers(&client)
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": "zero"}, "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 0, "maxReplicas": 3}})),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("not an API error: {refused}")
    };
    assert_eq!(status.code, 422);
    assert!(
        status
            .message
            .contains("spec.minReplicas: Invalid value: 0: must be greater than or equal to 1"),
        "{}",
        status.message
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scales_a_custom_resource_through_its_scale_subresource() {
    let h = Harness::start().await;
    let client = h.admin();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    create_object(
        &crds,
        json!({"metadata": {"name": "workers.example.com"}, "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "workers", "singular": "worker", "kind": "Worker"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas",
                    "labelSelectorPath": ".status.selector"}}}]}}),
    )
    .await;
    let resource = ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Worker".into(),
        plural: "workers".into(),
    };
    let workers: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &resource);
    let worker: DynamicObject = object(json!({"apiVersion": "example.com/v1", "kind": "Worker",
        "metadata": {"name": "crunch"}, "spec": {"replicas": 1}}));
    eventually(WAIT, "the CRD served", || async {
        workers.create(&PostParams::default(), &worker).await.ok()
    })
    .await;
    merge_patch_status(
        &workers,
        "crunch",
        json!({"status": {"replicas": 1, "selector": "app=crunch"}}),
    )
    .await;
    settled_pod(&client, "crunch", "crunch-a").await;
    h.figures.set(&[("crunch-a", 150)]);
    autoscaler(
        &client,
        json!({"scaleTargetRef": {"apiVersion": "example.com/v1", "kind": "Worker", "name": "crunch"},
            "maxReplicas": 10, "metrics": cpu_target(50)}),
    )
    .await;
    // 150 % of 50 %: three.
    eventually(WAIT, "the custom resource scaled", || async {
        let worker = workers.get("crunch").await.ok()?;
        (worker.data["spec"]["replicas"] == 3).then_some(())
    })
    .await;
    assert!(h.figures.asked_for("app=crunch"));
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_autoscaler_account_writes_scale_and_status_only() {
    let (h, _) = Harness::with_web(1, &["web-a"]).await;
    let account = h.cluster.client_as(autoscaler_account());
    let deployments: Api<Deployment> = Api::namespaced(account.clone(), NS);
    // What it needs: the Scale, pods by selector, and PodMetrics.
    let scale = deployments.get_scale("web").await.unwrap();
    assert_eq!(
        scale.status.and_then(|s| s.selector).as_deref(),
        Some("app=web")
    );
    Api::<Pod>::namespaced(account.clone(), NS)
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    // What it must not do.
    let forbidden = |result: Result<(), kube::Error>| match result {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{}", status.message),
        other => panic!("expected 403, got {other:?}"),
    };
    forbidden(
        deployments
            .patch(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [
                    {"name": "app", "image": "evil"}]}}}})),
            )
            .await
            .map(|_| ()),
    );
    forbidden(
        Api::<Secret>::namespaced(account.clone(), NS)
            .list(&ListParams::default())
            .await
            .map(|_| ()),
    );
    forbidden(
        Api::<Pod>::namespaced(account.clone(), NS)
            .delete("web-a", &Default::default())
            .await
            .map(|_| ()),
    );
    forbidden(
        Api::<HorizontalPodAutoscaler>::namespaced(account.clone(), NS)
            .create(
                &PostParams::default(),
                &object(json!({"metadata": {"name": "sneaky"}, "spec": {
                    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                    "maxReplicas": 100}})),
            )
            .await
            .map(|_| ()),
    );
    h.shutdown().await;
}
