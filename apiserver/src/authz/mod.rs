//! Authorization: may this user do this to that? Every request that reaches
//! the router — from the network or from an in-process component — is
//! described as [`Attributes`] (upstream's RequestInfo) and put to the
//! [`Chain`]: `system:masters`, then the Node authorizer, then RBAC; the
//! first that allows or denies decides, and a request nobody allows is
//! refused with upstream's 403 wording ([`forbidden`]).
//!
//! Authorizers answer from memory (the watch caches and indexes built on
//! them); they must never read the store or block on I/O, because they sit
//! in front of every request.

pub mod bootstrap;
pub mod impersonation;
pub(crate) mod middleware;
pub mod node;
pub mod rbac;
pub mod request;

use std::sync::Arc;

use k8s_openapi::api::authorization::v1::{NonResourceRule, ResourceRule};

use crate::authn::UserInfo;
use crate::status::ApiError;

/// The group whose members may do anything, checked before any policy.
pub const MASTERS_GROUP: &str = "system:masters";

/// What a request asks to do, as upstream's authorizer.Attributes. Empty
/// strings mean "not given" (a cluster-scoped request has no namespace, a
/// collection request no name), as in SubjectAccessReview.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    /// Who asks.
    pub user: UserInfo,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`, or a special verb (`impersonate`, `bind`,
    /// `escalate`, `approve`, …); for non-resource paths the lower-cased
    /// HTTP method (`get`, `post`, …).
    pub verb: String,
    /// What the request is aimed at.
    pub request: RequestKind,
}

/// A request aimed at an API resource, or at a plain path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestKind {
    /// An API resource (`/api/...`, `/apis/...`).
    Resource(ResourceAttributes),
    /// `/healthz`, `/version`, `/api`, `/openapi/v2`, …
    NonResource {
        /// The request's path.
        path: String,
    },
}

/// The resource part of [`Attributes`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceAttributes {
    /// The API group; empty for the core group.
    pub group: String,
    /// The API version.
    pub version: String,
    /// The resource, e.g. `pods`.
    pub resource: String,
    /// The subresource, e.g. `status`.
    pub subresource: String,
    /// The namespace; empty for cluster-scoped requests.
    pub namespace: String,
    /// The object's name; empty for collection requests.
    pub name: String,
}

impl ResourceAttributes {
    /// `resource/subresource`, or the resource alone: how rules and
    /// messages name what a request is aimed at.
    pub fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

#[cfg(test)]
impl RequestKind {
    /// A `v1` resource request, for tests: `resource` may end in
    /// `/<subresource>`.
    pub(crate) fn v1(group: &str, resource: &str, namespace: &str, name: &str) -> Self {
        let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
        RequestKind::Resource(ResourceAttributes {
            group: group.into(),
            version: "v1".into(),
            resource: resource.into(),
            subresource: subresource.into(),
            namespace: namespace.into(),
            name: name.into(),
        })
    }
}

impl Attributes {
    /// The resource attributes, when this is a resource request.
    pub fn resource(&self) -> Option<&ResourceAttributes> {
        match &self.request {
            RequestKind::Resource(r) => Some(r),
            RequestKind::NonResource { .. } => None,
        }
    }
}

/// One authorizer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed; the text says why (upstream's reason: `RBAC: allowed by
    /// …`, or empty), for the audit log and SubjectAccessReview.
    Allow(String),
    /// Refused outright; later authorizers are not asked. The text is the
    /// reason appended to the 403 message.
    Deny(String),
    /// Not this authorizer's call; the text (possibly empty) says why, for
    /// the 403 message when nobody allows.
    NoOpinion(String),
}

/// What a user may do in a namespace, for SelfSubjectRulesReview.
#[derive(Debug, Clone, Default)]
pub struct RulesReview {
    /// What the user may do to resources.
    pub resource_rules: Vec<ResourceRule>,
    /// What the user may do on non-resource paths.
    pub non_resource_rules: Vec<NonResourceRule>,
    /// Some rules could not be listed (another authorizer decides too).
    pub incomplete: bool,
    /// Why rules could not be listed; empty when all were.
    pub evaluation_error: String,
}

