//! The scale subresource of a custom resource: where its replicas and
//! selector live (`specReplicasPath`, `statusReplicasPath`,
//! `labelSelectorPath`), read into an autoscaling/v1 Scale and written back.

use serde_json::{Map, Value, json};

use super::printer::lookup;
use crate::status::FieldError;

/// The paths of one version's `subresources.scale`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    /// The JSONPath of the desired count, e.g. `.spec.replicas`.
    pub spec_replicas: String,
    /// The JSONPath of the observed count, e.g. `.status.replicas`.
    pub status_replicas: String,
    /// The JSONPath of the selector string in status, when the resource has one.
    pub label_selector: Option<String>,
}

impl ScalePaths {
    pub(crate) fn parse(v: &Value) -> Self {
        let text = |k: &str| v[k].as_str().unwrap_or("").to_string();
        Self {
            spec_replicas: text("specReplicasPath"),
            status_replicas: text("statusReplicasPath"),
            label_selector: v["labelSelectorPath"].as_str().map(String::from),
        }
    }
}

/// Checks a CRD version's scale subresource.
pub(crate) fn validate(scale: &Value, path: &str, errors: &mut Vec<FieldError>) {
    for (field, prefix) in [
        ("specReplicasPath", ".spec."),
        ("statusReplicasPath", ".status."),
        ("labelSelectorPath", ".status."),
    ] {
        match scale[field].as_str() {
            None if field == "labelSelectorPath" => {}
            None | Some("") => errors.push(FieldError::required(format!("{path}.{field}"), "")),
            Some(p) if !allowed_path(field, prefix, p) => errors.push(FieldError::invalid(
                format!("{path}.{field}"),
                p,
                format!(
                    "should be a json path under {}",
                    prefix.trim_end_matches('.')
                ),
            )),
            _ => {}
        }
    }
}

/// The label selector may live under spec or status; replicas paths only
/// under their own half.
fn allowed_path(field: &str, prefix: &str, path: &str) -> bool {
    path.starts_with(prefix) || (field == "labelSelectorPath" && path.starts_with(".spec."))
}

/// The autoscaling/v1 Scale view of a custom object.
pub(crate) fn view(paths: &ScalePaths, object: &Value) -> Value {
    let replicas = |p: &str| lookup(object, p).and_then(Value::as_i64).unwrap_or(0);
    let selector = paths
        .label_selector
        .as_deref()
        .and_then(|p| lookup(object, p))
        .and_then(Value::as_str)
        .unwrap_or("");
    crate::kinds::scale_of(
        object,
        replicas(&paths.spec_replicas),
        replicas(&paths.status_replicas),
        selector,
    )
}

/// Writes `replicas` at the spec replicas path, creating missing objects.
pub(crate) fn set_replicas(paths: &ScalePaths, object: &mut Value, replicas: i64) {
    let steps: Vec<&str> = paths
        .spec_replicas
        .trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
        .collect();
    let Some((last, parents)) = steps.split_last() else {
        return;
    };
    let mut current = object;
    for step in parents {
        let Some(map) = current.as_object_mut() else {
            return;
        };
        let next = map
            .entry(step.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !next.is_object() {
            *next = Value::Object(Map::new());
        }
        current = next;
    }
    if let Some(map) = current.as_object_mut() {
        map.insert(last.to_string(), json!(replicas));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_reads_and_writes_the_declared_paths() {
        let paths = ScalePaths::parse(&json!({"specReplicasPath": ".spec.size",
            "statusReplicasPath": ".status.ready", "labelSelectorPath": ".status.selector"}));
        let mut w = json!({"metadata": {"name": "w"}, "spec": {"size": 2},
            "status": {"ready": 1, "selector": "app=w"}});
        let s = view(&paths, &w);
        assert_eq!(s["spec"]["replicas"], 2);
        assert_eq!(s["status"], json!({"replicas": 1, "selector": "app=w"}));
        set_replicas(&paths, &mut w, 5);
        assert_eq!(w["spec"]["size"], 5);
        let mut empty = json!({"metadata": {"name": "e"}});
        set_replicas(&paths, &mut empty, 1);
        assert_eq!(empty["spec"]["size"], 1);
        let mut errors = Vec::new();
        validate(&json!({"specReplicasPath": "spec.size"}), "s", &mut errors);
        assert_eq!(errors.len(), 2, "{errors:?}");
    }
}
