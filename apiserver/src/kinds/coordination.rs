//! `coordination.k8s.io/v1` Leases: a node may only write its own lease in
//! the node lease namespace (NodeRestriction).

use super::{KindStrategy, NodeWrites};

named_kind! {
    /// `coordination.k8s.io` leases.
    Leases = k8s_openapi::api::coordination::v1::Lease;
}

impl KindStrategy for Leases {
    fn node_writes(&self) -> NodeWrites {
        NodeWrites::OwnLease
    }
}
