//! `coordination.k8s.io/v1` Leases: a node may only write its own lease in
//! the node lease namespace (NodeRestriction).

use super::{GroupResource, KindStrategy, NodeWrites};

/// `coordination.k8s.io` leases.
#[derive(Debug)]
pub(crate) struct Leases;

impl Leases {
    /// `coordination.k8s.io` leases, for the Node authorizer.
    pub(crate) const RESOURCE: GroupResource<'static> =
        GroupResource::of::<k8s_openapi::api::coordination::v1::Lease>();
}

impl KindStrategy for Leases {
    fn node_writes(&self) -> NodeWrites {
        NodeWrites::OwnLease
    }
}
