//! ServiceAccounts: a node may only ask for tokens bound to pods on it
//! (NodeRestriction).

use super::{KindStrategy, NodeWrites};

named_kind! {
    /// Core `serviceaccounts`.
    ServiceAccounts = k8s_openapi::api::core::v1::ServiceAccount;
}

impl KindStrategy for ServiceAccounts {
    fn node_writes(&self) -> NodeWrites {
        NodeWrites::PodTokens
    }
}
