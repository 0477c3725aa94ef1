//! The garbage collector: watches every deletable resource, keeps the
//! ownerReferences graph, and
//! - deletes dependents whose owners are all gone (background deletion, and
//!   dangling references left over from before a restart), after confirming
//!   each absent owner with a live GET by name and uid;
//! - for an owner deleted in the foreground (`foregroundDeletion`
//!   finalizer) deletes its dependents, then removes the finalizer once no
//!   dependent with `blockOwnerDeletion` is left;
//! - for an owner deleted with the `orphan` finalizer removes the owner's
//!   reference from its dependents, then the finalizer.

pub mod discovery;
pub mod graph;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::discovery::{ApiResource, Scope};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use skiff_informer::{Action, Controller, WorkQueue};

use crate::controller_utils::RequestFailed;
use crate::manager::{Context, Stop, stopped};
use discovery::ApiResources;
use graph::{FOREGROUND, Graph, Node, ORPHAN};

/// How often discovery is re-run to pick up new resources (CRDs).
const REDISCOVERY: Duration = Duration::from_secs(30);
/// Safety net while an owner waits for dependents deleted elsewhere.
const FOREGROUND_RECHECK: Duration = Duration::from_secs(5);

/// Errors of one garbage collection step.
#[derive(Debug, thiserror::Error)]
pub enum GcError {
    /// A request about an object failed.
    #[error(transparent)]
    Api(#[from] RequestFailed),
    /// An owner reference names a kind the API does not serve (yet).
    #[error("owner kind {api_version}/{kind} of {object} is not served")]
    UnknownKind {
        /// The owner reference's apiVersion.
        api_version: String,
        /// The owner reference's kind.
        kind: String,
        /// The dependent holding the reference.
        object: String,
    },
}

/// State shared by the watch tasks and the workers.
struct Shared {
    client: kube::Client,
    graph: Mutex<Graph>,
    resources: Mutex<ApiResources>,
    queue: WorkQueue<String>,
    /// Resource watches that have not finished their first list yet.
    unsynced: std::sync::atomic::AtomicUsize,
    /// Whether the first discovery has started every watch.
    discovered: std::sync::atomic::AtomicBool,
}

impl Shared {
    fn graph(&self) -> MutexGuard<'_, Graph> {
        self.graph.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn resources(&self) -> ApiResources {
        self.resources
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn enqueue(&self, uids: Vec<String>) {
        for uid in uids {
            self.queue.add(uid);
        }
    }
}

/// Runs the garbage collector until `stop`.
pub async fn run(ctx: Context, stop: Stop) {
    let shared = Arc::new(Shared {
        client: ctx.client.clone(),
        graph: Mutex::new(Graph::default()),
        resources: Mutex::new(ApiResources::default()),
        queue: WorkQueue::new(),
        unsynced: std::sync::atomic::AtomicUsize::new(0),
        discovered: std::sync::atomic::AtomicBool::new(false),
    });
    let watches = tokio::spawn(keep_watching(Arc::clone(&shared), stop.clone()));
    Controller::new("garbage-collector", shared.queue.clone())
        .workers(4)
        .run_shared(
            Arc::clone(&shared),
            |shared, uid| async move { process(&shared, &uid).await },
            stopped(stop),
        )
        .await;
    let _ = watches.await;
}

/// Discovers resources now and every [`REDISCOVERY`], starting one watch per
/// new collectable resource.
async fn keep_watching(shared: Arc<Shared>, stop: Stop) {
    let mut watched: HashSet<(String, String)> = HashSet::new();
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        match ApiResources::discover(&shared.client).await {
            Ok(resources) => {
                for (ar, _) in resources.collectable() {
                    if watched.insert((ar.group.clone(), ar.plural.clone())) {
                        shared
                            .unsynced
                            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        tasks.spawn(watch_resource(Arc::clone(&shared), ar, stop.clone()));
                    }
                }
                *shared.resources.lock().unwrap_or_else(|e| e.into_inner()) = resources;
                shared
                    .discovered
                    .store(true, std::sync::atomic::Ordering::SeqCst);
            }
            Err(error) => tracing::warn!(%error, "garbage collector: discovery failed"),
        }
        tokio::select! {
            _ = stopped(stop.clone()) => break,
            _ = tokio::time::sleep(REDISCOVERY) => {}
        }
    }
    while tasks.join_next().await.is_some() {}
}

/// Keeps the graph current with every object of one resource.
async fn watch_resource(shared: Arc<Shared>, ar: ApiResource, stop: Stop) {
    let resource = Arc::new(ar);
    let api: Api<DynamicObject> = Api::all_with(shared.client.clone(), &*resource);
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut listing: HashSet<String> = HashSet::new();
    let mut first_list_done = false;
    loop {
        let event = tokio::select! {
            _ = stopped(stop.clone()) => return,
            event = stream.next() => event,
        };
        let Some(event) = event else { return };
        let attention = match event {
            Ok(watcher::Event::Init) => {
                listing.clear();
                Vec::new()
            }
            Ok(watcher::Event::InitApply(obj)) => match Node::of(&obj, &resource) {
                Some(node) => {
                    listing.insert(node.uid.clone());
                    shared.graph().upsert(node)
                }
                None => Vec::new(),
            },
            Ok(watcher::Event::InitDone) => {
                if !first_list_done {
                    first_list_done = true;
                    shared
                        .unsynced
                        .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                }
                let mut graph = shared.graph();
                let gone = graph.missing(&resource.group, &resource.plural, &listing);
                let mut attention = Vec::new();
                for uid in gone {
                    attention.extend(graph.remove(&uid));
                }
                listing.clear();
                attention
            }
            Ok(watcher::Event::Apply(obj)) => match Node::of(&obj, &resource) {
                Some(node) => shared.graph().upsert(node),
                None => Vec::new(),
            },
            Ok(watcher::Event::Delete(obj)) => match obj.metadata.uid.as_deref() {
                Some(uid) => shared.graph().remove(uid),
                None => Vec::new(),
            },
            Err(error) => {
                tracing::debug!(resource = %resource.plural, %error, "garbage collector watch error");
                Vec::new()
            }
        };
        shared.enqueue(attention);
    }
}

/// Looks at one object: an owner being deleted (foreground or orphan), or a
/// dependent whose owners may be gone.
async fn process(shared: &Shared, uid: &str) -> Result<Action, GcError> {
    // Like upstream, act only on a complete graph: a dependent not listed
    // yet would otherwise be missed by orphaning or foreground deletion, or
    // look dangling.
    if !shared.discovered.load(std::sync::atomic::Ordering::SeqCst)
        || shared.unsynced.load(std::sync::atomic::Ordering::SeqCst) > 0
    {
        return Ok(Action::RequeueAfter(std::time::Duration::from_millis(100)));
    }
    let Some(node) = shared.graph().get(uid).cloned() else {
        return Ok(Action::Done);
    };
    if node.deleting {
        if node.has_finalizer(ORPHAN) {
            orphan_dependents(shared, &node).await?;
            remove_finalizer(shared, &node, ORPHAN).await?;
        } else if node.has_finalizer(FOREGROUND) {
            return delete_dependents_first(shared, &node).await;
        }
        return Ok(Action::Done);
    }
    if node.owners.is_empty() {
        return Ok(Action::Done);
    }
    collect_if_owners_gone(shared, &node).await
}

/// How one owner reference stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OwnerState {
    /// The owner exists and is not waiting for its dependents.
    Solid,
    /// No object with that name and uid exists.
    Absent,
    /// The owner is being deleted in the foreground.
    Waiting,
}

