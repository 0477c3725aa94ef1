//! How the default policy is written down: role and binding specs, a rule
//! builder, and the verb sets upstream's policy is phrased in. The roles
//! themselves are in `roles.rs` and `controllers.rs`.

pub use k8s_openapi::api::rbac::v1::Subject;
use k8s_openapi::api::rbac::v1::{
    AggregationRule, ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::authz::rbac::GROUP;
pub use crate::authz::rbac::Rule;

/// Read verbs.
pub const READ: &[&str] = &["get", "list", "watch"];
/// Write verbs.
pub const WRITE: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];
/// Read and write verbs.
pub const READ_WRITE: &[&str] = &crate::authz::rbac::rule::COMMON_VERBS;

/// The core API group ("").
pub const CORE: &str = "";
/// The `apps` API group.
pub const APPS: &str = "apps";
/// The `batch` API group.
pub const BATCH: &str = "batch";
/// The `extensions` API group (rules still name it, as upstream's).
pub const EXTENSIONS: &str = "extensions";
/// The `policy` API group.
pub const POLICY: &str = "policy";
/// The `networking.k8s.io` API group.
pub const NETWORKING: &str = "networking.k8s.io";
/// The `autoscaling` API group.
pub const AUTOSCALING: &str = "autoscaling";
/// The `storage.k8s.io` API group.
pub const STORAGE: &str = "storage.k8s.io";
/// The `discovery.k8s.io` API group.
pub const DISCOVERY: &str = "discovery.k8s.io";
/// The `events.k8s.io` API group.
pub const EVENTS: &str = "events.k8s.io";
/// The `coordination.k8s.io` API group.
pub const COORDINATION: &str = "coordination.k8s.io";
/// The `authentication.k8s.io` API group.
pub const AUTHENTICATION: &str = "authentication.k8s.io";
/// The `authorization.k8s.io` API group.
pub const AUTHORIZATION: &str = "authorization.k8s.io";
/// The `certificates.k8s.io` API group.
pub const CERTIFICATES: &str = "certificates.k8s.io";
/// The `node.k8s.io` API group.
pub const NODE: &str = "node.k8s.io";
/// The `rbac.authorization.k8s.io` API group.
pub const RBAC: &str = GROUP;

/// The annotation that lets the server bring an object back to its
/// default at start; `"false"` leaves the object as the admin made it.
pub const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";
/// The label every default policy object carries.
pub const BOOTSTRAPPING: (&str, &str) = ("kubernetes.io/bootstrapping", "rbac-defaults");

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// A rule allowing `verbs`, completed with [`RuleBuilder`].
pub fn rule(verbs: &[&str]) -> Rule {
    Rule {
        verbs: strings(verbs),
        ..Default::default()
    }
}

