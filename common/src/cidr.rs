//! IPv4 CIDRs (`10.42.0.0/16`) on the `ipnet` crate: the one parser for the
//! cluster, node, pod and service ranges, and the arithmetic the node IPAM
//! controller hands node subnets out with.

use std::net::Ipv4Addr;
use std::ops::RangeInclusive;

pub use ipnet::Ipv4Net;

/// Why a CIDR was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    /// Not `address/prefix` with an IPv4 address and a prefix up to 32.
    #[error("{0:?} is not an IPv4 CIDR (address/prefix)")]
    Syntax(String),
    /// The address has bits set beyond the prefix (`10.0.0.1/24`).
    #[error("{0:?}: host bits are set")]
    HostBits(String),
    /// The prefix length is outside what the caller can use.
    #[error("{cidr:?}: the prefix length must be between {min} and {max}")]
    Prefix {
        /// The CIDR as given.
        cidr: String,
        /// Shortest prefix accepted.
        min: u8,
        /// Longest prefix accepted.
        max: u8,
    },
}

/// Parses `a.b.c.d/n`; host bits are allowed (use [`Ipv4Net::trunc`] for the
/// network).
pub fn parse_v4(cidr: &str) -> Result<Ipv4Net, CidrError> {
    cidr.trim()
        .parse::<Ipv4Net>()
        .map_err(|_| CidrError::Syntax(cidr.to_owned()))
}

/// Parses a network that must be written as one (no host bits) with a
/// prefix length in `prefixes`.
pub fn parse_v4_network(cidr: &str, prefixes: RangeInclusive<u8>) -> Result<Ipv4Net, CidrError> {
    let net = parse_v4(cidr)?;
    if net != net.trunc() {
        return Err(CidrError::HostBits(cidr.to_owned()));
    }
    check_prefix(cidr, net, prefixes)
}

/// Refuses `net` (parsed from `cidr`) when its prefix length is outside
/// `prefixes`.
pub fn check_prefix(
    cidr: &str,
    net: Ipv4Net,
    prefixes: RangeInclusive<u8>,
) -> Result<Ipv4Net, CidrError> {
    if prefixes.contains(&net.prefix_len()) {
        Ok(net)
    } else {
        Err(CidrError::Prefix {
            cidr: cidr.to_owned(),
            min: *prefixes.start(),
            max: *prefixes.end(),
        })
    }
}

/// The `index`-th subnet of length `prefix` inside `net` (counting from
/// its network address), if there is one.
pub fn nth_subnet(net: Ipv4Net, prefix: u8, index: u32) -> Option<Ipv4Net> {
    let bits = prefix.checked_sub(net.prefix_len())?;
    if prefix > 32 || (bits < 32 && index >= 1u32 << bits) {
        return None;
    }
    let offset = u64::from(index) << (32 - u32::from(prefix));
    let first = u32::try_from(u64::from(u32::from(net.network())) + offset).ok()?;
    Ipv4Net::new(Ipv4Addr::from(first), prefix).ok()
}

/// Where `subnet` stands among the subnets of its length inside `net`
/// (the inverse of [`nth_subnet`]); `None` when it is not one of them.
pub fn subnet_index(net: Ipv4Net, subnet: Ipv4Net) -> Option<u32> {
    if subnet != subnet.trunc() || !net.contains(&subnet) {
        return None;
    }
    let distance = u32::from(subnet.network()) - u32::from(net.network());
    Some(distance >> (32 - u32::from(subnet.prefix_len())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses_as_asked() {
        let net = parse_v4("10.42.0.0/16").unwrap();
        assert_eq!(
            (net.network(), net.prefix_len()),
            ("10.42.0.0".parse().unwrap(), 16)
        );
        assert_eq!(
            parse_v4("10.43.0.9/16").unwrap().trunc().to_string(),
            "10.43.0.0/16"
        );
        for bad in ["10.42.0.0", "10.42.0.0/33", "x/8", "10.42.0/16", "::1/64"] {
            assert!(matches!(parse_v4(bad), Err(CidrError::Syntax(_))), "{bad}");
        }
        assert!(matches!(
            parse_v4_network("10.42.3.1/24", 1..=30),
            Err(CidrError::HostBits(_))
        ));
        assert!(matches!(
            parse_v4_network("10.42.3.0/31", 1..=30),
            Err(CidrError::Prefix {
                min: 1,
                max: 30,
                ..
            })
        ));
        assert!(parse_v4_network("10.42.3.0/24", 1..=30).is_ok());
    }

    #[test]
    fn subnets_count_from_the_network_address() {
        let net = parse_v4("10.42.0.0/16").unwrap();
        assert_eq!(nth_subnet(net, 24, 0).unwrap().to_string(), "10.42.0.0/24");
        assert_eq!(
            nth_subnet(net, 24, 255).unwrap().to_string(),
            "10.42.255.0/24"
        );
        assert_eq!(nth_subnet(net, 24, 256), None);
        assert_eq!(nth_subnet(net, 8, 0), None);
        let third = parse_v4("10.42.3.0/24").unwrap();
        assert_eq!(subnet_index(net, third), Some(3));
        assert_eq!(subnet_index(net, parse_v4("10.43.3.0/24").unwrap()), None);
        assert_eq!(subnet_index(net, parse_v4("10.42.3.1/24").unwrap()), None);
    }
}
