//! The disruption controller, as upstream's: it keeps each
//! PodDisruptionBudget's status current, which is what the eviction API
//! decides by. For the pods a budget selects it counts the healthy ones
//! (Ready, not being deleted, not just evicted), works out how many must
//! stay healthy (`minAvailable`, or the expected pods less
//! `maxUnavailable`) and so how many may be disrupted now. Expected pods
//! come from the pods' controllers (a Deployment through its ReplicaSets,
//! a ReplicaSet, ReplicationController or StatefulSet) when the budget is
//! a percentage or `maxUnavailable`; an integer `minAvailable` counts the
//! pods themselves.
//!
//! It writes only budgets' status, replacing it at the resourceVersion it
//! read, so an eviction's decrement in between is never overwritten (the
//! conflict is retried). A pod an eviction named in `disruptedPods` stays
//! out of the healthy count until it is gone or two minutes have passed.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, PostParams};
use kube::core::Selector;
use kube::{Resource, ResourceExt};
use skiff_informer::{Action, Cache, HandlerFns, ObjectKey};

use crate::controller_utils::{WriteFailed, controller_ref, selects};
use crate::events::{EventRecorder, object_reference};
use crate::manager::{Context, Reconciler, Stop, keyed_by, run_until_stopped};
use crate::pod_control::is_ready;

const CONTROLLER: &str = "disruption-controller";

/// How long an eviction keeps its pod out of the healthy count while the
/// pod has not gone yet (upstream's `DeletionTimeout`).
const DELETION_TIMEOUT: SignedDuration = SignedDuration::from_mins(2);

/// The condition the eviction API and `kubectl describe` read.
const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";

/// Runs the controller until `stop`.
pub(crate) async fn run(ctx: Context, stop: Stop) {
    let pdbs = ctx.factory.informer::<PodDisruptionBudget>();
    let pods = ctx.factory.informer::<Pod>();
    let replica_sets = ctx.factory.informer::<ReplicaSet>();
    let deployments = ctx.factory.informer::<Deployment>();
    let stateful_sets = ctx.factory.informer::<StatefulSet>();
    let controllers = ctx.factory.informer::<ReplicationController>();
    let syncer = Arc::new(Syncer {
        client: ctx.client.clone(),
        pdbs: pdbs.cache().clone(),
        pods: pods.cache().clone(),
        scales: Scales {
            replica_sets: replica_sets.cache().clone(),
            deployments: deployments.cache().clone(),
            stateful_sets: stateful_sets.cache().clone(),
            controllers: controllers.cache().clone(),
        },
        events: EventRecorder::new(ctx.client.clone(), CONTROLLER),
    });
    let controller = keyed_by("disruption", &pdbs).workers(2);
    let queue = controller.queue().clone();
    // A pod wakes every budget in its namespace that selects it, before or
    // after the change.
    let budgets_of = {
        let (queue, pdbs) = (queue.clone(), pdbs.cache().clone());
        move |pod: &Pod| {
            let namespace = pod.namespace().unwrap_or_default();
            for pdb in pdbs.list_namespace(&namespace) {
                if pod_selector(&pdb).is_some_and(|s| selects(&s, &pod.metadata)) {
                    queue.add(ObjectKey::from_object(pdb.as_ref()));
                }
            }
        }
    };
    let (b1, b2, b3) = (budgets_of.clone(), budgets_of.clone(), budgets_of);
    let pod_handler = HandlerFns::new()
        .on_add(move |p: &Arc<Pod>| b1(p))
        .on_update(move |old: &Arc<Pod>, new: &Arc<Pod>| {
            b2(old);
            b2(new);
        })
        .on_delete(move |p: &Arc<Pod>| b3(p));
    // A workload's scale changes the expected pods of the budgets beside it.
    let namespace_budgets = {
        let (queue, pdbs) = (queue, pdbs.cache().clone());
        move |namespace: String| {
            for pdb in pdbs.list_namespace(&namespace) {
                queue.add(ObjectKey::from_object(pdb.as_ref()));
            }
        }
    };
    let controller = controller
        .watch(&pods, pod_handler)
        .watch(&replica_sets, rescale(namespace_budgets.clone()))
        .watch(&deployments, rescale(namespace_budgets.clone()))
        .watch(&stateful_sets, rescale(namespace_budgets.clone()))
        .watch(&controllers, rescale(namespace_budgets));
    run_until_stopped(controller, syncer, stop).await;
}

