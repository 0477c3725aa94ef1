//! Upstream's `pv-protection` controller: a PersistentVolume keeps its
//! `kubernetes.io/pv-protection` finalizer while it is `Bound`, so deleting
//! a volume a claim still holds leaves it Terminating, its claim bound and
//! its data where it was, until the claim goes and the volume is Released
//! (or was never bound). Volumes made before the API server added the
//! finalizer get it here.
//!
//! "Bound" is the volume's own phase, which the persistentvolume-binder
//! writes: upstream judges it the same way. It acts as
//! `pv-protection-controller`, which may read and update volumes and
//! nothing else.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolume;
use kube::{Api, ResourceExt};
use skiff_informer::{Action, Cache, ObjectKey};

use crate::controller_utils::{done_or_gone, write_finalizers};
use crate::manager::{Context, Reconciler, Stop, keyed_by, run_until_stopped};

use skiff_common::claims::PV_PROTECTION_FINALIZER as FINALIZER;

/// Why a volume's finalizers could not be changed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProtectionError {
    /// The volume's update failed (a conflict is retried).
    #[error("updating the finalizers of volume {volume}: {source}")]
    Update {
        /// The volume.
        volume: String,
        /// The API's error.
        #[source]
        source: kube::Error,
    },
}

struct Protector {
    client: kube::Client,
    volumes: Arc<Cache<PersistentVolume>>,
}

/// Runs the controller until `stop`.
pub(crate) async fn run(ctx: Context, stop: Stop) {
    let volumes = ctx.factory.informer::<PersistentVolume>();
    let protector = Arc::new(Protector {
        client: ctx.client.clone(),
        volumes: volumes.cache().clone(),
    });
    // A volume's own updates (its phase leaving Bound) are what a deleted
    // volume waits for, so its informer alone drives the queue.
    let controller = keyed_by("pv-protection", &volumes);
    run_until_stopped(controller, protector, stop).await;
}

/// Whether a claim holds `volume` now.
fn bound(volume: &PersistentVolume) -> bool {
    volume
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|phase| phase == "Bound")
}

/// What the controller does with a volume.
#[derive(Debug, PartialEq)]
enum Step {
    /// A live volume lacks the finalizer: add it.
    Protect,
    /// A deleted volume no claim holds: take the finalizer off.
    Release,
    /// Nothing to do (protected and live, bound, or not ours to hold).
    Keep,
}

fn step(volume: &PersistentVolume) -> Step {
    let protected = volume.finalizers().iter().any(|f| f == FINALIZER);
    match (volume.metadata.deletion_timestamp.is_some(), protected) {
        (false, false) => Step::Protect,
        (true, true) if !bound(volume) => Step::Release,
        _ => Step::Keep,
    }
}

impl Protector {
    /// Writes `finalizers` to the volume, guarded by the version judged.
    async fn set_finalizers(
        &self,
        volume: &PersistentVolume,
        finalizers: Vec<String>,
    ) -> Result<Action, ProtectionError> {
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        let written = write_finalizers(&api, volume, finalizers).await;
        done_or_gone(written, |source| ProtectionError::Update {
            volume: volume.name_any(),
            source,
        })
    }
}

impl Reconciler for Protector {
    type Error = ProtectionError;

    async fn sync(&self, key: ObjectKey) -> Result<Action, ProtectionError> {
        let Some(volume) = self.volumes.get("", &key.name) else {
            return Ok(Action::Done);
        };
        let finalizers = volume.finalizers().to_vec();
        match step(&volume) {
            Step::Protect => {
                let mut with = finalizers;
                with.push(FINALIZER.to_string());
                self.set_finalizers(&volume, with).await
            }
            Step::Release => {
                let rest = finalizers.into_iter().filter(|f| f != FINALIZER).collect();
                let action = self.set_finalizers(&volume, rest).await?;
                tracing::info!(volume = %key.name, "no claim holds the deleted volume; released");
                Ok(action)
            }
            Step::Keep => Ok(Action::Done),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn volume(deleted: bool, finalizers: &[&str], phase: &str) -> PersistentVolume {
        serde_json::from_value(json!({
            "metadata": {"name": "pv", "finalizers": finalizers,
                "deletionTimestamp": deleted.then_some("2026-12-06T00:00:00Z")},
            "status": {"phase": phase}
        }))
        .expect("volume")
    }

    #[test]
    fn a_deleted_volume_is_let_go_only_once_no_claim_is_bound_to_it() {
        assert_eq!(step(&volume(false, &[], "Available")), Step::Protect);
        assert_eq!(step(&volume(false, &[FINALIZER], "Bound")), Step::Keep);
        assert_eq!(step(&volume(true, &[FINALIZER], "Bound")), Step::Keep);
        for phase in ["Pending", "Available", "Released", "Failed"] {
            assert_eq!(step(&volume(true, &[FINALIZER], phase)), Step::Release);
        }
        // Another party's finalizer is not ours to take off or to add to.
        assert_eq!(step(&volume(true, &["other"], "Released")), Step::Keep);
    }
}