/// Declares [`RuleBuilder`] and implements it for [`Rule`] from a table of
/// methods, each setting one list field of the rule.
macro_rules! rule_builder {
    ($($(#[$doc:meta])* $method:ident => $field:ident;)*) => {
        /// Builder methods for [`rule`].
        pub trait RuleBuilder {
            $($(#[$doc])* fn $method(self, values: &[&str]) -> Self;)*
        }

        impl RuleBuilder for Rule {
            $(fn $method(mut self, values: &[&str]) -> Self {
                self.$field = strings(values);
                self
            })*
        }
    };
}

rule_builder! {
    /// The rule applies to these API groups.
    groups => api_groups;
    /// The rule applies to these resources.
    resources => resources;
    /// The rule applies to these objects only.
    names => resource_names;
    /// The rule applies to these non-resource paths.
    urls => non_resource_urls;
}

/// A rule allowing `verbs` on `resources` of the API `groups`: the shape
/// of nearly every default rule, as one call so that a role's rule list
/// reads as a table, a rule a line.
pub fn allow(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Rule {
    rule(verbs).groups(groups).resources(resources)
}

/// The three rules a workload controller holds on the kind it owns, as
/// upstream grants each of them: `verbs` on the objects, update and patch
/// on their status, and update on their finalizers (to set
/// `blockOwnerDeletion` on what it creates).
pub fn owned(verbs: &[&str], groups: &[&str], kind: &str) -> Vec<Rule> {
    let status = format!("{kind}/status");
    let finalizers = format!("{kind}/finalizers");
    vec![
        allow(verbs, groups, &[kind]),
        allow(&["update", "patch"], groups, &[&status]),
        allow(&["update"], groups, &[&finalizers]),
    ]
}

/// Upstream's rule for components that record events (both APIs).
pub fn events_rule() -> Rule {
    allow(&["create", "update", "patch"], &[CORE, EVENTS], &["events"])
}

/// A default Role or ClusterRole.
#[derive(Debug, Clone)]
pub struct RoleSpec {
    /// The role's name.
    pub name: String,
    /// `Some` for a Role.
    pub namespace: Option<&'static str>,
    /// Labels besides [`BOOTSTRAPPING`] (the aggregation labels).
    pub labels: Vec<(&'static str, &'static str)>,
    /// What the role allows.
    pub rules: Vec<Rule>,
    /// For an aggregated ClusterRole: the label (`key: "true"`) whose
    /// roles it gathers.
    pub aggregates: Option<&'static str>,
}

impl RoleSpec {
    /// A ClusterRole.
    pub fn cluster(name: impl Into<String>, rules: Vec<Rule>) -> Self {
        Self {
            name: name.into(),
            namespace: None,
            labels: Vec::new(),
            rules,
            aggregates: None,
        }
    }

    /// A Role in `namespace`.
    pub fn namespaced(namespace: &'static str, name: impl Into<String>, rules: Vec<Rule>) -> Self {
        Self {
            namespace: Some(namespace),
            ..Self::cluster(name, rules)
        }
    }

    /// Adds the aggregation label `key: "true"`, so that the ClusterRole aggregating `key` gathers this one's rules.
    pub fn labelled(mut self, key: &'static str) -> Self {
        self.labels.push((key, "true"));
        self
    }

    /// Makes this an aggregated ClusterRole gathering the roles labelled `key: "true"`.
    pub fn aggregating(mut self, key: &'static str) -> Self {
        self.aggregates = Some(key);
        self
    }

    fn metadata(&self) -> ObjectMeta {
        let mut labels = skiff_common::labels::from_pairs(&self.labels);
        labels.insert(BOOTSTRAPPING.0.into(), BOOTSTRAPPING.1.into());
        ObjectMeta {
            name: Some(self.name.clone()),
            namespace: self.namespace.map(String::from),
            labels: Some(labels),
            annotations: Some([(AUTOUPDATE.to_string(), "true".to_string())].into()),
            ..Default::default()
        }
    }

    fn policy_rules(&self) -> Option<Vec<PolicyRule>> {
        Some(self.rules.iter().map(PolicyRule::from).collect())
    }

    /// The ClusterRole object, with the bootstrapping label and the autoupdate annotation.
    pub fn cluster_role(&self) -> ClusterRole {
        ClusterRole {
            metadata: self.metadata(),
            rules: self.policy_rules(),
            aggregation_rule: self.aggregates.map(|key| AggregationRule {
                cluster_role_selectors: Some(vec![LabelSelector {
                    match_labels: Some([(key.to_string(), "true".to_string())].into()),
                    match_expressions: None,
                }]),
            }),
        }
    }

    /// The Role object, with the bootstrapping label and the autoupdate annotation.
    pub fn role(&self) -> Role {
        Role {
            metadata: self.metadata(),
            rules: self.policy_rules(),
        }
    }
}

/// A default RoleBinding or ClusterRoleBinding.
#[derive(Debug, Clone)]
pub struct BindingSpec {
    /// The binding's name.
    pub name: String,
    /// `Some` for a RoleBinding.
    pub namespace: Option<&'static str>,
    /// `ClusterRole` or `Role`.
    pub role_kind: &'static str,
    /// The name of the role bound.
    pub role: String,
    /// Whom the binding grants the role to.
    pub subjects: Vec<Subject>,
}

impl BindingSpec {
    /// A ClusterRoleBinding of the ClusterRole of the same name.
    pub fn cluster(name: impl Into<String>, subjects: Vec<Subject>) -> Self {
        let name = name.into();
        Self {
            role: name.clone(),
            name,
            namespace: None,
            role_kind: "ClusterRole",
            subjects,
        }
    }

    /// A RoleBinding in `namespace` of the Role of the same name.
    pub fn namespaced(
        namespace: &'static str,
        name: impl Into<String>,
        subjects: Vec<Subject>,
    ) -> Self {
        Self {
            namespace: Some(namespace),
            role_kind: "Role",
            ..Self::cluster(name, subjects)
        }
    }

    /// The same binding naming another role.
    pub fn of(mut self, role: &str) -> Self {
        self.role = role.to_string();
        self
    }

    fn metadata(&self) -> ObjectMeta {
        ObjectMeta {
            name: Some(self.name.clone()),
            namespace: self.namespace.map(String::from),
            labels: Some([(BOOTSTRAPPING.0.to_string(), BOOTSTRAPPING.1.to_string())].into()),
            annotations: Some([(AUTOUPDATE.to_string(), "true".to_string())].into()),
            ..Default::default()
        }
    }

    /// The reference to the bound role.
    pub fn role_ref(&self) -> RoleRef {
        RoleRef {
            api_group: GROUP.into(),
            kind: self.role_kind.into(),
            name: self.role.clone(),
        }
    }

    /// The ClusterRoleBinding object, with the bootstrapping label and the autoupdate annotation.
    pub fn cluster_role_binding(&self) -> ClusterRoleBinding {
        ClusterRoleBinding {
            metadata: self.metadata(),
            role_ref: self.role_ref(),
            subjects: Some(self.subjects.clone()),
        }
    }

    /// The RoleBinding object, with the bootstrapping label and the autoupdate annotation.
    pub fn role_binding(&self) -> RoleBinding {
        RoleBinding {
            metadata: self.metadata(),
            role_ref: self.role_ref(),
            subjects: Some(self.subjects.clone()),
        }
    }
}

/// A subject naming a user.
pub fn user(name: &str) -> Subject {
    Subject {
        api_group: Some(GROUP.into()),
        kind: "User".into(),
        name: name.into(),
        namespace: None,
    }
}

/// A subject naming a group.
pub fn group(name: &str) -> Subject {
    Subject {
        api_group: Some(GROUP.into()),
        kind: "Group".into(),
        name: name.into(),
        namespace: None,
    }
}

/// A subject naming a service account.
pub fn service_account(namespace: &str, name: &str) -> Subject {
    Subject {
        api_group: None,
        kind: "ServiceAccount".into(),
        name: name.into(),
        namespace: Some(namespace.into()),
    }
}
