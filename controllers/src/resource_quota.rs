//! The resource quota controller (upstream's `resourcequota-controller`):
//! keeps each ResourceQuota's `status.hard` equal to its `spec.hard` and
//! `status.used` equal to what its namespace's objects use, by the rules of
//! `skiff_common::quota` that admission enforces, so `kubectl describe
//! quota` shows the figures. A quota is recounted when it changes, when an
//! object it counts is added, deleted or changes what it uses (one watch per
//! counted resource, started when a quota first names it), and every five
//! minutes (a deleted pod's grace period running out changes nothing
//! observable).
//!
//! The status is a report: admission counts live and never reads it. This
//! controller writes nothing but `resourcequotas/status`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ResourceQuota;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DynamicObject, ListParams, PostParams};
use kube::discovery::ApiResource;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde_json::Value;
use skiff_common::amount::Amount;
use skiff_common::quota::{
    Evaluator, QuotaSpec, ResourceList, add, list_to_json, mask, read_list, resource_of,
};
use skiff_informer::{Action, Controller, HandlerFns, WorkQueue};

use crate::garbage_collector::discovery::ApiResources;
use crate::manager::{Context, Stop, stopped};

/// How often every quota is recounted regardless of events (upstream's
/// `--resource-quota-sync-period`).
const RESYNC: Duration = Duration::from_secs(300);
/// How long after a discovery a resource it lacked is looked up again.
const REDISCOVERY: Duration = Duration::from_secs(30);
/// Retry delay after a lost status write.
const CONFLICT_RETRY: Duration = Duration::from_millis(100);

/// Errors of one quota sync.
#[derive(Debug, thiserror::Error)]
pub enum QuotaError {
    /// Listing what a quota counts, or writing its status, failed.
    #[error("{action} for quota {quota}: {source}")]
    Api {
        /// The request that failed, e.g. "writing status".
        action: String,
        /// The quota's namespace/name.
        quota: String,
        #[source]
        /// The API's error.
        source: kube::Error,
    },
    /// A quota or a counted object did not convert to its JSON form.
    #[error("reading {what}: {source}")]
    Json {
        /// What was being converted.
        what: String,
        #[source]
        /// The conversion's error.
        source: serde_json::Error,
    },
}

/// The resource a quota counts, as `(group, plural)`.
type Counted = (String, String);

struct Shared {
    client: kube::Client,
    quotas: Arc<skiff_informer::Cache<ResourceQuota>>,
    queue: WorkQueue<String>,
    /// Resources with a change watch running.
    watched: Mutex<HashSet<Counted>>,
    /// The last discovery and when it ran.
    discovery: tokio::sync::Mutex<Option<(ApiResources, Instant)>>,
    stop: Stop,
}

impl Shared {
    /// Queues every quota of `namespace`.
    fn recount_namespace(&self, namespace: &str) {
        for quota in self.quotas.list_namespace(namespace) {
            self.queue.add(key_of(&quota));
        }
    }

    fn recount_all(&self) {
        for quota in self.quotas.list() {
            self.queue.add(key_of(&quota));
        }
    }

    /// The served resource `counted`, discovering again when the last
    /// discovery lacks it and is older than [`REDISCOVERY`].
    async fn resolve(&self, counted: &Counted) -> Option<ApiResource> {
        let mut discovery = self.discovery.lock().await;
        let find = |resources: &ApiResources| {
            resources
                .all()
                .find(|(ar, _)| ar.group == counted.0 && ar.plural == counted.1)
                .map(|(ar, _)| ar.clone())
        };
        if let Some((resources, _)) = discovery.as_ref()
            && let Some(found) = find(resources)
        {
            return Some(found);
        }
        if discovery
            .as_ref()
            .is_some_and(|(_, at)| at.elapsed() < REDISCOVERY)
        {
            return None;
        }
        match ApiResources::discover(&self.client).await {
            Ok(resources) => {
                let found = find(&resources);
                *discovery = Some((resources, Instant::now()));
                found
            }
            Err(error) => {
                tracing::warn!(%error, "resourcequota controller: discovery failed");
                None
            }
        }
    }
}

