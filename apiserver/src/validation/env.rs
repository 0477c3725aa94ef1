//! A container's environment, checked as upstream's validateEnv: each
//! `valueFrom` names exactly one source and never beside a `value`, a
//! `fieldRef` names a field the downward API gives containers, and a
//! `resourceFieldRef` a resource it reports.

use serde_json::Value;

use super::names::validate_qualified_name;
use crate::status::FieldError;

/// The pod fields an environment variable may take (besides subscripted
/// labels and annotations), as upstream lists them.
const ENV_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

/// Field labels upstream's conversion knows at all; one outside them is
/// an error of the conversion rather than an unsupported value.
const KNOWN_FIELDS: &[&str] = &[
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.phase",
    "status.podIP",
    "status.podIPs",
];

const ENV_RESOURCES: &[&str] = &[
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
];

/// The `env` of the container `c` at `at`.
pub(crate) fn container_env(c: &Value, at: &str, errors: &mut Vec<FieldError>) {
    for (i, var) in c["env"].as_array().into_iter().flatten().enumerate() {
        let from = &var["valueFrom"];
        if !from.is_object() {
            continue;
        }
        let path = format!("{at}.env[{i}].valueFrom");
        let sources = [
            "fieldRef",
            "resourceFieldRef",
            "configMapKeyRef",
            "secretKeyRef",
        ]
        .iter()
        .filter(|s| from[**s].is_object())
        .count();
        if let Some(field) = from["fieldRef"]["fieldPath"].as_str() {
            field_path(field, &format!("{path}.fieldRef"), errors);
        }
        if let Some(resource) = from["resourceFieldRef"]["resource"].as_str() {
            let hugepages = ["limits.hugepages-", "requests.hugepages-"]
                .iter()
                .any(|p| resource.starts_with(p));
            if !ENV_RESOURCES.contains(&resource) && !hugepages {
                errors.push(FieldError::not_supported(
                    format!("{path}.resourceFieldRef.resource"),
                    resource,
                    ENV_RESOURCES,
                ));
            }
        }
        let value_given = var["value"].as_str().is_some_and(|v| !v.is_empty());
        let detail = if sources == 0 {
            Some(
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            )
        } else if value_given {
            Some("may not be specified when `value` is not empty")
        } else if sources > 1 {
            Some("may not have more than one field specified at a time")
        } else {
            None
        };
        if let Some(detail) = detail {
            errors.push(FieldError::invalid(path, "", detail));
        }
    }
}

/// A `fieldRef`'s `fieldPath` at `at`.
fn field_path(path: &str, at: &str, errors: &mut Vec<FieldError>) {
    let (base, subscript) = match path.split_once('[') {
        Some((base, rest)) => (base, rest.strip_suffix(']').map(|s| s.trim_matches('\''))),
        None => (path, None),
    };
    if !KNOWN_FIELDS.contains(&base) {
        errors.push(FieldError::invalid(
            format!("{at}.fieldPath"),
            path,
            format!("error converting fieldPath: field label not supported: {path}"),
        ));
        return;
    }
    match (base, subscript) {
        ("metadata.annotations", Some(key)) => {
            errors.extend(validate_qualified_name(&key.to_lowercase(), at));
        }
        ("metadata.labels", Some(key)) => errors.extend(validate_qualified_name(key, at)),
        (_, Some(_)) => errors.push(FieldError::invalid(at, base, "does not support subscript")),
        (field, None) if !ENV_FIELDS.contains(&field) => errors.push(FieldError::not_supported(
            format!("{at}.fieldPath"),
            field,
            ENV_FIELDS,
        )),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rendered(env: Value) -> Vec<String> {
        let mut errors = Vec::new();
        container_env(&json!({"env": env}), "c", &mut errors);
        errors.iter().map(FieldError::render).collect()
    }

    #[test]
    fn a_variable_takes_one_source_the_downward_api_gives() {
        assert!(rendered(json!([
            {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {"name": "B", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}},
            {"name": "C", "value": "", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        ]))
        .is_empty());
        assert_eq!(
            rendered(json!([
                {"name": "A", "value": "x", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "B", "valueFrom": {}},
                {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "status.phase"}}},
                {"name": "D", "valueFrom": {"fieldRef": {"fieldPath": "metadata.nosuch"}}},
                {"name": "E", "valueFrom": {"resourceFieldRef": {"resource": "limits.gpu"}}},
            ])),
            [
                "c.env[0].valueFrom: Invalid value: \"\": may not be specified when `value` is not empty",
                "c.env[1].valueFrom: Invalid value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
                "c.env[2].valueFrom.fieldRef.fieldPath: Unsupported value: \"status.phase\": supported values: \"metadata.name\", \"metadata.namespace\", \"metadata.uid\", \"spec.nodeName\", \"spec.serviceAccountName\", \"status.hostIP\", \"status.hostIPs\", \"status.podIP\", \"status.podIPs\"",
                "c.env[3].valueFrom.fieldRef.fieldPath: Invalid value: \"metadata.nosuch\": error converting fieldPath: field label not supported: metadata.nosuch",
                "c.env[4].valueFrom.resourceFieldRef.resource: Unsupported value: \"limits.gpu\": supported values: \"limits.cpu\", \"limits.ephemeral-storage\", \"limits.memory\", \"requests.cpu\", \"requests.ephemeral-storage\", \"requests.memory\"",
            ]
        );
    }
}
