//! skiff-netpol enforces NetworkPolicies on this node, as k3s's embedded
//! policy controller (kube-router's) does: from NetworkPolicies, Pods and
//! Namespaces (informers) it plans, for each pod bound to this node, what
//! it may receive and send (`plan`: upstream's semantics — isolation per
//! direction, pod/namespace selectors, ipBlocks with exceptions, numbered,
//! ranged and named ports), renders that as one nftables table (`render`,
//! `inet skiff-netpol` by default) and keeps it applied, one atomic
//! `nft -f` transaction per change (`sync`, through
//! `skiff_common::nft`). Peers are matched by address among every pod of
//! the cluster, so the rules are the same whichever node a peer runs on.
//!
//! It must never touch other tables, write to the API, or import the API
//! server or the store.

#![warn(missing_docs)]

pub mod facts;
pub mod plan;
pub(crate) mod ranges;
pub mod render;
pub(crate) mod sync;

pub use facts::{PodFacts, Protocol};
pub use plan::{Plan, plan};
pub use skiff_common::nft::{Nft, NftError};
pub use sync::{DEFAULT_TABLE, NetpolConfig, NetpolError, Sources, intact, remove_table, run};
