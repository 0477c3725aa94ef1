//! Integration tests of the network policy rules in network namespaces the
//! tests create (never on the host's tables): a "node" namespace with a
//! Linux bridge and "pod" namespaces on it, real TCP between them, the
//! rendered table applied in the node namespace; and the controller loop
//! fed by an in-process API server. Need root, nft, ip and /bin/busybox.

mod netpol {
    pub mod netns;

    mod nft;
    mod sync;
}
