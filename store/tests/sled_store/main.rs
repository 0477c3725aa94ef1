//! Behaviour of the sled-backed store as a user of the `Store` trait sees it.

mod api;
mod common;
mod compaction;
mod crash;
mod defrag;
mod model;
mod restart;
mod watch;
