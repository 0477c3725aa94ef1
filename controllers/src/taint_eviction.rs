//! Upstream's taint eviction (the NoExecute taint manager): a pod on a node
//! with a NoExecute taint it does not tolerate is deleted at once; one that
//! tolerates the taint for `tolerationSeconds` is deleted once that long has
//! passed since the taint was added; one that tolerates every such taint
//! without a limit stays. The node-condition taints (`not-ready`,
//! `unreachable`) are judged the same way, except that a pod stored without
//! a toleration of them gets the configured default (the API server gives
//! every new pod 300 s ones). Before a pod is deleted it gets the
//! `DisruptionTarget` condition (`DeletionByTaintManager`) and a
//! `TaintManagerEviction` event, as upstream words them.
//!
//! A taint written without `timeAdded` (`kubectl taint` writes none) counts
//! from when this controller first saw it. It runs in the node lifecycle
//! controller's monitor pass, as its `node-controller` account, which may
//! delete pods and patch their status and nothing more of them.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodCondition, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::DeleteParams;
use kube::{Api, ResourceExt};
use skiff_common::placement::tolerates;

use crate::controller_utils::{RequestFailed, patch_pod_status};
use crate::events::{EventRecorder, object_reference};

/// The effect that evicts.
pub const NO_EXECUTE: &str = "NoExecute";
/// The condition a pod deleted for a taint carries, and why.
const DISRUPTION_TARGET: &str = "DisruptionTarget";
const DELETION_REASON: &str = "DeletionByTaintManager";
const DELETION_MESSAGE: &str = "Taint manager: deleting due to NoExecute taint";

/// A taint as the clock tells it apart: node, key, value, effect.
type TaintKey = (String, String, String, String);

fn key_of(node: &str, taint: &Taint) -> TaintKey {
    (
        node.to_string(),
        taint.key.clone(),
        taint.value.clone().unwrap_or_default(),
        taint.effect.clone(),
    )
}

/// When each NoExecute taint without `timeAdded` was first seen.
#[derive(Default)]
pub(crate) struct TaintClock {
    first_seen: HashMap<TaintKey, Timestamp>,
}

impl TaintClock {
    /// The NoExecute taints of `node` with when each was added; forgets
    /// the node's taints that are gone.
    pub(crate) fn no_execute(&mut self, node: &str, taints: &[Taint]) -> Vec<(Taint, Timestamp)> {
        let now = Timestamp::now();
        let live: Vec<&Taint> = taints.iter().filter(|t| t.effect == NO_EXECUTE).collect();
        let keys: HashSet<TaintKey> = live.iter().map(|t| key_of(node, t)).collect();
        self.first_seen
            .retain(|key, _| key.0 != node || keys.contains(key));
        live.into_iter()
            .map(|taint| {
                let added = match &taint.time_added {
                    Some(t) => t.0,
                    None => *self.first_seen.entry(key_of(node, taint)).or_insert(now),
                };
                (taint.clone(), added)
            })
            .collect()
    }

    /// Forgets every taint of a node that is gone.
    pub(crate) fn forget(&mut self, node: &str) {
        self.first_seen.retain(|key, _| key.0 != node);
    }
}

/// Whether `taint` is one the node lifecycle controller puts on a node
/// whose agent is not ready or not heard from.
fn is_node_condition_taint(taint: &Taint) -> bool {
    taint.key == crate::node_lifecycle::UNREACHABLE_TAINT
        || taint.key == crate::node_lifecycle::NOT_READY_TAINT
}

