//! Admission validation: the field checks whose failures are a 422 Invalid
//! with one cause per field. Runs on the JSON form before typed decoding, so
//! a missing required field is reported as upstream reports it. Metadata is
//! checked here for every kind; which other checks apply (and the name rule)
//! is each kind's strategy's choice (`kinds/`), drawing on [`workloads`].

pub(crate) mod autoscaling_metrics;
mod env;
pub(crate) mod int_or_percent;
pub(crate) mod ip_warnings;
pub(crate) mod job_policies;
mod names;
mod pod_dns;
mod pod_placement;
mod pod_volumes;
pub(crate) mod pod_warnings;
pub(crate) mod ports;
pub(crate) mod resource_names;
pub(crate) mod rollouts;
mod security_contexts;
mod security_profiles;
mod service_policies;
pub(crate) mod workloads;

use serde_json::Value;

use crate::registry::ResourceInfo;
use crate::status::FieldError;

pub(crate) use names::{
    NameRule, is_dns1123_label, is_dns1123_subdomain, validate_label_value, validate_name,
    validate_qualified_name,
};

/// A path that stays below where it is joined (a sub path, an item's
/// file, a local profile), as upstream's validateLocalDescendingPath:
/// relative, and no `..` part.
pub(crate) fn descending_path(path: &str, field: &str, errors: &mut Vec<FieldError>) {
    if path.starts_with('/') {
        errors.push(FieldError::invalid(field, path, "must be a relative path"));
    }
    if path.split('/').any(|part| part == "..") {
        errors.push(FieldError::invalid(field, path, "must not contain '..'"));
    }
}

/// The integer `spec.<field>`, when set, is not negative (upstream's
/// ValidateNonnegativeField).
pub(crate) fn non_negative(spec: &Value, field: &str, errors: &mut Vec<FieldError>) {
    non_negative_at(spec, "spec", field, errors);
}

/// [`non_negative`] of `<parent>.<field>`, where `parent` is the path of
/// `object` (`status`, say).
pub(crate) fn non_negative_at(
    object: &Value,
    parent: &str,
    field: &str,
    errors: &mut Vec<FieldError>,
) {
    if let Some(n) = object[field].as_i64().filter(|n| *n < 0) {
        errors.push(FieldError::invalid(
            format!("{parent}.{field}"),
            n,
            "must be greater than or equal to 0",
        ));
    }
}

/// A quantity as JSON gives it: its text, or a number (which upstream's
/// decoder reads as a quantity too); `None` for anything else.
pub(crate) fn quantity(value: &Value) -> Option<skiff_common::amount::Amount> {
    match value {
        Value::String(text) => skiff_common::amount::Amount::parse(text),
        Value::Number(n) => skiff_common::amount::Amount::parse(&n.to_string()),
        _ => None,
    }
}

/// `text` at `path` is a CIDR (upstream's IsValidCIDR); the network it
/// names when it is.
pub(crate) fn cidr(text: &str, path: &str, errors: &mut Vec<FieldError>) -> Option<ipnet::IpNet> {
    let net = text.parse::<ipnet::IpNet>().ok();
    if net.is_none() {
        errors.push(FieldError::invalid(
            path,
            text,
            "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
        ));
    }
    net
}

/// `text` at `path` is an IP address (upstream's IsValidIP); whether it is.
pub(crate) fn ip_address(text: &str, path: &str, errors: &mut Vec<FieldError>) -> bool {
    let valid = text.parse::<std::net::IpAddr>().is_ok();
    if !valid {
        errors.push(FieldError::invalid(
            path,
            text,
            "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        ));
    }
    valid
}

/// `object.field`, when set, must be one of `allowed` (upstream's
/// NotSupported at `path.field`, or `field` at the root when `path` is
/// empty, listing them, otherwise): the check of every optional enumerated
/// string field.
pub(crate) fn one_of(
    object: &Value,
    field: &str,
    allowed: &[&str],
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    if let Some(value) = object[field].as_str()
        && !allowed.contains(&value)
    {
        let at = if path.is_empty() {
            field.to_owned()
        } else {
            format!("{path}.{field}")
        };
        errors.push(FieldError::not_supported(at, value, allowed));
    }
}

/// All field errors of `object` (about to be written), given the stored
/// `old` object on updates.
pub(crate) fn validate(
    info: &ResourceInfo,
    object: &Value,
    old: Option<&Value>,
    subresource: Option<crate::registry::Subresource>,
) -> Vec<FieldError> {
    let mut errors = validate_metadata(info, object, old);
    let written = crate::kinds::Written {
        info,
        object,
        old,
        subresource,
    };
    info.strategy.validate(&written, &mut errors);
    errors
}

/// The kind's warnings about `object` (written over `old` on updates),
/// for a write that passed [`validate`].
pub(crate) fn warnings(
    info: &ResourceInfo,
    object: &Value,
    old: Option<&Value>,
    subresource: Option<crate::registry::Subresource>,
) -> Vec<String> {
    info.strategy.warnings(&crate::kinds::Written {
        info,
        object,
        old,
        subresource,
    })
}

fn validate_metadata(info: &ResourceInfo, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let meta = &object["metadata"];
    match meta["name"].as_str() {
        None | Some("") => errors.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        )),
        Some(name) => errors.extend(validate_name(
            info.strategy.name_rule(),
            name,
            "metadata.name",
        )),
    }
    if info.namespaced && meta["namespace"].as_str().unwrap_or("").is_empty() {
        errors.push(FieldError::required("metadata.namespace", ""));
    }
    if let Some(labels) = meta["labels"].as_object() {
        for (k, v) in labels {
            errors.extend(names::validate_qualified_name(k, "metadata.labels"));
            // Upstream reports a bad value at the map, not at its key.
            match v.as_str() {
                Some(v) => errors.extend(names::validate_label_value(v, "metadata.labels")),
                None => errors.push(FieldError::invalid(
                    format!("metadata.labels[{k}]"),
                    v.clone(),
                    "must be a string",
                )),
            }
        }
    }
    if let Some(annotations) = meta["annotations"].as_object() {
        let mut total = 0;
        for (k, v) in annotations {
            errors.extend(names::validate_qualified_name(
                &k.to_ascii_lowercase(),
                "metadata.annotations",
            ));
            total += k.len() + v.as_str().map_or(0, str::len);
        }
        if total > 256 * 1024 {
            errors.push(FieldError::too_long("metadata.annotations", 256 * 1024));
        }
    }
    if let Some(old) = old
        && crate::object::is_terminating(old)
    {
        let before = crate::object::finalizers(old);
        let added: Vec<String> = crate::object::finalizers(object)
            .into_iter()
            .filter(|f| !before.contains(f))
            .collect();
        if !added.is_empty() {
            errors.push(FieldError::forbidden(
                "metadata.finalizers",
                format!("no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"),
            ));
        }
    }
    errors
}

/// What a pod-spec check (`check(spec, "spec", errors)`) says of `spec`, as
/// rendered messages: the form the checks' tests compare.
#[cfg(test)]
pub(crate) fn rendered(check: fn(&Value, &str, &mut Vec<FieldError>), spec: Value) -> Vec<String> {
    let mut errors = Vec::new();
    check(&spec, "spec", &mut errors);
    errors.iter().map(FieldError::render).collect()
}
