//! Port numbers and port names (IANA service names), checked as upstream's
//! IsValidPortNum, IsValidPortName and ValidatePortNumOrName: where pods
//! declare ports, where probes and hooks reach them, where Services target
//! them.

use serde_json::Value;

use crate::status::FieldError;

const PORT_RANGE: &str = "must be between 1 and 65535, inclusive";

/// A port number at `field`; `required` says whether it may be absent.
pub(crate) fn number(value: &Value, field: &str, required: bool, errors: &mut Vec<FieldError>) {
    match value.as_i64() {
        None if value.is_null() && required => errors.push(FieldError::required(field, "")),
        None if value.is_null() => {}
        Some(p) if (1..=65535).contains(&p) => {}
        _ => errors.push(FieldError::invalid(field, value.clone(), PORT_RANGE)),
    }
}

/// A port name at `field`: at most 15 lowercase letters, digits and single
/// inner hyphens, at least one letter.
pub(crate) fn name(name: &str, field: &str, errors: &mut Vec<FieldError>) {
    let mut bad = |detail: &str| errors.push(FieldError::invalid(field, name, detail));
    if name.len() > 15 {
        bad("must be no more than 15 characters");
    }
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        bad("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        bad("must contain at least one letter (a-z)");
    }
    if name.contains("--") {
        bad("must not contain consecutive hyphens");
    }
    if name.starts_with('-') || name.ends_with('-') {
        bad("must not begin or end with a hyphen");
    }
}

/// A port given by number or by name (an `IntOrString`) at `field`.
pub(crate) fn number_or_name(value: &Value, field: &str, errors: &mut Vec<FieldError>) {
    match value {
        Value::Null => {}
        Value::String(n) => name(n, field, errors),
        other => number(other, field, false, errors),
    }
}

/// A container's `ports`: numbers, names (each once), host ports and
/// protocols.
pub(crate) fn container_ports(container: &Value, at: &str, errors: &mut Vec<FieldError>) {
    let mut names: Vec<&str> = Vec::new();
    for (j, p) in container["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let here = format!("{at}.ports[{j}]");
        if let Some(n) = p["name"].as_str().filter(|n| !n.is_empty()) {
            name(n, &format!("{here}.name"), errors);
            if names.contains(&n) {
                errors.push(FieldError::duplicate(format!("{here}.name"), n));
            }
            names.push(n);
        }
        number(
            &p["containerPort"],
            &format!("{here}.containerPort"),
            true,
            errors,
        );
        if p["hostPort"].as_i64().is_some_and(|h| h != 0) {
            number(&p["hostPort"], &format!("{here}.hostPort"), false, errors);
        }
        super::one_of(p, "protocol", &["SCTP", "TCP", "UDP"], &here, errors);
    }
}

/// On the host's network a container listens on the host's port, so each
/// regular container's `hostPort` is its `containerPort`. A pod's own spec
/// has it defaulted by then, so only a pod's may not leave it unset; a
/// template may (its pods get it defaulted).
pub(crate) fn host_network(spec: &Value, path: &str, is_pod: bool, errors: &mut Vec<FieldError>) {
    if spec["hostNetwork"] != Value::Bool(true) {
        return;
    }
    for (i, c) in spec["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for (j, p) in c["ports"].as_array().into_iter().flatten().enumerate() {
            let host = p["hostPort"].as_i64().unwrap_or(0);
            if (is_pod || host != 0) && Some(host) != p["containerPort"].as_i64() {
                errors.push(FieldError::invalid(
                    format!("{path}.containers[{i}].ports[{j}].hostPort"),
                    host,
                    "must match `containerPort` when `hostNetwork` is true",
                ));
            }
        }
    }
}

/// The ports a probe or lifecycle hook at `path` reaches.
pub(crate) fn handler_ports(handler: &Value, path: &str, errors: &mut Vec<FieldError>) {
    for action in ["httpGet", "tcpSocket"] {
        let port = &handler[action]["port"];
        if handler[action].is_object() {
            if port.is_null() {
                errors.push(FieldError::required(format!("{path}.{action}.port"), ""));
            }
            number_or_name(port, &format!("{path}.{action}.port"), errors);
        }
    }
    if handler["grpc"].is_object() {
        number(
            &handler["grpc"]["port"],
            &format!("{path}.grpc.port"),
            true,
            errors,
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rendered(check: impl FnOnce(&mut Vec<FieldError>)) -> Vec<String> {
        let mut errors = Vec::new();
        check(&mut errors);
        errors.iter().map(FieldError::render).collect()
    }

    #[test]
    fn host_network_ports_listen_on_the_same_port() {
        let spec = json!({"hostNetwork": true, "containers": [
            {"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81}]},
        ]});
        let refusal = "must match `containerPort` when `hostNetwork` is true";
        assert_eq!(
            rendered(|e| host_network(&spec, "spec", true, e)),
            [
                format!("spec.containers[0].ports[0].hostPort: Invalid value: 8080: {refusal}"),
                format!("spec.containers[0].ports[1].hostPort: Invalid value: 0: {refusal}"),
            ]
        );
        // A template's pods get the unset one defaulted.
        assert_eq!(
            rendered(|e| host_network(&spec, "spec.template.spec", false, e)),
            [format!(
                "spec.template.spec.containers[0].ports[0].hostPort: Invalid value: 8080: {refusal}"
            )]
        );
        let off = json!({"containers": [{"ports": [{"containerPort": 80, "hostPort": 8080}]}]});
        assert!(rendered(|e| host_network(&off, "spec", true, e)).is_empty());
    }

    #[test]
    fn port_names_are_iana_service_names() {
        assert!(rendered(|e| name("http-alt", "n", e)).is_empty());
        assert_eq!(
            rendered(|e| name("-Web--Server-Port", "n", e)),
            [
                "n: Invalid value: \"-Web--Server-Port\": must be no more than 15 characters",
                "n: Invalid value: \"-Web--Server-Port\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                "n: Invalid value: \"-Web--Server-Port\": must not contain consecutive hyphens",
                "n: Invalid value: \"-Web--Server-Port\": must not begin or end with a hyphen",
            ]
        );
        assert_eq!(
            rendered(|e| name("8080", "n", e)),
            ["n: Invalid value: \"8080\": must contain at least one letter (a-z)"]
        );
        assert_eq!(
            rendered(|e| number_or_name(&json!(70000), "t", e)),
            ["t: Invalid value: 70000: must be between 1 and 65535, inclusive"]
        );
    }

    #[test]
    fn a_containers_ports_are_named_once_with_valid_host_ports() {
        let c = json!({"ports": [
            {"name": "web", "containerPort": 80, "hostPort": 70000},
            {"name": "web", "containerPort": 81, "protocol": "HTTP"}]});
        assert_eq!(
            rendered(|e| container_ports(&c, "c", e)),
            [
                "c.ports[0].hostPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
                "c.ports[1].name: Duplicate value: \"web\"",
                "c.ports[1].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            ]
        );
    }
}
