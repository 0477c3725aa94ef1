//! skiff's own containerd: its configuration, the process supervising it,
//! and bringing the node's runtime up at agent start.

pub mod bringup;
pub mod config;
pub mod registries;
pub mod supervisor;
