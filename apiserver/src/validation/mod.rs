//! Admission validation: the field checks whose failures are a 422 Invalid
//! with one cause per field. Runs on the JSON form before typed decoding, so
//! a missing required field is reported as upstream reports it.

mod names;
mod workloads;

use serde_json::Value;

use crate::registry::ResourceInfo;
use crate::status::FieldError;

pub use names::{NameRule, is_dns1123_label, is_dns1123_subdomain, validate_name};

/// All field errors of `object` (about to be written), given the stored
/// `old` object on updates.
pub fn validate(info: &ResourceInfo, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = validate_metadata(info, object, old);
    match (info.group, info.resource) {
        ("", "pods") => workloads::pod(object, old, &mut errors),
        ("", "podtemplates") => {
            workloads::pod_spec(&object["template"]["spec"], "template.spec", &mut errors)
        }
        ("", "replicationcontrollers") => workloads::replication_controller(object, &mut errors),
        ("apps", "deployments" | "replicasets" | "statefulsets" | "daemonsets") => {
            workloads::workload(object, old, &mut errors)
        }
        ("batch", "jobs") => workloads::pod_spec(
            &object["spec"]["template"]["spec"],
            "spec.template.spec",
            &mut errors,
        ),
        ("batch", "cronjobs") => workloads::pod_spec(
            &object["spec"]["jobTemplate"]["spec"]["template"]["spec"],
            "spec.jobTemplate.spec.template.spec",
            &mut errors,
        ),
        ("", "services") => workloads::service(object, old, &mut errors),
        ("", "configmaps") => data_keys(object, &["data", "binaryData"], &mut errors),
        ("", "secrets") => data_keys(object, &["data", "stringData"], &mut errors),
        _ => crate::crd::validate(info, object, &mut errors),
    }
    errors
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
            NameRule::for_resource(info.group, info.resource),
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
            match v.as_str() {
                Some(v) => errors.extend(names::validate_label_value(
                    v,
                    &format!("metadata.labels[{k}]"),
                )),
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
            errors.push(FieldError {
                field: "metadata.annotations".into(),
                kind: crate::status::FieldErrorKind::TooLong(Value::String(String::new())),
                detail: "must have at most 262144 bytes".into(),
            });
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

/// ConfigMap/Secret keys: [-._a-zA-Z0-9]+, at most 253 characters.
fn data_keys(object: &Value, fields: &[&str], errors: &mut Vec<FieldError>) {
    for field in fields {
        for key in object[*field]
            .as_object()
            .into_iter()
            .flat_map(|m| m.keys())
        {
            let ok = !key.is_empty()
                && key.len() <= 253
                && key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c));
            if !ok {
                errors.push(FieldError::invalid(
                    format!("{field}[{key}]"),
                    key.as_str(),
                    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                ));
            }
        }
    }
}
