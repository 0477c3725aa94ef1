//! The aggregation layer (upstream's kube-aggregator inside
//! kube-apiserver). Every group/version this server serves has a local
//! APIService (`<version>.<group>`, no Service, labelled
//! `kube-aggregator.kubernetes.io/automanaged: onstart`), created at start
//! and put back whenever it is deleted or its spec is changed. An
//! APIService naming a Service gets requests under `/apis/<group>/<version>`
//! ([`proxy`]) — never for a group/version served here, so no APIService
//! can take over a built-in or custom group — and its group in discovery
//! once available ([`discovery`]). Each APIService's `Available` condition
//! says why: `Local`; `ServiceNotFound`, `ServicePortError`,
//! `MissingEndpoints`, `FailedDiscoveryCheck`; or `Passed` once its server
//! answered `/apis/<group>/<version>`.
//!
//! The bookkeeping reads the API server's own watch caches and writes
//! through the server's in-process client (`system:apiserver`), like the
//! CRD controller.

pub(crate) mod discovery;
pub(crate) mod proxy;

pub(crate) use proxy::{FrontProxyError, FrontProxyTls};

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::admission_plugins::webhook::target::{TargetError, service_address};
use crate::kinds::GroupResource;
use crate::registry::Registry;
use crate::server::Inner;

/// The label upstream puts on the APIServices it manages.
pub(crate) const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

/// How often everything is looked at without any change.
const RESYNC: Duration = Duration::from_secs(30);

/// The local APIServices for the served group/versions: name, group,
/// version, group priority, version priority (earlier groups and the
/// preferred version first, as upstream orders its built-ins).
pub(crate) fn local_services(registry: &Registry) -> Vec<Value> {
    let mut out = Vec::new();
    for (g, group) in registry.groups().iter().enumerate() {
        let group_priority = (18000 - 100 * g as i64).max(100);
        for (v, version) in group.versions.iter().enumerate() {
            let version_priority = (15 - 3 * v as i64).max(1);
            out.push(json!({
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {
                    "name": format!("{version}.{}", group.name),
                    "labels": {AUTOMANAGED: "onstart"},
                },
                "spec": {
                    "group": group.name,
                    "version": version,
                    "groupPriorityMinimum": group_priority,
                    "versionPriority": version_priority,
                },
            }));
        }
    }
    out
}

/// The APIServices in the watch cache.
fn stored(inner: &Inner) -> Vec<Value> {
    inner.cached_objects("apiregistration.k8s.io", "v1", "apiservices")
}

/// Creates the missing local APIServices and restores the spec of those
/// changed since; returns whether all writes went through. The writes go
/// out together, so a first start commits them in a few store groups.
pub(crate) async fn autoregister(inner: &Inner, client: &kube::Client) -> bool {
    let api: Api<APIService> = Api::all(client.clone());
    let existing = stored(inner);
    let writes = local_services(&inner.registry.current())
        .into_iter()
        .filter_map(|wanted| {
            let name = wanted["metadata"]["name"].as_str()?.to_string();
            let current = existing
                .iter()
                .find(|s| s["metadata"]["name"].as_str() == Some(name.as_str()));
            match current {
                Some(c)
                    if c["spec"] == wanted["spec"]
                        && c["metadata"]["labels"][AUTOMANAGED] == "onstart" =>
                {
                    None
                }
                Some(c) => {
                    tracing::warn!(apiservice = %name, "restoring a local APIService that was changed");
                    let mut restored = c.clone();
                    restored["spec"] = wanted["spec"].clone();
                    restored["metadata"]["labels"][AUTOMANAGED] = json!("onstart");
                    Some((name, restored, true))
                }
                None => Some((name, wanted, false)),
            }
        })
        .map(|(name, object, exists)| {
            let api = api.clone();
            async move {
                let result = match typed(&object) {
                    Ok(service) if exists => api
                        .replace(&name, &PostParams::default(), &service)
                        .await
                        .map(|_| ()),
                    Ok(service) => match api.create(&PostParams::default(), &service).await {
                        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                        other => other.map(|_| ()),
                    },
                    Err(e) => Err(e),
                };
                if let Err(error) = &result {
                    tracing::warn!(apiservice = %name, %error, "registering a local APIService");
                }
                result.is_ok()
            }
        });
    futures::future::join_all(writes)
        .await
        .into_iter()
        .all(|ok| ok)
}

/// The typed form of an APIService built here or read from the cache.
fn typed(object: &Value) -> Result<APIService, kube::Error> {
    serde_json::from_value(object.clone()).map_err(kube::Error::SerdeError)
}

/// The identity of the discovery check (upstream's aggregator name).
const CHECKER: &str = "system:kube-aggregator";

