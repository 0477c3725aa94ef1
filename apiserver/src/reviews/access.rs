//! The `authorization.k8s.io` reviews: a SubjectAccessReview spec turned
//! into [`Attributes`] and put to the authorizer chain, or the rules the
//! chain can list for the caller.

use k8s_openapi::api::authorization::v1::{
    LocalSubjectAccessReview, NonResourceAttributes, ResourceAttributes, SelfSubjectAccessReview,
    SelfSubjectRulesReview, SubjectAccessReview, SubjectAccessReviewSpec,
    SubjectAccessReviewStatus, SubjectRulesReviewStatus,
};
use serde_json::Value;

use super::{decode, empty_metadata, encode, invalid};
use crate::authn::UserInfo;
use crate::authz::{self, Attributes, Decision, RequestKind};
use crate::handlers::Ctx;
use crate::status::{ApiError, FieldError};

/// `POST /apis/authorization.k8s.io/v1/subjectaccessreviews`.
pub(super) fn subject_access(ctx: &Ctx, object: Value) -> Result<Value, ApiError> {
    let mut review: SubjectAccessReview = decode(ctx, object)?;
    let mut causes = check_spec(&review.spec);
    causes.extend(empty_metadata(&review.metadata, false));
    if !causes.is_empty() {
        return Err(invalid(ctx, causes));
    }
    review.status = Some(decide(ctx, spec_attributes(&review.spec)));
    encode(&review)
}

/// `POST /apis/authorization.k8s.io/v1/namespaces/<ns>/localsubjectaccessreviews`:
/// a SubjectAccessReview that may only ask about the path's namespace.
pub(super) fn local_subject_access(ctx: &Ctx, object: Value) -> Result<Value, ApiError> {
    let Some(namespace) = ctx.namespace() else {
        return Err(ApiError::PathNotFound);
    };
    let mut review: LocalSubjectAccessReview = decode(ctx, object)?;
    match review.metadata.namespace.as_deref() {
        None | Some("") => review.metadata.namespace = Some(namespace.to_string()),
        Some(given) if given == namespace => {}
        Some(_) => {
            return Err(ApiError::BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request"
                    .into(),
            ));
        }
    }
    let mut causes = check_spec(&review.spec);
    causes.extend(empty_metadata(&review.metadata, true));
    if let Some(resource) = &review.spec.resource_attributes {
        let asked = resource.namespace.as_deref().unwrap_or("");
        if asked != namespace {
            causes.push(FieldError::invalid(
                "spec.resourceAttributes.namespace",
                asked,
                "must match metadata.namespace",
            ));
        }
    }
    if let Some(path) = &review.spec.non_resource_attributes {
        causes.push(FieldError::invalid(
            "spec.nonResourceAttributes",
            serde_json::to_value(path).unwrap_or(Value::Null),
            "disallowed on this kind of request",
        ));
    }
    if !causes.is_empty() {
        return Err(invalid(ctx, causes));
    }
    review.status = Some(decide(ctx, spec_attributes(&review.spec)));
    encode(&review)
}

/// `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`: may the
/// caller do this?
pub(super) fn self_subject_access(ctx: &Ctx, object: Value) -> Result<Value, ApiError> {
    let mut review: SelfSubjectAccessReview = decode(ctx, object)?;
    let mut causes = check_attributes(
        review.spec.resource_attributes.as_ref(),
        review.spec.non_resource_attributes.as_ref(),
    );
    causes.extend(empty_metadata(&review.metadata, false));
    if !causes.is_empty() {
        return Err(invalid(ctx, causes));
    }
    let attributes = attributes(
        ctx.user.clone(),
        review.spec.resource_attributes.as_ref(),
        review.spec.non_resource_attributes.as_ref(),
    );
    review.status = Some(decide(ctx, attributes));
    encode(&review)
}

