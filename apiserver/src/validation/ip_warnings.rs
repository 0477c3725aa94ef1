//! IP and CIDR text that validation accepts but upstream warns of, in its
//! words (GetWarningsForIP and GetWarningsForCIDR): forms another parser
//! would read differently (an IPv4-mapped IPv6 address, octets or a prefix
//! length with leading zeros), a CIDR with bits set after its prefix, and
//! IPv6 text not in RFC 5952's canonical form, which makes clients that
//! compare what they wrote with what they read apply again and again.

use std::net::IpAddr;

use ipnet::{IpNet, Ipv4Net};

use crate::go_format::go_quote;

/// Warnings for the IP address `text` at `path` (none when it does not
/// parse: validation refuses that).
pub(crate) fn for_ip(path: &str, text: &str) -> Vec<String> {
    let Some(ip) = parse_sloppy(text) else {
        return Vec::new();
    };
    let strict = text.parse::<IpAddr>().ok();
    let mapped = matches!(strict, Some(IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_some());
    if strict.is_none() || mapped {
        return vec![format!(
            "{path}: non-standard IP address {} will be considered invalid in a future Kubernetes release: use {}",
            go_quote(text),
            go_quote(&go_ip(ip).to_string())
        )];
    }
    match ip {
        IpAddr::V6(v6) if v6.to_string() != text => vec![format!(
            "{path}: IPv6 address {} should be in RFC 5952 canonical format ({})",
            go_quote(text),
            go_quote(&v6.to_string())
        )],
        _ => Vec::new(),
    }
}

/// Warnings for the CIDR `text` at `path` (none when it does not parse).
pub(crate) fn for_cidr(path: &str, text: &str) -> Vec<String> {
    let Some(net) = parse_cidr_sloppy(text) else {
        return Vec::new();
    };
    let (ip, network) = (go_ip(net.addr()), go_net(net));
    let mut warnings = Vec::new();
    if ip != network.network() {
        let bits = if ip.is_ipv4() { 32 } else { 128 };
        warnings.push(format!(
            "{path}: CIDR value {} is ambiguous in this context (should be {} or {}?)",
            go_quote(text),
            go_quote(&network.trunc().to_string()),
            go_quote(&format!("{ip}/{bits}"))
        ));
    }
    // What Go's strict ParsePrefix takes: a plain address and a prefix
    // length without leading zeros, not an IPv4-mapped IPv6 address.
    let strict = text.split_once('/').and_then(|(addr, bits)| {
        let plain_bits = bits == "0" || !bits.starts_with('0');
        addr.parse::<IpAddr>().ok().filter(|_| plain_bits)
    });
    let mapped = matches!(strict, Some(IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_some());
    if strict.is_none() || mapped {
        warnings.push(format!(
            "{path}: non-standard CIDR value {} will be considered invalid in a future Kubernetes release: use {}",
            go_quote(text),
            go_quote(&network.trunc().to_string())
        ));
    }
    if let (true, Some(IpAddr::V6(v6))) = (warnings.is_empty(), strict) {
        let canonical = format!("{v6}/{}", net.prefix_len());
        if canonical != text {
            warnings.push(format!(
                "{path}: IPv6 CIDR value {} should be in RFC 5952 canonical format ({})",
                go_quote(text),
                go_quote(&canonical)
            ));
        }
    }
    warnings
}

/// Go's ParseIPSloppy: the standard forms, and IPv4 octets with leading
/// zeros read as decimal.
fn parse_sloppy(text: &str) -> Option<IpAddr> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(ip);
    }
    // ipnet's parser reads octets as Go's sloppy parser does.
    if text.contains('/') {
        return None;
    }
    format!("{text}/32")
        .parse::<Ipv4Net>()
        .ok()
        .map(|net| IpAddr::V4(net.addr()))
}

/// Go's ParseCIDRSloppy: as [`parse_sloppy`] for the address, and a
/// prefix length that may have leading zeros.
fn parse_cidr_sloppy(text: &str) -> Option<IpNet> {
    if let Ok(net) = text.parse::<IpNet>() {
        return Some(net);
    }
    let (addr, bits) = text.split_once('/')?;
    let bits: u8 = bits
        .parse()
        .ok()
        .filter(|_| bits.bytes().all(|b| b.is_ascii_digit()))?;
    IpNet::new(parse_sloppy(addr)?, bits).ok()
}

