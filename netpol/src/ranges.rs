//! Sets of IPv4 addresses as sorted, disjoint, non-adjacent inclusive
//! ranges: what an `ipBlock` with `except` leaves, joined with pod
//! addresses. Kept disjoint here so the nft interval set needs no
//! `auto-merge` and lists back the elements it was given.

use std::net::Ipv4Addr;

/// A set of IPv4 addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ranges {
    /// Sorted, disjoint, non-adjacent `(first, last)` pairs.
    spans: Vec<(u32, u32)>,
}

impl Ranges {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `first..=last`.
    pub fn add(&mut self, first: u32, last: u32) {
        self.spans.push((first.min(last), first.max(last)));
        self.normalize();
    }

    /// Adds one address.
    pub fn add_ip(&mut self, ip: Ipv4Addr) {
        let n = u32::from(ip);
        self.add(n, n);
    }

    /// Adds every address in `net`.
    pub fn add_net(&mut self, net: (Ipv4Addr, u8)) {
        let (first, last) = bounds(net);
        self.add(first, last);
    }

    /// Adds every address of `other`.
    pub fn extend(&mut self, other: &Ranges) {
        self.spans.extend_from_slice(&other.spans);
        self.normalize();
    }

    /// Removes every address in `net`.
    pub fn remove_net(&mut self, net: (Ipv4Addr, u8)) {
        let (cut_first, cut_last) = bounds(net);
        let mut out = Vec::with_capacity(self.spans.len() + 1);
        for &(first, last) in &self.spans {
            if last < cut_first || first > cut_last {
                out.push((first, last));
                continue;
            }
            if first < cut_first {
                out.push((first, cut_first - 1));
            }
            if last > cut_last {
                out.push((cut_last + 1, last));
            }
        }
        self.spans = out;
    }

    /// Whether `ip` is in the set.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        let n = u32::from(ip);
        self.spans.iter().any(|&(f, l)| f <= n && n <= l)
    }

    /// True when the set holds no address.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The elements of an nft `ipv4_addr` interval set: an address, a
    /// prefix when the range is one, else `first-last`.
    pub fn nft_elements(&self) -> Vec<String> {
        self.spans
            .iter()
            .map(|&(first, last)| {
                let (a, b) = (Ipv4Addr::from(first), Ipv4Addr::from(last));
                if first == last {
                    return a.to_string();
                }
                let size = u64::from(last - first) + 1;
                if size.is_power_of_two() && u64::from(first) % size == 0 {
                    let prefix = 32 - size.trailing_zeros();
                    format!("{a}/{prefix}")
                } else {
                    format!("{a}-{b}")
                }
            })
            .collect()
    }

    fn normalize(&mut self) {
        self.spans.sort_unstable();
        let mut out: Vec<(u32, u32)> = Vec::with_capacity(self.spans.len());
        for &(first, last) in &self.spans {
            match out.last_mut() {
                // Overlapping or adjacent: one span.
                Some(prev) if u64::from(first) <= u64::from(prev.1) + 1 => {
                    prev.1 = prev.1.max(last);
                }
                _ => out.push((first, last)),
            }
        }
        self.spans = out;
    }
}

fn bounds((addr, prefix): (Ipv4Addr, u8)) -> (u32, u32) {
    let prefix = u32::from(prefix.min(32));
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    let first = u32::from(addr) & mask;
    (first, first | !mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn a_block_minus_its_exceptions_renders_as_disjoint_elements() {
        let mut r = Ranges::new();
        r.add_net((ip("10.0.0.0"), 24));
        r.remove_net((ip("10.0.0.128"), 25));
        r.remove_net((ip("10.0.0.5"), 32));
        assert_eq!(
            r.nft_elements(),
            ["10.0.0.0-10.0.0.4", "10.0.0.6-10.0.0.127"]
        );
        assert!(r.contains(ip("10.0.0.4")));
        assert!(!r.contains(ip("10.0.0.5")));
        assert!(!r.contains(ip("10.0.0.200")));
    }

    #[test]
    fn overlapping_and_adjacent_additions_merge() {
        let mut r = Ranges::new();
        r.add_ip(ip("10.42.0.5"));
        r.add_net((ip("10.42.0.0"), 29));
        r.add_ip(ip("10.42.0.8"));
        r.add_ip(ip("10.42.1.1"));
        assert_eq!(r.nft_elements(), ["10.42.0.0-10.42.0.8", "10.42.1.1"]);
        let mut all = Ranges::new();
        all.add_net((ip("1.2.3.4"), 0));
        assert_eq!(all.nft_elements(), ["0.0.0.0/0"]);
    }
}
