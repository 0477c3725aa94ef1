//! The persistent volume controller's release step: a volume whose claim
//! is gone (deleted, or replaced by a claim of the same name with another
//! UID) goes from Bound to `Released`, keeping its `claimRef`, as upstream
//! marks it. What happens to the storage is the reclaim policy's business:
//! a `Retain` volume stays Released for an administrator; a `Delete` one is
//! removed by its provisioner (skiff's local-path volumes by the node
//! agent that holds their directory).
//!
//! The claims cache may lag a claim created a moment ago, so a claim missing
//! from it is looked up on the API server before its volume is released.
//! Runs as part of `persistentvolume-binder`, whose account may read
//! volumes and write their status.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use kube::api::{Patch, PatchParams};
use skiff_informer::{Action, Cache, HandlerFns, ObjectKey};

use crate::controller_utils::done_or_gone;
use crate::manager::{Context, Reconciler, Stop, keyed_by, run_until_stopped};

/// Why a volume's claim could not be checked or its phase written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReleaseError {
    /// Looking the claim up on the API server failed.
    #[error("looking up claim {claim} of volume {volume}: {source}")]
    Claim {
        /// The volume.
        volume: String,
        /// namespace/name of its claim.
        claim: String,
        /// The API's error.
        #[source]
        source: kube::Error,
    },
    /// Writing the volume's status failed.
    #[error("marking volume {volume} Released: {source}")]
    Status {
        /// The volume.
        volume: String,
        /// The API's error.
        #[source]
        source: kube::Error,
    },
}

struct Releaser {
    client: kube::Client,
    volumes: Arc<Cache<PersistentVolume>>,
    claims: Arc<Cache<PersistentVolumeClaim>>,
}

/// Runs the release step until `stop`.
pub(crate) async fn run(ctx: Context, stop: Stop) {
    let volumes = ctx.factory.informer::<PersistentVolume>();
    let claims = ctx.factory.informer::<PersistentVolumeClaim>();
    let releaser = Arc::new(Releaser {
        client: ctx.client.clone(),
        volumes: volumes.cache().clone(),
        claims: claims.cache().clone(),
    });
    let controller = keyed_by("persistentvolume-release", &volumes);
    // A claim that goes may leave a volume bound to nothing.
    let (queue, cache) = (controller.queue().clone(), volumes.cache().clone());
    let on_delete = move |claim: &Arc<PersistentVolumeClaim>| {
        for volume in cache
            .list()
            .iter()
            .filter(|v| claim_of(v).is_some_and(|c| c.names(claim)))
        {
            queue.add(ObjectKey::from_object(volume.as_ref()));
        }
    };
    let controller = controller.watch(&claims, HandlerFns::new().on_delete(on_delete));
    run_until_stopped(controller, releaser, stop).await;
}

/// The claim a volume is bound to, as its `claimRef` names it.
struct ClaimRef<'a> {
    namespace: &'a str,
    name: &'a str,
    /// Empty when the reference names no UID (a volume pre-bound by name).
    uid: &'a str,
}

impl ClaimRef<'_> {
    /// Whether `claim` is the one referred to (by UID when one is named).
    fn names(&self, claim: &PersistentVolumeClaim) -> bool {
        let meta = &claim.metadata;
        meta.namespace.as_deref() == Some(self.namespace)
            && meta.name.as_deref() == Some(self.name)
            && (self.uid.is_empty() || meta.uid.as_deref() == Some(self.uid))
    }
}

fn claim_of(volume: &PersistentVolume) -> Option<ClaimRef<'_>> {
    let claim = volume.spec.as_ref()?.claim_ref.as_ref()?;
    Some(ClaimRef {
        namespace: claim.namespace.as_deref().filter(|n| !n.is_empty())?,
        name: claim.name.as_deref().filter(|n| !n.is_empty())?,
        uid: claim.uid.as_deref().unwrap_or_default(),
    })
}

/// Whether `volume` is one the release step judges: bound to a claim that
/// it names by UID (a volume reserved for a claim by name alone waits for
/// that claim, as upstream's does).
fn bound_by_uid(volume: &PersistentVolume) -> bool {
    let phase = volume.status.as_ref().and_then(|s| s.phase.as_deref());
    phase == Some("Bound") && claim_of(volume).is_some_and(|c| !c.uid.is_empty())
}

impl Reconciler for Releaser {
    type Error = ReleaseError;

    /// Marks the volume under `key` Released when the claim it is bound to
    /// no longer exists.
    async fn sync(&self, key: ObjectKey) -> Result<Action, ReleaseError> {
        let Some(volume) = self.volumes.get("", &key.name) else {
            return Ok(Action::Done);
        };
        if !bound_by_uid(&volume) {
            return Ok(Action::Done);
        }
        let Some(claim) = claim_of(&volume) else {
            return Ok(Action::Done);
        };
        if let Some(cached) = self.claims.get(claim.namespace, claim.name)
            && claim.names(&cached)
        {
            return Ok(Action::Done);
        }
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), claim.namespace);
        let live = api
            .get_opt(claim.name)
            .await
            .map_err(|source| ReleaseError::Claim {
                volume: key.name.clone(),
                claim: format!("{}/{}", claim.namespace, claim.name),
                source,
            })?;
        if live.is_some_and(|live| claim.names(&live)) {
            return Ok(Action::Done);
        }
        let volumes: Api<PersistentVolume> = Api::all(self.client.clone());
        let released = serde_json::json!({"status": {"phase": "Released"}});
        let written = volumes
            .patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&released))
            .await
            .inspect(|_| {
                tracing::info!(volume = %key.name, claim = %format!("{}/{}", claim.namespace, claim.name), "claim gone; volume released")
            });
        done_or_gone(written, |source| ReleaseError::Status {
            volume: key.name.clone(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn volume(phase: &str, uid: Option<&str>) -> PersistentVolume {
        serde_json::from_value(json!({
            "metadata": {"name": "pv-1"},
            "spec": {"claimRef": {"namespace": "default", "name": "data", "uid": uid}},
            "status": {"phase": phase}
        }))
        .expect("volume")
    }

    fn claim(uid: &str) -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": "data", "namespace": "default", "uid": uid}
        }))
        .expect("claim")
    }

    #[test]
    fn only_a_volume_bound_to_a_claim_by_uid_is_judged() {
        assert!(bound_by_uid(&volume("Bound", Some("u1"))));
        assert!(!bound_by_uid(&volume("Bound", None)), "pre-bound by name");
        assert!(!bound_by_uid(&volume("Released", Some("u1"))));
        assert!(!bound_by_uid(&volume("Available", Some("u1"))));
    }

    #[test]
    fn a_claim_of_the_same_name_but_another_uid_is_not_the_volumes() {
        let bound = volume("Bound", Some("u1"));
        let reference = claim_of(&bound).expect("claimRef");
        assert!(reference.names(&claim("u1")));
        assert!(!reference.names(&claim("u2")));
    }
}
