//! Whether a webhook is called for a write, as upstream decides it: one of
//! its rules names the operation, the group/version/resource (with
//! `*`, `resource/subresource` and `*/*`) and the scope; under
//! `matchPolicy: Equivalent` a rule naming another version of the same
//! stored resource matches too, and the hook is then sent the object in
//! that version; the namespace selector is put to the namespace's labels
//! (a Namespace's own, when the object is one) and the object selector to
//! the new or the old object's labels.

use std::sync::Arc;

use serde_json::Value;

use super::Attributes;
use super::source::{Hook, Rule};
use crate::handlers::storage;
use crate::registry::ResourceInfo;
use crate::selectors::LabelSelector;
use crate::server::Inner;
use crate::status::ApiError;

/// A webhook that is to be called, and in which version of the resource.
pub(super) struct Invocation {
    /// The resource as the webhook is told about it (the request's own, or
    /// an equivalent version its rules named).
    pub resource: Arc<ResourceInfo>,
}

/// What a rule is compared with.
struct Request<'a> {
    operation: &'a str,
    group: &'a str,
    version: &'a str,
    resource: &'a str,
    subresource: &'a str,
    namespace: &'a str,
    is_namespace: bool,
}

fn any_is(list: &[String], value: &str) -> bool {
    list.iter().any(|item| item == "*" || item == value)
}

/// Whether one rule covers the request, as upstream's rule matcher.
fn rule_matches(rule: &Rule, request: &Request<'_>) -> bool {
    let resource = rule.resources.iter().any(|entry| {
        let (res, sub) = entry.split_once('/').unwrap_or((entry, ""));
        (res == "*" || res == request.resource) && (sub == "*" || sub == request.subresource)
    });
    let scope = match rule.scope.as_str() {
        "Namespaced" => !request.is_namespace && !request.namespace.is_empty(),
        "Cluster" => request.is_namespace || request.namespace.is_empty(),
        _ => true,
    };
    any_is(&rule.operations, request.operation)
        && any_is(&rule.api_groups, request.group)
        && any_is(&rule.api_versions, request.version)
        && resource
        && scope
}

fn rules_match(hook: &Hook, request: &Request<'_>) -> bool {
    hook.rules.iter().any(|rule| rule_matches(rule, request))
}

/// The resource the hook's rules select the request by: the request's
/// own, else (matchPolicy Equivalent) another version of the same stored
/// resource.
fn matching_resource(
    inner: &Inner,
    hook: &Hook,
    attributes: &Attributes<'_>,
    namespace: &str,
) -> Option<Arc<ResourceInfo>> {
    let info = attributes.request.info;
    let subresource = attributes
        .request
        .subresource
        .map(|s| s.name())
        .unwrap_or("");
    let request = |candidate: &ResourceInfo| -> bool {
        rules_match(
            hook,
            &Request {
                operation: attributes.request.operation.name(),
                group: candidate.group,
                version: candidate.version,
                resource: candidate.resource,
                subresource,
                namespace,
                is_namespace: info.is(crate::kinds::Namespaces::RESOURCE),
            },
        )
    };
    let registry = inner.registry.current();
    if request(info) {
        return registry
            .get(info.group, info.version, info.resource)
            .or_else(|| Some(Arc::new(info.clone())));
    }
    if hook.exact {
        return None;
    }
    registry
        .resources()
        .iter()
        .filter(|other| {
            other.storage_prefix == info.storage_prefix
                && other.review.is_none()
                && (other.group, other.version) != (info.group, info.version)
        })
        .find(|other| request(other))
        .cloned()
}

/// Whether the namespace selector lets the request through.
async fn namespace_selected(
    inner: &Inner,
    selector: &LabelSelector,
    attributes: &Attributes<'_>,
    object: Option<&Value>,
    namespace: &str,
) -> Result<bool, ApiError> {
    let is_namespace = attributes
        .request
        .info
        .is(crate::kinds::Namespaces::RESOURCE);
    if selector.is_empty() || (namespace.is_empty() && !is_namespace) {
        return Ok(true);
    }
    // A namespace being created or updated is judged by its new labels.
    if is_namespace && let Some(object) = object {
        return Ok(selector.matches(object));
    }
    let ns_info = inner
        .registry
        .get("", "v1", "namespaces")
        .ok_or_else(|| ApiError::Internal("namespaces are not served".into()))?;
    let stored = storage::lookup(inner, &ns_info, &ns_info.key(None, namespace)).await?;
    let namespace_object = match &stored {
        Some(ns) => ns,
        None => match attributes.request.old.filter(|_| is_namespace) {
            Some(old) => old,
            None => {
                return Err(ApiError::Internal(format!(
                    "namespace \"{namespace}\" not found"
                )));
            }
        },
    };
    Ok(selector.matches(namespace_object))
}

/// Whether the object selector picks the new or the old object.
fn object_selected(selector: &LabelSelector, object: Option<&Value>, old: Option<&Value>) -> bool {
    selector.is_empty()
        || [object, old]
            .into_iter()
            .flatten()
            .any(|o| selector.matches(o))
}