async fn collect_if_owners_gone(shared: &Shared, node: &Node) -> Result<Action, GcError> {
    let mut states = Vec::with_capacity(node.owners.len());
    for owner in &node.owners {
        states.push((owner, owner_state(shared, node, owner).await?));
    }
    let solid = states.iter().any(|(_, s)| *s == OwnerState::Solid);
    let stale: Vec<&str> = states
        .iter()
        .filter(|(_, s)| *s != OwnerState::Solid)
        .map(|(o, _)| o.uid.as_str())
        .collect();
    if solid {
        if !stale.is_empty() {
            remove_owner_refs(shared, node, &stale).await?;
        }
        return Ok(Action::Done);
    }
    // As upstream: an owner waiting for its dependents makes this object go
    // in the foreground only when it has dependents of its own; a leaf goes
    // by its own finalizers, as it would when the owner's foreground pass
    // (`delete_dependents_first`) deletes it first.
    let waiting = states.iter().any(|(_, s)| *s == OwnerState::Waiting);
    let has_own = !shared.graph().dependents_of(&node.uid).is_empty();
    let policy = if (waiting && has_own) || node.has_finalizer(FOREGROUND) {
        "Foreground"
    } else if node.has_finalizer(ORPHAN) {
        "Orphan"
    } else {
        "Background"
    };
    tracing::info!(object = %describe(node), policy, "garbage collector: deleting object whose owners are gone");
    delete(shared, node, policy).await?;
    Ok(Action::Done)
}