/// `POST /apis/authorization.k8s.io/v1/selfsubjectrulesreviews`: what the
/// caller may do in a namespace, as far as the authorizers can list it.
pub(super) fn self_subject_rules(ctx: &Ctx, object: Value) -> Result<Value, ApiError> {
    let mut review: SelfSubjectRulesReview = decode(ctx, object)?;
    let namespace = review.spec.namespace.as_deref().unwrap_or("");
    if namespace.is_empty() {
        return Err(ApiError::BadRequest("no namespace on request".into()));
    }
    let rules = ctx.inner.authorizer.rules_for(&ctx.user, namespace);
    review.status = Some(SubjectRulesReviewStatus {
        resource_rules: rules.resource_rules,
        non_resource_rules: rules.non_resource_rules,
        incomplete: rules.incomplete,
        evaluation_error: (!rules.evaluation_error.is_empty()).then_some(rules.evaluation_error),
    });
    encode(&review)
}

/// The chain's answer as a review status.
fn decide(ctx: &Ctx, attributes: Attributes) -> SubjectAccessReviewStatus {
    let decision = ctx.inner.authorizer.authorize(&attributes);
    tracing::debug!(
        asker = %ctx.user.name,
        user = %attributes.user.name,
        verb = %attributes.verb,
        ?decision,
        "access review"
    );
    status(decision)
}

/// Upstream's SubjectAccessReviewStatus of a decision: `denied` only for an
/// explicit Deny, the reason (if any) either way.
pub(crate) fn status(decision: Decision) -> SubjectAccessReviewStatus {
    let (allowed, denied, reason) = match decision {
        Decision::Allow(reason) => (true, false, reason),
        Decision::Deny(reason) => (false, true, reason),
        Decision::NoOpinion(reason) => (false, false, reason),
    };
    SubjectAccessReviewStatus {
        allowed,
        denied: denied.then_some(true),
        reason: (!reason.is_empty()).then_some(reason),
        evaluation_error: None,
    }
}

/// Upstream's checks of a SubjectAccessReview spec.
fn check_spec(spec: &SubjectAccessReviewSpec) -> Vec<FieldError> {
    let mut causes = check_attributes(
        spec.resource_attributes.as_ref(),
        spec.non_resource_attributes.as_ref(),
    );
    let user = spec.user.as_deref().unwrap_or("");
    if user.is_empty() && spec.groups.as_ref().is_none_or(Vec::is_empty) {
        causes.push(FieldError::invalid(
            "spec.user",
            user,
            "at least one of user or group must be specified",
        ));
    }
    causes
}

/// Exactly one of resource and non-resource attributes.
fn check_attributes(
    resource: Option<&ResourceAttributes>,
    path: Option<&NonResourceAttributes>,
) -> Vec<FieldError> {
    match (resource, path) {
        (Some(_), Some(path)) => vec![FieldError::invalid(
            "spec.nonResourceAttributes",
            serde_json::to_value(path).unwrap_or(Value::Null),
            "cannot be specified in combination with resourceAttributes",
        )],
        (None, None) => vec![FieldError::invalid(
            "spec.resourceAttributes",
            Value::Null,
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )],
        _ => Vec::new(),
    }
}

/// The user a SubjectAccessReview asks about, exactly as given: no
/// `system:authenticated` is added, as upstream.
fn spec_user(spec: &SubjectAccessReviewSpec) -> UserInfo {
    UserInfo {
        name: spec.user.clone().unwrap_or_default(),
        uid: spec.uid.clone().unwrap_or_default(),
        groups: spec.groups.clone().unwrap_or_default(),
        extra: spec.extra.clone().unwrap_or_default(),
    }
}

/// The attributes a (validated) SubjectAccessReview spec asks about.
pub(crate) fn spec_attributes(spec: &SubjectAccessReviewSpec) -> Attributes {
    attributes(
        spec_user(spec),
        spec.resource_attributes.as_ref(),
        spec.non_resource_attributes.as_ref(),
    )
}

