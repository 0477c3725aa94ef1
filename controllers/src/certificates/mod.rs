//! Certificates of the cluster: the `kubernetes.io/kubelet-serving` signer's
//! rules and signature ([`kubelet_serving`]) and the controller that
//! approves and signs remote nodes' serving certificate requests with them
//! ([`controller`]).

pub mod controller;
pub mod kubelet_serving;
