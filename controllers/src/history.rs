//! Controller history, shared by the StatefulSet and DaemonSet controllers:
//! each distinct pod template an owner has had is kept as a ControllerRevision
//! named `<owner>-<hash>`. Revisions are numbered in the order their templates
//! were last current, which is what `kubectl rollout history` lists and what
//! `kubectl rollout undo` patches back into the owner (the stored data is a
//! patch replacing `spec.template`).
//!
//! This module only reads and writes revisions; which revision a pod belongs
//! to, and which old revisions are still in use, is the owner's controller's
//! business.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use skiff_informer::Cache;

use crate::controller_utils::{WriteFailed, controlled_by, write_status};

/// Why the revision of an owner's current template could not be settled.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HistoryError {
    /// Reading or writing a revision failed.
    #[error(transparent)]
    Write(#[from] WriteFailed),
    /// The revision's name is taken by one storing a different template; the
    /// owner's `status.collisionCount` must grow so the next name differs.
    #[error("revision hash collision for {kind} {key}")]
    Collision {
        /// The owner's kind, as messages name it ("daemonset").
        kind: &'static str,
        /// The owner's namespace/name.
        key: String,
    },
}

/// The pod label naming the revision a StatefulSet's or DaemonSet's pod was
/// made from (upstream's `controller-revision-hash`).
pub(crate) const REVISION_HASH_LABEL: &str = "controller-revision-hash";

/// The revision `pod` was made from, by its [`REVISION_HASH_LABEL`].
pub(crate) fn revision_hash(pod: &Pod) -> Option<&str> {
    pod.labels().get(REVISION_HASH_LABEL).map(String::as_str)
}

/// What a revision stores: the template as a patch that replaces the owner's
/// `spec.template` (as upstream stores it, so `rollout undo` can apply it).
pub(crate) fn revision_data(template: &PodTemplateSpec) -> Value {
    let mut template = serde_json::to_value(template).unwrap_or(Value::Null);
    if let Some(map) = template.as_object_mut() {
        map.insert("$patch".into(), json!("replace"));
    }
    json!({"spec": {"template": template}})
}

/// The pod template a revision stores.
pub(crate) fn template_of(revision: &ControllerRevision) -> Option<PodTemplateSpec> {
    let mut template = revision
        .data
        .as_ref()?
        .0
        .get("spec")?
        .get("template")?
        .clone();
    if let Some(map) = template.as_object_mut() {
        map.remove("$patch");
    }
    serde_json::from_value(template).ok()
}

/// True when `revision` stores `template`.
pub(crate) fn stores(revision: &ControllerRevision, template: &PodTemplateSpec) -> bool {
    revision.data.as_ref().map(|d| &d.0) == Some(&revision_data(template))
}

/// The revision-to-be of an owner's template: named `<owner>-<hash>`, with
/// the template's labels plus `hash_label: hash`, controlled by the owner.
pub(crate) struct Proposal<'a> {
    /// The owner's metadata (name and namespace).
    pub owner: &'a ObjectMeta,
    /// The controller reference to the owner.
    pub owner_ref: OwnerReference,
    /// The template to store.
    pub template: &'a PodTemplateSpec,
    /// The label that carries the hash on the revision.
    pub hash_label: &'static str,
    /// The hash naming the revision.
    pub hash: String,
}

impl Proposal<'_> {
    /// The revision object, numbered `number`.
    fn revision(&self, number: i64) -> ControllerRevision {
        let owner_name = self.owner.name.clone().unwrap_or_default();
        let mut labels: BTreeMap<String, String> = self
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default();
        labels.insert(self.hash_label.into(), self.hash.clone());
        ControllerRevision {
            metadata: ObjectMeta {
                name: Some(format!("{owner_name}-{}", self.hash)),
                namespace: self.owner.namespace.clone(),
                labels: Some(labels),
                owner_references: Some(vec![self.owner_ref.clone()]),
                ..Default::default()
            },
            data: Some(RawExtension(revision_data(self.template))),
            revision: number,
        }
    }
}

/// The revisions in `namespace` that the owner with `uid` controls, oldest
/// number first: the order [`History::current`] expects them in.
pub(crate) fn owned_revisions(
    cache: &Cache<ControllerRevision>,
    namespace: &str,
    uid: &str,
) -> Vec<ControllerRevision> {
    let mut revisions: Vec<ControllerRevision> = controlled_by(cache, namespace, uid)
        .into_iter()
        .map(|r| (*r).clone())
        .collect();
    revisions.sort_by_key(|r| r.revision);
    revisions
}

