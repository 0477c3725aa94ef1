//! EndpointSlices (`discovery.k8s.io/v1`): each port names itself, if only
//! with the empty name, and speaks TCP unless it says otherwise — upstream's
//! defaults for every writer, so clients that read `name` as always present
//! (kubectl's describe) find it on slices written by anyone. The core
//! Endpoints they succeed live here too: their ports speak TCP unless they
//! say otherwise, and their addresses are IP addresses.

use serde_json::{Map, Value, json};

use super::{KindStrategy, Written, changed_outside_metadata, set_default};
use crate::object::items_mut;
use crate::registry::ResourceInfo;
use crate::status::FieldError;

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
