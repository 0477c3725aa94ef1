//! From the stored CRDs to registry entries: whose names are accepted (the
//! oldest CRD keeps a contested kind or short name in its group), and one
//! [`ResourceInfo`] per served version of every accepted CRD, in upstream's
//! version priority order (GA before beta before alpha, higher first).

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::CustomVersion;
use super::definition::{Definition, Names};
use super::schema::Schema;
use crate::registry::{Conversion, ResourceInfo, Subresource, intern, intern_list};

/// Whether a CRD's names were accepted, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Acceptance {
    /// The names the CRD now serves under.
    Accepted(Names),
    /// `(reason, message)` of the NamesAccepted=False condition.
    Conflict(String, String),
}

/// What the current CRDs serve.
#[derive(Debug, Default)]
pub(crate) struct Served {
    /// The resources served, one per served version.
    pub resources: Vec<ResourceInfo>,
    /// By CRD name.
    pub acceptance: HashMap<String, Acceptance>,
}

/// Decides names and builds registry entries for `crds`; `reserved` holds
/// the resource names built-in groups already use (by group), which no CRD
/// may take.
pub(crate) fn served_resources(crds: &[Value], reserved: &HashMap<String, Vec<String>>) -> Served {
    let mut defs: Vec<Definition> = crds.iter().map(Definition::parse).collect();
    // Names already held are kept; then the oldest CRD wins.
    defs.sort_by(|a, b| {
        (
            !a.accepted_before,
            a.creation_timestamp.as_str(),
            a.name.as_str(),
        )
            .cmp(&(
                !b.accepted_before,
                b.creation_timestamp.as_str(),
                b.name.as_str(),
            ))
    });
    let mut served = Served::default();
    // Names taken per group: every plural, singular, kind, list kind and short name.
    let mut taken: HashMap<String, Vec<String>> = reserved.clone();
    for def in &defs {
        let used = taken.entry(def.group.clone()).or_default();
        let acceptance = match conflict(&def.names, used) {
            Some((reason, message)) => Acceptance::Conflict(reason, message),
            None => {
                used.extend(all_names(&def.names));
                Acceptance::Accepted(def.names.clone())
            }
        };
        if matches!(acceptance, Acceptance::Accepted(_)) {
            served.resources.extend(entries(def));
        }
        served.acceptance.insert(def.name.clone(), acceptance);
    }
    served.resources.sort_by(|a, b| {
        a.group
            .cmp(b.group)
            .then_with(|| version_priority(a.version, b.version))
            .then_with(|| a.resource.cmp(b.resource))
    });
    served
}

fn all_names(names: &Names) -> Vec<String> {
    let mut out = vec![
        names.plural.clone(),
        names.singular.clone(),
        names.kind.clone(),
        names.list_kind.clone(),
    ];
    out.extend(names.short_names.iter().cloned());
    out
}

fn conflict(names: &Names, used: &[String]) -> Option<(String, String)> {
    let checks: Vec<(&str, &String)> = [
        ("PluralConflict", &names.plural),
        ("SingularConflict", &names.singular),
        ("KindConflict", &names.kind),
        ("ListKindConflict", &names.list_kind),
    ]
    .into_iter()
    .chain(names.short_names.iter().map(|s| ("ShortNamesConflict", s)))
    .collect();
    checks
        .into_iter()
        .find(|(_, name)| used.contains(name))
        .map(|(reason, name)| (reason.to_string(), format!("{name:?} is already in use")))
}

fn entries(def: &Definition) -> Vec<ResourceInfo> {
    let Some(storage) = def.storage_version() else {
        return Vec::new();
    };
    let storage_api_version = format!("{}/{}", def.group, storage);
    def.versions
        .iter()
        .filter(|v| v.served)
        .map(|v| {
            let mut subresources = Vec::new();
            if v.status {
                subresources.push(Subresource::Status);
            }
            if v.scale.is_some() {
                subresources.push(Subresource::Scale);
            }
            let custom = CustomVersion {
                crd_name: def.name.clone(),
                api_version: format!("{}/{}", def.group, v.name),
                storage_api_version: storage_api_version.clone(),
                singular: def.names.singular.clone(),
                schema: v.schema.as_ref().and_then(|s| Schema::parse(s).ok()),
                openapi_schema: v.schema.clone(),
                columns: v.columns.clone(),
                scale: v.scale.clone(),
            };
            ResourceInfo {
                group: intern(&def.group),
                version: intern(&v.name),
                resource: intern(&def.names.plural),
                kind: intern(&def.names.kind),
                namespaced: def.namespaced,
                short_names: intern_list(&def.names.short_names),
                categories: intern_list(&def.names.categories),
                subresources,
                tracks_generation: true,
                field_labels: &[],
                create_on_update: false,
                storage_prefix: format!("/registry/{}/{}/", def.group, def.names.plural),
                conversion: Some(Conversion::CUSTOM),
                roundtrip: keep_as_is,
                custom: Some(Arc::new(custom)),
                strategy: &crate::kinds::CustomResources,
                printer: &crate::table::core::DEFAULT,
                review: None,
                metrics: None,
                component_statuses: false,
                legacy_binding: false,
            }
        })
        .collect()
}

