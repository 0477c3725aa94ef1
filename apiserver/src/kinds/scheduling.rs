//! `scheduling.k8s.io/v1` PriorityClasses: a class that does not say
//! otherwise lets its pods preempt lower-priority ones.

use serde_json::{Value, json};

use super::{KindStrategy, set_default};
use crate::registry::ResourceInfo;

/// The `priorityclasses` resource.
#[derive(Debug)]
pub(crate) struct PriorityClasses;

impl KindStrategy for PriorityClasses {
    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        set_default(object, "preemptionPolicy", json!("PreemptLowerPriority"));
    }
}
