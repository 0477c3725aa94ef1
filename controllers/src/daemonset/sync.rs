//! One sync of one DaemonSet: settle the revision of its template, then per
//! node create the missing daemon pod or delete extra and misplaced ones;
//! replace outdated pods within maxUnavailable or maxSurge (`rolling.rs`
//! decides which); drop old revisions beyond revisionHistoryLimit; write
//! status.
//!
//! A pod being deleted still holds its node until it has stopped (as
//! upstream): its replacement is made only once it is gone or has reached a
//! terminal phase, so two daemon pods (with the same host ports, say) never
//! run on one node at once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{Node, Pod, PodTemplateSpec};
use kube::api::Api;
use kube::{Client, ResourceExt};
use skiff_informer::{Action, Cache, ObjectKey};

use super::placement::{node_of, pin_to_node, should_run};
use super::rolling;
use crate::controller_utils::{WriteFailed, write_status};
use crate::controller_utils::{controller_owner_ref, now, safe_hash, workload_selector};
use crate::events::{EventRecorder, object_reference};
use crate::history::{History, Proposal, REVISION_HASH_LABEL, owned_revisions, revision_hash};
use crate::manager::Reconciler;
use crate::pod_control::{
    Expectations, WorkloadSyncError, claim, create_pod, delete_pods, is_available, is_ready,
    is_terminal, phase, pod_from_template, requeue_when_available,
};

/// The pod label with the hash of the template a pod was made from; the
/// template's revision carries it too and is named `<set>-<hash>`.
const HASH_LABEL: &str = REVISION_HASH_LABEL;

/// The pod label with the set's generation when the pod was made (upstream
/// still sets it, though it judges pods by [`HASH_LABEL`]).
const GENERATION_LABEL: &str = "pod-template-generation";

/// What a sync needs.
pub(super) struct Syncer {
    pub client: Client,
    pub sets: Arc<Cache<DaemonSet>>,
    pub pods: Arc<Cache<Pod>>,
    pub nodes: Arc<Cache<Node>>,
    pub revisions: Arc<Cache<ControllerRevision>>,
    pub expectations: Expectations,
    pub events: EventRecorder,
    /// How soon a failed daemon pod on a node is replaced.
    pub failed_backoff: super::failed_backoff::FailedPodBackoff,
}

impl Reconciler for Syncer {
    type Error = WorkloadSyncError;