/// Custom objects have no typed form; the schema did the checking.
fn keep_as_is(object: &Value) -> Result<Value, String> {
    Ok(object.clone())
}

/// `(major, stability, minor)` of a Kubernetes-style version name; stability
/// 2 = GA, 1 = beta, 0 = alpha.
fn parse_version(v: &str) -> Option<(u64, u8, u64)> {
    let rest = v.strip_prefix('v')?;
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let major: u64 = rest[..digits].parse().ok()?;
    let tail = &rest[digits..];
    if tail.is_empty() {
        return Some((major, 2, 0));
    }
    let (stability, minor) = if let Some(m) = tail.strip_prefix("beta") {
        (1, m)
    } else if let Some(m) = tail.strip_prefix("alpha") {
        (0, m)
    } else {
        return None;
    };
    Some((major, stability, minor.parse().ok()?))
}

/// Orders versions as upstream's discovery does: most preferred first.
pub(super) fn version_priority(a: &str, b: &str) -> Ordering {
    match (parse_version(a), parse_version(b)) {
        (Some((ma, sa, na)), Some((mb, sb, nb))) => sb.cmp(&sa).then(mb.cmp(&ma)).then(nb.cmp(&na)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(name: &str, plural: &str, kind: &str, short: &[&str], created: &str) -> Value {
        json!({"metadata": {"name": name, "creationTimestamp": created},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": plural, "singular": plural.trim_end_matches('s'),
                    "kind": kind, "shortNames": short},
                "versions": [
                    {"name": "v1beta1", "served": true, "storage": false},
                    {"name": "v1", "served": true, "storage": true},
                    {"name": "v1alpha1", "served": false, "storage": false}]}})
    }

    #[test]
    fn versions_sort_by_stability_then_number() {
        let mut vs = vec![
            "v1alpha1", "v2beta1", "v1", "foo", "v2", "v1beta2", "v1beta1",
        ];
        vs.sort_by(|a, b| version_priority(a, b));
        assert_eq!(
            vs,
            vec![
                "v2", "v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1", "foo"
            ]
        );
    }

    #[test]
    fn the_older_crd_keeps_contested_names() {
        let reserved = HashMap::from([("example.com".to_string(), vec!["things".to_string()])]);
        let served = served_resources(
            &[
                crd(
                    "gadgets.example.com",
                    "gadgets",
                    "Widget",
                    &[],
                    "2026-01-02T00:00:00Z",
                ),
                crd(
                    "widgets.example.com",
                    "widgets",
                    "Widget",
                    &["wd"],
                    "2026-01-01T00:00:00Z",
                ),
                crd(
                    "things.example.com",
                    "things",
                    "Thing",
                    &[],
                    "2026-01-01T00:00:00Z",
                ),
            ],
            &reserved,
        );
        assert!(matches!(
            served.acceptance["things.example.com"],
            Acceptance::Conflict(..)
        ));
        assert!(matches!(
            served.acceptance["widgets.example.com"],
            Acceptance::Accepted(_)
        ));
        assert_eq!(
            served.acceptance["gadgets.example.com"],
            Acceptance::Conflict("KindConflict".into(), "\"Widget\" is already in use".into())
        );
        let versions: Vec<&str> = served.resources.iter().map(|r| r.version).collect();
        assert_eq!(
            versions,
            vec!["v1", "v1beta1"],
            "served versions only, preferred first"
        );
        let v1beta1 = &served.resources[1];
        assert_eq!(v1beta1.storage_prefix, "/registry/example.com/widgets/");
        assert_eq!(v1beta1.short_names, &["wd"]);
        let stored = v1beta1.to_storage(json!({"apiVersion": "example.com/v1beta1"}));
        assert_eq!(stored["apiVersion"], "example.com/v1");
        assert_eq!(
            v1beta1.from_storage(stored)["apiVersion"],
            "example.com/v1beta1"
        );
    }
}
