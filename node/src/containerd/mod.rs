//! skiff's own containerd: its configuration and the process supervising it.

pub mod config;
pub mod supervisor;
