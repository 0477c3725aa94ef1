//! PersistentVolumes and PersistentVolumeClaims: both start Pending.

use super::{InitialStatus, KindStrategy};
use crate::table::Printer;

/// Core `persistentvolumes`.
#[derive(Debug)]
pub(crate) struct PersistentVolumes;

impl KindStrategy for PersistentVolumes {
    fn initial_status(&self) -> InitialStatus {
        InitialStatus::Phase("Pending")
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

    fn printer(&self) -> &'static Printer {
        &crate::table::core::PERSISTENTVOLUMECLAIMS
    }
}
