//! Legacy discovery documents (`/api`, `/api/v1`, `/apis`, `/apis/G`,
//! `/apis/G/V`) and `/version`, built from the registry.

use serde_json::{Value, json};

use crate::registry::Registry;
use crate::status::ApiError;

/// The Kubernetes version this server implements.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0+skiff",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `/api`.
pub fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
    })
}

fn group_json(name: &str, versions: &[&str]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis`.
pub fn groups(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .iter()
        .filter(|g| !g.name.is_empty())
        .map(|g| group_json(g.name, &g.versions))
        .collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

/// `/apis/<group>`.
pub fn group(registry: &Registry, name: &str) -> Result<Value, ApiError> {
    let g = registry
        .groups()
        .iter()
        .find(|g| !g.name.is_empty() && g.name == name)
        .ok_or(ApiError::PathNotFound)?;
    let mut doc = group_json(g.name, &g.versions);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Ok(doc)
}

/// `/api/v1` or `/apis/<group>/<version>`.
pub fn resources(registry: &Registry, group: &str, version: &str) -> Result<Value, ApiError> {
    let mut resources = Vec::new();
    for r in registry.in_group_version(group, version) {
        let mut entry = json!({
            "name": r.resource,
            "singularName": r.singular(),
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
        });
        if !r.short_names.is_empty() {
            entry["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            entry["categories"] = json!(r.categories);
        }
        resources.push(entry);
        for sub in &r.subresources {
            let mut entry = json!({
                "name": format!("{}/{}", r.resource, sub.name()),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": sub.verbs(),
            });
            if let Some((g, v, k)) = sub.kind() {
                entry["kind"] = json!(k);
                if !g.is_empty() {
                    entry["group"] = json!(g);
                }
                entry["version"] = json!(v);
            }
            resources.push(entry);
        }
    }
    if resources.is_empty() {
        return Err(ApiError::PathNotFound);
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Ok(
        json!({ "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources }),
    )
}