/// A handler that wakes a namespace's budgets on any add, change or delete
/// of a workload there.
fn rescale<K: Resource + Send + Sync + 'static>(
    wake: impl Fn(String) + Clone + Send + Sync + 'static,
) -> HandlerFns<K> {
    let (w1, w2, w3) = (wake.clone(), wake.clone(), wake);
    HandlerFns::new()
        .on_add(move |o: &Arc<K>| w1(o.meta().namespace.clone().unwrap_or_default()))
        .on_update(move |_, o: &Arc<K>| w2(o.meta().namespace.clone().unwrap_or_default()))
        .on_delete(move |o: &Arc<K>| w3(o.meta().namespace.clone().unwrap_or_default()))
}

/// The pods a budget selects: none for a missing selector, all of the
/// namespace for an empty one (policy/v1).
fn pod_selector(pdb: &PodDisruptionBudget) -> Option<Selector> {
    let selector = pdb.spec.as_ref()?.selector.clone()?;
    Selector::try_from(selector).ok()
}

/// The workload caches expected pods are read from.
struct Scales {
    replica_sets: Arc<Cache<ReplicaSet>>,
    deployments: Arc<Cache<Deployment>>,
    stateful_sets: Arc<Cache<StatefulSet>>,
    controllers: Arc<Cache<ReplicationController>>,
}

impl Scales {
    /// The controller that sets `pod`'s scale (a Deployment rather than its
    /// ReplicaSet) as its UID and replicas; `None` when the pod has no
    /// controller or one of a kind without a known scale.
    fn of(&self, pod: &Pod) -> Option<(String, i32)> {
        let owner = controller_ref(&pod.metadata)?;
        let namespace = pod.namespace().unwrap_or_default();
        let group = owner.api_version.split('/').next().unwrap_or_default();
        let same = |meta: &kube::api::ObjectMeta| meta.uid.as_deref() == Some(owner.uid.as_str());
        match (group, owner.kind.as_str()) {
            ("apps", "ReplicaSet") => {
                let rs = self.replica_sets.get(&namespace, &owner.name)?;
                if !same(&rs.metadata) {
                    return None;
                }
                if let Some(parent) = controller_ref(&rs.metadata)
                    .filter(|r| r.kind == "Deployment" && r.api_version.starts_with("apps/"))
                {
                    let deployment = self.deployments.get(&namespace, &parent.name)?;
                    if deployment.metadata.uid.as_deref() != Some(parent.uid.as_str()) {
                        return None;
                    }
                    let replicas = deployment.spec.as_ref().and_then(|s| s.replicas);
                    return Some((parent.uid.clone(), replicas.unwrap_or(1)));
                }
                let replicas = rs.spec.as_ref().and_then(|s| s.replicas);
                Some((owner.uid.clone(), replicas.unwrap_or(1)))
            }
            ("apps", "StatefulSet") => {
                let set = self.stateful_sets.get(&namespace, &owner.name)?;
                let replicas = set.spec.as_ref().and_then(|s| s.replicas);
                same(&set.metadata).then(|| (owner.uid.clone(), replicas.unwrap_or(1)))
            }
            ("v1", "ReplicationController") => {
                let rc = self.controllers.get(&namespace, &owner.name)?;
                let replicas = rc.spec.as_ref().and_then(|s| s.replicas);
                same(&rc.metadata).then(|| (owner.uid.clone(), replicas.unwrap_or(1)))
            }
            _ => None,
        }
    }

    /// The pods the controllers of `pods` want, each controller once, and
    /// the names of the pods that have none. A pod whose controller has no
    /// known scale fails the count, as upstream's does.
    fn expected(&self, pods: &[Arc<Pod>]) -> Result<(i32, Vec<String>), String> {
        let mut scale: HashMap<String, i32> = HashMap::new();
        let mut unmanaged = Vec::new();
        for pod in pods {
            if controller_ref(&pod.metadata).is_none() {
                unmanaged.push(pod.name_any());
                continue;
            }
            let (uid, replicas) = self
                .of(pod)
                .ok_or_else(|| format!("found no controllers for pod {:?}", pod.name_any()))?;
            scale.insert(uid, replicas);
        }
        Ok((scale.values().sum(), unmanaged))
    }
}

