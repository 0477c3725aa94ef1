//! The CRD controller inside the API server. It follows the CRD watch
//! cache and, on every change: rebuilds the custom part of the live
//! registry (creating a watch cache for each new storage prefix), writes
//! each CRD's status (`acceptedNames`, `NamesAccepted`, `Established`,
//! `Terminating`, `storedVersions`) and finishes deletions: a CRD marked for
//! deletion has all its objects deleted, then loses its cleanup finalizer.
//! Status and deletions go through the in-process API client like any
//! other controller's writes.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use skiff_common::conditions::without_transition_times;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use super::definition::{CLEANUP_FINALIZER, Definition};
use super::{Acceptance, Served, served_resources};
use crate::object::{finalizers, now_rfc3339};
use crate::registry::{Registry, ResourceInfo};
use crate::server::Inner;
use crate::watch_cache::{FeedError, WatchCache};

/// How often pending deletions are looked at again when nothing changes.
const RETRY: Duration = Duration::from_millis(300);
/// How often everything is re-checked without any change.
const RESYNC: Duration = Duration::from_secs(30);

/// Resource names of the built-in groups, which CRDs may not take.
static RESERVED: LazyLock<HashMap<String, Vec<String>>> = LazyLock::new(|| {
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    for r in Registry::builtin().resources() {
        out.entry(r.group.to_string())
            .or_default()
            .push(r.resource.to_string());
    }
    out
});

fn crd_info(inner: &Inner) -> Option<Arc<ResourceInfo>> {
    inner
        .registry
        .get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
}

/// The CRDs as the watch cache has them now.
fn stored_crds(inner: &Inner) -> Vec<Value> {
    inner.cached_objects("apiextensions.k8s.io", "v1", "customresourcedefinitions")
}

/// Makes the registry serve exactly the accepted CRDs' versions, each
/// backed by a filled watch cache. Used at start-up and on every change.
pub(crate) async fn sync(inner: &Arc<Inner>) -> Result<Served, FeedError> {
    let mut served = served_resources(&stored_crds(inner), &RESERVED);
    for info in &served.resources {
        ensure_cache(inner, &info.storage_prefix).await?;
    }
    if inner
        .registry
        .set_custom(std::mem::take(&mut served.resources))
    {
        inner.openapi.invalidate();
    }
    Ok(served)
}

async fn ensure_cache(inner: &Arc<Inner>, prefix: &str) -> Result<(), FeedError> {
    if inner.caches.contains_key(prefix) || inner.custom_caches.read().contains_key(prefix) {
        return Ok(());
    }
    let limits = inner.config.cache_limits();
    let cache = WatchCache::new(prefix.to_string(), &limits);
    cache.load(inner.store.as_ref()).await?;
    let mut caches = inner.custom_caches.write();
    if caches.contains_key(prefix) {
        return Ok(());
    }
    tokio::spawn(
        cache
            .clone()
            .follow(inner.store.clone(), inner.shutdown.subscribe()),
    );
    caches.insert(prefix.to_string(), cache);
    Ok(())
}

/// Runs until the server shuts down.
pub(crate) async fn run(inner: Arc<Inner>, client: kube::Client) {
    let Some(info) = crd_info(&inner) else {
        return;
    };
    let Ok(cache) = inner.cache(&info) else {
        return;
    };
    let Ok(subscription) = cache.subscribe(None) else {
        return;
    };
    let mut live = subscription.live;
    let mut shutdown = inner.shutdown.subscribe();
    loop {
        if *shutdown.borrow() {
            return;
        }
        let pending = match sync(&inner).await {
            Ok(served) => reconcile(&inner, &client, &served).await,
            Err(e) => {
                tracing::warn!(error = %e, "serving custom resources failed; retrying");
                true
            }
        };
        let wait = if pending { RETRY } else { RESYNC };
        tokio::select! {
            received = live.recv() => {
                if matches!(received, Err(RecvError::Closed)) {
                    return;
                }
            }
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep(wait) => {}
        }
        // One pass covers every change queued meanwhile.
        while let Ok(_) | Err(TryRecvError::Lagged(_)) = live.try_recv() {}
    }
}

/// Writes statuses and advances deletions; true while a deletion waits.
async fn reconcile(inner: &Arc<Inner>, client: &kube::Client, served: &Served) -> bool {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut pending = false;
    for crd in stored_crds(inner) {
        let def = Definition::parse(&crd);
        let status = desired_status(&crd, &def, served.acceptance.get(&def.name));
        if without_transition_times(&status) != without_transition_times(&crd["status"]) {
            let patch = json!({ "status": status });
            if let Err(e) = api
                .patch_status(&def.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                tracing::debug!(crd = %def.name, error = %e, "CRD status write failed; retrying");
                pending = true;
            }
        }
        if def.terminating && finalizers(&crd).iter().any(|f| f == CLEANUP_FINALIZER) {
            pending |= !clean_up(inner, client, &api, &crd, &def).await;
        }
    }
    pending
}

