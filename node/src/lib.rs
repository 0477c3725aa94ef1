//! skiff-node is the node agent (skiff's kubelet): node registration and lease,
//! pod workers, the CRI runtime that drives containerd, the simulated runtime
//! used for scale tests, probes, volumes, streaming, image import, the service
//! proxy and DNS.
//!
//! It must never import the API server or the store: it sees only the pods
//! bound to its node, through the Kubernetes API.