/// `value` of `total`: itself, or a percentage of `total` rounded up.
fn scaled(value: &IntOrString, total: i32) -> Result<i32, String> {
    match value {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(s) => {
            let percent: i64 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| format!("invalid value for IntOrString: invalid value {s:?}"))?;
            let scaled = (percent * i64::from(total) + 99).div_euclid(100);
            Ok(i32::try_from(scaled).unwrap_or(i32::MAX))
        }
    }
}

/// What a budget's numbers are now.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Pods the budget expects to exist.
    pub expected: i32,
    /// Healthy pods it must keep.
    pub desired_healthy: i32,
    /// Healthy pods it has.
    pub current_healthy: i32,
    /// Disruptions allowed now.
    pub allowed: i32,
}

/// The counts of `pdb` over the `pods` it selects, at `now`, given the
/// evictions it still waits on (`disrupted`, already cleaned up).
fn counts(
    pdb: &PodDisruptionBudget,
    pods: &[Arc<Pod>],
    scales: &Scales,
    disrupted: &BTreeMap<String, Time>,
) -> Result<(Counts, Vec<String>), String> {
    let spec = pdb.spec.clone().unwrap_or_default();
    let (expected, desired_healthy, unmanaged) = if let Some(max) = &spec.max_unavailable {
        let (expected, unmanaged) = scales.expected(pods)?;
        let desired = (expected - scaled(max, expected)?).max(0);
        (expected, desired, unmanaged)
    } else if let Some(min) = &spec.min_available {
        match min {
            IntOrString::Int(n) => (i32::try_from(pods.len()).unwrap_or(i32::MAX), *n, vec![]),
            IntOrString::String(_) => {
                let (expected, unmanaged) = scales.expected(pods)?;
                (expected, scaled(min, expected)?, unmanaged)
            }
        }
    } else {
        (0, 0, vec![])
    };
    let current_healthy = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| !disrupted.contains_key(&p.name_any()))
        .filter(|p| is_ready(p))
        .count();
    let current_healthy = i32::try_from(current_healthy).unwrap_or(i32::MAX);
    // A budget that expects no pods allows nothing: its first pods may
    // appear before this controller has counted them.
    let allowed = if expected <= 0 {
        0
    } else {
        (current_healthy - desired_healthy).max(0)
    };
    let counts = Counts {
        expected,
        desired_healthy,
        current_healthy,
        allowed,
    };
    Ok((counts, unmanaged))
}

/// The evictions still pending: entries for pods that exist, are not being
/// deleted and were evicted less than [`DELETION_TIMEOUT`] ago; and when the
/// oldest kept one runs out.
fn pending_evictions(
    pdb: &PodDisruptionBudget,
    pods: &[Arc<Pod>],
    now: Timestamp,
) -> (BTreeMap<String, Time>, Option<Timestamp>) {
    let mut kept = BTreeMap::new();
    let mut next = None::<Timestamp>;
    let recorded = pdb.status.as_ref().and_then(|s| s.disrupted_pods.as_ref());
    for (name, at) in recorded.into_iter().flatten() {
        let present = pods
            .iter()
            .any(|p| p.name_any() == *name && p.metadata.deletion_timestamp.is_none());
        let expires = at.0 + DELETION_TIMEOUT;
        if present && expires > now {
            kept.insert(name.clone(), at.clone());
            next = Some(next.map_or(expires, |n| n.min(expires)));
        }
    }
    (kept, next)
}

/// `conditions` with the DisruptionAllowed condition set to `status` for
/// `reason` (its transition time moves only when its status does).
fn with_condition(
    conditions: Option<Vec<Condition>>,
    status: &str,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: Timestamp,
) -> Vec<Condition> {
    let mut conditions = conditions.unwrap_or_default();
    let transition = conditions
        .iter()
        .find(|c| c.type_ == DISRUPTION_ALLOWED && c.status == status)
        .map(|c| c.last_transition_time.clone());
    conditions.retain(|c| c.type_ != DISRUPTION_ALLOWED);
    conditions.push(Condition {
        type_: DISRUPTION_ALLOWED.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        observed_generation: generation,
        last_transition_time: transition.unwrap_or(Time(now)),
    });
    conditions
}

