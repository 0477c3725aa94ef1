//! Behaviour of the sled-backed store as a user of the `Store` trait sees it.

// A test stops at the first surprise (unwrapping is how it says so), and
// nothing outside this binary sees its items.
#![allow(clippy::unwrap_used, unreachable_pub)]

mod api;
mod common;
mod compaction;
mod crash;
mod defrag;
mod model;
mod restart;
#[path = "../shared/tmpfs.rs"]
mod tmpfs;
mod watch;
