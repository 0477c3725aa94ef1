//! RBAC's escalation prevention, as upstream's RBAC storage enforces it:
//! nobody can grant through RBAC what they do not hold themselves.
//!
//! - Creating or updating a Role or ClusterRole is refused unless the
//!   caller holds every rule in it (in that namespace, or cluster-wide for
//!   a ClusterRole) or may `escalate` that role. Setting or keeping an
//!   `aggregationRule` needs every permission (`*` on everything), since an
//!   aggregated role can gather anything.
//! - Creating or updating a RoleBinding or ClusterRoleBinding is refused
//!   unless the caller may `bind` the referenced role or holds every rule
//!   it grants in the binding's scope.
//! - Members of `system:masters` are never refused; an update that only
//!   touches what the garbage collector writes (owner references,
//!   finalizers) is not checked.
//!
//! It reads the caller's rules from the RBAC authorizer and asks the
//! authorizer chain about `escalate` and `bind`; it never writes.

use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef};
use serde::Deserialize;
use serde_json::Value;

use super::{Operation, WriteRequest};
use crate::authn::UserInfo;
use crate::authz::rbac::rule::{Rule, compact, uncovered};
use crate::authz::rbac::{GROUP, Rbac};
use crate::authz::{Attributes, Chain, MASTERS_GROUP, RequestKind, ResourceAttributes};
use crate::go_format::{go_quote, go_quoted_list};
use crate::handlers::storage;
use crate::object::meta_str;
use crate::status::ApiError;

/// Metadata the garbage collector (and the server) change, which never
/// count as granting anything.
const GC_FIELDS: &[&str] = &[
    "ownerReferences",
    "finalizers",
    "selfLink",
    "managedFields",
    "resourceVersion",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// Checks one write of an RBAC object.
pub(super) fn check(
    authorizer: &Chain,
    rbac: &Rbac,
    request: &WriteRequest<'_>,
) -> Result<(), ApiError> {
    let info = request.info;
    if info.group != GROUP
        || request.subresource.is_some()
        || request.operation == Operation::Delete
        || request.user.groups.iter().any(|g| g == MASTERS_GROUP)
    {
        return Ok(());
    }
    let Some(new) = request.new else {
        return Ok(());
    };
    if request.old.is_some_and(|old| only_gc_fields(old, new)) {
        return Ok(());
    }
    let name = meta_str(new, "name").unwrap_or("");
    let namespace = meta_str(new, "namespace").unwrap_or("");
    let refuse = |detail: String| storage::forbidden(info, name, detail);
    let user = request.user;
    match info.resource {
        "roles" | "clusterroles" => {
            if allowed(authorizer, user, "escalate", info.resource, namespace, name) {
                return Ok(());
            }
            let wanted = rules_of(new);
            confirm_no_escalation(rbac, user, namespace, &wanted).map_err(refuse)?;
            let aggregates = |o: &Value| o.get("aggregationRule").is_some_and(|a| !a.is_null());
            if info.resource == "clusterroles"
                && (aggregates(new) || request.old.is_some_and(aggregates))
            {
                let everything = [
                    Rule {
                        verbs: vec!["*".into()],
                        api_groups: vec!["*".into()],
                        resources: vec!["*".into()],
                        ..Default::default()
                    },
                    Rule {
                        verbs: vec!["*".into()],
                        non_resource_urls: vec!["*".into()],
                        ..Default::default()
                    },
                ];
                if confirm_no_escalation(rbac, user, "", &everything).is_err() {
                    return Err(refuse(
                        "must have cluster-admin privileges to use the aggregationRule".into(),
                    ));
                }
            }
            Ok(())
        }
        "rolebindings" | "clusterrolebindings" => {
            let Ok(role) = RoleRef::deserialize(&new["roleRef"]) else {
                // Validation has already refused a binding without one.
                return Ok(());
            };
            let resource = match role.kind.as_str() {
                "ClusterRole" => "clusterroles",
                "Role" => "roles",
                _ => "",
            };
            if !resource.is_empty()
                && role.api_group == GROUP
                && allowed(authorizer, user, "bind", resource, namespace, &role.name)
            {
                return Ok(());
            }
            let granted = rbac.role_rules(&role, namespace).map_err(refuse)?;
            confirm_no_escalation(rbac, user, namespace, &granted).map_err(refuse)
        }
        _ => Ok(()),
    }
}

/// Whether `old` and `new` differ only in fields that grant nothing.
fn only_gc_fields(old: &Value, new: &Value) -> bool {
    let strip = |object: &Value| {
        let mut copy = object.clone();
        if let Some(meta) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in GC_FIELDS {
                meta.remove(*field);
            }
        }
        copy
    };
    strip(old) == strip(new)
}