/// The `Available` condition an APIService should have now:
/// `(status, reason, message)`; for a Service that answered, also its
/// `APIResourceList`.
async fn availability(
    inner: &Inner,
    service: &Value,
) -> ((&'static str, &'static str, String), Option<Value>) {
    let Some(target) = service["spec"]["service"].as_object() else {
        let local = (
            "True",
            "Local",
            "Local APIServices are always available".to_string(),
        );
        return (local, None);
    };
    let namespace = target
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let name = target.get("name").and_then(Value::as_str).unwrap_or("");
    let port = target
        .get("port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(443);
    let refused = match service_address(inner, namespace, name, port) {
        Err(TargetError::NoService(_)) => (
            "ServiceNotFound",
            format!("service/{name} in \"{namespace}\" is not present"),
        ),
        Err(TargetError::NoPort { .. }) => (
            "ServicePortError",
            format!("service/{name} in \"{namespace}\" is not listening on port {port}"),
        ),
        Err(_) => (
            "MissingEndpoints",
            format!(
                "endpoints for service/{name} in \"{namespace}\" have no addresses with port {port}"
            ),
        ),
        Ok(_) => match discovery_check(inner, service).await {
            Ok(resources) => {
                let passed = ("True", "Passed", "all checks passed".to_string());
                return (passed, Some(resources));
            }
            Err(detail) => ("FailedDiscoveryCheck", detail),
        },
    };
    (("False", refused.0, refused.1), None)
}

/// GETs `/apis/<group>/<version>` from the APIService's server; its
/// `APIResourceList`, or why it failed in upstream's words.
async fn discovery_check(inner: &Inner, service: &Value) -> Result<Value, String> {
    let group = service["spec"]["group"].as_str().unwrap_or("");
    let version = service["spec"]["version"].as_str().unwrap_or("");
    let path = format!("/apis/{group}/{version}");
    let failing = |detail: String| format!("failing or missing response from {path}: {detail}");
    let request = http::Request::builder()
        .method(http::Method::GET)
        .uri(&path)
        .header(http::header::ACCEPT, "application/json")
        .body(axum::body::Body::empty())
        .map_err(|e| failing(e.to_string()))?;
    let checker = crate::authn::UserInfo::new(CHECKER, Vec::<String>::new());
    let answer = tokio::time::timeout(
        CHECK_TIMEOUT,
        proxy::forward(inner, service, &checker, request),
    )
    .await
    .map_err(|_| failing("timed out".into()))?
    .map_err(|e| failing(e.to_string()))?;
    let status = answer.status();
    let body = tokio::time::timeout(
        CHECK_TIMEOUT,
        axum::body::to_bytes(answer.into_body(), 4 << 20),
    )
    .await
    .map_err(|_| failing("timed out".into()))?
    .map_err(|e| failing(e.to_string()))?;
    if !status.is_success() {
        return Err(failing(format!(
            "bad status from {path}: {}",
            status.as_u16()
        )));
    }
    serde_json::from_slice(&body).map_err(|e| failing(e.to_string()))
}

/// How long the discovery check may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// Writes each APIService's `Available` condition where it changed (all
/// at once, as above) and keeps what the available remote ones serve for
/// discovery.
async fn update_conditions(inner: &Inner, client: &kube::Client) -> bool {
    let api: Api<APIService> = Api::all(client.clone());
    let checks = stored(inner).into_iter().map(|service| async move {
        let verdict = availability(inner, &service).await;
        (service, verdict)
    });
    let verdicts = futures::future::join_all(checks).await;
    let mut remote = std::collections::BTreeMap::new();
    let writes = verdicts
        .into_iter()
        .filter_map(|(service, ((status, reason, message), resources))| {
            let name = service["metadata"]["name"].as_str()?.to_string();
            if let Some(resources) = resources {
                remote.insert(name.clone(), discovery::Remote::new(&service, resources));
            }
            let condition = crate::object::condition_update(
                &service["status"]["conditions"],
                "Available",
                (status, reason, message.as_str()),
            )?;
            let patch = json!({"status": {"conditions": [condition]}});
            let api = api.clone();
            Some(async move {
                let result = api
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
                if let Err(error) = &result {
                    tracing::warn!(apiservice = %name, %error, "updating APIService availability");
                }
                result.is_ok()
            })
        })
        .collect::<Vec<_>>();
    *inner.aggregated.write() = remote;
    futures::future::join_all(writes)
        .await
        .into_iter()
        .all(|ok| ok)
}

/// One round: registration, then availability.
pub(crate) async fn sync(inner: &Inner, client: &kube::Client) -> bool {
    let registered = autoregister(inner, client).await;
    let updated = update_conditions(inner, client).await;
    registered && updated
}

/// Keeps the local APIServices registered and every APIService's
/// availability current until the server shuts down: on any change of
/// APIServices, Services or EndpointSlices, and every 30 s.
pub(crate) async fn run(inner: Arc<Inner>, client: kube::Client) {
    let followed = [
        GroupResource::of::<APIService>(),
        GroupResource::of::<Service>(),
        GroupResource::of::<EndpointSlice>(),
    ];
    // The server ran the first round before serving.
    crate::server::follow_caches(&inner, true, Some(RESYNC), &followed, || {
        sync(&inner, &client)
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_group_version_has_a_local_service() {
        let services = local_services(&Registry::builtin());
        let names: Vec<&str> = services
            .iter()
            .filter_map(|s| s["metadata"]["name"].as_str())
            .collect();
        for want in [
            "v1.",
            "v1.apps",
            "v2.autoscaling",
            "v1.autoscaling",
            "v1beta1.metrics.k8s.io",
        ] {
            assert!(names.contains(&want), "{want} in {names:?}");
        }
        let core = &services[0];
        assert_eq!(core["spec"]["group"], "");
        assert_eq!(core["spec"]["groupPriorityMinimum"], 18000);
        let v1 = services
            .iter()
            .find(|s| s["metadata"]["name"] == "v1.autoscaling")
            .unwrap();
        let v2 = services
            .iter()
            .find(|s| s["metadata"]["name"] == "v2.autoscaling")
            .unwrap();
        assert!(v2["spec"]["versionPriority"].as_i64() > v1["spec"]["versionPriority"].as_i64());
    }
}
