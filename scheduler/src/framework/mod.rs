//! The scheduling framework: extension-point traits, cycle state, statuses, cluster
//! events, configuration and the per-profile runtime.

pub mod config;
pub mod cycle_state;
pub mod events;
pub mod interface;
pub mod registry;
pub mod runtime;
pub mod status;

pub use config::{ConfigError, SchedulerConfig};
pub use cycle_state::CycleState;
pub use events::{ActionSet, ClusterEvent, EventObjects, EventResource, QueueingHint};
pub use interface::*;
pub use registry::{Registry, Services, parse_args};
pub use runtime::Framework;
pub use status::{Code, Status};
