//! The RBAC policy at one moment: every Role's and ClusterRole's rules and
//! every binding, indexed by subject (user name or group), built from
//! snapshots of the four watch caches; plus the rules each caller resolved
//! to, so that a caller's bindings are looked up once per policy change,
//! not once per request.
//!
//! A policy is immutable once built (the per-caller memo aside); the
//! authorizer swaps in a new one when a cache has moved. Nothing here reads
//! the store or waits.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef, Subject};
use parking_lot::RwLock;
use serde::Deserialize;
use serde_json::Value;
use skiff_store::Revision;

use super::rule::{Compiled, Rule};
use crate::authn::UserInfo;
use crate::object::meta_str;
use crate::watch_cache::{Cached, Snapshot};

/// More distinct callers than this and the memo starts over (it only
/// saves work; a caller that falls out resolves again).
const MEMO_LIMIT: usize = 8192;

/// The rules of one role, shared by every caller bound to it.
pub(crate) type Rules = Arc<[Compiled]>;

/// Which role a binding grants, and where.
#[derive(Debug, Clone)]
struct Grant {
    /// The binding's namespace; `None` for a ClusterRoleBinding.
    namespace: Option<String>,
    role: RoleRef,
    /// Upstream's reason when this grant allows a request: `RBAC: allowed
    /// by ClusterRoleBinding "b" of ClusterRole "r" to User "u"`, built
    /// once per binding subject so the hot path only clones it.
    source: Arc<str>,
}

/// What one caller may do: the rules of the roles bound to it, cluster-wide
/// and per namespace, with the binding problems found on the way (a
/// binding to a role that does not exist), which upstream reports as the
/// reason of a refusal.
#[derive(Debug, Default)]
pub(crate) struct Resolved {
    pub cluster: Vec<Rules>,
    /// Why each of `cluster` applies (same index): the allow reason.
    pub cluster_sources: Vec<Arc<str>>,
    pub cluster_errors: Vec<String>,
    pub namespaces: HashMap<String, Scoped>,
}

/// The part of [`Resolved`] granted by RoleBindings of one namespace.
#[derive(Debug, Default)]
pub(crate) struct Scoped {
    pub rules: Vec<Rules>,
    /// Why each of `rules` applies (same index): the allow reason.
    pub sources: Vec<Arc<str>>,
    pub errors: Vec<String>,
}

impl Resolved {
    /// What RoleBindings grant in `namespace` (none for the empty one).
    pub(super) fn scoped(&self, namespace: &str) -> Option<&Scoped> {
        if namespace.is_empty() {
            return None;
        }
        self.namespaces.get(namespace)
    }

    /// The roles in force in `namespace` (cluster-wide ones first), and the
    /// problems met resolving them.
    pub(super) fn in_namespace(&self, namespace: &str) -> (Vec<&Rules>, Vec<&str>) {
        let mut rules: Vec<&Rules> = self.cluster.iter().collect();
        let mut errors: Vec<&str> = self.cluster_errors.iter().map(String::as_str).collect();
        if let Some(scoped) = self.scoped(namespace) {
            rules.extend(scoped.rules.iter());
            errors.extend(scoped.errors.iter().map(String::as_str));
        }
        (rules, errors)
    }
}

/// The revisions of the four caches a policy was built from, in the order
/// roles, cluster roles, role bindings, cluster role bindings.
pub(crate) type Revisions = [Revision; 4];

/// The four snapshots a policy is built from.
pub(crate) struct Inputs {
    pub roles: Snapshot,
    pub cluster_roles: Snapshot,
    pub role_bindings: Snapshot,
    pub cluster_role_bindings: Snapshot,
}

