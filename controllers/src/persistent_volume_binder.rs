//! The part of upstream's persistent volume controller
//! (`persistentvolume-binder`) that nothing else in skiff does: a claim that
//! names no StorageClass and was created while none was marked default gets
//! the default class once one is (upstream's retroactive default
//! StorageClass assignment). A claim created after that already has it from
//! DefaultStorageClass admission. Provisioning and binding are the
//! provisioner's (`local_path_provisioner` for skiff's own class);
//! until a pod is scheduled with it, a claim of a `WaitForFirstConsumer`
//! class is told why it is Pending, in the event upstream records, and once
//! placed (or of an immediate class) that it waits for its provisioner. A volume
//! whose claim is gone is marked Released (`persistent_volume_release`).
//!
//! It acts as the `persistent-volume-binder` service account, which may
//! update claims, read StorageClasses and volumes and write volumes'
//! status, and it only ever sets the class
//! of an unbound claim that names none; `storageClassName: ""` asks for no
//! class and is left alone, as upstream leaves it.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use skiff_common::default_class::{
    BETA_STORAGE_CLASS_MARKER, Candidate, STORAGE_CLASS_MARKER, newest_default,
};
use skiff_informer::{Action, Cache, HandlerFns, ObjectKey};

use crate::controller_utils::{done_or_gone, unbound_claim};
use crate::events::{EventRecorder, object_reference};
use crate::manager::{Context, Reconciler, Stop, keyed_by, run_until_stopped};

/// The annotation that named a claim's class before `storageClassName`.
const LEGACY_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";
/// Set by the scheduler on a delayed claim once its first pod has a node.
const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";
/// The provisioner of classes whose volumes an administrator makes by hand.
const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";
/// Upstream's name for this controller's events.
const CONTROLLER: &str = "persistentvolume-controller";

/// Why a claim's class could not be set.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BinderError {
    /// The update of the claim failed (a conflict is retried).
    #[error("setting the default StorageClass of claim {claim}: {source}")]
    Update {
        /// namespace/name.
        claim: String,
        /// The API's error.
        #[source]
        source: kube::Error,
    },
}

struct Syncer {
    client: kube::Client,
    events: EventRecorder,
    claims: Arc<Cache<PersistentVolumeClaim>>,
    classes: Arc<Cache<StorageClass>>,
}

/// Runs the controller until `stop`.
pub(crate) async fn run(ctx: Context, stop: Stop) {
    let release = crate::persistent_volume_release::run(ctx.clone(), stop.clone());
    tokio::join!(assign_default_classes(ctx, stop), release);
}

/// The default StorageClass of claims made before there was one.
async fn assign_default_classes(ctx: Context, stop: Stop) {
    let claims = ctx.factory.informer::<PersistentVolumeClaim>();
    let classes = ctx.factory.informer::<StorageClass>();
    let syncer = Arc::new(Syncer {
        client: ctx.client.clone(),
        events: EventRecorder::new(ctx.client.clone(), CONTROLLER),
        claims: claims.cache().clone(),
        classes: classes.cache().clone(),
    });
    let controller = keyed_by("persistentvolume-binder", &claims);
    // A class added or marked default may be what every waiting claim lacks.
    let wake_waiting = {
        let (queue, claims) = (controller.queue().clone(), claims.cache().clone());
        move || {
            for claim in claims.list().iter().filter(|c| waits_for_default(c)) {
                queue.add(ObjectKey::from_object(claim.as_ref()));
            }
        }
    };
    let on_update = wake_waiting.clone();
    let class_handler = HandlerFns::new()
        .on_add(move |_: &Arc<StorageClass>| wake_waiting())
        .on_update(move |_, _: &Arc<StorageClass>| on_update());
    let controller = controller.watch(&classes, class_handler);
    run_until_stopped(controller, syncer, stop).await;
}

/// Whether `claim` names no class in any way and is not bound or going.
fn waits_for_default(claim: &PersistentVolumeClaim) -> bool {
    let unbound_without_class = claim.spec.as_ref().is_some_and(|s| {
        s.storage_class_name.is_none() && s.volume_name.as_deref().unwrap_or_default().is_empty()
    });
    unbound_without_class
        && !claim.annotations().contains_key(LEGACY_CLASS_ANNOTATION)
        && claim.metadata.deletion_timestamp.is_none()
}