/// One link of the chain.
pub trait Authorizer: Send + Sync {
    /// Decides one request; must answer from memory.
    fn authorize(&self, attributes: &Attributes) -> Decision;

    /// The rules `user` holds in `namespace` (empty: cluster-wide only),
    /// as far as this authorizer can list them.
    fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> RulesReview {
        RulesReview::default()
    }
}

/// Allows members of `system:masters` everything. It lists no rules for
/// SelfSubjectRulesReview, as upstream's privileged-group authorizer: a
/// master's rules come from the bootstrap `cluster-admin` binding.
#[derive(Debug, Default)]
pub struct Masters;

impl Authorizer for Masters {
    fn authorize(&self, attributes: &Attributes) -> Decision {
        if attributes.user.groups.iter().any(|g| g == MASTERS_GROUP) {
            // Upstream's privileged-group authorizer gives no reason.
            Decision::Allow(String::new())
        } else {
            Decision::NoOpinion(String::new())
        }
    }
}

/// Authorizers asked in order; the first to allow or deny decides.
#[derive(Clone)]
pub struct Chain {
    links: Vec<Arc<dyn Authorizer>>,
}

impl Chain {
    /// A chain asking `links` in order; the first to decide wins.
    pub fn new(links: Vec<Arc<dyn Authorizer>>) -> Self {
        Self { links }
    }

    /// The chain's decision: the first link's Allow or Deny, else
    /// NoOpinion with every link's reason joined, as upstream's union
    /// authorizer.
    pub fn authorize(&self, attributes: &Attributes) -> Decision {
        let mut reasons: Vec<String> = Vec::new();
        for link in &self.links {
            match link.authorize(attributes) {
                Decision::Allow(reason) => return Decision::Allow(reason),
                Decision::Deny(reason) => {
                    if !reason.is_empty() {
                        reasons.push(reason);
                    }
                    return Decision::Deny(reasons.join(", "));
                }
                Decision::NoOpinion(reason) => {
                    if !reason.is_empty() {
                        reasons.push(reason);
                    }
                }
            }
        }
        Decision::NoOpinion(reasons.join(", "))
    }

    /// Allow, or the reason for refusing (possibly empty).
    pub fn decide(&self, attributes: &Attributes) -> Result<(), String> {
        self.decide_why(attributes).map(drop)
    }

    /// The reason for allowing (possibly empty), or for refusing.
    pub fn decide_why(&self, attributes: &Attributes) -> Result<String, String> {
        match self.authorize(attributes) {
            Decision::Allow(reason) => Ok(reason),
            Decision::Deny(reason) | Decision::NoOpinion(reason) => Err(reason),
        }
    }

    /// Allows or fails with upstream's 403.
    pub fn check(&self, attributes: &Attributes) -> Result<(), ApiError> {
        self.decide(attributes)
            .map_err(|reason| forbidden(attributes, &reason))
    }

    /// Every link's rules for `user` in `namespace`, merged.
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> RulesReview {
        let mut merged = RulesReview::default();
        for link in &self.links {
            let part = link.rules_for(user, namespace);
            merged.resource_rules.extend(part.resource_rules);
            merged.non_resource_rules.extend(part.non_resource_rules);
            merged.incomplete |= part.incomplete;
            if !part.evaluation_error.is_empty() {
                if !merged.evaluation_error.is_empty() {
                    merged.evaluation_error.push_str(", ");
                }
                merged.evaluation_error.push_str(&part.evaluation_error);
            }
        }
        merged
    }
}

