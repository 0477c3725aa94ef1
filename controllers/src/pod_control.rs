//! What every pod-owning workload controller needs: expectations (so a pod
//! whose creation or deletion is not yet observed is not acted on twice),
//! pod predicates, upstream's deletion ranking, pods built from templates,
//! slow-start batches, creating pods and reporting creations and deletions
//! as upstream's events, adoption / release of pods by selector, and the
//! error of a sync that failed writing.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::serde::de::DeserializeOwned;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::Selector;
use serde_json::json;
use skiff_informer::Action;

use crate::controller_utils::api_message;
use crate::controller_utils::{
    WriteFailed, controller_owner_ref, controller_ref, key_of, seconds_between, selects,
};
use crate::events::EventRecorder;

/// How long an expectation may stay unfulfilled before the controller stops
/// waiting for it (a lost watch event must not wedge a workload forever).
const EXPECTATIONS_TTL: Duration = Duration::from_secs(5 * 60);

/// Upstream's cap on pods created or deleted by one sync.
pub(crate) const BURST_REPLICAS: usize = 500;

/// Why a pod-owning workload's sync failed (it is retried with backoff): a
/// pod write, or another of its API writes.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WorkloadSyncError {
    /// Adopting, releasing, creating or deleting pods failed.
    #[error(transparent)]
    Pods(#[from] PodControlError),
    /// An API write failed.
    #[error(transparent)]
    Api(#[from] WriteFailed),
    /// The owner's ControllerRevisions could not be settled.
    #[error(transparent)]
    History(#[from] crate::history::HistoryError),
}

/// Errors of pod writes.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PodControlError {
    /// The API refused or failed a pod write.
    #[error("{action} pod {name:?} failed: {source}")]
    Api {
        /// The write that failed, e.g. "delete".
        action: &'static str,
        /// The pod's name.
        name: String,
        #[source]
        /// The API's error.
        source: kube::Error,
    },
}

#[derive(Debug)]
struct Expectation {
    adds: i64,
    deletes: HashSet<String>,
    set_at: Instant,
}

/// Creations and deletions a controller has asked for but not yet seen in its
/// informer, per owner key. While an owner has pending expectations its sync
/// must not create or delete pods again (its cache is known to be stale).
#[derive(Debug, Default, Clone)]
pub(crate) struct Expectations {
    inner: Arc<Mutex<HashMap<String, Expectation>>>,
}

impl Expectations {
    fn with<R>(&self, f: impl FnOnce(&mut HashMap<String, Expectation>) -> R) -> R {
        let mut guard = match self.inner.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut guard)
    }

    /// True when `key` may be synced: nothing pending, or the record expired.
    pub(crate) fn satisfied(&self, key: &str) -> bool {
        self.with(|m| match m.get(key) {
            None => true,
            Some(e) => {
                (e.adds <= 0 && e.deletes.is_empty()) || e.set_at.elapsed() > EXPECTATIONS_TTL
            }
        })
    }

    /// Expects `adds` pod creations for `key` (replacing any old record).
    pub(crate) fn expect_creations(&self, key: &str, adds: usize) {
        self.with(|m| {
            m.insert(
                key.to_owned(),
                Expectation {
                    adds: adds as i64,
                    deletes: HashSet::new(),
                    set_at: Instant::now(),
                },
            );
        });
    }

    /// Expects the deletion of these pods (by "namespace/name") for `key`.
    pub(crate) fn expect_deletions(&self, key: &str, pods: impl IntoIterator<Item = String>) {
        self.with(|m| {
            m.insert(
                key.to_owned(),
                Expectation {
                    adds: 0,
                    deletes: pods.into_iter().collect(),
                    set_at: Instant::now(),
                },
            );
        });
    }

    /// One expected creation was observed (or will never happen).
    pub(crate) fn creation_observed(&self, key: &str) {
        self.with(|m| {
            if let Some(e) = m.get_mut(key) {
                e.adds -= 1;
            }
        });
    }

    /// The deletion of `pod` was observed (or will never happen).
    pub(crate) fn deletion_observed(&self, key: &str, pod: &str) {
        self.with(|m| {
            if let Some(e) = m.get_mut(key) {
                e.deletes.remove(pod);
            }
        });
    }

    /// Forgets `key` (its owner is gone).
    pub(crate) fn forget(&self, key: &str) {
        self.with(|m| {
            m.remove(key);
        });
    }
}

