//! From the peers a node should reach and what the kernel holds now to the
//! `ip` and `bridge` batch lines that make the two agree: per VXLAN peer a
//! route to its pod CIDR via its VTEP address (onlink, on the VXLAN
//! device), a permanent neighbour entry for that address with the VTEP's
//! MAC and a forwarding entry sending that MAC to the peer's node address;
//! per host-gw peer a route to its pod CIDR via its node address. Entries
//! for peers that are gone are deleted. Only routes marked with skiff's
//! protocol number and entries on skiff's VXLAN device are ever touched.

use std::collections::BTreeSet;

use super::Backend;
use super::ip::{KernelState, ROUTE_PROTO};
use super::peers::Peer;

/// Lines for `ip -batch` and `bridge -batch`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Changes {
    /// `ip` lines (routes, neighbours).
    pub ip: Vec<String>,
    /// `bridge` lines (forwarding entries).
    pub bridge: Vec<String>,
}

impl Changes {
    /// Nothing to do.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.ip.is_empty() && self.bridge.is_empty()
    }
}

/// What makes `current` match `peers` for `backend` on `device`.
pub(crate) fn plan(
    backend: Backend,
    device: &str,
    peers: &[Peer],
    current: &KernelState,
) -> Changes {
    let mut changes = Changes::default();
    let mut wanted_routes = BTreeSet::new();
    let mut wanted_neighbours = BTreeSet::new();
    let mut wanted_fdb = BTreeSet::new();
    for peer in peers {
        let (gateway, dev) = match (backend, &peer.vtep_mac) {
            (Backend::Vxlan, Some(mac)) => {
                let vtep = peer.vtep_ip();
                if current.neighbours.get(&vtep) != Some(mac) {
                    changes.ip.push(format!(
                        "neigh replace {vtep} lladdr {mac} dev {device} nud permanent"
                    ));
                }
                if !current.fdb.contains(&(mac.clone(), peer.public_ip)) {
                    changes.bridge.push(format!(
                        "fdb replace {mac} dev {device} dst {} self permanent",
                        peer.public_ip
                    ));
                }
                wanted_neighbours.insert(vtep);
                wanted_fdb.insert((mac.clone(), peer.public_ip));
                (vtep, Some(device))
            }
            (Backend::HostGw, _) => (peer.public_ip, None),
            _ => continue,
        };
        wanted_routes.insert(peer.pod_cidr);
        let have = current.routes.get(&peer.pod_cidr);
        let same = have.is_some_and(|(gw, have_dev)| {
            *gw == Some(gateway) && dev.is_none_or(|d| d == have_dev)
        });
        if !same {
            changes.ip.push(match dev {
                Some(d) => format!(
                    "route replace {} via {gateway} dev {d} onlink proto {ROUTE_PROTO}",
                    peer.pod_cidr
                ),
                None => format!(
                    "route replace {} via {gateway} proto {ROUTE_PROTO}",
                    peer.pod_cidr
                ),
            });
        }
    }
    for dst in current.routes.keys() {
        if !wanted_routes.contains(dst) {
            changes
                .ip
                .push(format!("route del {dst} proto {ROUTE_PROTO}"));
        }
    }
    for ip in current.neighbours.keys() {
        if !wanted_neighbours.contains(ip) {
            changes.ip.push(format!("neigh del {ip} dev {device}"));
        }
    }
    for (mac, dst) in &current.fdb {
        if !wanted_fdb.contains(&(mac.clone(), *dst)) {
            changes
                .bridge
                .push(format!("fdb del {mac} dev {device} dst {dst} self"));
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(cidr: &str, ip: &str, mac: Option<&str>) -> Peer {
        Peer {
            pod_cidr: cidr.parse().unwrap(),
            public_ip: ip.parse().unwrap(),
            vtep_mac: mac.map(String::from),
        }
    }

    #[test]
    fn a_new_vxlan_peer_gets_neighbour_forwarding_entry_and_route() {
        let peers = [peer("10.42.1.0/24", "192.0.2.2", Some("02:00:00:00:00:02"))];
        let changes = plan(
            Backend::Vxlan,
            "skiff.vxlan",
            &peers,
            &KernelState::default(),
        );
        assert_eq!(
            changes.ip,
            [
                "neigh replace 10.42.1.0 lladdr 02:00:00:00:00:02 dev skiff.vxlan nud permanent",
                "route replace 10.42.1.0/24 via 10.42.1.0 dev skiff.vxlan onlink proto 173",
            ]
        );
        assert_eq!(
            changes.bridge,
            ["fdb replace 02:00:00:00:00:02 dev skiff.vxlan dst 192.0.2.2 self permanent"]
        );
    }

    #[test]
    fn what_is_in_place_is_left_and_what_is_gone_is_removed() {
        let peers = [peer("10.42.1.0/24", "192.0.2.2", Some("02:00:00:00:00:02"))];
        let mut current = KernelState::default();
        current.routes.insert(
            "10.42.1.0/24".parse().unwrap(),
            (Some("10.42.1.0".parse().unwrap()), "skiff.vxlan".into()),
        );
        current
            .neighbours
            .insert("10.42.1.0".parse().unwrap(), "02:00:00:00:00:02".into());
        current
            .fdb
            .insert(("02:00:00:00:00:02".into(), "192.0.2.2".parse().unwrap()));
        assert!(plan(Backend::Vxlan, "skiff.vxlan", &peers, &current).is_empty());

        // The peer went away (its Node was deleted): everything of it goes.
        let gone = plan(Backend::Vxlan, "skiff.vxlan", &[], &current);
        assert_eq!(
            gone.ip,
            [
                "route del 10.42.1.0/24 proto 173",
                "neigh del 10.42.1.0 dev skiff.vxlan"
            ]
        );
        assert_eq!(
            gone.bridge,
            ["fdb del 02:00:00:00:00:02 dev skiff.vxlan dst 192.0.2.2 self"]
        );

        // The peer came back on another host with a new VTEP.
        let moved = [peer("10.42.1.0/24", "192.0.2.9", Some("02:00:00:00:00:09"))];
        let changes = plan(Backend::Vxlan, "skiff.vxlan", &moved, &current);
        assert_eq!(
            changes.ip,
            ["neigh replace 10.42.1.0 lladdr 02:00:00:00:00:09 dev skiff.vxlan nud permanent"]
        );
        assert_eq!(
            changes.bridge,
            [
                "fdb replace 02:00:00:00:00:09 dev skiff.vxlan dst 192.0.2.9 self permanent",
                "fdb del 02:00:00:00:00:02 dev skiff.vxlan dst 192.0.2.2 self",
            ]
        );
    }

    #[test]
    fn host_gw_routes_via_the_peer_node_and_replaces_overlay_routes() {
        let peers = [peer("10.42.1.0/24", "192.0.2.2", None)];
        let mut current = KernelState::default();
        current.routes.insert(
            "10.42.1.0/24".parse().unwrap(),
            (Some("10.42.1.0".parse().unwrap()), "skiff.vxlan".into()),
        );
        current.routes.insert(
            "10.42.5.0/24".parse().unwrap(),
            (Some("192.0.2.5".parse().unwrap()), "eth0".into()),
        );
        let changes = plan(Backend::HostGw, "skiff.vxlan", &peers, &current);
        assert_eq!(
            changes.ip,
            [
                "route replace 10.42.1.0/24 via 192.0.2.2 proto 173",
                "route del 10.42.5.0/24 proto 173",
            ]
        );
        assert!(changes.bridge.is_empty());
        // `none` routes nowhere: whatever a previous backend left goes.
        let none = plan(Backend::None, "skiff.vxlan", &peers, &current);
        assert_eq!(none.ip.len(), 2);
        assert!(none.ip.iter().all(|l| l.starts_with("route del")));
    }
}
