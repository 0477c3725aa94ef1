//! skiff-proxy owns the node's service proxy: it turns Services,
//! EndpointSlices and Nodes (from the shared informers) into one nftables
//! table — cluster IPs, node ports, external and load-balancer IPs DNATed to
//! ready endpoints with random balancing, ClientIP affinity, `Local` traffic
//! policies, draining of terminating endpoints, rejection of Services without
//! endpoints, masquerading for hairpin and off-cluster clients, node ports
//! on `127.0.0.1` for the host's own clients with the loopback guarded
//! against other hosts — and keeps
//! it applied, one atomic `nft -f` transaction per change.
//!
//! It must never touch other tables (only its own, `ip skiff-proxy` by
//! default), write to the API, or import the API server or the store.

#![warn(missing_docs)]

pub mod plan;
pub mod render;
pub(crate) mod sync;

pub use plan::{Endpoint, NodeFacts, PortPlan, Protocol, Target};
pub use render::Ruleset;
pub use skiff_common::nft::{Applied, Applier, Family, Nft, NftError};
pub use sync::{DEFAULT_TABLE, ProxyConfig, ProxyError, Sources, intact, run};