/// Decides whether `owner` exists: the graph first, then a live GET (the
/// graph may lag behind, or not watch that kind).
async fn owner_state(
    shared: &Shared,
    dependent: &Node,
    owner: &OwnerReference,
) -> Result<OwnerState, GcError> {
    if let Some(found) = shared.graph().get(&owner.uid) {
        return Ok(if found.waits_for_dependents() {
            OwnerState::Waiting
        } else {
            OwnerState::Solid
        });
    }
    let resources = shared.resources();
    let Some((ar, caps)) = resources.resolve(&owner.api_version, &owner.kind) else {
        return Err(GcError::UnknownKind {
            api_version: owner.api_version.clone(),
            kind: owner.kind.clone(),
            object: describe(dependent),
        });
    };
    let api: Api<DynamicObject> = match (caps.scope, &dependent.namespace) {
        (Scope::Cluster, _) => Api::all_with(shared.client.clone(), &ar),
        (Scope::Namespaced, Some(ns)) => Api::namespaced_with(shared.client.clone(), ns, &ar),
        // A cluster-scoped object cannot be owned by a namespaced one.
        (Scope::Namespaced, None) => return Ok(OwnerState::Absent),
    };
    match api.get_opt(&owner.name).await {
        Ok(Some(live)) if live.metadata.uid.as_deref() == Some(owner.uid.as_str()) => {
            let waiting = live.metadata.deletion_timestamp.is_some()
                && live.finalizers().iter().any(|f| f == FOREGROUND);
            Ok(if waiting {
                OwnerState::Waiting
            } else {
                OwnerState::Solid
            })
        }
        Ok(_) => Ok(OwnerState::Absent),
        Err(source) => {
            Err(RequestFailed::of("looking up owner of", describe(dependent))(source).into())
        }
    }
}

/// Foreground deletion: deletes every dependent, and lets the owner go once
/// no dependent blocks it.
async fn delete_dependents_first(shared: &Shared, owner: &Node) -> Result<Action, GcError> {
    let dependents = shared.graph().dependents_of(&owner.uid);
    let mut blocking = 0;
    for dependent in &dependents {
        let blocks = dependent
            .owners
            .iter()
            .any(|o| o.uid == owner.uid && o.block_owner_deletion == Some(true));
        if blocks {
            blocking += 1;
        }
        if dependent.deleting {
            continue;
        }
        let has_own = !shared.graph().dependents_of(&dependent.uid).is_empty();
        let policy = if has_own { "Foreground" } else { "Background" };
        delete(shared, dependent, policy).await?;
    }
    if blocking > 0 {
        return Ok(Action::RequeueAfter(FOREGROUND_RECHECK));
    }
    remove_finalizer(shared, owner, FOREGROUND).await?;
    Ok(Action::Done)
}

