//! The kernel side of the pod network through iproute2's `ip` and `bridge`
//! commands: reading links, addresses, routes, neighbours and forwarding
//! entries as JSON (`-j`), changing them in one `-batch` run per command,
//! and the VXLAN device itself. Every call is blocking; the caller runs it
//! off the async runtime.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use serde_json::Value;
use skiff_common::cidr::{self, Ipv4Net};

use super::OverlayError;

/// The routing protocol number skiff's pod-network routes carry, so that
/// they can be told from every other route (the kernel keeps it; `ip route
/// show proto 173` lists exactly ours).
pub(crate) const ROUTE_PROTO: u8 = 173;

/// Runs `program args`, feeding `input`, and returns its standard output.
fn run(program: &str, args: &[&str], input: Option<&str>) -> Result<String, OverlayError> {
    let words: Vec<&str> = std::iter::once(program)
        .chain(args.iter().copied())
        .collect();
    Ok(skiff_common::host_command::run(&words, input)?)
}

fn json(program: &str, args: &[&str]) -> Result<Vec<Value>, OverlayError> {
    let text = run(program, args, None)?;
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Array(items)) => Ok(items),
        Ok(_) | Err(_) => Err(OverlayError::Output {
            command: format!("{program} {}", args.join(" ")),
            detail: "not a JSON array".into(),
        }),
    }
}

/// Runs `lines` through `ip -batch -` (or `bridge`), going on past a failed
/// line (`-force`) so one bad entry does not hold up the rest; the error
/// names what failed.
pub(crate) fn batch(program: &str, lines: &[String]) -> Result<(), OverlayError> {
    if lines.is_empty() {
        return Ok(());
    }
    let mut input = lines.join("\n");
    input.push('\n');
    run(program, &["-force", "-batch", "-"], Some(&input)).map(|_| ())
}

/// The MTU of the link that holds `address`, if any does.
pub(crate) fn mtu_of_link_with(address: Ipv4Addr) -> Result<Option<(String, u32)>, OverlayError> {
    let links = json("ip", &["-j", "addr", "show"])?;
    Ok(links.iter().find_map(|link| {
        let holds = link["addr_info"]
            .as_array()?
            .iter()
            .any(|a| a["family"] == "inet" && a["local"].as_str() == Some(&address.to_string()));
        let mtu = u32::try_from(link["mtu"].as_u64()?).ok()?;
        holds.then(|| (link["ifname"].as_str().unwrap_or_default().to_string(), mtu))
    }))
}

/// A VXLAN device as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VxlanLink {
    /// Its MAC.
    pub mac: String,
    /// VXLAN network identifier.
    pub vni: u64,
    /// Local (source) address.
    pub local: Option<Ipv4Addr>,
    /// UDP destination port.
    pub port: u64,
    /// Whether it is a VXLAN device at all.
    pub is_vxlan: bool,
    /// Its IPv4 addresses.
    pub addresses: Vec<String>,
}

/// The device `name`, if it exists.
pub(crate) fn link(name: &str) -> Result<Option<VxlanLink>, OverlayError> {
    let links = json("ip", &["-d", "-j", "link", "show"])?;
    let Some(found) = links.iter().find(|l| l["ifname"] == name) else {
        return Ok(None);
    };
    let data = &found["linkinfo"]["info_data"];
    let addresses = json("ip", &["-j", "-4", "addr", "show", "dev", name])?
        .iter()
        .flat_map(|l| l["addr_info"].as_array().cloned().unwrap_or_default())
        .filter_map(|a| {
            Some(format!(
                "{}/{}",
                a["local"].as_str()?,
                a["prefixlen"].as_u64()?
            ))
        })
        .collect();
    Ok(Some(VxlanLink {
        mac: found["address"].as_str().unwrap_or_default().to_string(),
        vni: data["id"].as_u64().unwrap_or_default(),
        local: data["local"].as_str().and_then(|s| s.parse().ok()),
        port: data["port"].as_u64().unwrap_or_default(),
        is_vxlan: found["linkinfo"]["info_kind"] == "vxlan",
        addresses,
    }))
}

