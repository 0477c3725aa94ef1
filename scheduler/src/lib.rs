//! skiff-scheduler places pods on nodes as kube-scheduler does: a scheduling
//! queue (active, backoff, unschedulable), a cache of nodes and pods with
//! assumed pods, the filter/score framework and its plugins, preemption, and
//! asynchronous binding through `pods/binding`; its Prometheus metrics
//! (`metrics`) carry upstream's names.
//!
//! It must never import the API server or the store, and never writes a pod's
//! `spec.nodeName` any other way than through the binding subresource.

#![warn(missing_docs)]

pub(crate) mod algorithm;
pub(crate) mod binding;
pub(crate) mod cache;
pub(crate) mod clock;
pub mod framework;
pub mod informers;
pub(crate) mod kube_api;
pub(crate) mod listers;
pub mod metrics;
pub(crate) mod plugins;
pub(crate) mod pod_info;
pub(crate) mod preemption;
pub(crate) mod queue;
pub(crate) mod resource;
pub(crate) mod scheduler;
pub(crate) mod selectors;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use algorithm::{Algorithm, FitError, ScheduleError, ScheduleResult};
pub use binding::{ApiError, Binder, Outcome, Preemptor, StatusReporter};
pub use cache::{Cache, NodeInfo, Snapshot};
pub use clock::{Clock, FakeClock, RealClock};
pub use framework::{Framework, SchedulerConfig, Services};
pub use plugins::in_tree_registry;
pub use pod_info::PodInfo;
pub use scheduler::{CycleOutcome, Failure, Scheduler};
