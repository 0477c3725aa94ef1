//! skiff-informer owns the client-side machinery every reconciler runs on:
//! shared informers (one watch per resource type per process), thread-safe
//! indexed caches with listers, event handler fan-out, the rate-limited
//! de-duplicating work queue, the controller runner and leader election.
//!
//! It sees the cluster only through a `kube::Client`; it must never import the
//! API server or the store, so that any component built on it can move out of
//! process unchanged.

#![warn(missing_docs)]

pub(crate) mod cache;
pub(crate) mod controller;
pub(crate) mod factory;
#[cfg(test)]
mod fake_api;
pub mod handler;
pub(crate) mod indexes;
pub(crate) mod informer;
pub(crate) mod key;
pub mod leader;
mod listener;
mod reflector;
pub mod workqueue;

pub use cache::{Cache, CacheError};
pub use controller::{
    Action, Controller, ControllerMetrics, MetricsSnapshot, Syncable, wait_synced,
};
pub use factory::SharedInformerFactory;
pub use handler::{EnqueueKeys, EventHandler, FilteringHandler, HandlerFns, Notification};
pub use indexes::{
    IndexFn, NAMESPACE_INDEX, NODE_NAME_INDEX, OWNER_UID_INDEX, label_value_index, namespace_index,
    owner_uid_index, pod_node_name_index,
};
pub use informer::{Informer, InformerError, InformerStats, WatchConfig};
pub use key::{ObjectKey, key_for, object_key};
pub use leader::{ElectionConfig, LeaderElector, Leadership};
pub use listener::ListenerHandle;
pub use workqueue::WorkQueue;
