//! API Priority and Fairness: the `flowcontrol.apiserver.k8s.io/v1`
//! FlowSchemas and PriorityLevelConfigurations — their defaults and checks
//! (`definition`) and upstream's mandatory and suggested objects kept at
//! every start (`bootstrap`). The REST plumbing of the two kinds is the
//! generic one (`kinds/flowcontrol.rs` holds their strategies); this tree
//! must never write the store itself.

pub mod bootstrap;
pub mod definition;