/// What a webhook whose selectors cannot be read answers.
pub(super) const BAD_SELECTOR: &str = "the webhook's selector could not be parsed";

/// Whether `hook` is called for this write (and in which version), or
/// the error its selectors gave (a call error, subject to the failure
/// policy, when a selector does not parse).
pub(super) async fn should_call(
    inner: &Inner,
    hook: &Hook,
    attributes: &Attributes<'_>,
    object: Option<&Value>,
) -> Result<Option<Invocation>, MatchError> {
    let namespace = attributes.namespace(object);
    let Some(resource) = matching_resource(inner, hook, attributes, &namespace) else {
        return Ok(None);
    };
    let (Some(namespaces), Some(objects)) = (&hook.namespace_selector, &hook.object_selector)
    else {
        return Err(MatchError::Call(BAD_SELECTOR.into()));
    };
    if !namespace_selected(inner, namespaces, attributes, object, &namespace)
        .await
        .map_err(MatchError::Api)?
    {
        return Ok(None);
    }
    if !object_selected(objects, object, attributes.request.old) {
        return Ok(None);
    }
    Ok(Some(Invocation { resource }))
}

/// Why matching could not decide.
pub(super) enum MatchError {
    /// Fails the request as it is.
    Api(ApiError),
    /// Counts as a failed call of the webhook.
    Call(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(
        ops: &[&str],
        groups: &[&str],
        versions: &[&str],
        resources: &[&str],
        scope: &str,
    ) -> Rule {
        let own = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        Rule {
            operations: own(ops),
            api_groups: own(groups),
            api_versions: own(versions),
            resources: own(resources),
            scope: scope.into(),
        }
    }

    fn request<'a>(resource: &'a str, subresource: &'a str, namespace: &'a str) -> Request<'a> {
        Request {
            operation: "CREATE",
            group: "",
            version: "v1",
            resource,
            subresource,
            namespace,
            is_namespace: resource == "namespaces",
        }
    }

    #[test]
    fn a_star_matches_resources_but_not_their_subresources() {
        let star = rule(&["*"], &["*"], &["*"], &["*"], "*");
        assert!(rule_matches(&star, &request("pods", "", "ns")));
        assert!(!rule_matches(&star, &request("pods", "status", "ns")));
        let all = rule(&["*"], &["*"], &["*"], &["*/*"], "*");
        assert!(rule_matches(&all, &request("pods", "status", "ns")));
        let status = rule(&["*"], &[""], &["v1"], &["pods/status"], "*");
        assert!(rule_matches(&status, &request("pods", "status", "ns")));
        assert!(!rule_matches(&status, &request("pods", "", "ns")));
        let any_status = rule(&["*"], &[""], &["v1"], &["*/status"], "*");
        assert!(rule_matches(
            &any_status,
            &request("services", "status", "ns")
        ));
    }

    #[test]
    fn operations_groups_and_versions_must_be_named() {
        let r = rule(&["UPDATE"], &["apps"], &["v1"], &["deployments"], "*");
        let mut req = request("deployments", "", "ns");
        req.group = "apps";
        assert!(!rule_matches(&r, &req), "CREATE is not UPDATE");
        req.operation = "UPDATE";
        assert!(rule_matches(&r, &req));
        req.version = "v2";
        assert!(!rule_matches(&r, &req));
    }

    #[test]
    fn scope_separates_namespaced_from_cluster_objects() {
        let namespaced = rule(&["*"], &["*"], &["*"], &["*"], "Namespaced");
        let cluster = rule(&["*"], &["*"], &["*"], &["*"], "Cluster");
        assert!(rule_matches(&namespaced, &request("pods", "", "ns")));
        assert!(!rule_matches(&namespaced, &request("nodes", "", "")));
        assert!(!rule_matches(&cluster, &request("pods", "", "ns")));
        assert!(rule_matches(&cluster, &request("nodes", "", "")));
        // A Namespace is cluster-scoped although the request names it.
        assert!(rule_matches(&cluster, &request("namespaces", "", "team-a")));
        assert!(!rule_matches(
            &namespaced,
            &request("namespaces", "", "team-a")
        ));
    }

    #[test]
    fn the_object_selector_takes_the_new_or_the_old_labels() {
        let selector =
            LabelSelector::from_object(&serde_json::json!({"matchLabels": {"hook": "on"}}))
                .unwrap();
        let on = serde_json::json!({"metadata": {"labels": {"hook": "on"}}});
        let off = serde_json::json!({"metadata": {"labels": {"hook": "off"}}});
        assert!(object_selected(&selector, Some(&on), None));
        assert!(object_selected(&selector, Some(&off), Some(&on)));
        assert!(!object_selected(&selector, Some(&off), None));
        assert!(!object_selected(&selector, None, None));
        assert!(object_selected(&LabelSelector::default(), None, None));
    }
}
