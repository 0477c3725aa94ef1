//! The Node as the cluster sees it: its object, status and Lease
//! (`registration`), the machine facts behind them (`host`), the hard
//! eviction thresholds behind its pressure conditions (`eviction`), the pod
//! network set up before the first sandbox (`network`), what the node
//! server reports about it (`stats`, `metrics`), and the events it reports
//! about itself (`events`).

pub(crate) mod cadvisor;
pub(crate) mod events;
pub mod eviction;
pub mod host;
pub(crate) mod metrics;
pub(crate) mod network;
pub mod registration;
pub mod reserved;
pub(crate) mod stats;