    /// Syncs the DaemonSet under `key`.
    async fn sync(&self, key: ObjectKey) -> Result<Action, WorkloadSyncError> {
        let ns = key.namespace.clone().unwrap_or_default();
        let key_str = key.to_string();
        let Some(set) = self.sets.get(&ns, &key.name) else {
            self.expectations.forget(&key_str);
            return Ok(Action::Done);
        };
        let set = (*set).clone();
        let Some(selector) = workload_selector(set.spec.as_ref().map(|s| &s.selector)) else {
            return Ok(Action::Done);
        };
        let spec = set.spec.clone().unwrap_or_default();
        let template_spec = spec.template.spec.clone().unwrap_or_default();
        let collision_count = set.status.as_ref().and_then(|s| s.collision_count);
        let hash = safe_hash(
            &serde_json::to_vec(&spec.template).unwrap_or_default(),
            collision_count,
        );
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let deleting = set.metadata.deletion_timestamp.is_some();
        let history = History {
            api: Api::namespaced(self.client.clone(), &ns),
            kind: "daemonset",
            key: &key_str,
        };
        let mut revisions = Vec::new();
        if !deleting {
            revisions = self
                .settle_revision(&set, &spec.template, &history, &hash)
                .await?;
        }
        let candidates: Vec<Arc<Pod>> = self
            .pods
            .list_namespace(&ns)
            .into_iter()
            .filter(|p| !(p.metadata.deletion_timestamp.is_some() && is_terminal(p)))
            .collect();
        let pods = claim(&api, &set, &selector, candidates).await?;
        let mut by_node: HashMap<String, Vec<Arc<Pod>>> = HashMap::new();
        for pod in &pods {
            if let Some(node) = node_of(pod) {
                by_node.entry(node).or_default().push(pod.clone());
            }
        }
        let nodes = self.nodes.list();
        let min_ready = spec.min_ready_seconds.unwrap_or(0);
        let at = now();

        let mut status = DaemonSetStatus {
            observed_generation: set.metadata.generation,
            collision_count: set.status.as_ref().and_then(|s| s.collision_count),
            conditions: set.status.as_ref().and_then(|s| s.conditions.clone()),
            ..Default::default()
        };
        let strategy = spec.update_strategy.clone().unwrap_or_default();
        let surging = rolling::surges(&strategy);
        let mut to_create: Vec<String> = Vec::new();
        let mut to_delete: Vec<Arc<Pod>> = Vec::new();
        let mut updating: Vec<rolling::NodePods> = Vec::new();
        let mut retry_after: Option<Duration> = None;
        for node in &nodes {
            let name = node.name_any();
            let (mut stopping, mut here): (Vec<Arc<Pod>>, Vec<Arc<Pod>>) = by_node
                .remove(&name)
                .unwrap_or_default()
                .into_iter()
                .partition(|p| p.metadata.deletion_timestamp.is_some());
            if !should_run(&template_spec, node) {
                if !here.is_empty() || !stopping.is_empty() {
                    status.number_misscheduled += 1;
                    to_delete.extend(here);
                }
                continue;
            }
            status.desired_number_scheduled += 1;
            let has_pods = !here.is_empty() || !stopping.is_empty();
            // Failed daemon pods are replaced: deleted (no sooner than the
            // node's backoff allows), their successor made once they are gone.
            let (failed, mut alive): (Vec<_>, Vec<_>) =
                here.drain(..).partition(|p| phase(p) == "Failed");
            if let Some(first) = failed.first() {
                match self
                    .failed_backoff
                    .allow(&key_str, &name, std::time::Instant::now())
                {
                    Ok(()) => {
                        self.events.warning(
                            &object_reference(&set),
                            "FailedDaemonPod",
                            "Delete",
                            format!(
                                "Found failed daemon pod {ns}/{} on node {name}, will try to kill it",
                                first.name_any()
                            ),
                        );
                        to_delete.extend(failed.iter().cloned());
                    }
                    Err(wait) => {
                        retry_after = Some(retry_after.map_or(wait, |r: Duration| r.min(wait)));
                    }
                }
            }
            alive.sort_by_key(|p| p.metadata.creation_timestamp.clone().map(|t| t.0));
            stopping.sort_by_key(|p| p.metadata.creation_timestamp.clone().map(|t| t.0));
            // Status reads the node's oldest pod, running or stopping.
            let counted = match (alive.first(), stopping.first()) {
                (Some(a), Some(s))
                    if s.metadata.creation_timestamp < a.metadata.creation_timestamp =>
                {
                    Some(s)
                }
                (Some(a), _) => Some(a),
                (None, s) => s,
            };
            if let Some(pod) = counted {
                status.current_number_scheduled += 1;
                if is_ready(pod) {
                    status.number_ready += 1;
                }
                if is_available(pod, min_ready, &at) {
                    *status.number_available.get_or_insert(0) += 1;
                }
                if revision_hash(pod) == Some(hash.as_str()) {
                    *status.updated_number_scheduled.get_or_insert(0) += 1;
                }
            } else if failed.is_empty() {
                to_create.push(name.clone());
            }
            let is_new = |p: &Arc<Pod>| revision_hash(p) == Some(hash.as_str());
            let (news, olds): (Vec<_>, Vec<_>) = alive.iter().cloned().partition(is_new);
            if surging {
                // The oldest of each kind stays; the old one goes too once
                // it is not ready or the new one is available.
                to_delete.extend(news.iter().skip(1).cloned());
                to_delete.extend(olds.iter().skip(1).cloned());
                if let (Some(new), Some(old)) = (news.first(), olds.first())
                    && (!is_ready(old) || is_available(new, min_ready, &at))
                {
                    to_delete.push(old.clone());
                }
            } else {
                to_delete.extend(alive.iter().skip(1).cloned());
            }
            if has_pods {
                updating.push(rolling::NodePods {
                    node: name,
                    single: news.len() <= 1 && olds.len() <= 1,
                    new: news.first().cloned(),
                    old: olds.first().cloned(),
                });
            }
        }
        // Pods for nodes that no longer exist go too.
        to_delete.extend(
            by_node
                .into_values()
                .flatten()
                .filter(|p| p.metadata.deletion_timestamp.is_none()),
        );
        let available = *status.number_available.get_or_insert(0);
        status.number_unavailable = Some(status.desired_number_scheduled - available);
        status.updated_number_scheduled.get_or_insert(0);

        if !deleting && self.expectations.satisfied(&key_str) {
            // The update moves only once the nodes are as they should be
            // (as upstream's expectations gate it): a node still waiting
            // for its pod is not counted by it, and must not be joined by
            // another.
            let settled = to_create.is_empty() && to_delete.is_empty();
            if let Some((surge, unavailable)) =
                rolling::limits(&strategy, status.desired_number_scheduled).filter(|_| settled)
            {
                let step = rolling::step(&updating, surge, unavailable, min_ready, &at);
                to_delete = step.delete;
                to_create = step.create_on;
            }
            self.apply(&set, &key_str, &api, &hash, to_create, to_delete)
                .await?;
            let limit = spec.revision_history_limit.unwrap_or(10).max(0) as usize;
            history
                .delete(&unused_revisions(&revisions, &hash, &pods, limit))
                .await?;
        }

        if Some(&status) != set.status.as_ref() {
            let sets: Api<DaemonSet> = Api::namespaced(self.client.clone(), &ns);
            let body = serde_json::to_value(&status).unwrap_or_default();
            let written = write_status(&sets, &set.name_any(), body)
                .await
                .map_err(|e| Self::err(&key_str, "updating status", e))?;
            if !written {
                return Ok(Action::Done);
            }
        }
        Ok(
            match (requeue_when_available(&pods, min_ready, &at), retry_after) {
                (Action::RequeueAfter(a), Some(b)) => Action::RequeueAfter(a.min(b)),
                (_, Some(b)) => Action::RequeueAfter(b),
                (action, None) => action,
            },
        )
    }
}

