//! Integration tests of the network policy rules in network namespaces the
//! tests create (never on the host's tables): a "node" namespace with a
//! Linux bridge and "pod" namespaces on it, real TCP between them, the
//! rendered table applied in the node namespace; and the controller loop
//! fed by an in-process API server. Need root, nft, ip and /bin/busybox.

// A test stops at the first surprise (unwrapping is how it says so), and
// nothing outside this binary sees its items.
#![allow(clippy::unwrap_used, unreachable_pub)]

mod netpol {
    pub mod netns;

    mod nft;
    mod sync;
}