/// The address as Go's net.IP prints it: an IPv4-mapped IPv6 address as
/// plain IPv4.
fn go_ip(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

/// The network as Go's net.IPNet holds it: an IPv4-mapped IPv6 network of
/// at least 96 bits as the IPv4 network it maps.
fn go_net(net: IpNet) -> IpNet {
    match net {
        IpNet::V6(v6) if v6.prefix_len() >= 96 => match v6.addr().to_ipv4_mapped() {
            Some(v4) => Ipv4Net::new(v4, v6.prefix_len() - 96)
                .map(IpNet::V4)
                .unwrap_or(net),
            None => net,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP_PATH: &str = "spec.clusterIPs[0]";
    const CIDR_PATH: &str = "spec.loadBalancerSourceRanges[0]";

    #[test]
    fn ips_are_warned_of_as_upstream_words_it() {
        assert!(for_ip(IP_PATH, "192.12.2.2").is_empty());
        assert!(for_ip(IP_PATH, "2001:db8::2").is_empty());
        assert!(for_ip(IP_PATH, "not an ip").is_empty());
        assert_eq!(
            for_ip(IP_PATH, "192.012.2.2"),
            [
                "spec.clusterIPs[0]: non-standard IP address \"192.012.2.2\" will be considered invalid in a future Kubernetes release: use \"192.12.2.2\""
            ]
        );
        assert_eq!(
            for_ip(IP_PATH, "::ffff:192.12.2.2"),
            [
                "spec.clusterIPs[0]: non-standard IP address \"::ffff:192.12.2.2\" will be considered invalid in a future Kubernetes release: use \"192.12.2.2\""
            ]
        );
        assert_eq!(
            for_ip("spec.loadBalancerIP", "2001:db8:0:0::2"),
            [
                "spec.loadBalancerIP: IPv6 address \"2001:db8:0:0::2\" should be in RFC 5952 canonical format (\"2001:db8::2\")"
            ]
        );
    }

    #[test]
    fn cidrs_are_warned_of_as_upstream_words_it() {
        assert!(for_cidr(CIDR_PATH, "192.12.2.0/24").is_empty());
        assert!(for_cidr(CIDR_PATH, "2001:db8::/64").is_empty());
        assert!(for_cidr(CIDR_PATH, "nope").is_empty());
        assert_eq!(
            for_cidr(CIDR_PATH, "192.12.2.0/024"),
            [
                "spec.loadBalancerSourceRanges[0]: non-standard CIDR value \"192.12.2.0/024\" will be considered invalid in a future Kubernetes release: use \"192.12.2.0/24\""
            ]
        );
        assert_eq!(
            for_cidr(CIDR_PATH, "::ffff:192.12.2.0/120"),
            [
                "spec.loadBalancerSourceRanges[0]: non-standard CIDR value \"::ffff:192.12.2.0/120\" will be considered invalid in a future Kubernetes release: use \"192.12.2.0/24\""
            ]
        );
        assert_eq!(
            for_cidr(CIDR_PATH, "192.12.2.8/24"),
            [
                "spec.loadBalancerSourceRanges[0]: CIDR value \"192.12.2.8/24\" is ambiguous in this context (should be \"192.12.2.0/24\" or \"192.12.2.8/32\"?)"
            ]
        );
        assert_eq!(
            for_cidr(CIDR_PATH, "192.012.2.8/24"),
            [
                "spec.loadBalancerSourceRanges[0]: CIDR value \"192.012.2.8/24\" is ambiguous in this context (should be \"192.12.2.0/24\" or \"192.12.2.8/32\"?)",
                "spec.loadBalancerSourceRanges[0]: non-standard CIDR value \"192.012.2.8/24\" will be considered invalid in a future Kubernetes release: use \"192.12.2.0/24\""
            ]
        );
        assert_eq!(
            for_cidr(CIDR_PATH, "2001:db8:0:0::/64"),
            [
                "spec.loadBalancerSourceRanges[0]: IPv6 CIDR value \"2001:db8:0:0::/64\" should be in RFC 5952 canonical format (\"2001:db8::/64\")"
            ]
        );
    }
}
