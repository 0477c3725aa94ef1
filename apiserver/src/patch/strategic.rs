//! Strategic merge patch: a JSON merge patch whose lists merge by key where
//! the type says so, plus the directives kubectl sends (`$patch`,
//! `$retainKeys`, `$setElementOrder/<list>`, `$deleteFromPrimitiveList/<list>`).

use serde_json::{Map, Value};

use super::strategic_schema::{ListStrategy, list_strategy};

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ORDER: &str = "$setElementOrder/";
const DELETE_PRIMITIVE: &str = "$deleteFromPrimitiveList/";

/// Applies a strategic merge patch (an object) to `original`.
pub fn strategic_merge(original: &Value, patch: &Value) -> Result<Value, String> {
    let Some(patch) = patch.as_object() else {
        return Err("patch must be an object".into());
    };
    let base = original.as_object().cloned().unwrap_or_default();
    let mut path = Vec::new();
    Ok(merge_map(base, patch, &mut path)?
        .map(Value::Object)
        .unwrap_or(Value::Object(Map::new())))
}

/// Merges `patch` into `original`; `None` means the map was deleted.
fn merge_map(
    mut original: Map<String, Value>,
    patch: &Map<String, Value>,
    path: &mut Vec<String>,
) -> Result<Option<Map<String, Value>>, String> {
    match patch.get(PATCH).and_then(Value::as_str) {
        Some("replace") => return Ok(Some(strip_map(patch))),
        Some("delete") => return Ok(None),
        Some("merge") | None => {}
        Some(other) => return Err(format!("unknown patch type: {other}")),
    }
    let mut orders: Vec<(&str, &Vec<Value>)> = Vec::new();
    for (key, value) in patch {
        if key == PATCH || key == RETAIN_KEYS {
            continue;
        }
        if let Some(field) = key.strip_prefix(SET_ORDER) {
            let order = value
                .as_array()
                .ok_or_else(|| format!("{key} must be a list"))?;
            orders.push((field, order));
            continue;
        }
        if let Some(field) = key.strip_prefix(DELETE_PRIMITIVE) {
            let doomed = value
                .as_array()
                .ok_or_else(|| format!("{key} must be a list"))?;
            if let Some(Value::Array(list)) = original.get_mut(field) {
                list.retain(|v| !doomed.contains(v));
            }
            continue;
        }
        path.push(key.clone());
        match value {
            Value::Null => {
                original.remove(key);
            }
            Value::Object(patch_map) => match original.remove(key) {
                Some(Value::Object(orig_map)) => {
                    if let Some(merged) = merge_map(orig_map, patch_map, path)? {
                        original.insert(key.clone(), Value::Object(merged));
                    }
                }
                _ => {
                    if patch_map.get(PATCH).and_then(Value::as_str) != Some("delete") {
                        original.insert(key.clone(), Value::Object(strip_map(patch_map)));
                    }
                }
            },
            Value::Array(patch_list) => {
                let names: Vec<&str> = path.iter().map(String::as_str).collect();
                let strategy = list_strategy(&names);
                let merged = merge_list(original.remove(key), patch_list, strategy, path)?;
                original.insert(key.clone(), Value::Array(merged));
            }
            scalar => {
                original.insert(key.clone(), scalar.clone());
            }
        }
        path.pop();
    }
    if let Some(retain) = patch.get(RETAIN_KEYS) {
        let keep: Vec<&str> = retain
            .as_array()
            .ok_or("$retainKeys must be a list")?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        original.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (field, order) in orders {
        path.push(field.to_string());
        let names: Vec<&str> = path.iter().map(String::as_str).collect();
        let strategy = list_strategy(&names);
        path.pop();
        if let Some(Value::Array(list)) = original.get_mut(field) {
            reorder(list, order, strategy);
        }
    }
    Ok(Some(original))
}

fn merge_list(
    original: Option<Value>,
    patch: &[Value],
    strategy: ListStrategy,
    path: &mut Vec<String>,
) -> Result<Vec<Value>, String> {
    let replace_all = patch
        .iter()
        .any(|v| v.get(PATCH).and_then(Value::as_str) == Some("replace"));
    let mut result = match original {
        Some(Value::Array(list)) if !replace_all => list,
        _ => Vec::new(),
    };
    match strategy {
        ListStrategy::Replace => Ok(patch.iter().map(strip).collect()),
        ListStrategy::MergePrimitives => {
            for v in patch {
                if !result.contains(v) {
                    result.push(v.clone());
                }
            }
            Ok(result)
        }
        ListStrategy::MergeByKey(key) => {
            for element in patch {
                let Some(element_map) = element.as_object() else {
                    if !result.contains(element) {
                        result.push(element.clone());
                    }
                    continue;
                };
                let directive = element_map.get(PATCH).and_then(Value::as_str);
                if directive == Some("replace") && element_map.len() == 1 {
                    continue;
                }
                let Some(id) = element_map.get(key) else {
                    return Err(format!(
                        "map: {element} does not contain declared merge key: {key}"
                    ));
                };
                let position = result.iter().position(|v| v.get(key) == Some(id));
                if directive == Some("delete") {
                    result.retain(|v| v.get(key) != Some(id));
                    continue;
                }
                match position {
                    Some(i) => {
                        let orig = match result[i].take() {
                            Value::Object(m) => m,
                            _ => Map::new(),
                        };
                        match merge_map(orig, element_map, path)? {
                            Some(merged) => result[i] = Value::Object(merged),
                            None => {
                                result.remove(i);
                            }
                        }
                    }
                    None => result.push(Value::Object(strip_map(element_map))),
                }
            }
            Ok(result)
        }
    }
}

/// Orders `list` as `order` says; elements not named keep their relative
/// order after the named ones.
fn reorder(list: &mut [Value], order: &[Value], strategy: ListStrategy) {
    let rank = |v: &Value| -> usize {
        let found = match strategy {
            ListStrategy::MergeByKey(key) => order
                .iter()
                .position(|o| o.get(key).is_some() && o.get(key) == v.get(key)),
            _ => order.iter().position(|o| o == v),
        };
        found.unwrap_or(usize::MAX)
    };
    list.sort_by_key(rank);
}

/// A patch value with its directives removed, for content new to the object.
fn strip(value: &Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(strip_map(m)),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .filter(|v| {
                    !(v.get(PATCH).is_some() && v.as_object().is_some_and(|m| m.len() == 1))
                })
                .map(strip)
                .collect(),
        ),
        other => other.clone(),
    }
}