impl Syncer {
    fn err(key: &str, what: &'static str, source: kube::Error) -> WorkloadSyncError {
        WriteFailed::new("daemonset", key, what, source).into()
    }

    /// The set's revisions, oldest first, once the one storing its current
    /// `template` (named after `hash`, its hash) exists and is the newest.
    async fn settle_revision(
        &self,
        set: &DaemonSet,
        template: &PodTemplateSpec,
        history: &History<'_>,
        hash: &str,
    ) -> Result<Vec<ControllerRevision>, WorkloadSyncError> {
        let ns = set.namespace().unwrap_or_default();
        let uid = set.metadata.uid.clone().unwrap_or_default();
        let mut revisions = owned_revisions(&self.revisions, &ns, &uid);
        let proposal = Proposal {
            owner: &set.metadata,
            owner_ref: controller_owner_ref(set),
            template,
            hash_label: HASH_LABEL,
            hash: hash.to_owned(),
        };
        let sets: Api<DaemonSet> = Api::namespaced(self.client.clone(), &ns);
        let count = set.status.as_ref().and_then(|s| s.collision_count);
        history
            .current_counting_collisions(&mut revisions, proposal, &sets, count)
            .await?;
        Ok(revisions)
    }

    async fn apply(
        &self,
        set: &DaemonSet,
        key: &str,
        api: &Api<Pod>,
        hash: &str,
        create_on: Vec<String>,
        delete: Vec<Arc<Pod>>,
    ) -> Result<(), WorkloadSyncError> {
        let ns = set.namespace().unwrap_or_default();
        let template = set.spec.clone().unwrap_or_default().template;
        if !delete.is_empty() {
            let regarding = object_reference(set);
            delete_pods(
                api,
                &self.events,
                &self.expectations,
                key,
                &regarding,
                &delete,
            )
            .await?;
            return Ok(());
        }
        if create_on.is_empty() {
            return Ok(());
        }
        self.expectations.expect_creations(key, create_on.len());
        let mut first_error = None;
        for node in create_on {
            let mut pod = pod_from_template(
                &template,
                &ns,
                &format!("{}-", set.name_any()),
                Some(controller_owner_ref(set)),
            );
            let labels = pod.metadata.labels.get_or_insert_with(Default::default);
            labels.insert(HASH_LABEL.into(), hash.to_owned());
            if let Some(generation) = set.metadata.generation {
                labels.insert(GENERATION_LABEL.into(), generation.to_string());
            }
            if let Some(spec) = pod.spec.as_mut() {
                pin_to_node(spec, &node);
            }
            if let Err(e) = create_pod(api, &self.events, &object_reference(set), &pod).await {
                self.expectations.creation_observed(key);
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) => Err(Self::err(key, "creating pods", e)),
            None => Ok(()),
        }
    }
}

