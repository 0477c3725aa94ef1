//! Whether a request is one a policy (its `matchConstraints`) or a binding
//! (its `matchResources`) cares about: resource rules with operations,
//! groups, versions, resources and subresources, names and scope; exclude
//! rules; the namespace's labels; the object's labels. Matching only reads
//! what it is given.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::object::str_items;
use crate::selectors::LabelSelector;

/// The request as rules see it.
pub(crate) struct RequestShape<'a> {
    /// `CREATE`, `UPDATE`, `DELETE`.
    pub operation: &'a str,
    pub group: &'a str,
    pub version: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub name: &'a str,
    pub namespaced: bool,
    /// Whether the object is a Namespace (its own labels then stand for
    /// its namespace's).
    pub is_namespace: bool,
    /// The labels of the request's namespace, when it has one.
    pub namespace_labels: Option<&'a Value>,
    pub new: Option<&'a Value>,
    pub old: Option<&'a Value>,
}

/// Whether `resources` (a `matchConstraints` or `matchResources`) takes in
/// the request. `rules_required`: with no resource rules nothing matches
/// (a policy); otherwise no rules means every resource (a binding).
pub(crate) fn matches(resources: &Value, request: &RequestShape<'_>, rules_required: bool) -> bool {
    let rules = resources["resourceRules"].as_array();
    let included = match rules {
        Some(rules) if !rules.is_empty() => rules.iter().any(|rule| rule_matches(rule, request)),
        _ => !rules_required,
    };
    if !included {
        return false;
    }
    let excluded = resources["excludeResourceRules"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|rule| rule_matches(rule, request));
    if excluded {
        return false;
    }
    namespace_matches(&resources["namespaceSelector"], request)
        && object_matches(&resources["objectSelector"], request)
}

fn listed(rule: &Value, field: &str, value: &str) -> bool {
    str_items(&rule[field]).any(|item| item == "*" || item == value)
}

/// One `NamedRuleWithOperations`.
fn rule_matches(rule: &Value, request: &RequestShape<'_>) -> bool {
    let scope_ok = match rule["scope"].as_str().unwrap_or("*") {
        "Cluster" => !request.namespaced,
        "Namespaced" => request.namespaced,
        _ => true,
    };
    let names_ok = rule["resourceNames"]
        .as_array()
        .filter(|names| !names.is_empty())
        .is_none_or(|names| names.iter().any(|n| n.as_str() == Some(request.name)));
    scope_ok
        && names_ok
        && listed(rule, "operations", request.operation)
        && listed(rule, "apiGroups", request.group)
        && listed(rule, "apiVersions", request.version)
        && str_items(&rule["resources"])
            .any(|pattern| resource_matches(pattern, request.resource, request.subresource))
}

/// `pods` (the resource only), `pods/status`, `pods/*` (every subresource),
/// `*` (every resource, no subresource), `*/scale`, `*/*` (everything).
fn resource_matches(pattern: &str, resource: &str, subresource: &str) -> bool {
    let (want_resource, want_sub) = match pattern.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (pattern, None),
    };
    let resource_ok = want_resource == "*" || want_resource == resource;
    let sub_ok = match want_sub {
        None => subresource.is_empty(),
        Some("*") => true,
        Some(sub) => sub == subresource,
    };
    resource_ok && sub_ok
}

