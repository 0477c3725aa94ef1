//! The DNS server over real sockets: queries over UDP and TCP on loopback for
//! every record kind, negative answers, and forwarding to a fake upstream.

// A test stops at the first surprise (unwrapping is how it says so), and
// nothing outside this binary sees its items.
#![allow(clippy::unwrap_used, unreachable_pub)]

mod dns {
    mod api;
    mod forwarding;
    mod records;
    pub mod support;
}
