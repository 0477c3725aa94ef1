//! Fake addresses for simulated nodes and pods, from the shared address space
//! 100.64.0.0/10 so they never collide with the real pod network
//! (10.42.0.0/16) or service network (10.43.0.0/16).

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, Ordering};

const BASE: u32 = u32::from_be_bytes([100, 64, 0, 0]);
/// Each node owns a block of 256 addresses: .0 is the node, .1–.254 its pods.
const BLOCK: u32 = 256;

/// The address of simulated node `index`.
pub(super) fn node_ip(index: usize) -> Ipv4Addr {
    Ipv4Addr::from(BASE + (index as u32) * BLOCK)
}

/// Hands out pod addresses within one node's block, round robin.
#[derive(Debug, Default)]
pub(super) struct PodIps {
    next: AtomicU32,
}

impl PodIps {
    /// The next pod address on node `index`. Addresses are reused after 254
    /// pods, which is fine for fake pods that never carry traffic.
    pub(super) fn next(&self, index: usize) -> Ipv4Addr {
        let slot = self.next.fetch_add(1, Ordering::Relaxed) % (BLOCK - 2) + 1;
        Ipv4Addr::from(BASE + (index as u32) * BLOCK + slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_blocks_do_not_overlap_and_pods_stay_in_their_block() {
        assert_eq!(node_ip(0), Ipv4Addr::new(100, 64, 0, 0));
        assert_eq!(node_ip(1), Ipv4Addr::new(100, 64, 1, 0));
        assert_eq!(node_ip(4999), Ipv4Addr::new(100, 83, 135, 0));
        let ips = PodIps::default();
        for _ in 0..600 {
            let ip = ips.next(3).octets();
            assert_eq!(&ip[..3], &[100, 64, 3]);
            assert!(ip[3] >= 1 && ip[3] <= 254, "{ip:?}");
        }
    }
}
