//! One sync of one Deployment: claim its ReplicaSets, find or create the one
//! for the current template, scale (rolling, recreate or proportionally when
//! the Deployment itself was scaled), clean up history, write status.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use skiff_informer::{Action, Cache, ObjectKey};

use super::rolling::{
    Counts, max_scaled_down, new_rs_replicas, resolve_fenceposts, scale_down_old,
};
use super::status::{self, FOUND_NEW_RS, NEW_RS_CREATED, PAUSED, RESUMED, progress_deadline};
use super::util::{
    DESIRED_REPLICAS, MAX_REPLICAS, POD_TEMPLATE_HASH, REVISION, condition, desired,
    equal_ignoring_hash, new_condition, revision_of, rs_available, rs_replicas, set_condition,
    set_replica_set_annotations, template_hash,
};
use crate::controller_utils::WriteFailed;
use crate::controller_utils::{controller_owner_ref, controller_ref, workload_selector};
use crate::events::{EventRecorder, object_reference};
use crate::manager::Reconciler;
use crate::pod_control::{PodControlError, claim};

/// Why a Deployment sync failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub(crate) enum DeploymentError {
    /// Adopting or releasing ReplicaSets failed.
    #[error(transparent)]
    Claim(#[from] PodControlError),
    /// An API write failed.
    #[error(transparent)]
    Api(#[from] WriteFailed),
    /// The new ReplicaSet's name is taken by a different template; the
    /// collision count was raised and the next sync uses another hash.
    #[error("hash collision for deployment {0}: retrying with a new pod-template-hash")]
    HashCollision(String),
}

/// What a sync needs.
pub(super) struct Syncer {
    pub client: Client,
    pub deployments: Arc<Cache<Deployment>>,
    pub replica_sets: Arc<Cache<ReplicaSet>>,
    pub events: EventRecorder,
}

/// The Deployment and its ReplicaSets during one sync; ReplicaSets are
/// replaced by the API's answer after every write.
struct Rollout<'a> {
    syncer: &'a Syncer,
    key: String,
    d: Deployment,
    /// Oldest first.
    rss: Vec<ReplicaSet>,
    new: Option<usize>,
    max_surge: i32,
    max_unavailable: i32,
    rolling: bool,
}

fn creation_order(a: &ReplicaSet, b: &ReplicaSet) -> std::cmp::Ordering {
    let t = |rs: &ReplicaSet| rs.metadata.creation_timestamp.as_ref().map(|t| t.0);
    t(a).cmp(&t(b))
        .then_with(|| a.name_any().cmp(&b.name_any()))
}

impl Reconciler for Syncer {
    type Error = DeploymentError;

    /// Syncs the Deployment under `key`.
    async fn sync(&self, key: ObjectKey) -> Result<Action, DeploymentError> {
        let ns = key.namespace.clone().unwrap_or_default();
        let Some(d) = self.deployments.get(&ns, &key.name) else {
            return Ok(Action::Done);
        };
        let d = (*d).clone();
        let Some(selector) = workload_selector(d.spec.as_ref().map(|s| &s.selector)) else {
            tracing::warn!(deployment = %key, "empty or invalid selector; not managing it");
            return Ok(Action::Done);
        };
        let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &ns);
        let deleting = d.metadata.deletion_timestamp.is_some();
        let candidates = self.replica_sets.list_namespace(&ns);
        let owned = claim(&api, &d, &selector, candidates).await?;
        let mut rss: Vec<ReplicaSet> = owned.iter().map(|rs| (**rs).clone()).collect();
        rss.sort_by(creation_order);
        let spec = d.spec.clone().unwrap_or_default();
        let strategy = spec.strategy.clone().unwrap_or_default();
        let rolling = strategy.type_.as_deref() != Some("Recreate");
        let replicas = desired(&d);
        let (max_surge, max_unavailable) = if rolling {
            let ru = strategy.rolling_update.clone().unwrap_or_default();
            let (s, u) =
                resolve_fenceposts(ru.max_surge.as_ref(), ru.max_unavailable.as_ref(), replicas);
            (s, u.min(replicas))
        } else {
            (0, 0)
        };
        let mut rollout = Rollout {
            syncer: self,
            key: key.to_string(),
            d,
            rss,
            new: None,
            max_surge,
            max_unavailable,
            rolling,
        };
        if deleting {
            rollout.find_new();
            return rollout.write_status(false).await;
        }
        rollout.check_paused_condition();
        if spec.paused == Some(true) {
            return rollout.sync_scale_only().await;
        }
        rollout.find_new();
        if rollout.is_scaling_event() {
            return rollout.sync_scale_only().await;
        }
        if rolling {
            rollout.rolling_update().await
        } else {
            rollout.recreate().await
        }
    }
}

