//! The proxy tests' namespace: skiff-testkit's [`Netns`], one per test,
//! given the addresses the test's rules point at by [`network`].

use std::time::Duration;

pub use skiff_testkit::netns::Netns;
use skiff_testkit::netns::unique_name;

/// A fresh namespace for one test; a fetch in it may take 3 s before it
/// counts as failed.
pub fn netns() -> Netns {
    let mut ns = Netns::new(unique_name("skp"));
    ns.fetch_timeout = Duration::from_secs(3);
    ns
}

/// `d0` in `ns` with `addresses` (the first is the source of local
/// traffic), the default route through it.
pub fn network(ns: &Netns, addresses: &[&str]) {
    // A veth pair (both ends here) gives d0 a carrier for the route.
    ns.exec_ok(&[
        "ip", "link", "add", "d0", "type", "veth", "peer", "name", "d1",
    ]);
    ns.exec_ok(&["ip", "link", "set", "d1", "up"]);
    for a in addresses {
        ns.exec_ok(&["ip", "addr", "add", &format!("{a}/24"), "dev", "d0"]);
    }
    ns.exec_ok(&["ip", "link", "set", "d0", "up"]);
    ns.exec_ok(&[
        "ip",
        "route",
        "add",
        "default",
        "dev",
        "d0",
        "src",
        addresses[0],
    ]);
}
