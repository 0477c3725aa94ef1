//! `apiregistration.k8s.io/v1` APIServices: upstream's checks (the name is
//! `<version>.<group>`, priorities in range, a local one names no CA and
//! skips no verification, a remote one names its Service).
//! What they do — local ones for every served group/version, availability
//! — is [`crate::aggregator`]'s.

use serde_json::Value;

use super::defined::Defined;
use crate::status::FieldError;
use crate::validation::NameRule;

fn nothing(_: &mut Value) {}

/// Upstream's field checks of an APIService.
fn validate(object: &Value, errors: &mut Vec<FieldError>) {
    let spec = &object["spec"];
    let group = spec["group"].as_str().unwrap_or("");
    let version = spec["version"].as_str().unwrap_or("");
    let name = object["metadata"]["name"].as_str().unwrap_or("");
    if version.is_empty() {
        errors.push(FieldError::required("spec.version", ""));
    }
    let wanted = format!("{version}.{group}");
    if !name.is_empty() && name != wanted {
        errors.push(FieldError::invalid(
            "metadata.name",
            name,
            format!("must be `spec.version+\".\"+spec.group`: \"{wanted}\""),
        ));
    }
    let in_range = |field: &str, max: i64| {
        let v = spec[field].as_i64().unwrap_or(0);
        (v <= 0 || v > max).then(|| {
            FieldError::invalid(
                format!("spec.{field}"),
                v,
                format!("must be positive and less than {}", max + 1),
            )
        })
    };
    errors.extend(in_range("groupPriorityMinimum", 20000));
    errors.extend(in_range("versionPriority", 1000));
    let ca = spec["caBundle"].as_str().is_some_and(|c| !c.is_empty());
    let skip = spec["insecureSkipTLSVerify"].as_bool() == Some(true);
    match spec["service"].as_object() {
        None => {
            if ca {
                errors.push(FieldError::invalid(
                    "spec.caBundle",
                    "<bytes>",
                    "local APIServices may not have a caBundle",
                ));
            }
            if skip {
                errors.push(FieldError::invalid(
                    "spec.insecureSkipTLSVerify",
                    true,
                    "local APIServices may not have insecureSkipTLSVerify",
                ));
            }
        }
        Some(service) => {
            for field in ["namespace", "name"] {
                if service
                    .get(field)
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    errors.push(FieldError::required(format!("spec.service.{field}"), ""));
                }
            }
            if let Some(port) = service.get("port").and_then(Value::as_i64)
                && !(1..=65535).contains(&port)
            {
                errors.push(FieldError::invalid(
                    "spec.service.port",
                    port,
                    "must be a valid port number",
                ));
            }
            if skip && ca {
                errors.push(FieldError::invalid(
                    "spec.insecureSkipTLSVerify",
                    true,
                    "may not be true if caBundle is present",
                ));
            }
        }
    }
}

/// APIServices.
pub(crate) static API_SERVICES: Defined = Defined {
    name_rule: NameRule::PathSegment,
    defaults: nothing,
    validate,
};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(object: Value) -> Vec<String> {
        let mut out = Vec::new();
        validate(&object, &mut out);
        out.iter().map(FieldError::render).collect()
    }

    #[test]
    fn names_priorities_and_trust_are_checked() {
        let local = json!({"metadata": {"name": "v1.example.com"}, "spec": {
            "group": "example.com", "version": "v1",
            "groupPriorityMinimum": 1000, "versionPriority": 15}});
        assert!(errors(local.clone()).is_empty());
        let mut wrong = local.clone();
        wrong["metadata"]["name"] = json!("v2.example.com");
        assert_eq!(
            errors(wrong),
            [
                "metadata.name: Invalid value: \"v2.example.com\": must be `spec.version+\".\"+spec.group`: \"v1.example.com\""
            ]
        );
        let mut zero = local.clone();
        zero["spec"]["versionPriority"] = json!(0);
        assert_eq!(errors(zero).len(), 1);
        let mut skip = local.clone();
        skip["spec"]["insecureSkipTLSVerify"] = json!(true);
        assert_eq!(errors(skip).len(), 1);
        let mut remote = local;
        remote["spec"]["service"] = json!({"namespace": "kube-system"});
        remote["spec"]["insecureSkipTLSVerify"] = json!(true);
        assert_eq!(errors(remote), ["spec.service.name: Required value"]);
    }
}
