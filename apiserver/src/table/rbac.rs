//! RBAC: roles print their creation time (`NAME CREATED AT`), bindings the
//! role they grant and, with `-o wide`, whom to (`NAME ROLE AGE USERS
//! GROUPS SERVICEACCOUNTS`).

use serde_json::Value;

use super::columns::{Column, Printer, age, list, name, text, text_cell};

/// Roles and ClusterRoles.
pub(crate) static ROLES: Printer = Printer {
    columns: &[Column::NAME, Column::CREATED_AT],
    cells: |role, _| {
        vec![
            name(role),
            text_cell(role, "metadata/creationTimestamp", ""),
        ]
    },
};

/// RoleBindings and ClusterRoleBindings.
pub(crate) static BINDINGS: Printer = Printer {
    columns: &[
        Column::NAME,
        Column::string("Role", "The role granted: its kind and name."),
        Column::AGE,
        Column::string("Users", "The users the binding names.").wide(),
        Column::string("Groups", "The groups the binding names.").wide(),
        Column::string(
            "ServiceAccounts",
            "The service accounts the binding names, as namespace:name.",
        )
        .wide(),
    ],
    cells: |binding, now| {
        let role = format!(
            "{}/{}",
            text(binding, "roleRef/kind").unwrap_or(""),
            text(binding, "roleRef/name").unwrap_or("")
        );
        let subjects = |kind: &str| -> String {
            list(binding, "subjects")
                .iter()
                .filter(|s| text(s, "kind") == Some(kind))
                .map(|s| {
                    let name = text(s, "name").unwrap_or("");
                    match kind {
                        "ServiceAccount" => {
                            format!("{}:{name}", text(s, "namespace").unwrap_or(""))
                        }
                        _ => name.to_string(),
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        vec![
            name(binding),
            Value::from(role),
            age(binding, now),
            Value::from(subjects("User")),
            Value::from(subjects("Group")),
            Value::from(subjects("ServiceAccount")),
        ]
    },
};