fn strip_map(map: &Map<String, Value>) -> Map<String, Value> {
    map.iter()
        .filter(|(k, _)| {
            !(k.as_str() == PATCH
                || k.as_str() == RETAIN_KEYS
                || k.starts_with(SET_ORDER)
                || k.starts_with(DELETE_PRIMITIVE))
        })
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| (k.clone(), strip(v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(containers: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": containers}})
    }

    /// (case, original, patch, expected)
    fn cases() -> Vec<(&'static str, Value, Value, Value)> {
        vec![
            (
                "containers merge by name, env by name",
                pod(
                    json!([{"name": "a", "image": "x", "env": [{"name": "E", "value": "1"}, {"name": "F", "value": "2"}]},
                           {"name": "b", "image": "y"}]),
                ),
                json!({"spec": {"containers": [{"name": "a", "env": [{"name": "E", "value": "9"}]}]}}),
                pod(
                    json!([{"name": "a", "image": "x", "env": [{"name": "E", "value": "9"}, {"name": "F", "value": "2"}]},
                           {"name": "b", "image": "y"}]),
                ),
            ),
            (
                "new container is appended",
                pod(json!([{"name": "a", "image": "x"}])),
                json!({"spec": {"containers": [{"name": "c", "image": "z"}]}}),
                pod(json!([{"name": "a", "image": "x"}, {"name": "c", "image": "z"}])),
            ),
            (
                "$patch delete removes one element",
                pod(json!([{"name": "a", "image": "x"}, {"name": "b", "image": "y"}])),
                json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}),
                pod(json!([{"name": "b", "image": "y"}])),
            ),
            (
                "$patch replace on a list replaces it",
                pod(json!([{"name": "a", "image": "x"}, {"name": "b", "image": "y"}])),
                json!({"spec": {"containers": [{"name": "c", "image": "z"}, {"$patch": "replace"}]}}),
                pod(json!([{"name": "c", "image": "z"}])),
            ),
            (
                "$patch replace on a map replaces it",
                json!({"metadata": {"labels": {"a": "1", "b": "2"}}}),
                json!({"metadata": {"labels": {"c": "3", "$patch": "replace"}}}),
                json!({"metadata": {"labels": {"c": "3"}}}),
            ),
            (
                "$patch delete on a map removes it",
                json!({"spec": {"x": {"a": 1}, "y": 2}}),
                json!({"spec": {"x": {"$patch": "delete"}}}),
                json!({"spec": {"y": 2}}),
            ),
            (
                "container ports merge by containerPort",
                pod(
                    json!([{"name": "a", "image": "x", "ports": [{"containerPort": 80, "name": "http"}]}]),
                ),
                json!({"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 443}]}]}}),
                pod(
                    json!([{"name": "a", "image": "x", "ports": [{"containerPort": 80, "name": "http", "protocol": "TCP"}, {"containerPort": 443}]}]),
                ),
            ),
            (
                "service ports merge by port",
                json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}]}}),
                json!({"spec": {"ports": [{"port": 80, "targetPort": 9090}]}}),
                json!({"spec": {"ports": [{"port": 80, "targetPort": 9090}]}}),
            ),
            (
                "tolerations are replaced (no strategy upstream)",
                json!({"spec": {"tolerations": [{"key": "a"}]}}),
                json!({"spec": {"tolerations": [{"key": "b"}]}}),
                json!({"spec": {"tolerations": [{"key": "b"}]}}),
            ),
            (
                "finalizers merge as a set, $deleteFromPrimitiveList removes",
                json!({"metadata": {"finalizers": ["a", "b"]}}),
                json!({"metadata": {"finalizers": ["c", "a"], "$deleteFromPrimitiveList/finalizers": ["b"]}}),
                json!({"metadata": {"finalizers": ["a", "c"]}}),
            ),
            (
                "null deletes a field",
                json!({"metadata": {"labels": {"a": "1", "b": "2"}}}),
                json!({"metadata": {"labels": {"a": null}}}),
                json!({"metadata": {"labels": {"b": "2"}}}),
            ),
            (
                "$retainKeys drops keys not listed",
                json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}),
                json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
                json!({"spec": {"strategy": {"type": "Recreate"}}}),
            ),
            (
                "$setElementOrder orders merged list",
                pod(json!([{"name": "a", "image": "x"}, {"name": "b", "image": "y"}])),
                json!({"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
                                "containers": [{"name": "a", "image": "x2"}]}}),
                pod(json!([{"name": "b", "image": "y"}, {"name": "a", "image": "x2"}])),
            ),
            (
                "conditions merge by type",
                json!({"status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "X", "status": "True"}]}}),
                json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
                json!({"status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "X", "status": "True"}]}}),
            ),
            (
                "volumes by name, volumeMounts by mountPath",
                json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}], "containers": [{"name": "a", "volumeMounts": [{"mountPath": "/a", "name": "v"}]}]}}),
                json!({"spec": {"volumes": [{"name": "w", "emptyDir": {}}], "containers": [{"name": "a", "volumeMounts": [{"mountPath": "/a", "readOnly": true}]}]}}),
                json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}, {"name": "w", "emptyDir": {}}], "containers": [{"name": "a", "volumeMounts": [{"mountPath": "/a", "name": "v", "readOnly": true}]}]}}),
            ),
            (
                "ownerReferences merge by uid",
                json!({"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}]}}),
                json!({"metadata": {"ownerReferences": [{"uid": "2", "name": "b"}]}}),
                json!({"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}, {"uid": "2", "name": "b"}]}}),
            ),
        ]
    }

    #[test]
    fn table() {
        for (name, original, patch, expected) in cases() {
            let got = strategic_merge(&original, &patch).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(got, expected, "{name}");
        }
    }

    #[test]
    fn missing_merge_key_is_an_error() {
        let err = strategic_merge(
            &pod(json!([])),
            &json!({"spec": {"containers": [{"image": "x"}]}}),
        )
        .unwrap_err();
        assert!(err.contains("merge key"), "{err}");
    }
}