fn labels_of(object: &Value) -> BTreeMap<&str, &str> {
    object["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
        .collect()
}

/// Whether the selector `value` selects: `test` of it, everything when
/// there is none, and nothing when it does not parse (validation refused
/// it, so one that still fails selects nothing rather than everything).
fn selects(value: &Value, test: impl FnOnce(&LabelSelector) -> bool) -> bool {
    if value.is_null() {
        return true;
    }
    LabelSelector::from_object(value).is_ok_and(|selector| test(&selector))
}

/// Cluster-scoped objects other than namespaces always match; a Namespace
/// is matched on its own labels.
fn namespace_matches(value: &Value, request: &RequestShape<'_>) -> bool {
    selects(value, |selector| {
        if request.is_namespace {
            let own = request
                .new
                .or(request.old)
                .map(labels_of)
                .unwrap_or_default();
            return selector.matches_labels(&own);
        }
        if !request.namespaced {
            return true;
        }
        let labels = request.namespace_labels.map(labels_of).unwrap_or_default();
        selector.matches_labels(&labels)
    })
}

/// The new or the old object's labels match.
fn object_matches(value: &Value, request: &RequestShape<'_>) -> bool {
    selects(value, |selector| {
        [request.new, request.old]
            .into_iter()
            .flatten()
            .any(|object| selector.matches_labels(&labels_of(object)))
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment_create<'a>(new: &'a Value, ns: &'a Value) -> RequestShape<'a> {
        RequestShape {
            operation: "CREATE",
            group: "apps",
            version: "v1",
            resource: "deployments",
            subresource: "",
            name: "web",
            namespaced: true,
            is_namespace: false,
            namespace_labels: Some(ns),
            new: Some(new),
            old: None,
        }
    }

    #[test]
    fn rules_match_operations_groups_resources_and_subresources() {
        let new = json!({"metadata": {"name": "web", "labels": {"tier": "front"}}});
        let ns = json!({"metadata": {"labels": {"env": "test"}}});
        let request = deployment_create(&new, &ns);
        let rule = |r: Value| json!({"resourceRules": [r]});
        let base = json!({"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"]});
        assert!(matches(&rule(base.clone()), &request, true));
        let mut update_only = base.clone();
        update_only["operations"] = json!(["UPDATE"]);
        assert!(!matches(&rule(update_only), &request, true));
        let mut core = base.clone();
        core["apiGroups"] = json!([""]);
        assert!(!matches(&rule(core), &request, true));
        let mut status = base.clone();
        status["resources"] = json!(["deployments/status"]);
        assert!(!matches(&rule(status.clone()), &request, true));
        let status_write = RequestShape {
            subresource: "status",
            operation: "UPDATE",
            ..deployment_create(&new, &ns)
        };
        let mut any_op = status.clone();
        any_op["operations"] = json!(["*"]);
        assert!(matches(&rule(any_op.clone()), &status_write, true));
        let mut star = any_op.clone();
        star["resources"] = json!(["*"]);
        assert!(
            !matches(&rule(star.clone()), &status_write, true),
            "* leaves subresources out"
        );
        star["resources"] = json!(["*/*"]);
        assert!(matches(&rule(star), &status_write, true));
        let mut cluster = base.clone();
        cluster["scope"] = json!("Cluster");
        assert!(!matches(&rule(cluster), &request, true));
        let mut named = base.clone();
        named["resourceNames"] = json!(["other"]);
        assert!(!matches(&rule(named), &request, true));
        // Exclusions win.
        let both = json!({"resourceRules": [base.clone()], "excludeResourceRules": [base]});
        assert!(!matches(&both, &request, true));
        // A binding without rules takes whatever its policy matched.
        assert!(matches(&json!({}), &request, false));
        assert!(!matches(&json!({}), &request, true));
    }

    #[test]
    fn selectors_look_at_the_namespace_and_the_object() {
        let new = json!({"metadata": {"name": "web", "labels": {"tier": "front"}}});
        let ns = json!({"metadata": {"labels": {"env": "test"}}});
        let request = deployment_create(&new, &ns);
        let with = |field: &str, selector: Value| json!({field: selector});
        assert!(matches(
            &with("namespaceSelector", json!({"matchLabels": {"env": "test"}})),
            &request,
            false
        ));
        assert!(!matches(
            &with("namespaceSelector", json!({"matchLabels": {"env": "prod"}})),
            &request,
            false
        ));
        assert!(matches(
            &with("objectSelector", json!({"matchLabels": {"tier": "front"}})),
            &request,
            false
        ));
        assert!(!matches(
            &with(
                "objectSelector",
                json!({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]})
            ),
            &request,
            false
        ));
        // A cluster-scoped object ignores the namespace selector.
        let node = RequestShape {
            namespaced: false,
            namespace_labels: None,
            ..deployment_create(&new, &ns)
        };
        assert!(matches(
            &with("namespaceSelector", json!({"matchLabels": {"env": "prod"}})),
            &node,
            false
        ));
    }
}