/// How long `pod` may stay on a node with the NoExecute `taint`, as
/// upstream reckons it: the shortest `tolerationSeconds` among the matching
/// tolerations (a limited one wins over an unlimited one); None when every
/// matching toleration is unlimited. With none matching: no time at all,
/// or `default` for the node-condition taints.
pub fn eviction_delay(pod: &Pod, taint: &Taint, default: Duration) -> Option<Duration> {
    let matching: Vec<&Toleration> = pod
        .spec
        .iter()
        .flat_map(|s| s.tolerations.iter().flatten())
        .filter(|t| tolerates(t, taint))
        .collect();
    if matching.is_empty() {
        let grace = if is_node_condition_taint(taint) {
            default
        } else {
            Duration::ZERO
        };
        return Some(grace);
    }
    matching
        .iter()
        .filter_map(|t| t.toleration_seconds)
        .min()
        .map(|s| Duration::from_secs(s.max(0) as u64))
}

/// When `pod` must leave a node with the NoExecute `taints` (each with when
/// it was added): the earliest of the taints' deadlines; None when it may
/// stay for good.
pub fn eviction_due(
    pod: &Pod,
    taints: &[(Taint, Timestamp)],
    default: Duration,
) -> Option<Timestamp> {
    taints
        .iter()
        .filter_map(|(taint, added)| {
            let delay = eviction_delay(pod, taint, default)?;
            let delay = SignedDuration::try_from(delay).unwrap_or(SignedDuration::MAX);
            Some(added.saturating_add(delay).unwrap_or(Timestamp::MAX))
        })
        .min()
}

/// Marks `pod` as disrupted by a taint and deletes it, saying so.
pub(crate) async fn evict(
    client: &kube::Client,
    events: &EventRecorder,
    pod: &Pod,
    node: &str,
) -> Result<(), RequestFailed> {
    let namespace = pod.namespace().unwrap_or_default();
    tracing::info!(pod = %pod.name_any(), %node, "taint eviction: deleting pod from a NoExecute-tainted node");
    events.normal(
        &object_reference(pod),
        "TaintManagerEviction",
        "Delete",
        format!("Marking for deletion Pod {namespace}/{}", pod.name_any()),
    );
    if let Some(conditions) = with_disruption_target(pod) {
        let patch = serde_json::json!({ "status": { "conditions": conditions } });
        patch_pod_status(client, pod, &patch, "marking pod disrupted").await?;
    }
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    match api.delete(&pod.name_any(), &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(source) => Err(RequestFailed::of("evicting pod", pod.name_any())(source)),
    }
}