pub(crate) struct Policy {
    pub revisions: Revisions,
    roles: HashMap<(String, String), Rules>,
    cluster_roles: HashMap<String, Rules>,
    by_user: HashMap<String, Vec<Grant>>,
    by_group: HashMap<String, Vec<Grant>>,
    /// Callers already resolved, by a hash of (name, groups); the entries
    /// keep name and groups to tell colliding callers apart.
    memo: RwLock<HashMap<u64, Vec<Memoised>>>,
    hasher: std::collections::hash_map::RandomState,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Caller {
    name: String,
    groups: Vec<String>,
}

/// One caller and what it resolved to.
type Memoised = (Caller, Arc<Resolved>);

#[derive(Deserialize)]
struct RuleHolder {
    #[serde(default)]
    rules: Option<Vec<PolicyRule>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BindingFields {
    #[serde(default)]
    subjects: Option<Vec<Subject>>,
    role_ref: RoleRef,
}

fn rules_of(object: &Value) -> Rules {
    RuleHolder::deserialize(object)
        .ok()
        .and_then(|h| h.rules)
        .unwrap_or_default()
        .iter()
        .map(|rule| Compiled::from(Rule::from(rule)))
        .collect()
}

impl Policy {
    /// An empty policy that matches no revisions (so the first request
    /// builds a real one).
    pub(super) fn empty() -> Self {
        Self {
            revisions: [Revision::MAX; 4],
            roles: HashMap::new(),
            cluster_roles: HashMap::new(),
            by_user: HashMap::new(),
            by_group: HashMap::new(),
            memo: RwLock::new(HashMap::new()),
            hasher: Default::default(),
        }
    }

    /// Indexes the four snapshots.
    pub(super) fn build(inputs: &Inputs) -> Self {
        let mut policy = Self::empty();
        policy.revisions = [
            inputs.roles.revision,
            inputs.cluster_roles.revision,
            inputs.role_bindings.revision,
            inputs.cluster_role_bindings.revision,
        ];
        for object in inputs.roles.objects.values().map(Cached::value) {
            let object = &*object;
            if let (Some(ns), Some(name)) =
                (meta_str(object, "namespace"), meta_str(object, "name"))
            {
                policy
                    .roles
                    .insert((ns.to_string(), name.to_string()), rules_of(object));
            }
        }
        for object in inputs.cluster_roles.objects.values().map(Cached::value) {
            let object = &*object;
            if let Some(name) = meta_str(object, "name") {
                policy
                    .cluster_roles
                    .insert(name.to_string(), rules_of(object));
            }
        }
        for object in inputs.role_bindings.objects.values().map(Cached::value) {
            let object = &*object;
            if let Some(ns) = meta_str(object, "namespace") {
                policy.index_binding(object, Some(ns));
            }
        }
        for object in inputs
            .cluster_role_bindings
            .objects
            .values()
            .map(Cached::value)
        {
            let object = &*object;
            policy.index_binding(object, None);
        }
        policy
    }

    fn index_binding(&mut self, object: &Value, namespace: Option<&str>) {
        let Ok(binding) = BindingFields::deserialize(object) else {
            return;
        };
        let binding_name = meta_str(object, "name").unwrap_or("");
        for subject in binding.subjects.unwrap_or_default() {
            let grant = Grant {
                namespace: namespace.map(String::from),
                source: allow_reason(binding_name, namespace, &binding.role_ref, &subject).into(),
                role: binding.role_ref.clone(),
            };
            match subject.kind.as_str() {
                "User" => self.by_user.entry(subject.name).or_default().push(grant),
                "Group" => self.by_group.entry(subject.name).or_default().push(grant),
                "ServiceAccount" => {
                    // In a RoleBinding an account without a namespace is
                    // one of the binding's own namespace, as upstream.
                    let ns = subject
                        .namespace
                        .filter(|n| !n.is_empty())
                        .or_else(|| namespace.map(String::from));
                    if let Some(ns) = ns {
                        self.by_user
                            .entry(crate::tokens::user_name(&ns, &subject.name))
                            .or_default()
                            .push(grant);
                    }
                }
                _ => {}
            }
        }
    }

