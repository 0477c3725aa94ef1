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

/// Where the values some sysctls had before any skiff on the host changed
/// them are kept, one file per sysctl, so the last instance to stop can
/// put them back whichever started first (`/run`: gone at a reboot, as the
/// settings are).
pub const MEMO_DIR: &str = "/run/skiff/sysctl";

/// The memo of `path` in this network namespace: `/proc/sys/net` is each
/// namespace's own (nodes of a multi-node test run in their own), while
/// the memo directory is the host's.
fn memo_file(memo_dir: &Path, path: &str) -> std::path::PathBuf {
    let namespace = std::fs::read_link("/proc/self/ns/net")
        .map(|link| {
            link.to_string_lossy()
                .chars()
                .filter(char::is_ascii_digit)
                .collect::<String>()
        })
        .unwrap_or_default();
    let name = path.trim_start_matches('/').replace('/', ".");
    memo_dir.join(format!("{namespace}-{name}"))
}

/// Remembers `earlier` as `path`'s value before skiff, unless a value is
/// remembered already (that one is older).
pub fn remember(memo_dir: &Path, path: &str, earlier: &str) {
    let memo = memo_file(memo_dir, path);
    if memo.exists() {
        return;
    }
    let written = std::fs::create_dir_all(memo_dir).and_then(|()| std::fs::write(&memo, earlier));
    if let Err(error) = written {
        tracing::warn!(memo = %memo.display(), %error, "cannot remember a sysctl's value");
    }
}

/// Puts back the value remembered for `path`, if any, and forgets it.
pub fn restore_remembered(memo_dir: &Path, path: &str) {
    let memo = memo_file(memo_dir, path);
    let Ok(earlier) = std::fs::read_to_string(&memo) else {
        return;
    };
    match std::fs::write(path, earlier.trim()) {
        Ok(()) => {
            let _ = std::fs::remove_file(&memo);
        }
        Err(error) => tracing::warn!(path, %error, "cannot restore sysctl"),
    }
}