/// True for pods that count towards a workload: not finished, not being deleted.
pub(crate) fn is_active(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    !matches!(phase, Some("Succeeded" | "Failed")) && pod.metadata.deletion_timestamp.is_none()
}

/// True for pods that have finished (Succeeded or Failed): none of their
/// containers will run again.
pub(crate) fn is_terminal(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

/// The phase of a pod ("Pending" when unset).
pub(crate) fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// When the pod's Ready condition last turned True, if it is True.
pub(crate) fn ready_since(pod: &Pod) -> Option<Option<&Time>> {
    pod.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .map(|c| c.last_transition_time.as_ref())
}

/// True when the pod's Ready condition is True.
pub(crate) fn is_ready(pod: &Pod) -> bool {
    ready_since(pod).is_some()
}

/// True when the pod has been ready for at least `min_ready_seconds` at `now`.
pub(crate) fn is_available(pod: &Pod, min_ready_seconds: i32, now: &Time) -> bool {
    match ready_since(pod) {
        None => false,
        Some(_) if min_ready_seconds <= 0 => true,
        Some(None) => false,
        Some(Some(since)) => seconds_between(since, now) >= i64::from(min_ready_seconds),
    }
}

/// Seconds until a ready pod becomes available, if it is ready and not yet so.
pub(crate) fn seconds_until_available(
    pod: &Pod,
    min_ready_seconds: i32,
    now: &Time,
) -> Option<i64> {
    let since = ready_since(pod)??;
    let left = i64::from(min_ready_seconds) - seconds_between(since, now);
    (left > 0).then_some(left)
}

/// When a workload's sync must look again: as the first ready pod of
/// `pods` turns available (a second away at the least), else only on the
/// next event.
pub(crate) fn requeue_when_available(
    pods: &[Arc<Pod>],
    min_ready_seconds: i32,
    now: &Time,
) -> Action {
    let next = pods
        .iter()
        .filter_map(|p| seconds_until_available(p, min_ready_seconds, now))
        .min();
    match next {
        Some(s) => Action::RequeueAfter(Duration::from_secs(s.max(1) as u64)),
        None => Action::Done,
    }
}

fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).max().unwrap_or(0))
        .unwrap_or(0)
}

fn phase_rank(pod: &Pod) -> u8 {
    match phase(pod) {
        "Pending" => 0,
        "Running" => 2,
        _ => 1,
    }
}

/// Upstream's order of pods to delete first when scaling down: unassigned
/// before assigned, Pending < Unknown < Running, not ready before ready, pods
/// doubled up on a node (higher `rank`) first, ready for less time first, more
/// restarts first, newer first.
pub(crate) fn deletion_order(a: &Pod, rank_a: usize, b: &Pod, rank_b: usize) -> Ordering {
    let assigned = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
    assigned(a)
        .cmp(&assigned(b))
        .then_with(|| phase_rank(a).cmp(&phase_rank(b)))
        .then_with(|| is_ready(a).cmp(&is_ready(b)))
        .then_with(|| rank_b.cmp(&rank_a))
        .then_with(
            || match (ready_since(a).flatten(), ready_since(b).flatten()) {
                // the more recently ready pod goes first
                (Some(x), Some(y)) => y.0.cmp(&x.0),
                _ => Ordering::Equal,
            },
        )
        .then_with(|| restarts(b).cmp(&restarts(a)))
        .then_with(|| {
            let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            created(b).cmp(&created(a))
        })
}

