//! Certificates of the cluster: the `kubernetes.io/kubelet-serving` signer's
//! rules and signature ([`kubelet_serving`]), the
//! `kubernetes.io/kube-apiserver-client-kubelet` signer's ([`kubelet_client`],
//! node client certificates from the kubelet TLS bootstrap), and the
//! controller that approves and signs both kinds of request ([`controller`]).

pub mod controller;
pub mod kubelet_client;
pub mod kubelet_serving;