/// The default StorageClass among `classes`, if one is marked.
fn default_class(classes: &[Arc<StorageClass>]) -> Option<String> {
    let created: Vec<String> = classes
        .iter()
        .map(|c| {
            c.metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.to_string())
                .unwrap_or_default()
        })
        .collect();
    let markers = [STORAGE_CLASS_MARKER, BETA_STORAGE_CLASS_MARKER];
    let candidates = classes.iter().zip(&created).filter_map(|(class, created)| {
        let name = class.metadata.name.as_deref()?;
        Some(Candidate::new(
            name,
            created,
            class.metadata.annotations.as_ref(),
            &markers,
        ))
    });
    newest_default(candidates).map(str::to_owned)
}

impl Syncer {
    /// Whether `claim` is unbound with a class that binds only once a pod
    /// using it is scheduled, and no pod has been yet.
    fn waits_for_consumer(&self, claim: &PersistentVolumeClaim) -> bool {
        self.pending_class(claim).is_some_and(|class| {
            class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer")
                && !claim.annotations().contains_key(SELECTED_NODE_ANNOTATION)
        })
    }

    /// The provisioner an unbound claim now waits for: its class's, once
    /// the claim may be provisioned (placed, or not delayed), unless the
    /// class provisions nothing.
    fn waits_for_provisioner(&self, claim: &PersistentVolumeClaim) -> Option<String> {
        let class = self.pending_class(claim)?;
        let delayed = class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer");
        let placed = claim.annotations().contains_key(SELECTED_NODE_ANNOTATION);
        (class.provisioner != NO_PROVISIONER && (placed || !delayed))
            .then(|| class.provisioner.clone())
    }

    /// The class of a live claim that names no volume yet.
    fn pending_class(&self, claim: &PersistentVolumeClaim) -> Option<Arc<StorageClass>> {
        if !unbound_claim(claim) {
            return None;
        }
        let name = claim.spec.as_ref()?.storage_class_name.as_deref()?;
        self.classes.get("", name).filter(|_| !name.is_empty())
    }
}

impl Reconciler for Syncer {
    type Error = BinderError;

    /// Gives the claim under `key` the default class, if it waits for one
    /// and one exists.
    async fn sync(&self, key: ObjectKey) -> Result<Action, BinderError> {
        let namespace = key.namespace.clone().unwrap_or_default();
        let Some(claim) = self.claims.get(&namespace, &key.name) else {
            return Ok(Action::Done);
        };
        if !waits_for_default(&claim) {
            if self.waits_for_consumer(&claim) {
                self.events.normal(
                    &object_reference(claim.as_ref()),
                    "WaitForFirstConsumer",
                    // events.k8s.io/v1 requires an action; upstream's
                    // legacy event has none to copy.
                    "Binding",
                    "waiting for first consumer to be created before binding",
                );
            } else if let Some(provisioner) = self.waits_for_provisioner(&claim) {
                self.events.normal(
                    &object_reference(claim.as_ref()),
                    "ExternalProvisioning",
                    "Provisioning",
                    format!(
                        "Waiting for a volume to be created either by the external provisioner '{provisioner}' \
                         or manually by the system administrator. If volume creation is delayed, please verify \
                         that the provisioner is running and correctly registered."
                    ),
                );
            }
            return Ok(Action::Done);
        }
        let Some(class) = default_class(&self.classes.list()) else {
            return Ok(Action::Done);
        };
        // A replace of the version judged here: a claim changed meanwhile
        // is a conflict, and its next sync judges it again.
        let mut updated = (*claim).clone();
        if let Some(spec) = updated.spec.as_mut() {
            spec.storage_class_name = Some(class.clone());
        }
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &namespace);
        let written = api
            .replace(&key.name, &PostParams::default(), &updated)
            .await
            .inspect(|_| tracing::info!(claim = %key, %class, "assigned the default StorageClass"));
        done_or_gone(written, |source| BinderError::Update {
            claim: key.to_string(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(spec: serde_json::Value, annotations: serde_json::Value) -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "default", "annotations": annotations},
            "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn only_an_unbound_claim_naming_no_class_waits_for_the_default() {
        let cases = [
            (json!({}), json!({}), true),
            (json!({"storageClassName": ""}), json!({}), false),
            (json!({"storageClassName": "fast"}), json!({}), false),
            (json!({"volumeName": "pv-1"}), json!({}), false),
            (json!({}), json!({LEGACY_CLASS_ANNOTATION: "fast"}), false),
        ];
        for (spec, annotations, waits) in cases {
            let claim = claim(spec.clone(), annotations);
            assert_eq!(waits_for_default(&claim), waits, "{spec}");
        }
    }
}