fn key_of(quota: &ResourceQuota) -> String {
    format!(
        "{}/{}",
        quota.namespace().unwrap_or_default(),
        quota.name_any()
    )
}

/// Runs the resource quota controller until `stop`.
pub async fn run(ctx: Context, stop: Stop) {
    let quotas = ctx.factory.informer::<ResourceQuota>();
    let queue = WorkQueue::<String>::new();
    let (q1, q2, q3) = (queue.clone(), queue.clone(), queue.clone());
    let handlers = HandlerFns::new()
        .on_add(move |q: &Arc<ResourceQuota>| q1.add(key_of(q)))
        .on_update(move |_, q: &Arc<ResourceQuota>| q2.add(key_of(q)))
        .on_delete(move |q: &Arc<ResourceQuota>| q3.add(key_of(q)));
    if let Err(error) = quotas.add_event_handler(handlers) {
        tracing::error!(%error, "resourcequota controller: cannot watch");
        return;
    }
    quotas.wait_for_sync().await;
    let shared = Arc::new(Shared {
        client: ctx.client.clone(),
        quotas: quotas.cache().clone(),
        queue: queue.clone(),
        watched: Mutex::new(HashSet::new()),
        discovery: tokio::sync::Mutex::new(None),
        stop: stop.clone(),
    });
    let periodic = tokio::spawn(resync(Arc::clone(&shared), stop.clone()));
    let workers = Arc::clone(&shared);
    Controller::new("resourcequota", queue)
        .workers(2)
        .run_until(
            move |key: String| {
                let shared = Arc::clone(&workers);
                async move { sync(&shared, &key).await }
            },
            stopped(stop),
        )
        .await;
    let _ = periodic.await;
}

async fn resync(shared: Arc<Shared>, stop: Stop) {
    loop {
        tokio::select! {
            _ = stopped(stop.clone()) => return,
            _ = tokio::time::sleep(RESYNC) => shared.recount_all(),
        }
    }
}

/// Recounts one quota and writes its status when the figures changed.
async fn sync(shared: &Arc<Shared>, key: &str) -> Result<Action, QuotaError> {
    let (namespace, name) = key.split_once('/').unwrap_or(("", key));
    let Some(quota) = shared.quotas.get(namespace, name) else {
        return Ok(Action::Done);
    };
    let json = serde_json::to_value(&*quota).map_err(|source| QuotaError::Json {
        what: format!("quota {key}"),
        source,
    })?;
    let spec = QuotaSpec::of(&json);
    let counted: BTreeSet<Counted> = spec.hard.keys().filter_map(|n| resource_of(n)).collect();
    let now = Timestamp::now();
    let mut used = ResourceList::new();
    for resource in &counted {
        let evaluator = Evaluator::for_resource(&resource.0, &resource.1);
        let names = evaluator.matching(spec.hard.keys());
        for name in &names {
            used.entry(name.clone()).or_insert(Amount::ZERO);
        }
        let Some(ar) = shared.resolve(resource).await else {
            tracing::debug!(quota = key, resource = ?resource, "resourcequota: resource not served");
            continue;
        };
        watch_once(shared, resource, &ar);
        for object in list(shared, &ar, namespace, key).await? {
            if spec.in_scope(&evaluator, &object) {
                let usage = mask(
                    &evaluator.usage(&object, now),
                    names.iter().map(String::as_str),
                );
                used = add(&used, &usage);
            }
        }
    }
    let status = &json["status"];
    let current = (read_list(&status["hard"]), read_list(&status["used"]));
    // Compared by value: `1000m` in the status is the `1` counted.
    if current.0 == spec.hard && current.1 == used {
        return Ok(Action::Done);
    }
    let mut updated = (*quota).clone();
    let hard = json["spec"]["hard"].clone();
    let status_json = serde_json::json!({"hard": hard, "used": list_to_json(&used)});
    updated.status =
        Some(
            serde_json::from_value(status_json).map_err(|source| QuotaError::Json {
                what: format!("status of quota {key}"),
                source,
            })?,
        );
    let api: Api<ResourceQuota> = Api::namespaced(shared.client.clone(), namespace);
    match api
        .replace_status(name, &PostParams::default(), &updated)
        .await
    {
        Ok(_) => Ok(Action::Done),
        // Changed meanwhile (or gone): the informer brings the new one.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(Action::RequeueAfter(CONFLICT_RETRY)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Action::Done),
        Err(source) => Err(QuotaError::Api {
            action: "writing status".into(),
            quota: key.to_string(),
            source,
        }),
    }
}

