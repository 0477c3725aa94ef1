//! Host settings the rules depend on: forwarding between interfaces, and
//! bridged pod-to-pod traffic passing through netfilter (without it a pod
//! answering a Service client on the same bridge would reply directly, with
//! its own address, and the client would drop the reply).

use std::path::Path;

const SETTINGS: [(&str, &str); 2] = [
    ("/proc/sys/net/ipv4/ip_forward", "1"),
    ("/proc/sys/net/bridge/bridge-nf-call-iptables", "1"),
];

/// Sets what it can and warns about the rest; the proxy still runs (a
/// single-pod Service or host-to-pod traffic works without them).
pub fn prepare_host() {
    for (path, value) in SETTINGS {
        let path = Path::new(path);
        match std::fs::read_to_string(path) {
            Ok(current) if current.trim() == value => {}
            Ok(_) => {
                if let Err(error) = std::fs::write(path, value) {
                    tracing::warn!(path = %path.display(), %error, "cannot set sysctl for the service proxy");
                }
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), %error,
                    "sysctl unavailable (is the br_netfilter module loaded?); pod-to-Service traffic on one bridge may fail");
            }
        }
    }
}
