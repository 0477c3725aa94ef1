//! Leader election on a coordination.k8s.io/v1 Lease, so several servers can
//! share one datastore with one active controller manager; a no-op
//! [`Leadership::always`] serves a process running alone.

mod decision;
mod elector;

pub use decision::{Decision, ElectionConfig, LeaseObserver, release_spec, should_step_down};
pub use elector::{LeaderElectionError, LeaderElector, Leadership};