/// What a sync needs.
struct Syncer {
    client: kube::Client,
    pdbs: Arc<Cache<PodDisruptionBudget>>,
    pods: Arc<Cache<Pod>>,
    scales: Scales,
    events: EventRecorder,
}

impl Reconciler for Syncer {
    type Error = WriteFailed;

    async fn sync(&self, key: ObjectKey) -> Result<Action, WriteFailed> {
        let namespace = key.namespace.clone().unwrap_or_default();
        let Some(pdb) = self.pdbs.get(&namespace, &key.name) else {
            return Ok(Action::Done);
        };
        let now = Timestamp::now();
        let pods: Vec<Arc<Pod>> = match pod_selector(&pdb) {
            Some(selector) => self
                .pods
                .list_namespace(&namespace)
                .into_iter()
                .filter(|p| selects(&selector, &p.metadata))
                .collect(),
            None => Vec::new(),
        };
        let reference = object_reference(pdb.as_ref());
        if pods.is_empty() {
            let note = "No matching pods found".to_owned();
            self.events.normal(&reference, "NoPods", "Sync", note);
        }
        let (disrupted, recheck) = pending_evictions(&pdb, &pods, now);
        let generation = pdb.metadata.generation;
        let old = pdb.status.clone().unwrap_or_default();
        let status = match counts(&pdb, &pods, &self.scales, &disrupted) {
            Ok((counts, unmanaged)) => {
                if !unmanaged.is_empty() {
                    self.events
                        .warning(&reference, "UnmanagedPods", "Sync", unmanaged_note(&pdb));
                }
                let (state, reason) = if counts.allowed > 0 {
                    ("True", "SufficientPods")
                } else {
                    ("False", "InsufficientPods")
                };
                PodDisruptionBudgetStatus {
                    current_healthy: counts.current_healthy,
                    desired_healthy: counts.desired_healthy,
                    expected_pods: counts.expected,
                    disruptions_allowed: counts.allowed,
                    disrupted_pods: (!disrupted.is_empty()).then_some(disrupted),
                    observed_generation: generation,
                    conditions: Some(with_condition(
                        old.conditions.clone(),
                        state,
                        reason,
                        String::new(),
                        generation,
                        now,
                    )),
                }
            }
            Err(message) => {
                let note = format!("Failed to calculate the number of expected pods: {message}");
                self.events
                    .warning(&reference, "CalculateExpectedPodCountFailed", "Sync", note);
                // Fail safe: nothing may be disrupted while the count is unknown.
                PodDisruptionBudgetStatus {
                    disruptions_allowed: 0,
                    conditions: Some(with_condition(
                        old.conditions.clone(),
                        "False",
                        "SyncFailed",
                        message,
                        old.observed_generation,
                        now,
                    )),
                    ..old.clone()
                }
            }
        };
        if status != old {
            let mut updated = (*pdb).clone();
            updated.status = Some(status);
            let api: Api<PodDisruptionBudget> = Api::namespaced(self.client.clone(), &namespace);
            match api
                .replace_status(&key.name, &PostParams::default(), &updated)
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Action::Done),
                Err(e) => {
                    return Err(WriteFailed::new(
                        CONTROLLER,
                        &key.to_string(),
                        "updating the status",
                        e,
                    ));
                }
            }
        }
        Ok(match recheck {
            Some(at) => {
                let wait = (at - now).get_seconds().max(0) as u64 + 1;
                Action::RequeueAfter(Duration::from_secs(wait))
            }
            None => Action::Done,
        })
    }
}

fn unmanaged_note(pdb: &PodDisruptionBudget) -> String {
    let selector = pdb
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .map(|s| format!("{s:?}"))
        .unwrap_or_default();
    format!(
        "Pods selected by this PodDisruptionBudget (selector: {selector}) were found to be unmanaged. \
         As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. \
         To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_round_up_as_upstream() {
        assert_eq!(scaled(&IntOrString::Int(2), 10), Ok(2));
        assert_eq!(scaled(&IntOrString::String("50%".into()), 3), Ok(2));
        assert_eq!(scaled(&IntOrString::String("34%".into()), 3), Ok(2));
        assert_eq!(scaled(&IntOrString::String("0%".into()), 3), Ok(0));
        assert!(scaled(&IntOrString::String("half".into()), 3).is_err());
    }
}