    /// The rules a role reference grants in `namespace` (a Role is looked
    /// up there), or upstream's "not found" message.
    pub(super) fn role_rules(&self, role: &RoleRef, namespace: &str) -> Result<Rules, String> {
        match role.kind.as_str() {
            "ClusterRole" => self.cluster_roles.get(&role.name).cloned().ok_or_else(|| {
                format!(
                    "clusterrole.rbac.authorization.k8s.io {} not found",
                    crate::go_format::go_quote(&role.name)
                )
            }),
            "Role" => self
                .roles
                .get(&(namespace.to_string(), role.name.clone()))
                .cloned()
                .ok_or_else(|| {
                    format!(
                        "role.rbac.authorization.k8s.io {} not found",
                        crate::go_format::go_quote(&role.name)
                    )
                }),
            other => Err(format!("unknown role kind {other:?}")),
        }
    }

    /// What `user` may do, resolved once per policy.
    pub(super) fn resolve(&self, user: &UserInfo) -> Arc<Resolved> {
        let mut hasher = self.hasher.build_hasher();
        user.name.hash(&mut hasher);
        user.groups.hash(&mut hasher);
        let key = hasher.finish();
        let same = |caller: &Caller| caller.name == user.name && caller.groups == user.groups;
        if let Some(found) = self
            .memo
            .read()
            .get(&key)
            .and_then(|entries| entries.iter().find(|(c, _)| same(c)))
        {
            return found.1.clone();
        }
        let resolved = Arc::new(self.resolve_now(user));
        let mut memo = self.memo.write();
        if memo.len() >= MEMO_LIMIT {
            memo.clear();
        }
        let entries = memo.entry(key).or_default();
        if !entries.iter().any(|(c, _)| same(c)) {
            entries.push((
                Caller {
                    name: user.name.clone(),
                    groups: user.groups.clone(),
                },
                resolved.clone(),
            ));
        }
        resolved
    }

    fn resolve_now(&self, user: &UserInfo) -> Resolved {
        let mut resolved = Resolved::default();
        let grants = self.by_user.get(&user.name).into_iter().chain(
            user.groups
                .iter()
                .filter_map(|group| self.by_group.get(group)),
        );
        for grant in grants.flatten() {
            let namespace = grant.namespace.as_deref().unwrap_or("");
            let found = self.role_rules(&grant.role, namespace);
            let (rules, sources, errors) = match &grant.namespace {
                None => (
                    &mut resolved.cluster,
                    &mut resolved.cluster_sources,
                    &mut resolved.cluster_errors,
                ),
                Some(ns) => {
                    let scoped = resolved.namespaces.entry(ns.clone()).or_default();
                    (&mut scoped.rules, &mut scoped.sources, &mut scoped.errors)
                }
            };
            match found {
                // A role bound twice is scanned once (the first binding
                // found is the one an allow names).
                Ok(found) if !rules.iter().any(|r| Arc::ptr_eq(r, &found)) => {
                    rules.push(found);
                    sources.push(grant.source.clone());
                }
                Ok(_) => {}
                Err(error) => errors.push(error),
            }
        }
        resolved
    }
}

/// Upstream's words for the binding subject that allowed a request:
/// `RBAC: allowed by RoleBinding "b/ns" of Role "r" to ServiceAccount
/// "sa/ns"` (a ClusterRoleBinding is named without a namespace; a service
/// account without one is of the binding's namespace).
fn allow_reason(
    binding: &str,
    namespace: Option<&str>,
    role: &RoleRef,
    subject: &Subject,
) -> String {
    use crate::go_format::go_quote;
    let binding = match namespace {
        Some(ns) => format!("RoleBinding {}", go_quote(&format!("{binding}/{ns}"))),
        None => format!("ClusterRoleBinding {}", go_quote(binding)),
    };
    let who = match subject.kind.as_str() {
        "ServiceAccount" => {
            let ns = subject
                .namespace
                .as_deref()
                .filter(|n| !n.is_empty())
                .or(namespace)
                .unwrap_or("");
            go_quote(&format!("{}/{ns}", subject.name))
        }
        _ => go_quote(&subject.name),
    };
    format!(
        "RBAC: allowed by {binding} of {} {} to {} {who}",
        role.kind,
        go_quote(&role.name),
        subject.kind
    )
}