/// Attributes of `user` doing what the review describes. An empty version
/// means any version, as upstream.
fn attributes(
    user: UserInfo,
    resource: Option<&ResourceAttributes>,
    path: Option<&NonResourceAttributes>,
) -> Attributes {
    let text = |s: &Option<String>| s.clone().unwrap_or_default();
    match (resource, path) {
        (Some(r), _) => {
            let version = text(&r.version);
            Attributes {
                user,
                verb: text(&r.verb),
                request: RequestKind::Resource(authz::ResourceAttributes {
                    group: text(&r.group),
                    version: if version.is_empty() {
                        "*".to_string()
                    } else {
                        version
                    },
                    resource: text(&r.resource),
                    subresource: text(&r.subresource),
                    namespace: text(&r.namespace),
                    name: text(&r.name),
                }),
            }
        }
        (None, path) => Attributes {
            user,
            verb: path.map(|p| text(&p.verb)).unwrap_or_default(),
            request: RequestKind::NonResource {
                path: path.map(|p| text(&p.path)).unwrap_or_default(),
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(user: Option<&str>, groups: &[&str]) -> SubjectAccessReviewSpec {
        SubjectAccessReviewSpec {
            user: user.map(String::from),
            groups: Some(groups.iter().map(|g| g.to_string()).collect()),
            uid: Some("u-1".into()),
            extra: Some([("scopes".to_string(), vec!["a".to_string()])].into()),
            resource_attributes: Some(ResourceAttributes {
                verb: Some("list".into()),
                resource: Some("pods".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            }),
            non_resource_attributes: None,
        }
    }

    #[test]
    fn a_spec_becomes_the_attributes_of_exactly_that_user() {
        let attributes = spec_attributes(&spec(Some("alice"), &["dev"]));
        assert_eq!(attributes.user.name, "alice");
        assert_eq!(attributes.user.uid, "u-1");
        // Nothing is added to what the asker said about the user.
        assert_eq!(attributes.user.groups, vec!["dev"]);
        assert_eq!(attributes.user.extra["scopes"], vec!["a"]);
        assert_eq!(attributes.verb, "list");
        let resource = attributes.resource().expect("resource request");
        assert_eq!(
            (
                resource.resource.as_str(),
                resource.namespace.as_str(),
                resource.version.as_str()
            ),
            ("pods", "ns", "*")
        );

        let path = SubjectAccessReviewSpec {
            user: Some("bob".into()),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some("/healthz".into()),
                verb: Some("get".into()),
            }),
            ..Default::default()
        };
        let attributes = spec_attributes(&path);
        assert_eq!(
            attributes.request,
            RequestKind::NonResource {
                path: "/healthz".into()
            }
        );
        assert_eq!(attributes.verb, "get");
    }

    #[test]
    fn specs_need_a_subject_and_exactly_one_kind_of_attributes() {
        assert!(check_spec(&spec(Some("alice"), &[])).is_empty());
        assert!(check_spec(&spec(None, &["dev"])).is_empty());
        let nobody = check_spec(&spec(None, &[]));
        assert_eq!(
            nobody.iter().map(FieldError::render).collect::<Vec<_>>(),
            vec!["spec.user: Invalid value: \"\": at least one of user or group must be specified"]
        );
        let mut both = spec(Some("alice"), &[]);
        both.non_resource_attributes = Some(NonResourceAttributes::default());
        assert_eq!(check_spec(&both)[0].field, "spec.nonResourceAttributes");
        let mut neither = spec(Some("alice"), &[]);
        neither.resource_attributes = None;
        assert_eq!(
            check_spec(&neither)[0].render(),
            "spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified"
        );
    }

    #[test]
    fn statuses_say_denied_only_for_an_explicit_deny() {
        let allowed = status(Decision::Allow(String::new()));
        assert!(allowed.allowed && allowed.denied.is_none() && allowed.reason.is_none());
        let bound = status(Decision::Allow("RBAC: allowed by x".into()));
        assert!(bound.allowed && bound.denied.is_none());
        assert_eq!(bound.reason.as_deref(), Some("RBAC: allowed by x"));
        let denied = status(Decision::Deny("no".into()));
        assert!(!denied.allowed);
        assert_eq!(denied.denied, Some(true));
        assert_eq!(denied.reason.as_deref(), Some("no"));
        let unanswered = status(Decision::NoOpinion(String::new()));
        assert!(!unanswered.allowed && unanswered.denied.is_none());
        assert!(unanswered.reason.is_none());
    }
}
