//! What `pods/resize` may change, as upstream's in-place resize (beta in
//! 1.33) allows it: the CPU and memory requests and limits of the pod's
//! containers and sidecars (init containers that restart), while its QoS
//! class stays what it was, no request or limit is removed and no memory
//! limit is lowered in place (only with `resizePolicy: RestartContainer`).
//! The write itself copies nothing but the containers' resources onto the
//! stored pod (see the update handler), so everything else is unchanged by
//! construction; the node agent then applies the new values.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::status::FieldError;

/// Resources a resize may change.
const RESIZABLE: &[&str] = &["cpu", "memory"];

/// The rules of a write through `pods/resize`: `object` as it will be
/// stored, `old` as it is.
pub(super) fn validate(object: &Value, old: &Value, errors: &mut Vec<FieldError>) {
    // The resources must be valid as on any pod (quantities, requests
    // within limits).
    crate::validation::workloads::pod_spec(&object["spec"], "spec", errors);
    let mut other_resource = false;
    for list in ["containers", "initContainers"] {
        let (new_list, old_list) = (&object["spec"][list], &old["spec"][list]);
        let pairs = new_list.as_array().into_iter().flatten().enumerate();
        for (i, container) in pairs {
            let before = &old_list[i];
            let (now, was) = (&container["resources"], &before["resources"]);
            if resources_equal(now, was) {
                continue;
            }
            let path = format!("spec.{list}[{i}].resources");
            if list == "initContainers" && container["restartPolicy"] != "Always" {
                errors.push(FieldError::forbidden(
                    &path,
                    "resources for non-sidecar init containers are immutable",
                ));
                continue;
            }
            for section in ["requests", "limits"] {
                let names = keys(&now[section]).chain(keys(&was[section]));
                for name in names {
                    let changed = quantity(&now[section][name]) != quantity(&was[section][name]);
                    if !RESIZABLE.contains(&name) {
                        other_resource |= changed;
                    } else if was[section][name].is_string() && now[section][name].is_null() {
                        errors.push(FieldError::forbidden(
                            format!("{path}.{section}[{name}]"),
                            format!("resource {section} cannot be removed"),
                        ));
                    }
                }
            }
            let lowered = match (
                quantity(&now["limits"]["memory"]),
                quantity(&was["limits"]["memory"]),
            ) {
                (Some(now), Some(was)) => now < was,
                _ => false,
            };
            if lowered && restart_policy(container, "memory") != "RestartContainer" {
                errors.push(FieldError::forbidden(
                    format!("{path}.limits[memory]"),
                    "memory limits cannot be decreased unless resizePolicy is RestartContainer",
                ));
            }
        }
    }
    if other_resource {
        errors.push(FieldError::forbidden(
            "spec",
            "only cpu and memory resources are mutable",
        ));
    }
    let class_before = old["status"]["qosClass"]
        .as_str()
        .map(str::to_string)
        .or_else(|| qos_class(old));
    if let (Some(before), Some(after)) = (class_before, qos_class(object))
        && before != after
    {
        errors.push(FieldError::invalid(
            "spec",
            json!(before),
            "Pod QOS Class may not change as a result of resizing",
        ));
    }
}

fn keys(section: &Value) -> impl Iterator<Item = &str> {
    section
        .as_object()
        .into_iter()
        .flat_map(|m| m.keys().map(String::as_str))
}

/// A quantity's value in its smallest unit (milli-units), so `0.5` and
/// `500m` are one value.
fn quantity(value: &Value) -> Option<i64> {
    value
        .as_str()
        .and_then(|q| skiff_common::quantity::parse_scaled(q, 1000))
}

fn resources_equal(a: &Value, b: &Value) -> bool {
    ["requests", "limits"].iter().all(|section| {
        keys(&a[*section])
            .chain(keys(&b[*section]))
            .all(|name| quantity(&a[*section][name]) == quantity(&b[*section][name]))
    })
}