/// Revision writes on behalf of one owner.
pub(crate) struct History<'a> {
    /// Revisions in the owner's namespace.
    pub api: Api<ControllerRevision>,
    /// The owner's kind, as messages name it ("statefulset").
    pub kind: &'static str,
    /// The owner's namespace/name.
    pub key: &'a str,
}

impl History<'_> {
    fn failed(&self, what: &'static str, source: kube::Error) -> HistoryError {
        WriteFailed::new(self.kind, self.key, what, source).into()
    }

    /// The revision storing the proposal's template. `revisions` are the
    /// owner's, sorted by number; an existing match that is not the newest
    /// is renumbered as the newest (a rollback), and with no match the
    /// proposal is created as the newest. `revisions` is kept up to date.
    pub(crate) async fn current(
        &self,
        revisions: &mut Vec<ControllerRevision>,
        proposal: Proposal<'_>,
    ) -> Result<ControllerRevision, HistoryError> {
        let newest = revisions.last().map_or(0, |r| r.revision);
        if let Some(i) = revisions.iter().position(|r| stores(r, proposal.template)) {
            if revisions[i].revision == newest {
                return Ok(revisions[i].clone());
            }
            let mut bumped = revisions[i].clone();
            bumped.revision = newest + 1;
            let updated = self
                .api
                .replace(&bumped.name_any(), &PostParams::default(), &bumped)
                .await
                .map_err(|e| self.failed("renumbering a revision", e))?;
            revisions.remove(i);
            revisions.push(updated.clone());
            return Ok(updated);
        }
        let revision = proposal.revision(newest + 1);
        match self.api.create(&PostParams::default(), &revision).await {
            Ok(created) => {
                revisions.push(created.clone());
                Ok(created)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let existing = self
                    .api
                    .get(&revision.name_any())
                    .await
                    .map_err(|e| self.failed("reading a revision", e))?;
                if stores(&existing, proposal.template) {
                    revisions.push(existing.clone());
                    revisions.sort_by_key(|r| r.revision);
                    return Ok(existing);
                }
                Err(HistoryError::Collision {
                    kind: self.kind,
                    key: self.key.to_owned(),
                })
            }
            Err(e) => Err(self.failed("creating a revision", e)),
        }
    }

    /// [`current`](Self::current), and on a hash collision one more count in
    /// the owner's `status.collisionCount` (written through `owners`;
    /// `collision_count` is the count now), so its next proposal hashes to a
    /// different name, as upstream's; the collision is still returned.
    pub(crate) async fn current_counting_collisions<K>(
        &self,
        revisions: &mut Vec<ControllerRevision>,
        proposal: Proposal<'_>,
        owners: &Api<K>,
        collision_count: Option<i32>,
    ) -> Result<ControllerRevision, HistoryError>
    where
        K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let owner = proposal.owner.name.clone().unwrap_or_default();
        let result = self.current(revisions, proposal).await;
        if let Err(HistoryError::Collision { .. }) = &result {
            let count = collision_count.unwrap_or(0).saturating_add(1);
            write_status(owners, &owner, json!({ "collisionCount": count }))
                .await
                .map_err(|e| self.failed("updating status", e))?;
        }
        result
    }

    /// Deletes `old` revisions (one already gone counts as deleted).
    pub(crate) async fn delete(&self, old: &[&ControllerRevision]) -> Result<(), HistoryError> {
        for r in old {
            match self.api.delete(&r.name_any(), &Default::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(self.failed("deleting an old revision", e)),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(image: &str) -> PodTemplateSpec {
        serde_json::from_value(json!({
            "metadata": {"labels": {"app": "db"}},
            "spec": {"containers": [{"name": "c", "image": image}]}
        }))
        .unwrap()
    }

    #[test]
    fn revisions_store_templates_under_the_owners_name_and_hash() {
        let owner = ObjectMeta {
            name: Some("db".into()),
            namespace: Some("ns".into()),
            ..Default::default()
        };
        let t = template("pg:1");
        let r = Proposal {
            owner: &owner,
            owner_ref: OwnerReference::default(),
            template: &t,
            hash_label: "controller-revision-hash",
            hash: "abc".into(),
        }
        .revision(3);
        assert_eq!(r.metadata.name.as_deref(), Some("db-abc"));
        assert_eq!(r.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(r.revision, 3);
        let labels = r.metadata.labels.clone().unwrap();
        assert_eq!(labels["app"], "db");
        assert_eq!(labels["controller-revision-hash"], "abc");
        assert!(stores(&r, &t));
        assert!(!stores(&r, &template("pg:2")));
        assert_eq!(template_of(&r), Some(t));
        assert_eq!(
            r.data.unwrap().0["spec"]["template"]["$patch"],
            json!("replace")
        );
    }
}
