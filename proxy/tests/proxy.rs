//! Integration tests of the service proxy in network namespaces the tests
//! create (never on the host's tables): the rendered rules in a real kernel
//! with real traffic, and the proxy loop fed by an in-process API server.
//! Need root, nft, ip and /bin/busybox (scripts/bootstrap).

// A test stops at the first surprise (unwrapping is how it says so), and
// nothing outside this binary sees its items.
#![allow(clippy::unwrap_used, unreachable_pub)]

mod proxy {
    pub mod netns;

    mod nft;
    mod sync;
}