/// The container's resize policy for `resource` (`NotRequired` unless set).
fn restart_policy<'a>(container: &'a Value, resource: &str) -> &'a str {
    container["resizePolicy"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["resourceName"] == resource)
        .and_then(|p| p["restartPolicy"].as_str())
        .unwrap_or("NotRequired")
}

fn qos_class(pod: &Value) -> Option<String> {
    let pod: Pod = serde_json::from_value(pod.clone()).ok()?;
    Some(skiff_common::qos::qos_class(&pod).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(resources: Value, policy: &str) -> Value {
        json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{
                "name": "c", "image": "i", "resources": resources,
                "resizePolicy": [
                    {"resourceName": "cpu", "restartPolicy": "NotRequired"},
                    {"resourceName": "memory", "restartPolicy": policy}]
            }]},
            "status": {"qosClass": "Burstable"}
        })
    }

    fn details(object: &Value, old: &Value) -> Vec<String> {
        let mut errors = Vec::new();
        validate(object, old, &mut errors);
        errors.iter().map(FieldError::render).collect()
    }

    #[test]
    fn cpu_and_memory_change_within_the_rules_and_nothing_else_does() {
        let old = pod(
            json!({"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"cpu": "200m", "memory": "64Mi"}}),
            "NotRequired",
        );
        let grown = pod(
            json!({"requests": {"cpu": "0.3", "memory": "48Mi"}, "limits": {"cpu": "1", "memory": "128Mi"}}),
            "NotRequired",
        );
        assert_eq!(details(&grown, &old), Vec::<String>::new());

        let lowered = pod(
            json!({"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"cpu": "200m", "memory": "48Mi"}}),
            "NotRequired",
        );
        assert_eq!(
            details(&lowered, &old),
            [
                "spec.containers[0].resources.limits[memory]: Forbidden: memory limits cannot be decreased unless resizePolicy is RestartContainer"
            ]
        );
        let restarting = pod(
            lowered["spec"]["containers"][0]["resources"].clone(),
            "RestartContainer",
        );
        assert_eq!(details(&restarting, &old), Vec::<String>::new());

        let guaranteed = pod(
            json!({"requests": {"cpu": "200m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "64Mi"}}),
            "NotRequired",
        );
        assert_eq!(
            details(&guaranteed, &old),
            [
                "spec: Invalid value: \"Burstable\": Pod QOS Class may not change as a result of resizing"
            ]
        );

        let storage = pod(
            json!({"requests": {"cpu": "100m", "memory": "32Mi", "ephemeral-storage": "1Gi"}, "limits": {"cpu": "200m", "memory": "64Mi"}}),
            "NotRequired",
        );
        assert_eq!(
            details(&storage, &old),
            ["spec: Forbidden: only cpu and memory resources are mutable"]
        );

        let unlimited = pod(
            json!({"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}}),
            "NotRequired",
        );
        assert_eq!(
            details(&unlimited, &old),
            [
                "spec.containers[0].resources.limits[cpu]: Forbidden: resource limits cannot be removed"
            ]
        );
    }

    #[test]
    fn only_sidecars_among_init_containers_resize() {
        let with_init = |cpu: &str, restart: Option<&str>| {
            let mut p = pod(json!({"requests": {"cpu": "100m"}}), "NotRequired");
            let mut init =
                json!({"name": "i", "image": "i", "resources": {"requests": {"cpu": cpu}}});
            if let Some(r) = restart {
                init["restartPolicy"] = json!(r);
            }
            p["spec"]["initContainers"] = json!([init]);
            p
        };
        assert_eq!(
            details(&with_init("300m", None), &with_init("100m", None)),
            [
                "spec.initContainers[0].resources: Forbidden: resources for non-sidecar init containers are immutable"
            ]
        );
        assert_eq!(
            details(
                &with_init("300m", Some("Always")),
                &with_init("100m", Some("Always"))
            ),
            Vec::<String>::new()
        );
    }
}
