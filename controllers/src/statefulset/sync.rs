//! One sync of one StatefulSet: revisions, the claims' owners as the
//! retention policy says, then one ordered step of creating, deleting or
//! updating pods, then status.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use skiff_informer::{Action, Cache, ObjectKey};

use super::retention::Retention;
use super::revision::{REVISION_LABEL, proposal};
use crate::controller_utils::api_message;
use crate::controller_utils::{WriteFailed, write_status};
use crate::controller_utils::{controller_owner_ref, now, workload_selector};
use crate::events::{EventRecorder, object_reference};
use crate::history::{History, owned_revisions, revision_hash, template_of};
use crate::manager::Reconciler;
use crate::pod_control::{
    WorkloadSyncError, claim, delete_pod, is_available, is_ready, phase, requeue_when_available,
};

/// What a sync needs.
pub(super) struct Syncer {
    pub client: Client,
    pub sets: Arc<Cache<StatefulSet>>,
    pub pods: Arc<Cache<Pod>>,
    pub revisions: Arc<Cache<ControllerRevision>>,
    pub claims: Arc<Cache<PersistentVolumeClaim>>,
    pub events: EventRecorder,
}

/// The ordinal of `pod` if it is named `<set>-<n>`.
pub(super) fn ordinal_of(set_name: &str, pod: &Pod) -> Option<i32> {
    pod.metadata
        .name
        .as_deref()?
        .strip_prefix(set_name)?
        .strip_prefix('-')?
        .parse()
        .ok()
}

fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// An optional count of the spec (`ordinals.start`, a rolling update's
/// `partition`): unset or negative reads as 0.
fn zero_or_more(count: Option<i32>) -> i32 {
    count.unwrap_or(0).max(0)
}

/// Running, Ready and not being deleted.
fn healthy(pod: &Pod) -> bool {
    phase(pod) == "Running" && is_ready(pod) && !is_terminating(pod)
}

impl Reconciler for Syncer {
    type Error = WorkloadSyncError;

