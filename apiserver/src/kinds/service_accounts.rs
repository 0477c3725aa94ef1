//! ServiceAccounts: a node may only ask for tokens bound to pods on it
//! (NodeRestriction).

use super::{GroupResource, KindStrategy, NodeWrites};

/// Core `serviceaccounts`.
#[derive(Debug)]
pub(crate) struct ServiceAccounts;

impl ServiceAccounts {
    /// Core `serviceaccounts`, for the Node authorizer.
    pub(crate) const RESOURCE: GroupResource<'static> =
        GroupResource::of::<k8s_openapi::api::core::v1::ServiceAccount>();
}

impl KindStrategy for ServiceAccounts {
    fn node_writes(&self) -> NodeWrites {
        NodeWrites::PodTokens
    }
}
