//! `networking.k8s.io/v1` NetworkPolicies: which directions a policy
//! governs when it does not list them (always ingress, egress once it has
//! egress rules), and TCP for ports that name no protocol; as upstream
//! validates them, at most the two known policy types, ports in range with
//! a known protocol, and peers that say who they are (an `ipBlock` alone,
//! its CIDR valid and its exceptions inside it). IngressClasses:
//! parameters are cluster-scoped unless they say; the controller is a
//! domain-prefixed path that never changes.

use serde_json::{Value, json};

use super::{KindStrategy, Written, set_default};
use crate::object::{items_mut, path_mut};
use crate::registry::ResourceInfo;
use crate::status::FieldError;
use crate::validation::{NameRule, validate_name};

const POLICY_TYPES: &[&str] = &["Ingress", "Egress"];
/// In upstream's order for this kind (not sorted, unlike a Service's).
const PROTOCOLS: &[&str] = &["TCP", "UDP", "SCTP"];

/// The `networkpolicies` resource.
#[derive(Debug)]
pub(crate) struct NetworkPolicies;

impl KindStrategy for NetworkPolicies {
    fn apply_spec_defaults(&self, _info: &ResourceInfo, spec: &mut Value) {
        for direction in ["ingress", "egress"] {
            for port in items_mut(spec, &[direction]).flat_map(|r| items_mut(r, &["ports"])) {
                set_default(port, "protocol", json!("TCP"));
            }
        }
        let listed = spec
            .get("policyTypes")
            .and_then(Value::as_array)
            .is_some_and(|t| !t.is_empty());
        if !listed {
            let egress = spec
                .get("egress")
                .and_then(Value::as_array)
                .is_some_and(|e| !e.is_empty());
            let types = if egress {
                json!(["Ingress", "Egress"])
            } else {
                json!(["Ingress"])
            };
            spec["policyTypes"] = types;
        }
    }

    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let spec = &written.object["spec"];
        let types = spec["policyTypes"]
            .as_array()
            .map_or(&[][..], Vec::as_slice);
        if types.len() > 2 {
            let shown = crate::go_format::go_string_slice(
                "networking.PolicyType",
                types.iter().map(|t| t.as_str().unwrap_or_default()),
            );
            errors.push(
                FieldError::invalid(
                    "spec.policyTypes",
                    Value::Null,
                    "may not specify more than two policyTypes",
                )
                .shown_as(shown),
            );
        } else {
            for (i, t) in types.iter().enumerate() {
                let t = t.as_str().unwrap_or_default();
                if !POLICY_TYPES.contains(&t) {
                    errors.push(FieldError::not_supported(
                        format!("spec.policyTypes[{i}]"),
                        t,
                        POLICY_TYPES,
                    ));
                }
            }
        }
        for (direction, peers) in [("ingress", "from"), ("egress", "to")] {
            for (i, rule) in spec[direction].as_array().into_iter().flatten().enumerate() {
                let at = format!("spec.{direction}[{i}]");
                for (j, port) in rule["ports"].as_array().into_iter().flatten().enumerate() {
                    policy_port(port, &format!("{at}.ports[{j}]"), errors);
                }
                for (j, peer) in rule[peers].as_array().into_iter().flatten().enumerate() {
                    policy_peer(peer, &format!("{at}.{peers}[{j}]"), errors);
                }
            }
        }
    }
}

fn policy_port(port: &Value, path: &str, errors: &mut Vec<FieldError>) {
    if let Some(protocol) = port["protocol"].as_str()
        && !PROTOCOLS.contains(&protocol)
    {
        errors.push(FieldError::not_supported(
            format!("{path}.protocol"),
            protocol,
            PROTOCOLS,
        ));
    }
    crate::validation::ports::number_or_name(&port["port"], &format!("{path}.port"), errors);
}

