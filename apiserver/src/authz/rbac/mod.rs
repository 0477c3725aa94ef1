//! The RBAC authorizer: Roles, ClusterRoles, RoleBindings and
//! ClusterRoleBindings (`rbac.authorization.k8s.io/v1`) decide what a
//! caller may do, with upstream's semantics. It reads the API server's
//! own watch caches of those four resources — never the store — and
//! allows a request when a rule of a role bound to the caller allows it
//! (ClusterRoleBindings anywhere, RoleBindings in their namespace);
//! otherwise it has no opinion, and the chain refuses.
//!
//! The hot path: one revision check per cache, one hash lookup of the
//! caller's resolved rules, and a scan of those few rules. The policy
//! (roles and bindings indexed by subject) is rebuilt only when one of the
//! caches has moved, and each caller's bindings are resolved once per
//! policy.

mod policy;
pub mod rule;

use std::sync::Arc;

use k8s_openapi::api::authorization::v1::{NonResourceRule, ResourceRule};
use k8s_openapi::api::rbac::v1::RoleRef;
use parking_lot::{Mutex, RwLock};

use self::policy::{Inputs, Policy, Revisions};
pub use self::rule::Rule;
use super::{Attributes, Authorizer, Decision, RulesReview};
use crate::authn::UserInfo;
use crate::status::aggregate;
use crate::watch_cache::WatchCache;

/// The API group of the RBAC resources.
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// The four watch caches RBAC reads.
#[derive(Clone)]
pub(crate) struct Sources {
    pub roles: Arc<WatchCache>,
    pub cluster_roles: Arc<WatchCache>,
    pub role_bindings: Arc<WatchCache>,
    pub cluster_role_bindings: Arc<WatchCache>,
}

impl Sources {
    fn revisions(&self) -> Revisions {
        [
            self.roles.revision(),
            self.cluster_roles.revision(),
            self.role_bindings.revision(),
            self.cluster_role_bindings.revision(),
        ]
    }

    fn snapshots(&self) -> Inputs {
        Inputs {
            roles: self.roles.snapshot(),
            cluster_roles: self.cluster_roles.snapshot(),
            role_bindings: self.role_bindings.snapshot(),
            cluster_role_bindings: self.cluster_role_bindings.snapshot(),
        }
    }
}

/// The RBAC link of the authorizer chain, and the rule resolver the
/// escalation checks use.
pub struct Rbac {
    sources: Sources,
    policy: RwLock<Arc<Policy>>,
    /// Held while a new policy is built, so concurrent requests that see
    /// the same change build it once.
    rebuilding: Mutex<()>,
}

impl std::fmt::Debug for Rbac {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rbac")
            .field("revisions", &self.policy.read().revisions)
            .finish()
    }
}

impl Rbac {
    pub(crate) fn new(sources: Sources) -> Self {
        Self {
            sources,
            policy: RwLock::new(Arc::new(Policy::empty())),
            rebuilding: Mutex::new(()),
        }
    }

    /// The policy as of the caches' current revisions.
    fn current(&self) -> Arc<Policy> {
        let wanted = self.sources.revisions();
        {
            let policy = self.policy.read();
            if policy.revisions == wanted {
                return policy.clone();
            }
        }
        let _building = self.rebuilding.lock();
        {
            // Someone else may have built it while this thread waited.
            let policy = self.policy.read();
            if policy.revisions == self.sources.revisions() {
                return policy.clone();
            }
        }
        let fresh = Arc::new(Policy::build(&self.sources.snapshots()));
        *self.policy.write() = fresh.clone();
        fresh
    }

    /// Every rule `user` holds in `namespace` (cluster-wide ones included;
    /// an empty namespace means cluster-wide only), and the problems met
    /// resolving its bindings (upstream's "resolution errors").
    pub fn rules(&self, user: &UserInfo, namespace: &str) -> (Vec<Rule>, Vec<String>) {
        let resolved = self.current().resolve(user);
        let (roles, errors) = resolved.in_namespace(namespace);
        (
            roles
                .iter()
                .flat_map(|r| r.iter().map(|c| c.rule.clone()))
                .collect(),
            errors.into_iter().map(String::from).collect(),
        )
    }

    /// The rules `role` grants to a binding in `namespace` (empty for a
    /// ClusterRoleBinding), or upstream's "not found" text.
    pub fn role_rules(&self, role: &RoleRef, namespace: &str) -> Result<Vec<Rule>, String> {
        self.current()
            .role_rules(role, namespace)
            .map(|rules| rules.iter().map(|c| c.rule.clone()).collect())
    }
}

impl Authorizer for Rbac {
    fn authorize(&self, attributes: &Attributes) -> Decision {
        let namespace = attributes.resource().map_or("", |r| r.namespace.as_str());
        let resolved = self.current().resolve(&attributes.user);
        // The hot path allocates nothing: scan the caller's cluster-wide
        // roles, then its roles in the request's namespace.
        let bit = rule::Compiled::verb_bit(&attributes.verb);
        let allows = |rules: &policy::Rules| {
            rules
                .iter()
                .any(|rule| rule.allows(&attributes.verb, bit, &attributes.request))
        };
        if let Some(at) = resolved.cluster.iter().position(allows) {
            return Decision::Allow(resolved.cluster_sources[at].to_string());
        }
        if let Some(scoped) = resolved.scoped(namespace)
            && let Some(at) = scoped.rules.iter().position(allows)
        {
            return Decision::Allow(scoped.sources[at].to_string());
        }
        let (_, errors) = resolved.in_namespace(namespace);
        Decision::NoOpinion(resolution_reason(&errors))
    }

    fn rules_for(&self, user: &UserInfo, namespace: &str) -> RulesReview {
        let (rules, errors) = self.rules(user, namespace);
        let mut review = RulesReview::default();
        for rule in &rules {
            if !rule.resources.is_empty() {
                review.resource_rules.push(ResourceRule {
                    verbs: rule.verbs.clone(),
                    api_groups: Some(rule.api_groups.clone()),
                    resources: Some(rule.resources.clone()),
                    resource_names: (!rule.resource_names.is_empty())
                        .then(|| rule.resource_names.clone()),
                });
            }
            if !rule.non_resource_urls.is_empty() {
                review.non_resource_rules.push(NonResourceRule {
                    verbs: rule.verbs.clone(),
                    non_resource_urls: Some(rule.non_resource_urls.clone()),
                });
            }
        }
        review.evaluation_error = aggregate(&errors);
        review
    }
}

/// Upstream's reason when RBAC has no opinion: empty, or the binding
/// problems it met (`RBAC: clusterrole.rbac.authorization.k8s.io "x" not
/// found`).
fn resolution_reason(errors: &[&str]) -> String {
    if errors.is_empty() {
        String::new()
    } else {
        format!("RBAC: {}", aggregate(errors))
    }
}

#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;