/// The pod's conditions with `DisruptionTarget` set as the taint manager
/// sets it; None when it already says so.
fn with_disruption_target(pod: &Pod) -> Option<Vec<PodCondition>> {
    let mut conditions = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let already = conditions.iter().any(|c| {
        c.type_ == DISRUPTION_TARGET
            && c.status == "True"
            && c.reason.as_deref() == Some(DELETION_REASON)
    });
    if already {
        return None;
    }
    conditions.retain(|c| c.type_ != DISRUPTION_TARGET);
    conditions.push(PodCondition {
        type_: DISRUPTION_TARGET.into(),
        status: "True".into(),
        reason: Some(DELETION_REASON.into()),
        message: Some(DELETION_MESSAGE.into()),
        last_transition_time: Some(Time(Timestamp::now())),
        ..Default::default()
    });
    Some(conditions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node_lifecycle::UNREACHABLE_TAINT;
    use serde_json::json;

    fn taint(key: &str) -> Taint {
        Taint {
            key: key.into(),
            effect: NO_EXECUTE.into(),
            ..Default::default()
        }
    }

    fn pod_with(tolerations: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [], "tolerations": tolerations}
        }))
        .unwrap()
    }

    #[test]
    fn eviction_delay_follows_tolerations() {
        let t = taint(UNREACHABLE_TAINT);
        let default = Duration::from_secs(300);
        assert_eq!(
            eviction_delay(&pod_with(json!([])), &t, default),
            Some(default)
        );
        let limited = pod_with(json!([
            {"key": UNREACHABLE_TAINT, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
            {"operator": "Exists", "tolerationSeconds": 60}
        ]));
        assert_eq!(
            eviction_delay(&limited, &t, default),
            Some(Duration::from_secs(30))
        );
        let forever = pod_with(json!([{"key": UNREACHABLE_TAINT, "operator": "Exists"}]));
        assert_eq!(eviction_delay(&forever, &t, default), None);
        // An unlimited toleration does not outlast a limited one that also matches.
        let mixed = pod_with(json!([
            {"operator": "Exists"},
            {"key": UNREACHABLE_TAINT, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        ]));
        assert_eq!(
            eviction_delay(&mixed, &t, default),
            Some(Duration::from_secs(300))
        );
        let other = pod_with(json!([{"key": "x", "operator": "Exists"},
                                     {"key": UNREACHABLE_TAINT, "operator": "Exists", "effect": "NoSchedule"}]));
        assert_eq!(eviction_delay(&other, &t, default), Some(default));
        // Any other NoExecute taint not tolerated: out at once.
        let dedicated = taint("dedicated");
        assert_eq!(
            eviction_delay(&other, &dedicated, default),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn the_earliest_deadline_of_all_taints_decides() {
        let added: Timestamp = "2026-12-06T10:00:00Z".parse().unwrap();
        let later: Timestamp = "2026-12-06T10:01:00Z".parse().unwrap();
        let default = Duration::from_secs(300);
        let pod = pod_with(json!([
            {"key": "a", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 120},
            {"key": "b", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
            {"key": "c", "operator": "Exists"}
        ]));
        let taints = [
            (taint("a"), added),
            (taint("b"), later),
            (taint("c"), added),
        ];
        assert_eq!(
            eviction_due(&pod, &taints, default),
            Some("2026-12-06T10:01:30Z".parse().unwrap())
        );
        // Tolerated for good: never.
        assert_eq!(eviction_due(&pod, &[(taint("c"), added)], default), None);
        // One not tolerated at all: when that one was added.
        let taints = [(taint("a"), added), (taint("d"), later)];
        assert_eq!(eviction_due(&pod, &taints, default), Some(later));
        assert_eq!(eviction_due(&pod, &[], default), None);
    }

    #[test]
    fn a_taint_without_time_added_counts_from_when_it_was_first_seen() {
        let mut clock = TaintClock::default();
        let first = clock.no_execute(
            "n1",
            &[
                taint("a"),
                Taint {
                    effect: "NoSchedule".into(),
                    ..taint("s")
                },
            ],
        );
        assert_eq!(first.len(), 1, "NoSchedule taints do not evict");
        std::thread::sleep(Duration::from_millis(5));
        let again = clock.no_execute("n1", &[taint("a")]);
        assert_eq!(again[0].1, first[0].1, "the first sighting stands");
        // Removed and added again: a new sighting.
        clock.no_execute("n1", &[]);
        let anew = clock.no_execute("n1", &[taint("a")]);
        assert!(anew[0].1 > first[0].1);
        // timeAdded, when written, is taken as it is.
        let stamped = Taint {
            time_added: Some(Time("2026-12-06T10:00:00Z".parse().unwrap())),
            ..taint("b")
        };
        let got = clock.no_execute("n2", &[stamped]);
        assert_eq!(
            got[0].1,
            "2026-12-06T10:00:00Z".parse::<Timestamp>().unwrap()
        );
        clock.forget("n1");
        assert!(clock.first_seen.keys().all(|k| k.0 != "n1"));
    }

    #[test]
    fn the_pod_is_marked_once_as_upstream_marks_it() {
        let pod = pod_with(json!([]));
        let conditions = with_disruption_target(&pod).expect("added");
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].reason.as_deref(), Some(DELETION_REASON));
        assert_eq!(conditions[0].message.as_deref(), Some(DELETION_MESSAGE));
        let mut marked = pod.clone();
        marked.status = Some(k8s_openapi::api::core::v1::PodStatus {
            conditions: Some(conditions),
            ..Default::default()
        });
        assert_eq!(with_disruption_target(&marked), None);
    }
}
