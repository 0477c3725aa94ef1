//! `coordination.k8s.io/v1` Leases: a node may only write its own lease in
//! the node lease namespace (NodeRestriction); a lease lasts a positive
//! number of seconds and counts its transitions from zero.

use super::{KindStrategy, NodeWrites, Written};
use crate::status::FieldError;

named_kind! {
    /// `coordination.k8s.io` leases.
    Leases = k8s_openapi::api::coordination::v1::Lease;
}

impl KindStrategy for Leases {
    fn node_writes(&self) -> NodeWrites {
        NodeWrites::OwnLease
    }

    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let spec = &written.object["spec"];
        if let Some(seconds) = spec["leaseDurationSeconds"].as_i64().filter(|s| *s <= 0) {
            errors.push(FieldError::invalid(
                "spec.leaseDurationSeconds",
                seconds,
                "must be greater than 0",
            ));
        }
        crate::validation::non_negative(spec, "leaseTransitions", errors);
    }
}