fn rules_of(object: &Value) -> Vec<Rule> {
    Option::<Vec<PolicyRule>>::deserialize(&object["rules"])
        .ok()
        .flatten()
        .unwrap_or_default()
        .iter()
        .map(Rule::from)
        .collect()
}

/// Whether the chain allows `verb` on the named role (any version).
fn allowed(
    authorizer: &Chain,
    user: &UserInfo,
    verb: &str,
    resource: &str,
    namespace: &str,
    name: &str,
) -> bool {
    let attributes = Attributes {
        user: user.clone(),
        verb: verb.into(),
        request: RequestKind::Resource(ResourceAttributes {
            group: GROUP.into(),
            version: "*".into(),
            resource: resource.into(),
            subresource: String::new(),
            namespace: namespace.into(),
            name: name.into(),
        }),
    };
    authorizer.decide(&attributes).is_ok()
}

/// Upstream's check that `user` holds every rule of `wanted` in
/// `namespace`; the error is upstream's message listing what is missing.
fn confirm_no_escalation(
    rbac: &Rbac,
    user: &UserInfo,
    namespace: &str,
    wanted: &[Rule],
) -> Result<(), String> {
    let (held, errors) = rbac.rules(user, namespace);
    let held: Vec<&Rule> = held.iter().collect();
    let missing = uncovered(&held, wanted);
    if missing.is_empty() {
        return Ok(());
    }
    let mut lines: Vec<String> = compact(missing).iter().map(Rule::compact_string).collect();
    lines.sort();
    lines.dedup();
    let mut message = format!(
        "user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        go_quote(&user.name),
        go_quoted_list(&user.groups),
        lines.join("\n")
    );
    if !errors.is_empty() {
        message.push_str(&format!("; resolution errors: [{}]", errors.join(", ")));
    }
    Err(message)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::authz::Masters;
    use crate::authz::rbac::testing::{binding, fixture, role, user_subjects};
    use crate::registry::Registry;

    fn named(ns: Option<&str>, name: &str, body: Value) -> Value {
        let mut meta = json!({"name": name});
        if let Some(ns) = ns {
            meta["namespace"] = json!(ns);
        }
        let mut object = body;
        object["metadata"] = meta;
        object
    }

    #[test]
    fn writes_of_rbac_objects_are_checked_as_upstream() {
        let pods_read =
            json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]);
        let f = fixture(
            &[role(
                Some("a"),
                "delegate",
                json!([
                    {"apiGroups": [GROUP], "resources": ["roles"], "verbs": ["escalate"]},
                    {"apiGroups": [GROUP], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["secret-reader"]},
                ]),
            )],
            &[
                role(None, "pod-reader", pods_read.clone()),
                role(
                    None,
                    "secret-reader",
                    json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]),
                ),
                role(
                    None,
                    "role-writer",
                    json!([{"apiGroups": [GROUP], "resources": ["clusterroles"], "verbs": ["create", "update"]},
                    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]),
                ),
            ],
            &[
                binding(
                    Some("a"),
                    "u-pods",
                    "ClusterRole",
                    "pod-reader",
                    user_subjects("u"),
                ),
                binding(
                    Some("a"),
                    "d-pods",
                    "ClusterRole",
                    "pod-reader",
                    user_subjects("d"),
                ),
                binding(
                    Some("a"),
                    "d-delegate",
                    "Role",
                    "delegate",
                    user_subjects("d"),
                ),
            ],
            &[binding(
                None,
                "w",
                "ClusterRole",
                "role-writer",
                user_subjects("w"),
            )],
        );
        let rbac = Arc::new(f.rbac);
        let chain = Chain::new(vec![Arc::new(Masters), rbac.clone()]);
        let registry = Registry::builtin();
        let info = |resource: &str| registry.get(GROUP, "v1", resource).unwrap();
        let user = |name: &str| UserInfo::new(name, Vec::new());
        let admin = UserInfo::new("root", [MASTERS_GROUP.to_string()]);
        let everything =
            json!({"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]});
        let pods_delete = json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "delete"]}]});
        let bind = |kind: &str, name: &str| json!({"roleRef": {"apiGroup": GROUP, "kind": kind, "name": name}, "subjects": user_subjects("x")});
        let mut owned = named(Some("a"), "r", everything.clone());
        owned["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "1"}]);
        let mut relabelled = named(Some("a"), "r", everything.clone());
        relabelled["metadata"]["labels"] = json!({"x": "y"});
        let old_everything = named(Some("a"), "r", everything.clone());
        let aggregated =
            json!({"aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}});

        // (who, resource, old, new, Ok or a part of the refusal)
        type Case<'a> = (UserInfo, &'a str, Option<Value>, Value, Result<(), &'a str>);
        let cases: Vec<Case> = vec![
            (
                admin.clone(),
                "roles",
                None,
                named(Some("a"), "r", everything.clone()),
                Ok(()),
            ),
            (
                user("u"),
                "roles",
                None,
                named(Some("a"), "r", json!({"rules": pods_read.clone()})),
                Ok(()),
            ),
            (
                user("u"),
                "roles",
                None,
                named(Some("a"), "r", pods_delete.clone()),
                Err(
                    "roles.rbac.authorization.k8s.io \"r\" is forbidden: user \"u\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}",
                ),
            ),
            (
                user("u"),
                "roles",
                None,
                named(Some("b"), "r", json!({"rules": pods_read.clone()})),
                Err("Verbs:[\"get\" \"list\"]}"),
            ),
            // escalate on roles in a lifts the check there, not elsewhere.
            (
                user("d"),
                "roles",
                None,
                named(Some("a"), "r", everything.clone()),
                Ok(()),
            ),
            (
                user("d"),
                "roles",
                None,
                named(Some("b"), "r", everything.clone()),
                Err("not currently held"),
            ),
            // What the garbage collector writes is never an escalation.
            (
                user("u"),
                "roles",
                Some(old_everything.clone()),
                owned,
                Ok(()),
            ),
            (
                user("u"),
                "roles",
                Some(old_everything),
                relabelled,
                Err("not currently held"),
            ),
            (
                user("u"),
                "rolebindings",
                None,
                named(Some("a"), "b", bind("ClusterRole", "pod-reader")),
                Ok(()),
            ),
            (
                user("u"),
                "rolebindings",
                None,
                named(Some("a"), "b", bind("ClusterRole", "secret-reader")),
                Err("rolebindings.rbac.authorization.k8s.io \"b\" is forbidden: user \"u\""),
            ),
            (
                user("d"),
                "rolebindings",
                None,
                named(Some("a"), "b", bind("ClusterRole", "secret-reader")),
                Ok(()),
            ),
            (
                user("d"),
                "rolebindings",
                None,
                named(Some("b"), "b", bind("ClusterRole", "secret-reader")),
                Err("not currently held"),
            ),
            (
                user("u"),
                "rolebindings",
                None,
                named(Some("a"), "b", bind("ClusterRole", "nope")),
                Err(
                    "rolebindings.rbac.authorization.k8s.io \"b\" is forbidden: clusterrole.rbac.authorization.k8s.io \"nope\" not found",
                ),
            ),
            // Holding pods in one namespace is not holding them cluster-wide.
            (
                user("u"),
                "clusterrolebindings",
                None,
                named(None, "b", bind("ClusterRole", "pod-reader")),
                Err("not currently held"),
            ),
            (
                user("w"),
                "clusterroles",
                None,
                named(None, "c", json!({"rules": pods_read.clone()})),
                Ok(()),
            ),
            (
                user("w"),
                "clusterroles",
                None,
                named(None, "c", aggregated),
                Err(
                    "clusterroles.rbac.authorization.k8s.io \"c\" is forbidden: must have cluster-admin privileges to use the aggregationRule",
                ),
            ),
        ];
        for (who, resource, old, new, want) in cases {
            let info = info(resource);
            let notes = crate::request_notes::RequestNotes::default();
            let request = WriteRequest {
                user: &who,
                notes: &notes,
                operation: if old.is_some() {
                    Operation::Update
                } else {
                    Operation::Create
                },
                info: &info,
                subresource: None,
                old: old.as_ref(),
                new: Some(&new),
                dry_run: false,
            };
            let got = check(&chain, &rbac, &request).map_err(|e| e.to_string());
            match want {
                Ok(()) => assert!(got.is_ok(), "{} {resource} {new}: {got:?}", who.name),
                Err(part) => {
                    let message = got.expect_err(&format!("{} {resource} {new} allowed", who.name));
                    assert!(message.contains(part), "{message}");
                }
            }
        }
    }
}
