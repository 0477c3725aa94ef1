//! RBAC objects (roles, cluster roles and their bindings): names are path
//! segments, as upstream allows `system:` names with colons; a binding's
//! User and Group subjects belong to the RBAC API group unless they say.
//! Rules name verbs and either resources (with their API groups) or, in
//! cluster roles only, non-resource URLs; bindings refer to a role of the
//! RBAC group and name subjects of the three kinds, as upstream's
//! validation rules them.

use serde_json::{Value, json};

use super::{KindStrategy, Written, set_default};
use crate::object::items_mut;
use crate::registry::ResourceInfo;
use crate::status::FieldError;
use crate::validation::NameRule;

/// The API group of User and Group subjects.
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Every resource of `rbac.authorization.k8s.io`.
#[derive(Debug)]
pub(crate) struct Rbac;

impl KindStrategy for Rbac {
    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    /// Subjects of bindings: upstream gives User and Group the RBAC group
    /// (a ServiceAccount's core group is empty, which is never written).
    fn apply_defaults(&self, _info: &ResourceInfo, object: &mut Value) {
        for subject in items_mut(object, &["subjects"]) {
            if matches!(subject["kind"].as_str(), Some("User" | "Group")) {
                set_default(subject, "apiGroup", json!(RBAC_GROUP));
            }
        }
    }

    fn validate(&self, written: &Written<'_>, errors: &mut Vec<FieldError>) {
        let Written { info, object, .. } = *written;
        match info.kind {
            "Role" | "ClusterRole" => rules(object, info.namespaced, errors),
            "RoleBinding" | "ClusterRoleBinding" => binding(object, info.namespaced, errors),
            _ => {}
        }
    }
}

/// Upstream's `%#v` of a `[]string`.
fn go_strings(list: &[Value]) -> String {
    crate::go_format::go_string_slice(
        "string",
        list.iter().map(|v| v.as_str().unwrap_or_default()),
    )
}

fn rules(role: &Value, namespaced: bool, errors: &mut Vec<FieldError>) {
    let listed = |rule: &Value, field: &str| -> Vec<Value> {
        rule[field].as_array().cloned().unwrap_or_default()
    };
    for (i, rule) in role["rules"].as_array().into_iter().flatten().enumerate() {
        let at = format!("rules[{i}]");
        if listed(rule, "verbs").is_empty() {
            errors.push(FieldError::required(
                format!("{at}.verbs"),
                "verbs must contain at least one value",
            ));
        }
        let urls = listed(rule, "nonResourceURLs");
        if !urls.is_empty() {
            let invalid = |detail: &str| {
                FieldError::invalid(format!("{at}.nonResourceURLs"), Value::Null, detail)
                    .shown_as(go_strings(&urls))
            };
            if namespaced {
                errors.push(invalid(
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            }
            if !listed(rule, "apiGroups").is_empty() || !listed(rule, "resources").is_empty() {
                errors.push(invalid(
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            continue;
        }
        if listed(rule, "apiGroups").is_empty() {
            errors.push(FieldError::required(
                format!("{at}.apiGroups"),
                "resource rules must supply at least one api group",
            ));
        }
        if listed(rule, "resources").is_empty() {
            errors.push(FieldError::required(
                format!("{at}.resources"),
                "resource rules must supply at least one resource",
            ));
        }
    }
}

fn binding(binding: &Value, namespaced: bool, errors: &mut Vec<FieldError>) {
    let role_ref = &binding["roleRef"];
    let text = |v: &Value, field: &str| v[field].as_str().unwrap_or_default().to_owned();
    let group = text(role_ref, "apiGroup");
    if group != RBAC_GROUP {
        errors.push(FieldError::not_supported(
            "roleRef.apiGroup",
            group,
            &[RBAC_GROUP],
        ));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    let kind = text(role_ref, "kind");
    if !kinds.contains(&kind.as_str()) {
        errors.push(FieldError::not_supported("roleRef.kind", kind, kinds));
    }
    if text(role_ref, "name").is_empty() {
        errors.push(FieldError::required("roleRef.name", ""));
    }
    for (i, subject) in binding["subjects"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("subjects[{i}]");
        if text(subject, "name").is_empty() {
            errors.push(FieldError::required(format!("{at}.name"), ""));
        }
        let group = text(subject, "apiGroup");
        match text(subject, "kind").as_str() {
            "ServiceAccount" => {
                if !group.is_empty() {
                    errors.push(FieldError::not_supported(
                        format!("{at}.apiGroup"),
                        group,
                        &[""],
                    ));
                }
                if !namespaced && text(subject, "namespace").is_empty() {
                    errors.push(FieldError::required(format!("{at}.namespace"), ""));
                }
            }
            "User" | "Group" if group != RBAC_GROUP => errors.push(FieldError::not_supported(
                format!("{at}.apiGroup"),
                group,
                &[RBAC_GROUP],
            )),
            "User" | "Group" => {}
            other => errors.push(FieldError::not_supported(
                format!("{at}.kind"),
                other,
                &["ServiceAccount", "User", "Group"],
            )),
        }
    }
}
