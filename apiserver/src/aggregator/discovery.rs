//! The groups of available Service-backed APIServices in this server's
//! discovery: `/apis` lists them after the local groups (versions by
//! `versionPriority`), `/apis/<group>` is answered here, and the
//! aggregated documents carry the resources each server's last discovery
//! check returned. An unavailable APIService's group is left out, so
//! clients are not sent to a server that does not answer.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// What one available remote APIService serves.
#[derive(Debug, Clone)]
pub(crate) struct Remote {
    group: String,
    version: String,
    group_priority: i64,
    version_priority: i64,
    /// Its server's `APIResourceList` for the group/version.
    resources: Value,
}

impl Remote {
    /// From the APIService and its server's answer.
    pub(crate) fn new(service: &Value, resources: Value) -> Self {
        Self {
            group: service["spec"]["group"].as_str().unwrap_or("").to_string(),
            version: service["spec"]["version"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            group_priority: service["spec"]["groupPriorityMinimum"]
                .as_i64()
                .unwrap_or(0),
            version_priority: service["spec"]["versionPriority"].as_i64().unwrap_or(0),
            resources,
        }
    }
}

/// The remote groups, each with its versions, highest priority first.
fn groups(remote: &BTreeMap<String, Remote>) -> Vec<(String, Vec<&Remote>)> {
    let mut by_group: BTreeMap<&str, Vec<&Remote>> = BTreeMap::new();
    for r in remote.values() {
        by_group.entry(&r.group).or_default().push(r);
    }
    let mut out: Vec<(String, Vec<&Remote>)> = by_group
        .into_iter()
        .map(|(g, mut versions)| {
            versions.sort_by(|a, b| {
                b.version_priority
                    .cmp(&a.version_priority)
                    .then(a.version.cmp(&b.version))
            });
            (g.to_string(), versions)
        })
        .collect();
    out.sort_by_key(|(g, versions)| {
        (
            std::cmp::Reverse(versions.iter().map(|v| v.group_priority).max().unwrap_or(0)),
            g.clone(),
        )
    });
    out
}

/// The names of `versions`, in their order.
fn version_names<'a>(versions: &[&'a Remote]) -> Vec<&'a str> {
    versions.iter().map(|v| v.version.as_str()).collect()
}

/// Appends the remote groups to an `/apis` `APIGroupList`, leaving out any
/// group the list already has.
pub(crate) fn add_to_group_list(doc: &mut Value, remote: &BTreeMap<String, Remote>) {
    let Some(list) = doc["groups"].as_array_mut() else {
        return;
    };
    for (name, versions) in groups(remote) {
        if list.iter().any(|g| g["name"] == name.as_str()) {
            continue;
        }
        list.push(crate::discovery::group_json(
            &name,
            &version_names(&versions),
        ));
    }
}

/// `/apis/<group>` for a remote group.
pub(crate) fn group(remote: &BTreeMap<String, Remote>, name: &str) -> Option<Value> {
    let (name, versions) = groups(remote).into_iter().find(|(g, _)| g == name)?;
    Some(crate::discovery::api_group(
        &name,
        &version_names(&versions),
    ))
}

/// An `APIResourceList` as aggregated discovery's resources of one version.
fn aggregated_resources(list: &Value, group: &str, version: &str) -> Vec<Value> {
    let entries = list["resources"].as_array().cloned().unwrap_or_default();
    let mut out: Vec<Value> = Vec::new();
    for entry in entries.iter().filter(|e| {
        e["name"]
            .as_str()
            .is_some_and(|n| !n.is_empty() && !n.contains('/'))
    }) {
        let name = entry["name"].as_str().unwrap_or("");
        let kind = |e: &Value| {
            json!({"group": e["group"].as_str().unwrap_or(group),
                   "version": e["version"].as_str().unwrap_or(version),
                   "kind": e["kind"]})
        };
        let subresources: Vec<Value> = entries
            .iter()
            .filter_map(|sub| {
                let sub_name = sub["name"].as_str()?.strip_prefix(&format!("{name}/"))?;
                Some(json!({"subresource": sub_name, "responseKind": kind(sub), "verbs": sub["verbs"]}))
            })
            .collect();
        let mut resource = json!({
            "resource": name,
            "responseKind": kind(entry),
            "scope": if entry["namespaced"] == true { "Namespaced" } else { "Cluster" },
            "singularResource": entry["singularName"].as_str().unwrap_or(""),
            "verbs": entry["verbs"],
        });
        for field in ["shortNames", "categories"] {
            if entry[field].as_array().is_some_and(|a| !a.is_empty()) {
                resource[field] = entry[field].clone();
            }
        }
        if !subresources.is_empty() {
            resource["subresources"] = json!(subresources);
        }
        out.push(resource);
    }
    out
}

/// Appends the remote groups to an aggregated `/apis` document.
pub(crate) fn add_to_aggregated(doc: &mut Value, remote: &BTreeMap<String, Remote>) {
    let Some(items) = doc["items"].as_array_mut() else {
        return;
    };
    for (name, versions) in groups(remote) {
        if items.iter().any(|i| i["metadata"]["name"] == name.as_str()) {
            continue;
        }
        let versions: Vec<Value> = versions
            .iter()
            .map(|v| {
                json!({"version": v.version,
                       "resources": aggregated_resources(&v.resources, &name, &v.version),
                       "freshness": "Current"})
            })
            .collect();
        items.push(
            json!({"metadata": {"name": name, "creationTimestamp": null}, "versions": versions}),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote() -> BTreeMap<String, Remote> {
        let service = |v: &str, p: i64| {
            json!({"spec": {"group": "example.com", "version": v,
                "groupPriorityMinimum": 1000, "versionPriority": p}})
        };
        let list = json!({"kind": "APIResourceList", "groupVersion": "example.com/v1",
            "resources": [
                {"name": "widgets", "singularName": "widget", "namespaced": true,
                 "kind": "Widget", "verbs": ["get", "list"], "shortNames": ["wd"]},
                {"name": "widgets/status", "singularName": "", "namespaced": true,
                 "kind": "Widget", "verbs": ["get"]}]});
        BTreeMap::from([
            (
                "v1.example.com".into(),
                Remote::new(&service("v1", 15), list.clone()),
            ),
            (
                "v1beta1.example.com".into(),
                Remote::new(&service("v1beta1", 9), list),
            ),
        ])
    }

    #[test]
    fn remote_groups_prefer_the_highest_version_priority() {
        let mut doc = json!({"kind": "APIGroupList", "groups": [{"name": "apps"}]});
        add_to_group_list(&mut doc, &remote());
        assert_eq!(doc["groups"][1]["name"], "example.com");
        assert_eq!(doc["groups"][1]["preferredVersion"]["version"], "v1");
        assert_eq!(doc["groups"][1]["versions"][1]["version"], "v1beta1");
        assert_eq!(group(&remote(), "example.com").unwrap()["kind"], "APIGroup");
        assert!(group(&remote(), "apps").is_none());
    }

    #[test]
    fn aggregated_discovery_carries_the_servers_resources() {
        let mut doc = json!({"items": []});
        add_to_aggregated(&mut doc, &remote());
        let widgets = &doc["items"][0]["versions"][0]["resources"][0];
        assert_eq!(widgets["resource"], "widgets");
        assert_eq!(widgets["scope"], "Namespaced");
        assert_eq!(widgets["responseKind"]["kind"], "Widget");
        assert_eq!(widgets["responseKind"]["group"], "example.com");
        assert_eq!(widgets["shortNames"], json!(["wd"]));
        assert_eq!(widgets["subresources"][0]["subresource"], "status");
    }
}