    /// Syncs the StatefulSet under `key`.
    async fn sync(&self, key: ObjectKey) -> Result<Action, WorkloadSyncError> {
        let ns = key.namespace.clone().unwrap_or_default();
        let key_str = key.to_string();
        let Some(set) = self.sets.get(&ns, &key.name) else {
            return Ok(Action::Done);
        };
        let set = (*set).clone();
        let Some(selector) = workload_selector(set.spec.as_ref().map(|s| &s.selector)) else {
            return Ok(Action::Done);
        };
        let spec = set.spec.clone().unwrap_or_default();
        let name = set.name_any();
        let uid = set.metadata.uid.clone().unwrap_or_default();
        let pod_api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let deleting = set.metadata.deletion_timestamp.is_some();
        let candidates = self.pods.list_namespace(&ns);
        let pods = claim(&pod_api, &set, &selector, candidates).await?;
        let mut status = set.status.clone().unwrap_or_default();

        // Revisions.
        let mut revisions = owned_revisions(&self.revisions, &ns, &uid);
        let history = self.history(&ns, &key_str);
        let proposed = proposal(&set, &spec.template, status.collision_count);
        let sets: Api<StatefulSet> = Api::namespaced(self.client.clone(), &ns);
        let update = history
            .current_counting_collisions(&mut revisions, proposed, &sets, status.collision_count)
            .await?;
        let update_name = update.metadata.name.clone().unwrap_or_default();
        let current = status
            .current_revision
            .as_ref()
            .and_then(|c| {
                revisions
                    .iter()
                    .find(|r| r.metadata.name.as_ref() == Some(c))
            })
            .cloned()
            .unwrap_or_else(|| update.clone());
        let current_name = current.metadata.name.clone().unwrap_or_default();

        let replicas = spec.replicas.unwrap_or(1).max(0);
        let start = zero_or_more(spec.ordinals.as_ref().and_then(|o| o.start));
        let end = start + replicas;
        let parallel = spec.pod_management_policy.as_deref() == Some("Parallel");
        let strategy = spec.update_strategy.clone().unwrap_or_default();
        let on_delete = strategy.type_.as_deref() == Some("OnDelete");
        let partition = zero_or_more(strategy.rolling_update.as_ref().and_then(|r| r.partition));
        let min_ready = spec.min_ready_seconds.unwrap_or(0);

        let mut by_ordinal: BTreeMap<i32, Arc<Pod>> = BTreeMap::new();
        let mut condemned: Vec<Arc<Pod>> = Vec::new();
        for pod in &pods {
            match ordinal_of(&name, pod) {
                Some(o) if (start..end).contains(&o) => {
                    by_ordinal.insert(o, pod.clone());
                }
                _ => condemned.push(pod.clone()),
            }
        }
        condemned.sort_by_key(|p| std::cmp::Reverse(ordinal_of(&name, p).unwrap_or(i32::MAX)));

        if !deleting {
            self.keep_claim_owners(&set, &key_str, &by_ordinal, &condemned)
                .await?;
            self.step(
                &set,
                &key_str,
                &pod_api,
                &by_ordinal,
                &condemned,
                (start, end, partition),
                parallel,
                on_delete,
                (&current, &update),
            )
            .await?;
        }

        // Status over the pods as the caches show them.
        let at = now();
        let live: Vec<&Arc<Pod>> = pods.iter().filter(|p| !is_terminating(p)).collect();
        status.observed_generation = set.metadata.generation;
        status.replicas = live.len() as i32;
        status.ready_replicas = Some(live.iter().filter(|p| is_ready(p)).count() as i32);
        status.available_replicas = Some(
            live.iter()
                .filter(|p| is_available(p, min_ready, &at))
                .count() as i32,
        );
        status.current_replicas = Some(
            live.iter()
                .filter(|p| revision_hash(p) == Some(current_name.as_str()))
                .count() as i32,
        );
        status.updated_replicas = Some(
            live.iter()
                .filter(|p| revision_hash(p) == Some(update_name.as_str()))
                .count() as i32,
        );
        status.current_revision = Some(current_name);
        status.update_revision = Some(update_name.clone());
        if !on_delete
            && status.updated_replicas == Some(status.replicas)
            && status.ready_replicas == Some(status.replicas)
            && status.replicas == replicas
        {
            status.current_replicas = status.updated_replicas;
            status.current_revision = Some(update_name);
        }
        if Some(&status) != set.status.as_ref() {
            let api: Api<StatefulSet> = Api::namespaced(self.client.clone(), &ns);
            let mut body = serde_json::to_value(&status).unwrap_or_default();
            for f in [
                "readyReplicas",
                "availableReplicas",
                "currentReplicas",
                "updatedReplicas",
            ] {
                if body.get(f).is_none() {
                    body[f] = json!(0);
                }
            }
            let written = write_status(&api, &name, body)
                .await
                .map_err(|e| Self::err(&key_str, "updating status", e))?;
            if !written {
                return Ok(Action::Done);
            }
        }
        self.truncate_history(&set, &key_str, &revisions, &pods)
            .await?;
        Ok(requeue_when_available(&pods, min_ready, &at))
    }
}

impl Syncer {
    fn err(key: &str, what: &'static str, source: kube::Error) -> WorkloadSyncError {
        WriteFailed::new("statefulset", key, what, source).into()
    }

