//! Certificates of the cluster: the `kubernetes.io/kubelet-serving` signer's
//! rules and signature ([`kubelet_serving`]).

pub mod kubelet_serving;
