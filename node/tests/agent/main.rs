//! The node agent against a real containerd (started by skiff's supervisor
//! in a temp dir) and a real in-process API server: pods run, crash, probe,
//! read their volumes and environment, stop gracefully, and survive a
//! restart of the agent. They need root, like containerd itself.

#![allow(clippy::unwrap_used, unreachable_pub)]

mod cgroups;
mod container_events;
mod eviction;
mod harness;
mod log_rotation;
mod max_pods;
mod node_events;
mod oom_score;
mod pods;
mod restart;
mod sidecars;
mod simulated;
mod streaming;
mod volume_mounts;
