//! Tests against a real containerd (1.6, runc, CNI plugins), started by
//! skiff's supervisor in a temp dir. They need root, like containerd itself.

mod harness;
mod images;
mod pods;
mod supervisor;
