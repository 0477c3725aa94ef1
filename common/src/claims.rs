//! A pod's PersistentVolumeClaims as every component names them: the
//! claims its `persistentVolumeClaim` volumes name and the ones its generic
//! `ephemeral` volumes own (`<pod>-<volume>`), for the scheduler's volume
//! binding and the pvc-protection controller alike; and the finalizer that
//! keeps a claim while pods use it (added by the API server on create,
//! taken off by that controller).

use k8s_openapi::api::core::v1::PodSpec;

/// The finalizer that keeps a claim while a pod uses it.
pub const PROTECTION_FINALIZER: &str = "kubernetes.io/pvc-protection";

/// The finalizer that keeps a PersistentVolume while a claim is bound to it.
pub const PV_PROTECTION_FINALIZER: &str = "kubernetes.io/pv-protection";

/// The claims pod `pod_name` with `spec` refers to, in volume order.
pub fn claim_names(pod_name: &str, spec: &PodSpec) -> Vec<String> {
    spec.volumes
        .iter()
        .flatten()
        .filter_map(|volume| {
            if let Some(claim) = &volume.persistent_volume_claim {
                Some(claim.claim_name.clone())
            } else {
                volume
                    .ephemeral
                    .as_ref()
                    .map(|_| format!("{pod_name}-{}", volume.name))
            }
        })
        .collect()
}