/// Orphaning: drops `owner` from every dependent's ownerReferences.
async fn orphan_dependents(shared: &Shared, owner: &Node) -> Result<(), GcError> {
    let dependents = shared.graph().dependents_of(&owner.uid);
    for dependent in dependents {
        remove_owner_refs(shared, &dependent, &[owner.uid.as_str()]).await?;
    }
    Ok(())
}

fn api_for(shared: &Shared, node: &Node) -> Api<DynamicObject> {
    match &node.namespace {
        Some(ns) => Api::namespaced_with(shared.client.clone(), ns, &*node.resource),
        None => Api::all_with(shared.client.clone(), &*node.resource),
    }
}

fn describe(node: &Node) -> String {
    match &node.namespace {
        Some(ns) => format!("{} {ns}/{}", node.resource.kind, node.name),
        None => format!("{} {}", node.resource.kind, node.name),
    }
}

async fn delete(shared: &Shared, node: &Node, policy: &str) -> Result<(), GcError> {
    let params = DeleteParams {
        propagation_policy: Some(match policy {
            "Foreground" => kube::api::PropagationPolicy::Foreground,
            "Orphan" => kube::api::PropagationPolicy::Orphan,
            _ => kube::api::PropagationPolicy::Background,
        }),
        preconditions: Some(Preconditions {
            uid: Some(node.uid.clone()),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api_for(shared, node).delete(&node.name, &params).await {
        Ok(_) => Ok(()),
        // Gone already, or replaced by a namesake (uid precondition).
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(source) => Err(RequestFailed::of("deleting", describe(node))(source).into()),
    }
}

/// The live object `node` stands for; `None` when it is gone or replaced
/// by a namesake (another uid).
async fn read_live(
    api: &Api<DynamicObject>,
    node: &Node,
) -> Result<Option<DynamicObject>, GcError> {
    match api.get_opt(&node.name).await {
        Ok(live) => Ok(live.filter(|l| l.metadata.uid.as_deref() == Some(node.uid.as_str()))),
        Err(source) => Err(RequestFailed::of("reading", describe(node))(source).into()),
    }
}

/// Rewrites the live object's ownerReferences without `owner_uids`, guarded
/// by its resourceVersion (a conflict retries the whole step).
async fn remove_owner_refs(
    shared: &Shared,
    node: &Node,
    owner_uids: &[&str],
) -> Result<(), GcError> {
    let api = api_for(shared, node);
    let Some(live) = read_live(&api, node).await? else {
        return Ok(());
    };
    let refs = live.metadata.owner_references.clone().unwrap_or_default();
    let kept: Vec<&OwnerReference> = refs
        .iter()
        .filter(|r| !owner_uids.contains(&r.uid.as_str()))
        .collect();
    if kept.len() == refs.len() {
        return Ok(());
    }
    let patch = serde_json::json!({
        "metadata": {
            "ownerReferences": kept,
            "resourceVersion": live.metadata.resource_version,
        }
    });
    patch_metadata(&api, node, &patch, "removing owner references of").await
}

/// Removes `finalizer` from the live object, guarded by its resourceVersion.
async fn remove_finalizer(shared: &Shared, node: &Node, finalizer: &str) -> Result<(), GcError> {
    let api = api_for(shared, node);
    let Some(live) = read_live(&api, node).await? else {
        return Ok(());
    };
    let finalizers = live.finalizers().to_vec();
    if !finalizers.iter().any(|f| f == finalizer) {
        return Ok(());
    }
    let kept: Vec<&String> = finalizers.iter().filter(|f| *f != finalizer).collect();
    let patch = serde_json::json!({
        "metadata": {
            "finalizers": kept,
            "resourceVersion": live.metadata.resource_version,
        }
    });
    patch_metadata(&api, node, &patch, "removing a finalizer of").await
}

async fn patch_metadata(
    api: &Api<DynamicObject>,
    node: &Node,
    patch: &serde_json::Value,
    action: &'static str,
) -> Result<(), GcError> {
    match api
        .patch(&node.name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(source) => Err(RequestFailed::of(action, describe(node))(source).into()),
    }
}
