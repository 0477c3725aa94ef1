//! `networking.k8s.io/v1` Ingresses, checked as upstream validates them: a
//! rule's host is a DNS name (a leading `*.` allowed), never an IP; each
//! path says its `pathType`, and an `Exact` or `Prefix` path is absolute;
//! each backend names one Service port (by number or name) or a resource.

use serde_json::Value;

use super::{KindStrategy, Written};
use crate::status::FieldError;
use crate::validation::{NameRule, one_of, ports, validate_name};

/// The `ingresses` resource.
#[derive(Debug)]
pub(crate) struct Ingresses;

impl KindStrategy for Ingresses {
    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let spec = &written.object["spec"];
        if spec["defaultBackend"].is_object() {
            backend(&spec["defaultBackend"], "spec.defaultBackend", errors);
        }
        for (i, rule) in spec["rules"].as_array().into_iter().flatten().enumerate() {
            let at = format!("spec.rules[{i}]");
            if let Some(h) = rule["host"].as_str().filter(|h| !h.is_empty()) {
                host(h, &format!("{at}.host"), errors);
            }
            let paths = rule["http"]["paths"].as_array();
            for (j, path) in paths.into_iter().flatten().enumerate() {
                let here = format!("{at}.http.paths[{j}]");
                match path["pathType"].as_str() {
                    None => errors.push(FieldError::required(
                        format!("{here}.pathType"),
                        "pathType must be specified",
                    )),
                    Some("Exact" | "Prefix") => {
                        if !path["path"].as_str().is_some_and(|p| p.starts_with('/')) {
                            errors.push(FieldError::invalid(
                                format!("{here}.path"),
                                path["path"].clone(),
                                "must be an absolute path",
                            ));
                        }
                    }
                    Some(_) => one_of(
                        path,
                        "pathType",
                        &["Exact", "ImplementationSpecific", "Prefix"],
                        &here,
                        errors,
                    ),
                }
                backend(&path["backend"], &format!("{here}.backend"), errors);
            }
        }
    }
}

fn host(host: &str, at: &str, errors: &mut Vec<FieldError>) {
    if host.parse::<std::net::IpAddr>().is_ok() {
        errors.push(FieldError::invalid(
            at,
            host,
            "must be a DNS name, not an IP address",
        ));
        return;
    }
    let name = match host.strip_prefix("*.") {
        Some(rest) => rest,
        None => host,
    };
    if name.contains('*') {
        errors.push(FieldError::invalid(
            at,
            host,
            "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character (e.g. '*.example.com', regex used for validation is '\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ));
        return;
    }
    let mut found = validate_name(NameRule::Subdomain, name, at);
    for error in &mut found {
        *error = FieldError::invalid(at, host, error.detail.clone());
    }
    errors.extend(found);
}

fn backend(backend: &Value, at: &str, errors: &mut Vec<FieldError>) {
    let (service, resource) = (&backend["service"], &backend["resource"]);
    match (service.is_object(), resource.is_object()) {
        (true, true) => errors.push(FieldError::invalid(
            at,
            "",
            "cannot set both resource and service backends",
        )),
        (false, false) => errors.push(FieldError::invalid(at, "", "one backend must be specified")),
        (true, false) => {
            if let Some(name) = service["name"].as_str() {
                errors.extend(validate_name(
                    NameRule::Dns1035,
                    name,
                    &format!("{at}.service.name"),
                ));
            }
            let port = &service["port"];
            let (number, named) = (
                &port["number"],
                port["name"].as_str().filter(|n| !n.is_empty()),
            );
            match (number.as_i64().filter(|n| *n != 0), named) {
                (Some(_), Some(_)) => errors.push(FieldError::invalid(
                    format!("{at}.service.port"),
                    "",
                    "cannot set both port name & port number",
                )),
                (Some(_), None) => {
                    ports::number(number, &format!("{at}.service.port.number"), true, errors)
                }
                (None, Some(name)) => ports::name(name, &format!("{at}.service.port.name"), errors),
                (None, None) => errors.push(FieldError::invalid(
                    format!("{at}.service.port"),
                    "",
                    "port name or number is required",
                )),
            }
        }
        (false, true) => typed_local_reference(resource, &format!("{at}.resource"), errors),
    }
}

/// A reference to an object of any kind in the same namespace (a resource
/// backend, an IngressClass's parameters): an optional API group that is a
/// DNS subdomain, and a kind and name that are path segments.
pub(super) fn typed_local_reference(reference: &Value, at: &str, errors: &mut Vec<FieldError>) {
    if let Some(group) = reference["apiGroup"].as_str() {
        errors.extend(validate_name(
            NameRule::Subdomain,
            group,
            &format!("{at}.apiGroup"),
        ));
    }
    for field in ["kind", "name"] {
        match reference[field].as_str().unwrap_or("") {
            "" => errors.push(FieldError::required(
                format!("{at}.{field}"),
                format!("{field} is required"),
            )),
            value => errors.extend(validate_name(
                NameRule::PathSegment,
                value,
                &format!("{at}.{field}"),
            )),
        }
    }
}
