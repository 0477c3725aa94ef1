//! EndpointSlices (`discovery.k8s.io/v1`): each port names itself, if only
//! with the empty name, and speaks TCP unless it says otherwise — upstream's
//! defaults for every writer, so clients that read `name` as always present
//! (kubectl's describe) find it on slices written by anyone. The core
//! Endpoints they succeed live here too: their ports speak TCP unless they
//! say otherwise, and their addresses are IP addresses. Slices are checked
//! as upstream checks them: addresses of their type, known protocols,
//! unique port names.

use serde_json::{Map, Value, json};

use super::{KindStrategy, Written, changed_outside_metadata, set_default};
use crate::object::{indexed, items_mut};
use crate::registry::ResourceInfo;
use crate::status::FieldError;
use crate::validation::{NameRule, validate_name, validate_qualified_name};

/// The `endpointslices` resource.
#[derive(Debug)]
pub(crate) struct EndpointSlices;

impl KindStrategy for EndpointSlices {
    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        for port in items_mut(object, &["ports"]) {
            set_default(port, "name", json!(""));
            set_default(port, "protocol", json!("TCP"));
        }
    }

    /// Upstream's rules: a known address type that never changes, each
    /// endpoint with at least one address of that type (at most 100) and a
    /// host name that is a DNS label, and ports named (each name once) with
    /// a known protocol.
    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let slice = written.object;
        let address_type = slice["addressType"].as_str().unwrap_or("");
        match address_type {
            "" => errors.push(FieldError::required("addressType", "")),
            "IPv4" | "IPv6" | "FQDN" => {}
            other => errors.push(FieldError::not_supported(
                "addressType",
                other,
                &["FQDN", "IPv4", "IPv6"],
            )),
        }
        for (i, endpoint) in indexed(&slice["endpoints"]) {
            let at = format!("endpoints[{i}]");
            let addresses = endpoint["addresses"].as_array().map_or(0, Vec::len);
            if addresses == 0 {
                errors.push(FieldError::required(
                    format!("{at}.addresses"),
                    "must contain at least 1 address",
                ));
            } else if addresses > MAX_ADDRESSES {
                errors.push(FieldError::too_many(
                    format!("{at}.addresses"),
                    addresses as u64,
                    MAX_ADDRESSES as u64,
                ));
            }
            for (j, address) in indexed(&endpoint["addresses"]) {
                let text = address.as_str().unwrap_or("");
                slice_address(address_type, text, &format!("{at}.addresses[{j}]"), errors);
            }
            if let Some(host) = endpoint["hostname"].as_str() {
                errors.extend(validate_name(
                    NameRule::Label,
                    host,
                    &format!("{at}.hostname"),
                ));
            }
        }
        let mut names: Vec<&str> = Vec::new();
        for (i, port) in indexed(&slice["ports"]) {
            let at = format!("ports[{i}]");
            let name = port["name"].as_str().unwrap_or("");
            if !name.is_empty() {
                errors.extend(validate_name(NameRule::Label, name, &format!("{at}.name")));
            }
            if names.contains(&name) {
                errors.push(FieldError::duplicate(format!("{at}.name"), name));
            } else {
                names.push(name);
            }
            match port["protocol"].as_str() {
                None => errors.push(FieldError::required(format!("{at}.protocol"), "")),
                Some("TCP" | "UDP" | "SCTP") => {}
                Some(other) => errors.push(FieldError::not_supported(
                    format!("{at}.protocol"),
                    other,
                    &["SCTP", "TCP", "UDP"],
                )),
            }
            if let Some(protocol) = port["appProtocol"].as_str() {
                errors.extend(validate_qualified_name(
                    protocol,
                    &format!("{at}.appProtocol"),
                ));
            }
        }
        if let Some(old) = written.old {
            crate::validation::workloads::immutable(old, slice, &["addressType"], errors);
        }
    }

    /// A slice has no spec: any change of its endpoints or ports is a new
    /// generation, and so is a change of its labels, which say which
    /// Service it belongs to and who manages it. The EndpointSlice
    /// controller reads generations to tell whether its cache has caught up
    /// with its own writes.
    fn generation_changed(&self, old: &Value, new: &Value) -> bool {
        changed_outside_metadata(old, new) || labels(old) != labels(new)
    }
}

/// An object's labels; none and an empty map are the same labels.
fn labels(object: &Value) -> Option<&Map<String, Value>> {
    object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .filter(|labels| !labels.is_empty())
}

/// The core `endpoints` resource.
#[derive(Debug)]
pub(crate) struct Endpoints;

impl KindStrategy for Endpoints {
    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        for port in items_mut(object, &["subsets"]).flat_map(|s| items_mut(s, &["ports"])) {
            set_default(port, "protocol", json!("TCP"));
        }
    }

    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        for (i, subset) in written.object["subsets"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            for list in ["addresses", "notReadyAddresses"] {
                for (j, address) in subset[list].as_array().into_iter().flatten().enumerate() {
                    endpoint_ip(
                        address["ip"].as_str().unwrap_or_default(),
                        &format!("subsets[{i}].{list}[{j}].ip"),
                        errors,
                    );
                }
            }
            for (j, port) in subset["ports"].as_array().into_iter().flatten().enumerate() {
                crate::validation::ports::number(
                    &port["port"],
                    &format!("subsets[{i}].ports[{j}].port"),
                    true,
                    errors,
                );
            }
        }
    }
}

/// Most addresses one endpoint of a slice lists.
const MAX_ADDRESSES: usize = 100;

/// An address of a slice's type (an unknown type's are not checked, as
/// upstream leaves them).
fn slice_address(address_type: &str, text: &str, path: &str, errors: &mut Vec<FieldError>) {
    let family_ok = match address_type {
        "IPv4" => text.parse::<std::net::Ipv4Addr>().is_ok(),
        "IPv6" => text.parse::<std::net::Ipv6Addr>().is_ok(),
        "FQDN" => {
            fqdn(text, path, errors);
            return;
        }
        _ => return,
    };
    if !family_ok {
        errors.push(FieldError::invalid(
            path,
            text,
            format!("must be a valid {address_type} address"),
        ));
    }
    // Upstream's second check, that it is an endpoint IP at all.
    if text.parse::<std::net::IpAddr>().is_err() {
        errors.push(FieldError::invalid(
            path,
            text,
            "must be a valid IP address",
        ));
    }
}

/// Upstream's IsFullyQualifiedDomainName: a DNS subdomain of at least two
/// labels (a trailing dot allowed).
fn fqdn(text: &str, path: &str, errors: &mut Vec<FieldError>) {
    let name = text.strip_suffix('.').unwrap_or(text);
    if name.is_empty() {
        errors.push(FieldError::required(path, ""));
        return;
    }
    let found = validate_name(NameRule::Subdomain, name, path);
    if !found.is_empty() {
        errors.extend(found);
        return;
    }
    if name.split('.').count() < 2 {
        errors.push(FieldError::invalid(
            path,
            name,
            "should be a domain with at least two segments separated by dots",
        ));
    }
}

/// An endpoint's address: a parseable IP, said twice as upstream's two
/// checks both say it. Upstream also refuses unspecified, loopback and
/// link-local addresses; skiff does not, since a single-node cluster bound
/// to loopback has its API server's and host-network pods' endpoints there.
fn endpoint_ip(text: &str, path: &str, errors: &mut Vec<FieldError>) {
    if !crate::validation::ip_address(text, path, errors) {
        errors.push(FieldError::invalid(
            path,
            text,
            "must be a valid IP address",
        ));
    }
}
