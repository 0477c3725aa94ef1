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
use crate::authz::rbac::rule::{Rule, compact, go_quote, go_quoted_list, uncovered};
use crate::authz::rbac::{GROUP, Rbac};
use crate::authz::{Attributes, Chain, MASTERS_GROUP, RequestKind, ResourceAttributes};
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
    let refuse = |detail: String| ApiError::Forbidden {
        resource: info.qualified(),
        group: info.group.to_string(),
        name: name.to_string(),
        detail,
        causes: Vec::new(),
    };
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
