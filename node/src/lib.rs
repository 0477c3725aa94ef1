//! skiff-node is the node agent (skiff's kubelet): node registration and lease,
//! pod workers, the CRI runtime that drives containerd, the simulated runtime
//! used for scale tests, probes, volumes, streaming and image import. (The
//! service proxy and cluster DNS that run next to it are `skiff-proxy` and
//! `skiff-dns`.)
//!
//! It must never import the API server or the store: it sees only the pods
//! bound to its node, through the Kubernetes API.
//!
//! The runtime layer lives in `containerd` (config and supervision of skiff's
//! own containerd), `images` (registry-less image archives and import), `cri`
//! (the typed CRI client) and `runtime` (the `Runtime` trait the pod workers
//! drive); `oom_score` ranks the node's daemons and containers for the
//! kernel's OOM killer. `agent` is the real node on top of it, one folder per job:
//! `agent::pod` (pod workers fed by a pod informer and a one-second relist
//! of the runtime, env, probes, termination, status, and the log reader
//! `pods/log` serves from), `agent::volumes`, `agent::node` (registration
//! and Lease, the node's own events, host facts, pod network, stats),
//! `agent::identity` (joining, the node's client and serving certificates),
//! `agent::server` (the node server) and `agent::overlay` (the pod network
//! across nodes).
//! `simulated` runs kwok-style hollow nodes for scale tests.

pub mod agent;
pub mod containerd;
pub(crate) mod cri;
pub mod images;
pub mod oom_score;
pub(crate) mod runtime;
pub mod simulated;

pub use cri::{CriError, CriRuntime, CriTimeouts};
pub use runtime::{ExecOutput, Runtime, RuntimeError, RuntimeHealth, RuntimeVersion, cri_api};