/// Upstream's refusal: `secrets is forbidden: User "u" cannot list resource
/// "secrets" in API group "" in the namespace "ns"`, with the name quoted
/// after the resource when the request named an object, and `: <reason>`
/// appended when an authorizer gave one.
pub fn forbidden(attributes: &Attributes, reason: &str) -> ApiError {
    let user = &attributes.user.name;
    let verb = &attributes.verb;
    let (message, resource, group, name) = match &attributes.request {
        RequestKind::NonResource { path } => (
            format!("User \"{user}\" cannot {verb} path \"{path}\""),
            String::new(),
            String::new(),
            String::new(),
        ),
        RequestKind::Resource(r) => {
            let resource = r.combined_resource();
            let scope = if r.namespace.is_empty() {
                "at the cluster scope".to_string()
            } else {
                format!("in the namespace \"{}\"", r.namespace)
            };
            let message = format!(
                "User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"{}\" {scope}",
                r.group
            );
            let qualified = if r.group.is_empty() {
                r.resource.clone()
            } else {
                format!("{}.{}", r.resource, r.group)
            };
            (message, qualified, r.group.clone(), r.name.clone())
        }
    };
    let detail = if reason.is_empty() {
        message
    } else {
        format!("{message}: {reason}")
    };
    ApiError::Forbidden {
        resource,
        group,
        name,
        detail,
        causes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(user: UserInfo, verb: &str, r: ResourceAttributes) -> Attributes {
        Attributes {
            user,
            verb: verb.into(),
            request: RequestKind::Resource(r),
        }
    }

    #[test]
    fn forbidden_messages_read_as_upstream() {
        let probe = UserInfo::new("system:serviceaccount:a:probe", Vec::new());
        let cases = [
            (
                "list",
                RequestKind::v1("", "secrets", "", ""),
                "",
                "secrets is forbidden: User \"system:serviceaccount:a:probe\" cannot list resource \"secrets\" in API group \"\" at the cluster scope",
            ),
            (
                "get",
                RequestKind::v1("", "pods/log", "x", "web"),
                "",
                "pods \"web\" is forbidden: User \"system:serviceaccount:a:probe\" cannot get resource \"pods/log\" in API group \"\" in the namespace \"x\"",
            ),
            (
                "get",
                RequestKind::NonResource {
                    path: "/metrics".into(),
                },
                "no",
                "forbidden: User \"system:serviceaccount:a:probe\" cannot get path \"/metrics\": no",
            ),
        ];
        for (verb, request, reason, wanted) in cases {
            let attributes = Attributes {
                user: probe.clone(),
                verb: verb.into(),
                request,
            };
            assert_eq!(forbidden(&attributes, reason).to_string(), wanted);
        }
    }

    #[test]
    fn chain_stops_at_the_first_decision() {
        struct Fixed(Decision);
        impl Authorizer for Fixed {
            fn authorize(&self, _: &Attributes) -> Decision {
                self.0.clone()
            }
        }
        let user = UserInfo::new("u", Vec::new());
        let a = attrs(user, "get", ResourceAttributes::default());
        let chain = Chain::new(vec![
            Arc::new(Masters),
            Arc::new(Fixed(Decision::NoOpinion("first".into()))),
            Arc::new(Fixed(Decision::Deny("second".into()))),
            Arc::new(Fixed(Decision::Allow(String::new()))),
        ]);
        assert_eq!(chain.decide(&a), Err("first, second".to_string()));
        assert_eq!(
            chain.authorize(&a),
            Decision::Deny("first, second".to_string())
        );
        let quiet = Chain::new(vec![
            Arc::new(Masters),
            Arc::new(Fixed(Decision::NoOpinion("nobody".into()))),
        ]);
        assert_eq!(
            quiet.authorize(&a),
            Decision::NoOpinion("nobody".to_string())
        );
        let master = attrs(
            UserInfo::new("m", vec![MASTERS_GROUP.to_string()]),
            "delete",
            ResourceAttributes::default(),
        );
        assert_eq!(chain.decide(&master), Ok(()));
    }
}