/// The old revisions to delete, oldest first: beyond `limit` old ones, those
/// no pod was made from (upstream's count: every revision but the current
/// one is old, and one still in use is kept even over the limit).
fn unused_revisions<'a>(
    revisions: &'a [ControllerRevision],
    current_hash: &str,
    pods: &[Arc<Pod>],
    limit: usize,
) -> Vec<&'a ControllerRevision> {
    let hash_of_revision = |r: &ControllerRevision| {
        r.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(HASH_LABEL))
            .cloned()
    };
    let in_use = |hash: &str| pods.iter().any(|p| revision_hash(p) == Some(hash));
    let old: Vec<&ControllerRevision> = revisions
        .iter()
        .filter(|r| hash_of_revision(r).as_deref() != Some(current_hash))
        .collect();
    let excess = old.len().saturating_sub(limit);
    old.into_iter()
        .filter(|r| !hash_of_revision(r).is_some_and(|h| in_use(&h)))
        .take(excess)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn labelled<T: Default>(hash: &str, with_meta: impl FnOnce(ObjectMeta) -> T) -> T {
        with_meta(ObjectMeta {
            labels: Some([(HASH_LABEL.to_owned(), hash.to_owned())].into()),
            ..Default::default()
        })
    }

    #[test]
    fn history_keeps_the_current_the_used_and_the_newest_old_revisions() {
        let revision = |hash: &str| {
            labelled(hash, |metadata| ControllerRevision {
                metadata,
                ..Default::default()
            })
        };
        let pod = |hash: &str| {
            Arc::new(labelled(hash, |metadata| Pod {
                metadata,
                ..Default::default()
            }))
        };
        let revisions: Vec<ControllerRevision> = ["a", "b", "c", "d", "cur"]
            .into_iter()
            .map(revision)
            .collect();
        let hashes = |limit, pods: &[Arc<Pod>]| -> Vec<String> {
            unused_revisions(&revisions, "cur", pods, limit)
                .iter()
                .map(|r| r.metadata.labels.as_ref().unwrap()[HASH_LABEL].clone())
                .collect()
        };
        assert_eq!(hashes(2, &[]), ["a", "b"]);
        assert_eq!(hashes(10, &[]), Vec::<String>::new());
        // A revision a pod still runs is kept, even over the limit.
        assert_eq!(hashes(2, &[pod("a")]), ["b", "c"]);
        assert_eq!(hashes(0, &[pod("b"), pod("cur")]), ["a", "c", "d"]);
    }
}