fn policy_peer(peer: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let set = |field: &str| !peer[field].is_null();
    let selectors = set("podSelector") || set("namespaceSelector");
    if !selectors && !set("ipBlock") {
        errors.push(FieldError::required(path, "must specify a peer"));
        return;
    }
    if !set("ipBlock") {
        return;
    }
    if selectors {
        errors.push(FieldError::forbidden(
            path,
            "may not specify both ipBlock and another peer",
        ));
        return;
    }
    let block = &peer["ipBlock"];
    let at = format!("{path}.ipBlock");
    let cidr = block["cidr"].as_str().unwrap_or_default();
    if cidr.is_empty() {
        errors.push(FieldError::required(format!("{at}.cidr"), ""));
        return;
    }
    let Some(net) = crate::validation::cidr(cidr, &format!("{at}.cidr"), errors) else {
        return;
    };
    for (k, except) in block["except"].as_array().into_iter().flatten().enumerate() {
        let text = except.as_str().unwrap_or_default();
        let field = format!("{at}.except[{k}]");
        match crate::validation::cidr(text, &field, errors) {
            Some(inner) if !(net.contains(&inner) && inner.prefix_len() > net.prefix_len()) => {
                errors.push(FieldError::invalid(
                    field,
                    text,
                    "must be a strict subset of `cidr`",
                ))
            }
            _ => {}
        }
    }
}

/// The `ingressclasses` resource.
#[derive(Debug)]
pub(crate) struct IngressClasses;

impl KindStrategy for IngressClasses {
    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        if let Some(parameters) =
            path_mut(object, &["spec", "parameters"]).filter(|p| p.is_object())
        {
            set_default(parameters, "scope", json!("Cluster"));
        }
    }

    /// Upstream's rules: the controller is a domain-prefixed path of at most
    /// 250 bytes that never changes, and parameters name a kind and object
    /// in the scope they say.
    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let spec = &written.object["spec"];
        let controller = spec["controller"].as_str().unwrap_or("");
        if controller.len() > MAX_CONTROLLER_BYTES {
            errors.push(FieldError::too_long(
                "spec.controller",
                MAX_CONTROLLER_BYTES,
            ));
        }
        domain_prefixed_path(controller, "spec.controller", errors);
        let parameters = &spec["parameters"];
        if parameters.is_object() {
            ingress_class_parameters(parameters, errors);
        }
        if let Some(old) = written.old {
            crate::validation::workloads::immutable(
                old,
                written.object,
                &["spec", "controller"],
                errors,
            );
        }
    }
}

/// Longest IngressClass controller name.
const MAX_CONTROLLER_BYTES: usize = 250;

/// Characters of an HTTP path (RFC 3986), as upstream's pattern lists them.
const HTTP_PATH_PATTERN: &str = "[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+";

/// Upstream's IsDomainPrefixedPath: `host/path`, the host a DNS subdomain
/// and the path of HTTP path characters.
fn domain_prefixed_path(text: &str, at: &str, errors: &mut Vec<FieldError>) {
    if text.is_empty() {
        errors.push(FieldError::required(at, ""));
        return;
    }
    let Some((host, path)) = text
        .split_once('/')
        .filter(|(h, p)| !h.is_empty() && !p.is_empty())
    else {
        errors.push(FieldError::invalid(
            at,
            text,
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        ));
        return;
    };
    for error in validate_name(NameRule::Subdomain, host, at) {
        errors.push(FieldError::invalid(at, host, error.detail));
    }
    let path_char = |c: char| c.is_ascii_alphanumeric() || "/-._~%!$&'()*+,;=:".contains(c);
    if !path.chars().all(path_char) {
        errors.push(FieldError::invalid(
            at,
            path,
            format!("Invalid path (regex used for validation is '{HTTP_PATH_PATTERN}')"),
        ));
    }
}

/// An IngressClass's `parameters`: a typed reference, and a namespace
/// exactly when its scope is `Namespace`.
fn ingress_class_parameters(parameters: &Value, errors: &mut Vec<FieldError>) {
    let at = "spec.parameters";
    super::ingresses::typed_local_reference(parameters, at, errors);
    let scope = parameters["scope"].as_str().unwrap_or("");
    let namespace = parameters["namespace"].as_str();
    match scope {
        "Namespace" => match namespace {
            None => errors.push(FieldError::required(
                format!("{at}.namespace"),
                "`parameters.scope` is set to 'Namespace'",
            )),
            Some(ns) => errors.extend(validate_name(
                NameRule::Label,
                ns,
                &format!("{at}.namespace"),
            )),
        },
        "Cluster" if namespace.is_some() => errors.push(FieldError::forbidden(
            format!("{at}.namespace"),
            "`parameters.scope` is set to 'Cluster'",
        )),
        "Cluster" => {}
        other => errors.push(FieldError::not_supported(
            format!("{at}.scope"),
            other,
            &["Cluster", "Namespace"],
        )),
    }
}
