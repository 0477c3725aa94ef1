//! Legacy discovery documents (`/api`, `/api/v1`, `/apis`, `/apis/G`,
//! `/apis/G/V`) and `/version`, built from the registry.

use serde_json::{Value, json};

use crate::registry::{Registry, ResourceInfo, Subresource};
use crate::status::ApiError;

/// The Kubernetes version this server implements, on the platform it runs
/// on (an arm64 edge device says `linux/arm64`), with the compatibility
/// fields upstream's 1.33 adds (it emulates itself and can be rolled back
/// to 1.32).
pub(crate) fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "emulationMajor": "1",
        "emulationMinor": "33",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "32",
        "gitVersion": "v1.33.0+skiff",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": skiff_common::platform::go_platform(),
    })
}

/// `/api`.
pub(crate) fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
    })
}

/// `name`'s entry in an `APIGroupList`: its versions, the first one
/// preferred. Remote groups (see `crate::aggregator`) are listed the same.
pub(crate) fn group_json(name: &str, versions: &[&str]) -> Value {
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
pub(crate) fn groups(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .iter()
        .filter(|g| !g.name.is_empty())
        .map(|g| group_json(g.name, &g.versions))
        .collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

/// `/apis/<group>`.
pub(crate) fn group(registry: &Registry, name: &str) -> Result<Value, ApiError> {
    let g = registry
        .groups()
        .iter()
        .find(|g| !g.name.is_empty() && g.name == name)
        .ok_or(ApiError::PathNotFound)?;
    Ok(api_group(g.name, &g.versions))
}

/// The `APIGroup` document of `/apis/<group>`, local or remote.
pub(crate) fn api_group(name: &str, versions: &[&str]) -> Value {
    let mut doc = group_json(name, versions);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    doc
}

/// A resource's short names and categories on its discovery `entry`, left
/// out when it has none, the same in both discovery forms.
fn add_names(entry: &mut Value, r: &ResourceInfo) {
    if !r.short_names.is_empty() {
        entry["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        entry["categories"] = json!(r.categories);
    }
}

/// `/api/v1` or `/apis/<group>/<version>`.
pub(crate) fn resources(
    registry: &Registry,
    group: &str,
    version: &str,
) -> Result<Value, ApiError> {
    let mut resources = Vec::new();
    for r in registry.in_group_version(group, version) {
        let mut entry = json!({
            "name": r.resource,
            "singularName": r.singular(),
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": r.verbs(),
        });
        add_names(&mut entry, r);
        resources.push(entry);
        for sub in &r.subresources {
            let mut entry = json!({
                "name": format!("{}/{}", r.resource, sub.name()),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": sub.verbs(),
            });
            if sub.kind().is_some() || *sub == Subresource::Proxy {
                let (g, v, k) = sub.discovery_kind(r);
                entry["kind"] = json!(k);
                // Upstream names the group and version only where they are
                // not the parent's (a Scale, an Eviction, a TokenRequest).
                if (g, v) != (r.group, r.version) {
                    if !g.is_empty() {
                        entry["group"] = json!(g);
                    }
                    entry["version"] = json!(v);
                }
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

/// Aggregated discovery (`apidiscovery.k8s.io`), which kubectl asks for
/// first: every group, version and resource of `/api` or `/apis` in one
/// document.
pub(crate) mod aggregated {
    use serde_json::{Value, json};

    use crate::registry::{Registry, ResourceInfo};

    /// The `apidiscovery.k8s.io` versions served.
    const VERSIONS: &[&str] = &["v2", "v2beta1"];

    /// The aggregated discovery version `Accept` asks for, if its first
    /// acceptable entry is one; `None` means legacy discovery.
    pub(crate) fn negotiate(headers: &http::HeaderMap) -> Option<&'static str> {
        let accept = headers.get(http::header::ACCEPT)?.to_str().ok()?;
        for entry in accept.split(',') {
            let mut parts = entry.split(';').map(str::trim);
            let media = parts.next().unwrap_or("");
            let (mut g, mut v, mut as_kind) = ("", "", "");
            for param in parts {
                match param.split_once('=') {
                    Some(("g", x)) => g = x,
                    Some(("v", x)) => v = x,
                    Some(("as", x)) => as_kind = x,
                    _ => {}
                }
            }
            if media == "application/json"
                && g == "apidiscovery.k8s.io"
                && as_kind == "APIGroupDiscoveryList"
                && let Some(version) = VERSIONS.iter().find(|x| **x == v)
            {
                return Some(version);
            }
            if g.is_empty() && matches!(media, "application/json" | "*/*" | "application/*") {
                return None;
            }
        }
        None
    }

    /// The response Content-Type of one aggregated discovery version.
    pub(crate) fn content_type(version: &str) -> String {
        format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList")
    }

    fn kind_json(group: &str, version: &str, kind: &str) -> Value {
        json!({ "group": group, "version": version, "kind": kind })
    }

    fn resource_json(r: &ResourceInfo) -> Value {
        let subresources: Vec<Value> = r
            .subresources
            .iter()
            .map(|sub| {
                let (g, v, k) = sub.discovery_kind(r);
                json!({
                    "subresource": sub.name(),
                    "responseKind": kind_json(g, v, &k),
                    "verbs": sub.verbs(),
                })
            })
            .collect();
        let mut entry = json!({
            "resource": r.resource,
            "responseKind": kind_json(r.group, r.version, r.kind),
            "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
            "singularResource": r.singular(),
            "verbs": r.verbs(),
        });
        super::add_names(&mut entry, r);
        if !subresources.is_empty() {
            entry["subresources"] = json!(subresources);
        }
        entry
    }

    /// The `APIGroupDiscoveryList` of `/api` (`core`) or `/apis`.
    pub(crate) fn document(registry: &Registry, core: bool, version: &str) -> Value {
        let items: Vec<Value> = registry
            .groups()
            .iter()
            .filter(|g| g.name.is_empty() == core)
            .map(|g| {
                let versions: Vec<Value> = g
                    .versions
                    .iter()
                    .map(|v| {
                        let resources: Vec<Value> = registry
                            .in_group_version(g.name, v)
                            .map(|r| resource_json(r))
                            .collect();
                        json!({ "version": v, "resources": resources, "freshness": "Current" })
                    })
                    .collect();
                let metadata = if core {
                    json!({ "creationTimestamp": null })
                } else {
                    json!({ "name": g.name, "creationTimestamp": null })
                };
                json!({ "metadata": metadata, "versions": versions })
            })
            .collect();
        json!({
            "kind": "APIGroupDiscoveryList",
            "apiVersion": format!("apidiscovery.k8s.io/{version}"),
            "metadata": {},
            "items": items,
        })
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn negotiates_the_first_acceptable_entry() {
            let mut h = http::HeaderMap::new();
            h.insert(http::header::ACCEPT, http::HeaderValue::from_static(
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json",
            ));
            assert_eq!(negotiate(&h), Some("v2"));
            h.insert(http::header::ACCEPT, http::HeaderValue::from_static(
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList, application/json",
            ));
            assert_eq!(negotiate(&h), Some("v2beta1"));
            h.insert(http::header::ACCEPT, http::HeaderValue::from_static(
                "application/json, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            ));
            assert_eq!(negotiate(&h), None);
        }
    }
}