/// What the VXLAN device must be.
#[derive(Debug, Clone)]
pub(crate) struct VxlanSpec<'a> {
    /// Device name.
    pub name: &'a str,
    /// VXLAN network identifier.
    pub vni: u32,
    /// UDP port.
    pub port: u16,
    /// The node's address (outer source).
    pub local: Ipv4Addr,
    /// Device MTU.
    pub mtu: u32,
    /// The device's own address (`<pod CIDR network>/32`).
    pub address: Ipv4Addr,
}

/// Creates the VXLAN device as `spec` says, or keeps the one there when it
/// already matches (so its MAC, which peers have recorded, stays); returns
/// its MAC.
pub(crate) fn ensure_vxlan(spec: &VxlanSpec<'_>) -> Result<String, OverlayError> {
    let existing = link(spec.name)?;
    let fits = existing.as_ref().is_some_and(|l| {
        l.is_vxlan
            && l.vni == u64::from(spec.vni)
            && l.port == u64::from(spec.port)
            && l.local == Some(spec.local)
    });
    if existing.is_some() && !fits {
        run("ip", &["link", "delete", spec.name], None)?;
    }
    if !fits {
        run(
            "ip",
            &[
                "link",
                "add",
                spec.name,
                "type",
                "vxlan",
                "id",
                &spec.vni.to_string(),
                "local",
                &spec.local.to_string(),
                "dstport",
                &spec.port.to_string(),
                "nolearning",
            ],
            None,
        )?;
    }
    run(
        "ip",
        &["link", "set", spec.name, "mtu", &spec.mtu.to_string()],
        None,
    )?;
    let address = format!("{}/32", spec.address);
    let addresses = link(spec.name)?.map(|l| l.addresses).unwrap_or_default();
    if addresses != [address.clone()] {
        run("ip", &["addr", "flush", "dev", spec.name], None)?;
        run("ip", &["addr", "add", &address, "dev", spec.name], None)?;
    }
    run("ip", &["link", "set", spec.name, "up"], None)?;
    link(spec.name)?
        .map(|l| l.mac)
        .filter(|mac| super::peers::valid_mac(mac))
        .ok_or_else(|| OverlayError::Output {
            command: format!("ip link show {}", spec.name),
            detail: "the VXLAN device has no usable MAC".into(),
        })
}

/// Deletes the device `name` when it exists.
pub(crate) fn delete_link(name: &str) -> Result<(), OverlayError> {
    if link(name)?.is_some() {
        run("ip", &["link", "delete", name], None)?;
    }
    Ok(())
}

/// The kernel's pod-network state: skiff's routes (destination → gateway and
/// device), and on the VXLAN device its permanent neighbours (IP → MAC) and
/// remote forwarding entries (MAC → remote address).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KernelState {
    /// Routes with [`ROUTE_PROTO`].
    pub routes: BTreeMap<Ipv4Net, (Option<Ipv4Addr>, String)>,
    /// Permanent neighbours on the VXLAN device.
    pub neighbours: BTreeMap<Ipv4Addr, String>,
    /// Forwarding entries with a remote destination on the VXLAN device.
    pub fdb: BTreeSet<(String, Ipv4Addr)>,
}

/// Reads [`KernelState`]; `device` is the VXLAN device (absent: no
/// neighbours or forwarding entries).
pub(crate) fn read_state(device: Option<&str>) -> Result<KernelState, OverlayError> {
    let proto = ROUTE_PROTO.to_string();
    let routes = json("ip", &["-j", "-4", "route", "show", "proto", &proto])?;
    let (neighbours, fdb) = match device {
        Some(device) => (
            json("ip", &["-j", "-4", "neigh", "show", "dev", device])?,
            json("bridge", &["-j", "fdb", "show", "dev", device])?,
        ),
        None => (Vec::new(), Vec::new()),
    };
    Ok(KernelState::parse(&routes, &neighbours, &fdb))
}