impl Rollout<'_> {
    fn ns(&self) -> String {
        self.d.namespace().unwrap_or_default()
    }

    fn rs_api(&self) -> Api<ReplicaSet> {
        Api::namespaced(self.syncer.client.clone(), &self.ns())
    }

    fn api_error(&self, what: &'static str, source: kube::Error) -> DeploymentError {
        WriteFailed::new("deployment", &self.key, what, source).into()
    }

    /// Writes `rs` over the ReplicaSet at `i` (`what` names the write in
    /// the error) and keeps the API's answer in its place.
    async fn replace_rs(
        &mut self,
        i: usize,
        rs: &ReplicaSet,
        what: &'static str,
    ) -> Result<(), DeploymentError> {
        self.rss[i] = self
            .rs_api()
            .replace(&rs.name_any(), &PostParams::default(), rs)
            .await
            .map_err(|e| self.api_error(what, e))?;
        Ok(())
    }

    fn status_mut(&mut self) -> &mut DeploymentStatus {
        self.d.status.get_or_insert_with(Default::default)
    }

    fn new_rs(&self) -> Option<&ReplicaSet> {
        self.new.map(|i| &self.rss[i])
    }

    fn old_indexes(&self) -> Vec<usize> {
        (0..self.rss.len())
            .filter(|i| Some(*i) != self.new)
            .collect()
    }

    /// The old ReplicaSets that still want pods: those both rollout
    /// strategies scale down.
    fn scaled_old_indexes(&self) -> Vec<usize> {
        self.old_indexes()
            .into_iter()
            .filter(|i| rs_replicas(&self.rss[*i]) > 0)
            .collect()
    }

    /// The ReplicaSet whose template is the Deployment's (the oldest such).
    fn find_new(&mut self) {
        let template = self.d.spec.as_ref().map(|s| &s.template);
        self.new = self.rss.iter().position(|rs| {
            equal_ignoring_hash(template, rs.spec.as_ref().and_then(|s| s.template.as_ref()))
        });
    }

    /// Progressing Unknown while paused, and once more on resume.
    fn check_paused_condition(&mut self) {
        if progress_deadline(&self.d).is_none() {
            return;
        }
        let paused = self.d.spec.as_ref().and_then(|s| s.paused) == Some(true);
        let status = self.d.status.clone().unwrap_or_default();
        let paused_cond =
            condition(&status, "Progressing").is_some_and(|c| c.reason.as_deref() == Some(PAUSED));
        if paused && !paused_cond {
            set_condition(
                self.status_mut(),
                new_condition(
                    "Progressing",
                    "Unknown",
                    PAUSED,
                    "Deployment is paused".into(),
                ),
            );
        } else if !paused && paused_cond {
            set_condition(
                self.status_mut(),
                new_condition(
                    "Progressing",
                    "Unknown",
                    RESUMED,
                    "Deployment is resumed".into(),
                ),
            );
        }
    }

    /// True when the Deployment's replicas changed since its active
    /// ReplicaSets were last sized.
    fn is_scaling_event(&self) -> bool {
        let replicas = desired(&self.d).to_string();
        self.rss.iter().filter(|rs| rs_replicas(rs) > 0).any(|rs| {
            rs.annotations()
                .get(DESIRED_REPLICAS)
                .is_some_and(|v| *v != replicas)
        })
    }

    /// Revisions: the new ReplicaSet (found or created) gets max(old) + 1 and
    /// the Deployment carries it.
    async fn sync_revision(&mut self, create: bool) -> Result<(), DeploymentError> {
        let max_old = self
            .old_indexes()
            .iter()
            .map(|i| revision_of(self.rss[*i].metadata.annotations.as_ref()))
            .max()
            .unwrap_or(0);
        let revision = max_old + 1;
        match self.new {
            Some(i) => {
                let mut rs = self.rss[i].clone();
                let mut changed =
                    set_replica_set_annotations(&mut rs, &self.d, Some(revision), self.max_surge);
                // keep desired/max as they were: only a scale changes those
                for k in [DESIRED_REPLICAS, MAX_REPLICAS] {
                    let before = self.rss[i].annotations().get(k).cloned();
                    let annotations = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
                    match before {
                        Some(v) => annotations.insert(k.to_owned(), v),
                        None => annotations.remove(k),
                    };
                }
                changed = changed && rs.metadata.annotations != self.rss[i].metadata.annotations;
                let min_ready = self.d.spec.as_ref().and_then(|s| s.min_ready_seconds);
                let spec = rs.spec.get_or_insert_with(Default::default);
                if spec.min_ready_seconds != min_ready {
                    spec.min_ready_seconds = min_ready;
                    changed = true;
                }
                if changed {
                    self.replace_rs(i, &rs, "updating replica set").await?;
                }
                let has_progressing = self
                    .d
                    .status
                    .as_ref()
                    .is_some_and(|s| condition(s, "Progressing").is_some());
                if !has_progressing && progress_deadline(&self.d).is_some() {
                    let msg = format!("Found new replica set \"{}\"", self.rss[i].name_any());
                    set_condition(
                        self.status_mut(),
                        new_condition("Progressing", "True", FOUND_NEW_RS, msg),
                    );
                }
            }
            None if create => self.create_new(revision).await?,
            None => {}
        }
        if let Some(i) = self.new {
            let rev = revision_of(self.rss[i].metadata.annotations.as_ref());
            if rev > 0 && revision_of(self.d.metadata.annotations.as_ref()) != rev {
                self.set_deployment_revision(rev).await?;
            }
        }
        Ok(())
    }

    async fn set_deployment_revision(&mut self, revision: i64) -> Result<(), DeploymentError> {
        let api: Api<Deployment> = Api::namespaced(self.syncer.client.clone(), &self.ns());
        let patch = json!({"metadata": {"annotations": {REVISION: revision.to_string()}}});
        let updated = api
            .patch(
                &self.d.name_any(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
            .map_err(|e| self.api_error("setting the revision", e))?;
        let status = self.d.status.take();
        self.d = updated;
        self.d.status = status;
        Ok(())
    }

    async fn create_new(&mut self, revision: i64) -> Result<(), DeploymentError> {
        let spec = self.d.spec.clone().unwrap_or_default();
        let collision = self.d.status.as_ref().and_then(|s| s.collision_count);
        let hash = template_hash(&spec.template, collision);
        let mut template = spec.template.clone();
        template
            .metadata
            .get_or_insert_with(Default::default)
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(POD_TEMPLATE_HASH.into(), hash.clone());
        let mut selector = spec.selector.clone();
        selector
            .match_labels
            .get_or_insert_with(BTreeMap::new)
            .insert(POD_TEMPLATE_HASH.into(), hash.clone());
        let replicas = if self.rolling {
            let all: i32 = self.rss.iter().map(rs_replicas).sum();
            new_rs_replicas(desired(&self.d), self.max_surge, all, 0)
        } else {
            desired(&self.d)
        };
        let name = format!("{}-{hash}", self.d.name_any());
        let mut rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(self.ns()),
                labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
                owner_references: Some(vec![controller_owner_ref(&self.d)]),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(replicas),
                min_ready_seconds: spec.min_ready_seconds,
                selector,
                template: Some(template),
            }),
            status: None,
        };
        set_replica_set_annotations(&mut rs, &self.d, Some(revision), self.max_surge);
        let created = match self.rs_api().create(&PostParams::default(), &rs).await {
            Ok(created) => created,
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let existing = self
                    .rs_api()
                    .get(&name)
                    .await
                    .map_err(|e| self.api_error("reading the new replica set", e))?;
                let ours = controller_ref(&existing.metadata)
                    .is_some_and(|r| Some(&r.uid) == self.d.metadata.uid.as_ref());
                let same = equal_ignoring_hash(
                    Some(&spec.template),
                    existing.spec.as_ref().and_then(|s| s.template.as_ref()),
                );
                if ours && same {
                    self.rss.push(existing);
                    self.new = Some(self.rss.len() - 1);
                    return Ok(());
                }
                let status = self.status_mut();
                status.collision_count = Some(status.collision_count.unwrap_or(0) + 1);
                self.write_status(false).await?;
                return Err(DeploymentError::HashCollision(self.key.clone()));
            }
            Err(e) => return Err(self.api_error("creating the new replica set", e)),
        };
        if replicas > 0 {
            self.syncer.events.normal(
                &object_reference(&self.d),
                "ScalingReplicaSet",
                "Scale",
                format!("Scaled up replica set {name} from 0 to {replicas}"),
            );
        }
        if progress_deadline(&self.d).is_some() {
            set_condition(
                self.status_mut(),
                new_condition(
                    "Progressing",
                    "True",
                    NEW_RS_CREATED,
                    format!("Created new replica set \"{name}\""),
                ),
            );
        }
        self.rss.push(created);
        self.new = Some(self.rss.len() - 1);
        Ok(())
    }

    /// Sets ReplicaSet `i` to `size` (and its desired/max annotations).
    /// Returns true when its size changed.
    async fn scale(&mut self, i: usize, size: i32) -> Result<bool, DeploymentError> {
        let from = rs_replicas(&self.rss[i]);
        let mut rs = self.rss[i].clone();
        let annotations_changed =
            set_replica_set_annotations(&mut rs, &self.d, None, self.max_surge);
        if from == size && !annotations_changed {
            return Ok(false);
        }
        rs.spec.get_or_insert_with(Default::default).replicas = Some(size);
        self.replace_rs(i, &rs, "scaling a replica set").await?;
        if from != size {
            let direction = if size > from { "up" } else { "down" };
            self.syncer.events.normal(
                &object_reference(&self.d),
                "ScalingReplicaSet",
                "Scale",
                format!(
                    "Scaled {direction} replica set {} from {from} to {size}",
                    rs.name_any()
                ),
            );
        }
        Ok(from != size)
    }

    async fn rolling_update(mut self) -> Result<Action, DeploymentError> {
        self.sync_revision(true).await?;
        let Some(new) = self.new else {
            return self.write_status(true).await;
        };
        let replicas = desired(&self.d);
        // Grow the new ReplicaSet within the surge.
        let new_size = rs_replicas(&self.rss[new]);
        let all: i32 = self.rss.iter().map(rs_replicas).sum();
        let target = if new_size > replicas {
            replicas
        } else {
            new_rs_replicas(replicas, self.max_surge, all, new_size)
        };
        if target != new_size && self.scale(new, target).await? {
            return self.write_status(true).await;
        }
        // Shrink old ones within maxUnavailable.
        let olds = self.scaled_old_indexes();
        if !olds.is_empty() {
            let all: i32 = self.rss.iter().map(rs_replicas).sum();
            let new_counts = Counts {
                spec: rs_replicas(&self.rss[new]),
                available: rs_available(&self.rss[new]),
            };
            let budget = max_scaled_down(all, replicas, self.max_unavailable, new_counts);
            if budget > 0 {
                let counts: Vec<Counts> = olds
                    .iter()
                    .map(|i| Counts {
                        spec: rs_replicas(&self.rss[*i]),
                        available: rs_available(&self.rss[*i]),
                    })
                    .collect();
                let available: i32 = self.rss.iter().map(rs_available).sum();
                let sizes =
                    scale_down_old(&counts, budget, available, replicas - self.max_unavailable);
                let mut scaled = false;
                for (i, size) in olds.iter().zip(sizes) {
                    if size != rs_replicas(&self.rss[*i]) {
                        scaled |= self.scale(*i, size).await?;
                    }
                }
                if scaled {
                    return self.write_status(true).await;
                }
            }
        }
        self.cleanup_if_complete().await?;
        self.write_status(true).await
    }

    async fn recreate(mut self) -> Result<Action, DeploymentError> {
        self.sync_revision(false).await?;
        let olds = self.scaled_old_indexes();
        let mut scaled = false;
        for i in olds {
            scaled |= self.scale(i, 0).await?;
        }
        if scaled {
            return self.write_status(true).await;
        }
        let old_running = self
            .old_indexes()
            .iter()
            .any(|i| self.rss[*i].status.as_ref().is_some_and(|s| s.replicas > 0));
        if old_running {
            return self.write_status(true).await;
        }
        if self.new.is_none() {
            self.sync_revision(true).await?;
        }
        if let Some(new) = self.new {
            let replicas = desired(&self.d);
            self.scale(new, replicas).await?;
        }
        self.cleanup_if_complete().await?;
        self.write_status(true).await
    }

    /// Paused Deployments and scaling events: size ReplicaSets to the
    /// Deployment's replicas without rolling anything out.
    async fn sync_scale_only(mut self) -> Result<Action, DeploymentError> {
        self.find_new();
        self.sync_revision(false).await?;
        self.proportional_scale().await?;
        if self.d.spec.as_ref().and_then(|s| s.paused) == Some(true) {
            self.cleanup().await?;
        }
        self.write_status(false).await
    }

    /// Upstream's scale(): one active ReplicaSet takes the whole change; a
    /// saturated new one lets the old ones go; otherwise the change is spread
    /// over active ReplicaSets in proportion to their size.
    async fn proportional_scale(&mut self) -> Result<(), DeploymentError> {
        let replicas = desired(&self.d);
        let active: Vec<usize> = (0..self.rss.len())
            .filter(|i| rs_replicas(&self.rss[*i]) > 0)
            .collect();
        let single = match active.len() {
            0 => self.new.or_else(|| self.rss.len().checked_sub(1)),
            1 => Some(active[0]),
            _ => None,
        };
        if let Some(i) = single {
            self.scale(i, replicas).await?;
            return Ok(());
        }
        if let Some(new) = self.new {
            let rs = &self.rss[new];
            let saturated = rs_replicas(rs) == replicas
                && rs.annotations().get(DESIRED_REPLICAS) == Some(&replicas.to_string())
                && rs_available(rs) == replicas;
            if saturated {
                for i in self.old_indexes() {
                    if rs_replicas(&self.rss[i]) > 0 {
                        self.scale(i, 0).await?;
                    }
                }
                return Ok(());
            }
        }
        if !self.rolling {
            return Ok(());
        }
        let all: i32 = active.iter().map(|i| rs_replicas(&self.rss[*i])).sum();
        let allowed = replicas + self.max_surge;
        let to_add = allowed - all;
        if to_add == 0 {
            return Ok(());
        }
        let mut order = active.clone();
        // largest first; newer first on ties when growing, older when shrinking
        order.sort_by(|a, b| {
            let (ra, rb) = (&self.rss[*a], &self.rss[*b]);
            rs_replicas(rb).cmp(&rs_replicas(ra)).then_with(|| {
                if to_add > 0 {
                    creation_order(rb, ra)
                } else {
                    creation_order(ra, rb)
                }
            })
        });
        let status_replicas = self.d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        let mut added = 0;
        let mut sizes: Vec<(usize, i32)> = Vec::new();
        for i in &order {
            let rs = &self.rss[*i];
            let size = rs_replicas(rs);
            let annotated_max = rs
                .annotations()
                .get(MAX_REPLICAS)
                .and_then(|v| v.parse::<i32>().ok())
                .unwrap_or(status_replicas);
            let fraction = if replicas == 0 {
                -size
            } else if annotated_max == 0 {
                0
            } else {
                let scaled = (f64::from(size) * f64::from(allowed) / f64::from(annotated_max))
                    .round() as i32;
                scaled - size
            };
            let left = to_add - added;
            let share = if to_add > 0 {
                fraction.min(left)
            } else {
                fraction.max(left)
            };
            added += share;
            sizes.push((*i, size + share));
        }
        if let Some(first) = sizes.first_mut() {
            first.1 = (first.1 + to_add - added).max(0);
        }
        for (i, size) in sizes {
            self.scale(i, size.max(0)).await?;
        }
        Ok(())
    }

    async fn cleanup_if_complete(&mut self) -> Result<(), DeploymentError> {
        let status = status::calculate(&self.d, &self.rss, self.new_rs(), self.max_unavailable);
        if status::complete(&self.d, &status) {
            self.cleanup().await?;
        }
        Ok(())
    }

    /// Deletes the oldest scaled-down ReplicaSets beyond revisionHistoryLimit.
    async fn cleanup(&mut self) -> Result<(), DeploymentError> {
        let Some(limit) = self.d.spec.as_ref().and_then(|s| s.revision_history_limit) else {
            return Ok(());
        };
        let mut cleanable: Vec<usize> = self
            .old_indexes()
            .into_iter()
            .filter(|i| {
                let rs = &self.rss[*i];
                rs_replicas(rs) == 0
                    && rs.status.as_ref().is_none_or(|s| s.replicas == 0)
                    && rs.metadata.deletion_timestamp.is_none()
                    && rs.status.as_ref().and_then(|s| s.observed_generation)
                        >= rs.metadata.generation
            })
            .collect();
        let excess = cleanable.len() as i64 - i64::from(limit.max(0));
        if excess <= 0 {
            return Ok(());
        }
        cleanable.sort_by_key(|i| revision_of(self.rss[*i].metadata.annotations.as_ref()));
        let api = self.rs_api();
        for i in cleanable.into_iter().take(excess as usize) {
            let name = self.rss[i].name_any();
            match api.delete(&name, &Default::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(self.api_error("deleting an old replica set", e)),
            }
        }
        Ok(())
    }

    /// Computes and writes status (with the Progressing condition of a
    /// rollout when `rollout`), and asks to come back at the deadline.
    async fn write_status(&mut self, rollout: bool) -> Result<Action, DeploymentError> {
        let mut status = status::calculate(&self.d, &self.rss, self.new_rs(), self.max_unavailable);
        if rollout {
            status::set_progressing(&self.d, &mut status, self.new_rs());
        }
        let requeue = if rollout {
            status::seconds_to_deadline(&self.d, &status)
        } else {
            None
        };
        let old = self.d.status.take().unwrap_or_default();
        let current = self
            .syncer
            .deployments
            .get(&self.ns(), &self.d.name_any())
            .and_then(|d| d.status.clone())
            .unwrap_or_default();
        if status != old || status != current {
            let api: Api<Deployment> = Api::namespaced(self.syncer.client.clone(), &self.ns());
            let mut body = serde_json::to_value(&status).unwrap_or_default();
            if status.conditions.is_none() {
                body["conditions"] = serde_json::Value::Null;
            }
            api.patch_status(
                &self.d.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": body })),
            )
            .await
            .map_err(|e| self.api_error("updating status", e))?;
        }
        Ok(match requeue {
            Some(s) => Action::RequeueAfter(Duration::from_secs(s.max(1) as u64)),
            None => Action::Done,
        })
    }
}
