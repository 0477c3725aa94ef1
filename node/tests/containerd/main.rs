//! Tests against a real containerd (1.6, runc, CNI plugins), started by
//! skiff's supervisor in a temp dir. They need root, like containerd itself.

#![allow(clippy::unwrap_used, unreachable_pub)]

mod harness;
mod images;
mod pods;
mod supervisor;