/// Picks the `count` pods to delete from `pods`, ranking each by how many of
/// `related` (the owner's active pods) share its node.
pub(crate) fn pods_to_delete(
    pods: &[Arc<Pod>],
    related: &[Arc<Pod>],
    count: usize,
) -> Vec<Arc<Pod>> {
    let mut per_node: HashMap<&str, usize> = HashMap::new();
    for p in related {
        if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            *per_node.entry(node).or_default() += 1;
        }
    }
    let rank = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .and_then(|n| per_node.get(n).copied())
            .unwrap_or(0)
    };
    let mut ranked: Vec<(usize, Arc<Pod>)> = pods.iter().map(|p| (rank(p), p.clone())).collect();
    ranked.sort_by(|(ra, a), (rb, b)| deletion_order(a, *ra, b, *rb));
    ranked.into_iter().take(count).map(|(_, p)| p).collect()
}

/// A pod for `template`, owned by `owner`, named `<generate_name>xxxxx` (or
/// exactly `name` when given).
pub(crate) fn pod_from_template(
    template: &PodTemplateSpec,
    namespace: &str,
    generate_name: &str,
    owner: Option<OwnerReference>,
) -> Pod {
    let meta = template.metadata.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(generate_name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: meta.labels,
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: owner.map(|o| vec![o]),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

/// Creates `pod` for the owner `regarding` names and reports it as
/// upstream's pod control does, so `kubectl describe` reads the same for a
/// ReplicaSet, a Job and a DaemonSet: `SuccessfulCreate` "Created pod:
/// <name>", or the warning `FailedCreate` "Error creating: <error>".
pub(crate) async fn create_pod(
    api: &Api<Pod>,
    events: &EventRecorder,
    regarding: &ObjectReference,
    pod: &Pod,
) -> Result<Pod, kube::Error> {
    use kube::ResourceExt as _;
    match api.create(&PostParams::default(), pod).await {
        Ok(created) => {
            let note = format!("Created pod: {}", created.name_any());
            events.normal(regarding, "SuccessfulCreate", "Create", note);
            Ok(created)
        }
        Err(error) => {
            let note = format!("Error creating: {}", api_message(&error));
            events.warning(regarding, "FailedCreate", "Create", note);
            Err(error)
        }
    }
}

/// Reports a pod deleted for the owner `regarding` names as upstream's pod
/// control does: `SuccessfulDelete` "Deleted pod: <name>".
pub(crate) fn report_deleted(events: &EventRecorder, regarding: &ObjectReference, name: &str) {
    let note = format!("Deleted pod: {name}");
    events.normal(regarding, "SuccessfulDelete", "Delete", note);
}

/// Deletes `pods` for the owner under `key` one at a time, each reported by
/// [`report_deleted`], stopping at the first failure. Every deletion is
/// expected before the first is sent; one already gone or failed is taken
/// back, since no watch event will observe it. Nothing to delete leaves the
/// expectations as they are.
pub(crate) async fn delete_pods(
    api: &Api<Pod>,
    events: &EventRecorder,
    expectations: &Expectations,
    key: &str,
    regarding: &ObjectReference,
    pods: &[Arc<Pod>],
) -> Result<(), PodControlError> {
    use kube::ResourceExt as _;
    if pods.is_empty() {
        return Ok(());
    }
    expectations.expect_deletions(key, pods.iter().map(|p| key_of(&p.metadata)));
    for pod in pods {
        let name = pod.name_any();
        let result = delete_pod(api, &name).await;
        if !matches!(result, Ok(true)) {
            expectations.deletion_observed(key, &key_of(&pod.metadata));
        }
        result?;
        report_deleted(events, regarding, &name);
    }
    Ok(())
}

/// Creates `pods` for the owner under `key` in slow-start batches
/// ([`slow_start_batch`], taking them from the last), each reported by
/// [`create_pod`]. Every creation is expected before it is sent, and those
/// that failed or were never tried are taken back, since no watch event will
/// ever observe them. Returns the first failure.
pub(crate) async fn create_pods(
    api: &Api<Pod>,
    events: &EventRecorder,
    expectations: &Expectations,
    key: &str,
    regarding: &ObjectReference,
    pods: Vec<Pod>,
) -> Option<kube::Error> {
    let total = pods.len();
    expectations.expect_creations(key, total);
    let queue = Mutex::new(pods);
    let (created, error) = slow_start_batch(total, || {
        let pod = match queue.lock() {
            Ok(mut pods) => pods.pop(),
            Err(poisoned) => poisoned.into_inner().pop(),
        };
        async move {
            let Some(pod) = pod else { return Ok(()) };
            create_pod(api, events, regarding, &pod).await.map(|_| ())
        }
    })
    .await;
    for _ in created..total {
        expectations.creation_observed(key);
    }
    error
}

/// Runs `count` calls of `create` in batches of 1, 2, 4, ... (at most `count`
/// in all), stopping after the first batch with a failure, so a broken
/// template costs one failed request rather than hundreds. Returns how many
/// succeeded and the first error.
pub(crate) async fn slow_start_batch<F, Fut, E>(count: usize, create: F) -> (usize, Option<E>)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let mut done = 0;
    let mut batch = 1usize;
    while done < count {
        let size = batch.min(count - done);
        let results = futures::future::join_all((0..size).map(|_| create())).await;
        let mut first_error = None;
        for r in results {
            match r {
                Ok(()) => done += 1,
                Err(e) => {
                    if first_error.is_none() {
                        first_error = Some(e);
                    }
                }
            }
        }
        if first_error.is_some() {
            return (done, first_error);
        }
        batch *= 2;
    }
    (done, None)
}

/// Deletes the pod `name`; Ok(false) when it was already gone.
pub(crate) async fn delete_pod(api: &Api<Pod>, name: &str) -> Result<bool, PodControlError> {
    match api.delete(name, &Default::default()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(source) => Err(PodControlError::Api {
            action: "delete",
            name: name.to_owned(),
            source,
        }),
    }
}

/// Which objects (pods, or a Deployment's ReplicaSets) `owner` keeps after
/// claiming: its own matching ones plus the orphans it adopted (under its
/// controller reference); its objects that stopped matching are released.
/// An owner being deleted keeps all of its own and adopts nothing.
pub(crate) async fn claim<O, K>(
    api: &Api<K>,
    owner: &O,
    selector: &Selector,
    objects: Vec<Arc<K>>,
) -> Result<Vec<Arc<K>>, PodControlError>
where
    O: Resource<DynamicType = ()>,
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let owner_ref = &controller_owner_ref(owner);
    let owner_deleting = owner.meta().deletion_timestamp.is_some();
    let mut claimed = Vec::new();
    for obj in objects {
        let meta = obj.meta();
        let name = meta.name.clone().unwrap_or_default();
        let matches = selects(selector, meta);
        match controller_ref(meta) {
            Some(r) if r.uid == owner_ref.uid => {
                if matches || owner_deleting {
                    claimed.push(obj);
                } else if meta.deletion_timestamp.is_none() {
                    release(api, meta, &owner_ref.uid).await?;
                }
            }
            Some(_) => {}
            None => {
                if matches && !owner_deleting && meta.deletion_timestamp.is_none() {
                    let patch = json!({"metadata": {
                        "ownerReferences": [owner_ref],
                        "uid": meta.uid,
                    }});
                    match api
                        .patch(&name, &PatchParams::default(), &Patch::Strategic(patch))
                        .await
                    {
                        Ok(adopted) => claimed.push(Arc::new(adopted)),
                        Err(kube::Error::Api(s)) if s.code == 404 => {}
                        Err(source) => {
                            return Err(PodControlError::Api {
                                action: "adopt",
                                name,
                                source,
                            });
                        }
                    }
                }
            }
        }
    }
    Ok(claimed)
}

