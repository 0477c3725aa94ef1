//! How cluster names are spelled: the dashed form of an IP address used in
//! pod and endpoint names, and the IP inside a reverse (`.arpa`) name.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `10.42.0.7` → `10-42-0-7`; `fd00::7` → `fd00--7` (as pod A records spell them).
pub(crate) fn dashed(ip: IpAddr) -> String {
    ip.to_string().replace(['.', ':'], "-")
}

/// The IP a dashed label stands for, if it is one.
pub(crate) fn undashed(label: &str) -> Option<IpAddr> {
    if label.split('-').count() == 4
        && let Ok(v4) = label.replace('-', ".").parse::<Ipv4Addr>()
    {
        return Some(IpAddr::V4(v4));
    }
    label
        .replace('-', ":")
        .parse::<Ipv6Addr>()
        .ok()
        .map(IpAddr::V6)
}

/// The address a reverse name (lowercase, without the trailing dot) asks for:
/// `7.0.42.10.in-addr.arpa` or the 32 nibbles under `ip6.arpa`.
pub(crate) fn reverse_ip(name: &str) -> Option<IpAddr> {
    if let Some(rest) = name.strip_suffix(".in-addr.arpa") {
        let mut octets = [0u8; 4];
        let labels: Vec<&str> = rest.split('.').collect();
        if labels.len() != 4 {
            return None;
        }
        for (slot, label) in octets.iter_mut().rev().zip(labels) {
            *slot = label.parse().ok()?;
        }
        return Some(IpAddr::V4(Ipv4Addr::from(octets)));
    }
    let rest = name.strip_suffix(".ip6.arpa")?;
    let nibbles: Vec<&str> = rest.split('.').collect();
    if nibbles.len() != 32 {
        return None;
    }
    let mut value: u128 = 0;
    for nibble in nibbles.iter().rev() {
        if nibble.len() != 1 {
            return None;
        }
        value = (value << 4) | u128::from_str_radix(nibble, 16).ok()?;
    }
    Some(IpAddr::V6(Ipv6Addr::from(value)))
}

/// True for names in the reverse zones.
pub(crate) fn is_reverse(name: &str) -> bool {
    name.ends_with(".in-addr.arpa") || name.ends_with(".ip6.arpa")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dashed_names_round_trip_for_both_families() {
        let v4: IpAddr = "10.42.0.7".parse().unwrap();
        let v6: IpAddr = "fd00::7".parse().unwrap();
        assert_eq!(dashed(v4), "10-42-0-7");
        assert_eq!(dashed(v6), "fd00--7");
        assert_eq!(undashed("10-42-0-7"), Some(v4));
        assert_eq!(undashed("fd00--7"), Some(v6));
        assert_eq!(undashed("web-0"), None);
        assert_eq!(undashed("10-42-0"), None);
    }

    #[test]
    fn reverse_names_give_the_address() {
        assert_eq!(
            reverse_ip("10.0.43.10.in-addr.arpa"),
            Some("10.43.0.10".parse().unwrap())
        );
        let v6: IpAddr = "fd00::1:2".parse().unwrap();
        let IpAddr::V6(v6addr) = v6 else { panic!() };
        let nibbles: Vec<String> = format!("{:032x}", u128::from(v6addr))
            .chars()
            .rev()
            .map(|c| c.to_string())
            .collect();
        let name = format!("{}.ip6.arpa", nibbles.join("."));
        assert_eq!(reverse_ip(&name), Some(v6));
        assert_eq!(reverse_ip("0.43.10.in-addr.arpa"), None);
        assert_eq!(reverse_ip("x.0.43.10.in-addr.arpa"), None);
        assert!(is_reverse("1.0.0.10.in-addr.arpa"));
        assert!(!is_reverse("kubernetes.default.svc.cluster.local"));
    }
}
