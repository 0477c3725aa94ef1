//! API Priority and Fairness: the `flowcontrol.apiserver.k8s.io/v1`
//! FlowSchemas and PriorityLevelConfigurations — their defaults and checks
//! (`definition`), upstream's mandatory and suggested objects kept at every
//! start (`bootstrap`), matching a request to its schema and flow
//! (`classify`), the configuration built from the watch caches with each
//! level's share of the seats (`config`), the seats and fair queues of a
//! level (`dispatch`), the middleware that applies them (`filter`) and the
//! schemas' `Dangling` condition (`status`, written through the API).
//! The REST plumbing of the two kinds is the generic one
//! (`kinds/flowcontrol.rs` holds their strategies); this tree never writes
//! the store.

pub(crate) mod bootstrap;
pub(crate) mod classify;
pub(crate) mod config;
pub(crate) mod definition;
pub(crate) mod dispatch;
pub(crate) mod filter;
pub(crate) mod status;