/// The objects of `ar` in `namespace`, in their JSON form.
async fn list(
    shared: &Shared,
    ar: &ApiResource,
    namespace: &str,
    quota: &str,
) -> Result<Vec<Value>, QuotaError> {
    let api: Api<DynamicObject> = Api::namespaced_with(shared.client.clone(), namespace, ar);
    let listed = api
        .list(&ListParams::default())
        .await
        .map_err(|source| QuotaError::Api {
            action: format!("listing {}", ar.plural),
            quota: quota.to_string(),
            source,
        })?;
    listed
        .items
        .iter()
        .map(|item| {
            serde_json::to_value(item).map_err(|source| QuotaError::Json {
                what: format!("{} {}", ar.plural, item.name_any()),
                source,
            })
        })
        .collect()
}

/// Starts the change watch of `resource` unless one runs.
fn watch_once(shared: &Arc<Shared>, resource: &Counted, ar: &ApiResource) {
    let mut watched = shared.watched.lock().unwrap_or_else(|e| e.into_inner());
    if watched.insert(resource.clone()) {
        let evaluator = Evaluator::for_resource(&resource.0, &resource.1);
        tokio::spawn(watch_changes(Arc::clone(shared), ar.clone(), evaluator));
    }
}

/// Queues the quotas of a namespace whenever one of its objects of `ar` is
/// added or deleted or changes what it is charged, and every quota after
/// each (re)list.
async fn watch_changes(shared: Arc<Shared>, ar: ApiResource, evaluator: Evaluator) {
    let api: Api<DynamicObject> = Api::all_with(shared.client.clone(), &ar);
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut charged: HashMap<String, ResourceList> = HashMap::new();
    loop {
        let event = tokio::select! {
            _ = stopped(shared.stop.clone()) => return,
            event = stream.next() => event,
        };
        let Some(event) = event else { return };
        match event {
            Ok(watcher::Event::InitApply(obj)) => {
                if let Some((key, usage)) = usage_of(&evaluator, &obj) {
                    charged.insert(key, usage);
                }
            }
            Ok(watcher::Event::InitDone) => shared.recount_all(),
            Ok(watcher::Event::Apply(obj)) => {
                if let Some((key, usage)) = usage_of(&evaluator, &obj)
                    && charged.get(&key) != Some(&usage)
                {
                    charged.insert(key, usage);
                    shared.recount_namespace(&obj.namespace().unwrap_or_default());
                }
            }
            Ok(watcher::Event::Delete(obj)) => {
                let namespace = obj.namespace().unwrap_or_default();
                charged.remove(&format!("{namespace}/{}", obj.name_any()));
                shared.recount_namespace(&namespace);
            }
            Ok(watcher::Event::Init) => charged.clear(),
            Err(error) => {
                tracing::debug!(resource = %ar.plural, %error, "resourcequota watch error");
            }
        }
    }
}

/// An object's key and what it is charged now.
fn usage_of(evaluator: &Evaluator, obj: &DynamicObject) -> Option<(String, ResourceList)> {
    let json = serde_json::to_value(obj).ok()?;
    let key = format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any());
    Some((key, evaluator.usage(&json, Timestamp::now())))
}
