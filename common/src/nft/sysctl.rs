//! Host settings nftables rules depend on: forwarding between interfaces,
//! and bridged pod-to-pod traffic passing through netfilter's `ip`/`inet`
//! hooks (`br_netfilter`'s `bridge-nf-call-iptables`). Without the latter,
//! two pods on one Linux bridge talk past every forward hook: the service
//! proxy's replies would skip un-NAT, and network policies would not see
//! same-node traffic at all.

use std::path::Path;

/// IPv4 forwarding.
pub const IP_FORWARD: &str = "/proc/sys/net/ipv4/ip_forward";
/// Routing of loopback addresses to and from other interfaces, for node
/// ports on `127.0.0.1` (the proxy guards the loopback addresses against
/// other hosts in return).
pub const ROUTE_LOCALNET: &str = "/proc/sys/net/ipv4/conf/all/route_localnet";
/// Bridged IPv4 traffic through the `ip`/`inet` hooks.
pub const BRIDGE_NF_CALL_IPTABLES: &str = "/proc/sys/net/bridge/bridge-nf-call-iptables";

/// Sets each `(path, value)` it can and warns about the rest, naming
/// `purpose` (the caller still runs: part of its rules work without them).
/// Returns the settings it changed, each with the value it had.
pub fn ensure(settings: &[(&'static str, &str)], purpose: &str) -> Vec<(&'static str, String)> {
    let mut changed = Vec::new();
    for &(name, value) in settings {
        let path = Path::new(name);
        match std::fs::read_to_string(path) {
            Ok(current) if current.trim() == value => {}
            Ok(current) => match std::fs::write(path, value) {
                Ok(()) => changed.push((name, current.trim().to_string())),
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, purpose, "cannot set sysctl");
                }
            },
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, purpose,
                    "sysctl unavailable (is the br_netfilter module loaded?)");
            }
        }
    }
    changed
}

/// Puts back the values [`ensure`] replaced.
pub fn restore(settings: impl IntoIterator<Item = (&'static str, String)>) {
    for (path, value) in settings {
        if let Err(error) = std::fs::write(path, &value) {
            tracing::warn!(path, %error, "cannot restore sysctl");
        }
    }
}