/// Deletes the CRD's objects; once none is left, removes the finalizer.
/// True when the CRD was released.
async fn clean_up(
    inner: &Arc<Inner>,
    client: &kube::Client,
    api: &Api<CustomResourceDefinition>,
    crd: &Value,
    def: &Definition,
) -> bool {
    let storage = def.storage_version().unwrap_or("");
    let info = inner.registry.get(&def.group, storage, &def.names.plural);
    let remaining = inner.cached_objects(&def.group, storage, &def.names.plural);
    if let (Some(info), false) = (info, remaining.is_empty()) {
        let resource = ApiResource {
            group: def.group.clone(),
            version: storage.to_string(),
            api_version: info.api_version(),
            kind: def.names.kind.clone(),
            plural: def.names.plural.clone(),
        };
        for object in remaining {
            let name = object["metadata"]["name"].as_str().unwrap_or("");
            if object["metadata"]["deletionTimestamp"].is_string() {
                continue;
            }
            let objects: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
                Some(ns) if def.namespaced => Api::namespaced_with(client.clone(), ns, &resource),
                _ => Api::all_with(client.clone(), &resource),
            };
            if let Err(e) = objects.delete(name, &DeleteParams::default()).await {
                tracing::debug!(crd = %def.name, object = name, error = %e, "deleting a custom object failed");
            }
        }
        return false;
    }
    let rest: Vec<String> = finalizers(crd)
        .into_iter()
        .filter(|f| f != CLEANUP_FINALIZER)
        .collect();
    let patch = json!({"metadata": {"finalizers": rest,
        "resourceVersion": crd["metadata"]["resourceVersion"]}});
    api.patch(&def.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .is_ok()
}

fn condition(ty: &str, ok: bool, reason: &str, message: &str) -> Value {
    json!({"type": ty, "status": if ok { "True" } else { "False" },
        "reason": reason, "message": message, "lastTransitionTime": now_rfc3339()})
}

/// The status a CRD should have, keeping transition times of conditions
/// whose status did not change.
fn desired_status(crd: &Value, def: &Definition, acceptance: Option<&Acceptance>) -> Value {
    let old = &crd["status"];
    let accepted_names = match acceptance {
        Some(Acceptance::Accepted(names)) => names.to_json(),
        _ => old
            .get("acceptedNames")
            .cloned()
            .unwrap_or_else(|| json!({"plural": "", "kind": ""})),
    };
    let mut conditions = match acceptance {
        Some(Acceptance::Accepted(_)) => vec![
            condition("NamesAccepted", true, "NoConflicts", "no conflicts found"),
            condition(
                "Established",
                true,
                "InitialNamesAccepted",
                "the initial names have been accepted",
            ),
        ],
        Some(Acceptance::Conflict(reason, message)) => vec![
            condition("NamesAccepted", false, reason, message),
            condition(
                "Established",
                false,
                "NotAccepted",
                "not all names are accepted",
            ),
        ],
        None => Vec::new(),
    };
    if def.terminating {
        conditions.push(condition(
            "Terminating",
            true,
            "InstanceDeletionInProgress",
            "CustomResource deletion is in progress",
        ));
    }
    let old_conditions = old["conditions"].as_array().cloned().unwrap_or_default();
    for c in &mut conditions {
        if let Some(prev) = old_conditions
            .iter()
            .find(|p| p["type"] == c["type"] && p["status"] == c["status"])
        {
            c["lastTransitionTime"] = prev["lastTransitionTime"].clone();
        }
    }
    let mut stored = crate::object::strings(&old["storedVersions"]);
    if let (Some(Acceptance::Accepted(_)), Some(v)) = (acceptance, def.storage_version())
        && !stored.iter().any(|s| s == v)
    {
        stored.push(v.to_string());
    }
    json!({"acceptedNames": accepted_names, "conditions": conditions, "storedVersions": stored})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_reports_names_and_keeps_transition_times() {
        let crd = json!({"metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true}]},
            "status": {"conditions": [{"type": "Established", "status": "True",
                "lastTransitionTime": "2020-01-01T00:00:00Z"}], "storedVersions": ["v0"]}});
        let def = Definition::parse(&crd);
        let names = def.names.clone();
        let status = desired_status(&crd, &def, Some(&Acceptance::Accepted(names)));
        assert_eq!(status["acceptedNames"]["kind"], "Widget");
        assert_eq!(status["acceptedNames"]["listKind"], "WidgetList");
        assert_eq!(status["conditions"][0]["type"], "NamesAccepted");
        assert_eq!(
            status["conditions"][1]["lastTransitionTime"],
            "2020-01-01T00:00:00Z"
        );
        assert_eq!(status["storedVersions"], json!(["v0", "v1"]));
        let conflict =
            Acceptance::Conflict("KindConflict".into(), "\"Widget\" is already in use".into());
        let status = desired_status(&crd, &def, Some(&conflict));
        assert_eq!(status["conditions"][0]["status"], "False");
        assert_eq!(status["conditions"][0]["reason"], "KindConflict");
        assert_eq!(status["conditions"][1]["status"], "False");
    }
}
