//! PersistentVolumes and PersistentVolumeClaims: both start Pending; their
//! defaults (a claim's spec also where it is a template: StatefulSets'
//! volumeClaimTemplates, pods' ephemeral volumes).

use serde_json::{Value, json};

use super::pods::default_volume_source;
use super::{InitialStatus, KindStrategy, set_default};
use crate::object::path_mut;
use crate::registry::ResourceInfo;
use crate::table::Printer;

/// A claim's spec asks for a filesystem unless it says block.
pub(super) fn default_claim_spec(spec: &mut Value) {
    set_default(spec, "volumeMode", json!("Filesystem"));
}

/// Core `persistentvolumes`.
#[derive(Debug)]
pub(crate) struct PersistentVolumes;

impl KindStrategy for PersistentVolumes {
    fn initial_status(&self) -> InitialStatus {
        InitialStatus::Phase("Pending")
    }

    /// A volume is kept when its claim goes (Retain) and is a filesystem,
    /// and its source gets the defaults a pod volume's would.
    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        let Some(spec) = path_mut(object, &["spec"]).filter(|s| s.is_object()) else {
            return;
        };
        set_default(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
        set_default(spec, "volumeMode", json!("Filesystem"));
        default_volume_source(spec);
    }

    fn printer(&self) -> &'static Printer {
        &crate::table::core::PERSISTENTVOLUMES
    }
}

/// Core `persistentvolumeclaims`.
#[derive(Debug)]
pub(crate) struct PersistentVolumeClaims;

impl KindStrategy for PersistentVolumeClaims {
    fn initial_status(&self) -> InitialStatus {
        InitialStatus::Phase("Pending")
    }

    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        if let Some(spec) = path_mut(object, &["spec"]).filter(|s| s.is_object()) {
            default_claim_spec(spec);
        }
    }

    fn printer(&self) -> &'static Printer {
        &crate::table::core::PERSISTENTVOLUMECLAIMS
    }
}
