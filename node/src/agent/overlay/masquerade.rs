//! Masquerading of pod traffic that leaves the pod network, in an nftables
//! table of the pod network's own (`ip skiff-net` by default): traffic from
//! this node's pods to any node's pod CIDR keeps its source address (pods
//! see each other's real addresses across nodes, which NetworkPolicy needs),
//! traffic from them to anything else — the hosts, the world — leaves with
//! the node's address, as flannel's `--ip-masq` rules do. (The CNI bridge's
//! own `ipMasq` would masquerade pod-to-pod traffic across nodes too, so it
//! is off.) The table is replaced whole in one `nft -f` transaction.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use skiff_common::cidr::Ipv4Net;
use skiff_common::nft::Nft;

use super::OverlayError;

/// The table's nft script for a node whose pods are in `own` when the pod
/// CIDRs of all nodes are `all`.
pub(crate) fn script(table: &str, own: Ipv4Net, all: &BTreeSet<Ipv4Net>) -> String {
    let mut cidrs: BTreeSet<Ipv4Net> = all.clone();
    cidrs.insert(own);
    let elements: Vec<String> = cidrs.iter().map(|c| c.to_string()).collect();
    let mut out = String::new();
    // Adding first makes the delete valid when the table does not exist.
    let _ = writeln!(out, "add table ip {table}");
    let _ = writeln!(out, "delete table ip {table}");
    let _ = writeln!(out, "table ip {table} {{");
    let _ = writeln!(out, "  set pod-cidrs {{");
    let _ = writeln!(out, "    type ipv4_addr; flags interval; auto-merge;");
    let _ = writeln!(out, "    elements = {{ {} }}", elements.join(", "));
    let _ = writeln!(out, "  }}");
    let _ = writeln!(out, "  chain postrouting {{");
    let _ = writeln!(
        out,
        "    type nat hook postrouting priority srcnat; policy accept;"
    );
    let _ = writeln!(out, "    ip saddr {own} ip daddr @pod-cidrs return");
    let _ = writeln!(
        out,
        "    ip saddr {own} ip daddr != 224.0.0.0/4 masquerade fully-random"
    );
    let _ = writeln!(out, "  }}");
    let _ = writeln!(out, "}}");
    out
}

/// Applies `script` with `nft -f -` (one transaction).
pub(crate) fn apply(script: &str) -> Result<(), OverlayError> {
    Ok(Nft::new().apply(script)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_keep_their_source_towards_pod_cidrs_and_are_masqueraded_elsewhere() {
        let all: BTreeSet<Ipv4Net> = ["10.42.1.0/24".parse().unwrap()].into();
        let text = script("skiff-net", "10.42.0.0/24".parse().unwrap(), &all);
        assert!(text.starts_with("add table ip skiff-net\ndelete table ip skiff-net\n"));
        assert!(text.contains("elements = { 10.42.0.0/24, 10.42.1.0/24 }"));
        let rules: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("ip saddr"))
            .collect();
        assert_eq!(
            rules,
            [
                "ip saddr 10.42.0.0/24 ip daddr @pod-cidrs return",
                "ip saddr 10.42.0.0/24 ip daddr != 224.0.0.0/4 masquerade fully-random",
            ]
        );
    }
}