impl KernelState {
    /// The state from `ip -j route show proto 173`, `ip -j neigh show dev
    /// DEVICE` and `bridge -j fdb show dev DEVICE`: only permanent
    /// neighbours, and only forwarding entries with a remote destination.
    pub(crate) fn parse(routes: &[Value], neighbours: &[Value], fdb: &[Value]) -> Self {
        let mut state = KernelState::default();
        for route in routes {
            let Some(dst) = route["dst"].as_str().and_then(parse_dst) else {
                continue;
            };
            let gateway = route["gateway"].as_str().and_then(|g| g.parse().ok());
            let dev = route["dev"].as_str().unwrap_or_default().to_string();
            state.routes.insert(dst, (gateway, dev));
        }
        for neighbour in neighbours {
            let permanent = neighbour["state"]
                .as_array()
                .is_some_and(|s| s.iter().any(|v| v == "PERMANENT"));
            if let (true, Some(ip), Some(mac)) = (
                permanent,
                neighbour["dst"].as_str().and_then(|d| d.parse().ok()),
                neighbour["lladdr"].as_str(),
            ) {
                state.neighbours.insert(ip, mac.to_ascii_lowercase());
            }
        }
        for entry in fdb {
            if let (Some(mac), Some(dst)) = (
                entry["mac"].as_str(),
                entry["dst"].as_str().and_then(|d| d.parse().ok()),
            ) {
                state.fdb.insert((mac.to_ascii_lowercase(), dst));
            }
        }
        state
    }
}

/// A route's `dst` as `ip -j` writes it (`10.42.1.0/24`, or a bare address
/// for a /32).
fn parse_dst(dst: &str) -> Option<Ipv4Net> {
    let text = if dst.contains('/') {
        dst.to_string()
    } else {
        format!("{dst}/32")
    };
    cidr::parse_v4(&text).ok()
}

/// Lets the node forward between its interfaces (pods ↔ the overlay); a new
/// network namespace starts with forwarding off.
pub(crate) fn enable_forwarding() -> Result<(), OverlayError> {
    let path = "/proc/sys/net/ipv4/ip_forward";
    match std::fs::read_to_string(path) {
        Ok(v) if v.trim() == "1" => Ok(()),
        _ => std::fs::write(path, "1").map_err(OverlayError::Forwarding),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(text: &str) -> Vec<Value> {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn kernel_state_reads_what_ip_and_bridge_print() {
        // As iproute2 6.1 prints them.
        let routes = values(
            r#"[{"dst":"10.221.1.0/24","gateway":"10.221.1.0","dev":"skiff.vxlan","flags":["onlink"]},
                {"dst":"10.222.5.7","gateway":"192.0.2.5","dev":"eth0","flags":[]}]"#,
        );
        let neighbours = values(
            r#"[{"dst":"10.221.1.0","lladdr":"86:00:0A:20:EB:F6","state":["PERMANENT"]},
                {"dst":"10.221.9.0","lladdr":"86:00:0a:20:eb:f7","state":["STALE"]}]"#,
        );
        let fdb = values(
            r#"[{"mac":"86:00:0a:20:eb:f6","dst":"10.209.1.12","flags":["self"],"state":"permanent"},
                {"mac":"33:33:00:00:00:01","flags":["self"],"state":"permanent"}]"#,
        );
        let state = KernelState::parse(&routes, &neighbours, &fdb);
        assert_eq!(
            state.routes.get(&"10.221.1.0/24".parse().unwrap()),
            Some(&(
                Some("10.221.1.0".parse().unwrap()),
                "skiff.vxlan".to_string()
            ))
        );
        assert!(state.routes.contains_key(&"10.222.5.7/32".parse().unwrap()));
        assert_eq!(
            state.neighbours.into_iter().collect::<Vec<_>>(),
            [(
                "10.221.1.0".parse().unwrap(),
                "86:00:0a:20:eb:f6".to_string()
            )]
        );
        assert_eq!(
            state.fdb.into_iter().collect::<Vec<_>>(),
            [(
                "86:00:0a:20:eb:f6".to_string(),
                "10.209.1.12".parse().unwrap()
            )]
        );
    }
}
