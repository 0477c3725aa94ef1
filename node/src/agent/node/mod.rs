//! The Node as the cluster sees it: its object, status and Lease
//! (`registration`), the machine facts behind them (`host`), the pod
//! network set up before the first sandbox (`network`), and what the node
//! server reports about it (`stats`, `metrics`).

pub mod host;
pub(crate) mod metrics;
pub(crate) mod network;
pub mod registration;
pub(crate) mod stats;
