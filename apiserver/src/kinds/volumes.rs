//! PersistentVolumes and PersistentVolumeClaims: both start Pending; their
//! defaults (a claim's spec also where it is a template: StatefulSets'
//! volumeClaimTemplates, pods' ephemeral volumes).

use serde_json::{Value, json};

use super::pods::default_volume_source;
use super::{InitialStatus, KindStrategy, NodeWrites, set_default};
use crate::registry::ResourceInfo;

/// A claim's spec asks for a filesystem unless it says block.
pub(super) fn default_claim_spec(spec: &mut Value) {
    set_default(spec, "volumeMode", json!("Filesystem"));
}

named_kind! {
    /// Core `persistentvolumes`.
    PersistentVolumes = k8s_openapi::api::core::v1::PersistentVolume;
}

impl KindStrategy for PersistentVolumes {
    fn initial_status(&self) -> InitialStatus {
        InitialStatus::Phase("Pending")
    }

    /// A volume is kept when its claim goes (Retain) and is a filesystem,
    /// and its source gets the defaults a pod volume's would.
    fn apply_spec_defaults(&self, _info: &ResourceInfo, spec: &mut Value) {
        set_default(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
        set_default(spec, "volumeMode", json!("Filesystem"));
        default_volume_source(spec);
    }
}

named_kind! {
    /// Core `persistentvolumeclaims`.
    PersistentVolumeClaims = k8s_openapi::api::core::v1::PersistentVolumeClaim;
}

impl KindStrategy for PersistentVolumeClaims {
    fn initial_status(&self) -> InitialStatus {
        InitialStatus::Phase("Pending")
    }

    fn node_writes(&self) -> NodeWrites {
        NodeWrites::ClaimStatus
    }

    fn apply_spec_defaults(&self, _info: &ResourceInfo, spec: &mut Value) {
        default_claim_spec(spec);
    }
}