/// Removes the owner reference `owner_uid` from the object.
async fn release<K>(api: &Api<K>, meta: &ObjectMeta, owner_uid: &str) -> Result<(), PodControlError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let name = meta.name.clone().unwrap_or_default();
    let patch = json!({"metadata": {
        "ownerReferences": [{"$patch": "delete", "uid": owner_uid}],
        "uid": meta.uid,
    }});
    match api
        .patch(&name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 422 => Ok(()),
        Err(source) => Err(PodControlError::Api {
            action: "release",
            name,
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};
    use k8s_openapi::jiff::Timestamp;

    fn pod(name: &str, node: Option<&str>, phase: &str, ready: bool, age_s: i64) -> Arc<Pod> {
        let now = Timestamp::now().as_second();
        let at = |s: i64| Time(Timestamp::from_second(now - s).unwrap());
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                creation_timestamp: Some(at(age_s)),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: node.map(Into::into),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                conditions: ready.then(|| {
                    vec![PodCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        last_transition_time: Some(at(age_s)),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
        })
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<&str> {
        pods.iter()
            .map(|p| p.metadata.name.as_deref().unwrap())
            .collect()
    }

    #[test]
    fn ranking_deletes_least_useful_pods_first() {
        let pods = vec![
            pod("running-ready-old", Some("n1"), "Running", true, 100),
            pod("running-ready-new", Some("n2"), "Running", true, 10),
            pod("unassigned", None, "Pending", false, 50),
            pod("pending", Some("n1"), "Pending", false, 50),
            pod("unknown", Some("n2"), "Unknown", false, 50),
            pod("running-unready", Some("n1"), "Running", false, 50),
        ];
        // no co-location ranks here: `related` is empty
        let order = pods_to_delete(&pods, &[], pods.len());
        assert_eq!(
            names(&order),
            [
                "unassigned",
                "pending",
                "unknown",
                "running-unready",
                "running-ready-new",
                "running-ready-old"
            ]
        );
    }

    #[test]
    fn ranking_prefers_pods_doubled_up_on_a_node() {
        let pods = vec![
            pod("alone", Some("n1"), "Running", true, 100),
            pod("crowded-a", Some("n2"), "Running", true, 100),
            pod("crowded-b", Some("n2"), "Running", true, 100),
        ];
        let order = pods_to_delete(&pods, &pods, 1);
        assert!(names(&order)[0].starts_with("crowded"));
    }

    #[test]
    fn availability_waits_min_ready_seconds() {
        let p = pod("p", Some("n"), "Running", true, 5);
        let now = Time(Timestamp::now());
        assert!(is_available(&p, 0, &now));
        assert!(is_available(&p, 5, &now));
        assert!(!is_available(&p, 30, &now));
        assert!(seconds_until_available(&p, 30, &now).is_some_and(|s| s > 20));
        let unready = pod("u", Some("n"), "Running", false, 5);
        assert!(!is_available(&unready, 0, &now));
    }

    #[test]
    fn expectations_block_until_observed() {
        let e = Expectations::default();
        assert!(e.satisfied("ns/rs"));
        e.expect_creations("ns/rs", 2);
        assert!(!e.satisfied("ns/rs"));
        e.creation_observed("ns/rs");
        assert!(!e.satisfied("ns/rs"));
        e.creation_observed("ns/rs");
        assert!(e.satisfied("ns/rs"));
        e.expect_deletions("ns/rs", ["ns/a".to_string(), "ns/b".to_string()]);
        e.deletion_observed("ns/rs", "ns/a");
        e.deletion_observed("ns/rs", "ns/a");
        assert!(!e.satisfied("ns/rs"));
        e.deletion_observed("ns/rs", "ns/b");
        assert!(e.satisfied("ns/rs"));
    }

    #[tokio::test]
    async fn slow_start_doubles_batches_and_stops_on_failure() {
        let calls = Arc::new(Mutex::new(0usize));
        let c = calls.clone();
        let (ok, err) = slow_start_batch(10, || {
            let c = c.clone();
            async move {
                let mut n = c.lock().unwrap();
                *n += 1;
                if *n > 4 { Err("quota") } else { Ok(()) }
            }
        })
        .await;
        // batches 1, 2, then 4 of which one succeeds (call 4) and three fail
        assert_eq!(ok, 4);
        assert_eq!(err, Some("quota"));
        assert_eq!(*calls.lock().unwrap(), 7);
        let (ok, err) = slow_start_batch(5, || async { Ok::<(), ()>(()) }).await;
        assert_eq!((ok, err), (5, None));
    }
}