    /// Revision writes for the set `key` in `namespace`.
    fn history<'a>(&self, namespace: &str, key: &'a str) -> History<'a> {
        History {
            api: Api::namespaced(self.client.clone(), namespace),
            kind: "statefulset",
            key,
        }
    }

    /// Gives the claims of the set's pods the owners its retention policy
    /// asks for (condemned pods' claims first owned by their pod when
    /// `whenScaled: Delete`, before the pod is deleted).
    async fn keep_claim_owners(
        &self,
        set: &StatefulSet,
        key: &str,
        by_ordinal: &BTreeMap<i32, Arc<Pod>>,
        condemned: &[Arc<Pod>],
    ) -> Result<(), WorkloadSyncError> {
        let policy = Retention::of(set);
        let ns = set.namespace().unwrap_or_default();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &ns);
        let templates = set
            .spec
            .as_ref()
            .and_then(|s| s.volume_claim_templates.as_deref())
            .unwrap_or_default();
        let pods = by_ordinal
            .values()
            .map(|p| (p, false))
            .chain(condemned.iter().map(|p| (p, true)));
        for (pod, scaled_down) in pods {
            for template in templates {
                let template_name = template.metadata.name.as_deref().unwrap_or_default();
                let claim_name = format!("{template_name}-{}", pod.name_any());
                let Some(claim) = self.claims.get(&ns, &claim_name) else {
                    continue;
                };
                let Some(owners) = policy.owners_to_write(&claim, set, Some(pod), scaled_down)
                else {
                    continue;
                };
                let mut updated = (*claim).clone();
                updated.metadata.owner_references = Some(owners);
                match api
                    .replace(&claim_name, &PostParams::default(), &updated)
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(Self::err(key, "updating a claim's owners", e)),
                }
            }
        }
        Ok(())
    }

    /// One step towards the desired pods: create missing ordinals, remove
    /// failed and condemned pods, update outdated ones (highest first).
    #[allow(clippy::too_many_arguments)]
    async fn step(
        &self,
        set: &StatefulSet,
        key: &str,
        api: &Api<Pod>,
        by_ordinal: &BTreeMap<i32, Arc<Pod>>,
        condemned: &[Arc<Pod>],
        (start, end, partition): (i32, i32, i32),
        parallel: bool,
        on_delete: bool,
        (current, update): (&ControllerRevision, &ControllerRevision),
    ) -> Result<(), WorkloadSyncError> {
        let update_name = update.metadata.name.clone().unwrap_or_default();
        // Failed pods are replaced.
        for pod in by_ordinal.values() {
            if phase(pod) == "Failed" && !is_terminating(pod) {
                self.delete(set, api, pod).await?;
                if !parallel {
                    return Ok(());
                }
            }
        }
        for ordinal in start..end {
            match by_ordinal.get(&ordinal) {
                None => {
                    let (revision, rev_name) = if ordinal < start + partition {
                        (current, current.metadata.name.clone().unwrap_or_default())
                    } else {
                        (update, update_name.clone())
                    };
                    let template = template_of(revision)
                        .or_else(|| set.spec.as_ref().map(|s| s.template.clone()))
                        .unwrap_or_default();
                    self.create(set, key, api, ordinal, &template, &rev_name)
                        .await?;
                    if !parallel {
                        return Ok(());
                    }
                }
                Some(pod) if !parallel && !healthy(pod) => return Ok(()),
                Some(_) => {}
            }
        }
        let all_healthy = by_ordinal.values().all(|p| healthy(p));
        for pod in condemned {
            if is_terminating(pod) {
                if !parallel {
                    return Ok(());
                }
                continue;
            }
            if !parallel && !all_healthy {
                return Ok(());
            }
            self.delete(set, api, pod).await?;
            if !parallel {
                return Ok(());
            }
        }
        if on_delete || !all_healthy || by_ordinal.len() as i32 != end - start {
            return Ok(());
        }
        // Rolling update: highest ordinal first, one pod at a time.
        for ordinal in (start + partition..end).rev() {
            if let Some(pod) = by_ordinal.get(&ordinal)
                && revision_hash(pod) != Some(update_name.as_str())
            {
                self.delete(set, api, pod).await?;
                return Ok(());
            }
        }
        Ok(())
    }

    async fn create(
        &self,
        set: &StatefulSet,
        key: &str,
        api: &Api<Pod>,
        ordinal: i32,
        template: &PodTemplateSpec,
        revision: &str,
    ) -> Result<(), WorkloadSyncError> {
        let set_name = set.name_any();
        let ns = set.namespace().unwrap_or_default();
        let pod_name = format!("{set_name}-{ordinal}");
        let spec = set.spec.clone().unwrap_or_default();
        let mut claims: HashMap<String, String> = HashMap::new();
        let pvc_api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &ns);
        for claim_template in spec.volume_claim_templates.iter().flatten() {
            let template_name = claim_template.metadata.name.clone().unwrap_or_default();
            let claim_name = format!("{template_name}-{pod_name}");
            let mut labels = claim_template.metadata.labels.clone().unwrap_or_default();
            labels.extend(spec.selector.match_labels.clone().unwrap_or_default());
            let mut pvc = PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(claim_name.clone()),
                    namespace: Some(ns.clone()),
                    labels: Some(labels),
                    annotations: claim_template.metadata.annotations.clone(),
                    ..Default::default()
                },
                spec: claim_template.spec.clone(),
                status: None,
            };
            // Owned by the set from the start when it is to go with it.
            pvc.metadata.owner_references =
                Retention::of(set).owners_to_write(&pvc, set, None, false);
            self.create_reported(
                set,
                &pvc_api,
                &pvc,
                format!("create Claim {claim_name} for Pod {pod_name} in StatefulSet {set_name}"),
                format!(
                    "create Claim {claim_name} Pod {pod_name} in StatefulSet {set_name} success"
                ),
            )
            .await
            .map_err(|e| Self::err(key, "creating a claim", e))?;
            claims.insert(template_name, claim_name);
        }
        let meta = template.metadata.clone().unwrap_or_default();
        let mut labels = meta.labels.unwrap_or_default();
        labels.insert(
            "statefulset.kubernetes.io/pod-name".into(),
            pod_name.clone(),
        );
        labels.insert("apps.kubernetes.io/pod-index".into(), ordinal.to_string());
        labels.insert(REVISION_LABEL.into(), revision.to_owned());
        let mut pod_spec = template.spec.clone().unwrap_or_default();
        pod_spec.hostname = Some(pod_name.clone());
        if let Some(service) = spec.service_name.clone().filter(|s| !s.is_empty()) {
            pod_spec.subdomain = Some(service);
        }
        let volumes = pod_spec.volumes.get_or_insert_with(Vec::new);
        for (volume, claim_name) in &claims {
            volumes.retain(|v| &v.name != volume);
            volumes.push(Volume {
                name: volume.clone(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claim_name.clone(),
                    read_only: None,
                }),
                ..Default::default()
            });
        }
        if volumes.is_empty() {
            pod_spec.volumes = None;
        }
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some(pod_name.clone()),
                namespace: Some(ns),
                labels: Some(labels),
                annotations: meta.annotations,
                owner_references: Some(vec![controller_owner_ref(set)]),
                ..Default::default()
            },
            spec: Some(pod_spec),
            status: None,
        };
        self.create_reported(
            set,
            api,
            &pod,
            format!("create Pod {pod_name} in StatefulSet {set_name}"),
            format!("create Pod {pod_name} in StatefulSet {set_name} successful"),
        )
        .await
        .map_err(|e| Self::err(key, "creating a pod", e))
    }

    /// Creates `object` for `set` and reports it in upstream's words for a
    /// StatefulSet's claims and pods alike: `SuccessfulCreate` with
    /// `success`, or the warning `FailedCreate` "`attempt` failed error:
    /// <error>". One already there (an earlier sync made it) is no news.
    async fn create_reported<K>(
        &self,
        set: &StatefulSet,
        api: &Api<K>,
        object: &K,
        attempt: String,
        success: String,
    ) -> Result<(), kube::Error>
    where
        K: Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
    {
        let regarding = object_reference(set);
        match api.create(&PostParams::default(), object).await {
            Ok(_) => self
                .events
                .normal(&regarding, "SuccessfulCreate", "Create", success),
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => {
                let note = format!("{attempt} failed error: {}", api_message(&e));
                self.events
                    .warning(&regarding, "FailedCreate", "Create", note);
                return Err(e);
            }
        }
        Ok(())
    }

    async fn delete(
        &self,
        set: &StatefulSet,
        api: &Api<Pod>,
        pod: &Pod,
    ) -> Result<(), WorkloadSyncError> {
        let pod_name = pod.name_any();
        delete_pod(api, &pod_name).await?;
        self.events.normal(
            &object_reference(set),
            "SuccessfulDelete",
            "Delete",
            format!(
                "delete Pod {pod_name} in StatefulSet {} successful",
                set.name_any()
            ),
        );
        Ok(())
    }

    /// Deletes the oldest revisions no pod uses beyond revisionHistoryLimit.
    async fn truncate_history(
        &self,
        set: &StatefulSet,
        key: &str,
        revisions: &[ControllerRevision],
        pods: &[Arc<Pod>],
    ) -> Result<(), WorkloadSyncError> {
        let limit = set
            .spec
            .as_ref()
            .and_then(|s| s.revision_history_limit)
            .unwrap_or(10)
            .max(0) as usize;
        let status = set.status.clone().unwrap_or_default();
        let live: Vec<&ControllerRevision> = revisions
            .iter()
            .filter(|r| {
                let name = r.metadata.name.as_deref();
                name != status.current_revision.as_deref()
                    && name != status.update_revision.as_deref()
                    && !pods.iter().any(|p| revision_hash(p) == name)
                    && revisions.last().map(|l| l.revision) != Some(r.revision)
            })
            .collect();
        if live.len() <= limit {
            return Ok(());
        }
        self.history(&set.namespace().unwrap_or_default(), key)
            .delete(&live[..live.len() - limit])
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals_come_from_names() {
        let pod = |n: &str| Pod {
            metadata: ObjectMeta {
                name: Some(n.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(ordinal_of("web", &pod("web-3")), Some(3));
        assert_eq!(ordinal_of("web", &pod("web-x")), None);
        assert_eq!(ordinal_of("web", &pod("webby-1")), None);
        assert_eq!(ordinal_of("web", &pod("web-api-1")), None);
    }
}
