//! Integration tests of the service proxy in network namespaces the tests
//! create (never on the host's tables): the rendered rules in a real kernel
//! with real traffic, and the proxy loop fed by an in-process API server.
//! Need root, nft, ip and /bin/busybox (scripts/bootstrap).

mod proxy {
    pub mod netns;

    mod nft;
    mod sync;
}
