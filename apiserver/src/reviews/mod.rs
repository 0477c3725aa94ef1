//! The review resources: `authorization.k8s.io/v1` SubjectAccessReview,
//! LocalSubjectAccessReview, SelfSubjectAccessReview and
//! SelfSubjectRulesReview, and `authentication.k8s.io/v1` TokenReview and
//! SelfSubjectReview. Each is a question put to the server by POSTing an
//! object; the answer is the same object with its `status` filled, from the
//! authorizer chain or the authenticators.
//!
//! They are virtual resources (see [`crate::registry::ResourceInfo::review`]):
//! the registry lists them for discovery and OpenAPI, and requests to them
//! are authorized like any other (`create` on the resource), but this
//! module must never store, list or watch anything: a review leaves no
//! trace.

mod access;
mod identity;

use axum::body::Body;
use axum::response::Response;
use http::{Method, StatusCode};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::handlers::{Ctx, check_type, respond};
use crate::status::{ApiError, FieldError};

/// Which question a virtual resource answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Review {
    /// May this user (given in the spec) do this?
    SubjectAccess,
    /// The same, limited to the namespace of the path.
    LocalSubjectAccess,
    /// May I do this?
    SelfSubjectAccess,
    /// What may I do in this namespace?
    SelfSubjectRules,
    /// Who does this bearer token belong to?
    Token,
    /// Who am I?
    SelfSubject,
}

/// Answers a request to a review resource: only a POST to the collection
/// exists, as upstream serves them.
pub(crate) async fn serve(
    ctx: Ctx,
    review: Review,
    method: Method,
    body: Body,
) -> Result<Response, ApiError> {
    if ctx.target.name.is_some() || ctx.target.subresource.is_some() {
        return Err(ApiError::PathNotFound);
    }
    if method != Method::POST || ctx.params.watch {
        return Err(ApiError::MethodNotAllowed);
    }
    let bytes = crate::body::read(&ctx.headers, body).await?;
    let mut object = crate::body::decode_object(&ctx.headers, &bytes)?;
    let info = ctx.info().clone();
    check_type(&mut object, &info.api_version(), info.kind)?;
    let answer = match review {
        Review::SubjectAccess => access::subject_access(&ctx, object)?,
        Review::LocalSubjectAccess => access::local_subject_access(&ctx, object)?,
        Review::SelfSubjectAccess => access::self_subject_access(&ctx, object)?,
        Review::SelfSubjectRules => access::self_subject_rules(&ctx, object)?,
        Review::Token => identity::token(&ctx, object)?,
        Review::SelfSubject => identity::self_subject(&ctx, object)?,
    };
    respond(StatusCode::CREATED, &answer)
}

/// The typed form of a posted review (a body the kind cannot hold is a 400,
/// worded as upstream's decoding failures).
fn decode<T: k8s_openapi::Resource + DeserializeOwned>(
    ctx: &Ctx,
    object: Value,
) -> Result<T, ApiError> {
    crate::decode_errors::decode(&object)
        .map_err(|words| crate::handlers::create::cannot_handle(ctx.info(), &words))
}

/// The JSON answer.
fn encode<T: Serialize>(answer: &T) -> Result<Value, ApiError> {
    serde_json::to_value(answer).map_err(|e| ApiError::Internal(e.to_string()))
}

/// A 422 naming the review kind, as upstream (reviews have no name).
fn invalid(ctx: &Ctx, causes: Vec<FieldError>) -> ApiError {
    ApiError::Invalid {
        kind: ctx.info().kind.to_string(),
        group: ctx.info().group.to_string(),
        name: String::new(),
        causes,
    }
}

/// Upstream refuses reviews whose metadata says anything (but managed
/// fields, and the namespace where `keep_namespace`): a review is not an
/// object anyone can refer to later.
fn empty_metadata(metadata: &ObjectMeta, keep_namespace: bool) -> Option<FieldError> {
    let mut rest = metadata.clone();
    rest.managed_fields = None;
    if keep_namespace {
        rest.namespace = None;
    }
    if rest == ObjectMeta::default() {
        return None;
    }
    let shown = serde_json::to_value(metadata).unwrap_or(Value::Null);
    let detail = if keep_namespace {
        "must be empty except for namespace"
    } else {
        "must be empty"
    };
    Some(FieldError::invalid("metadata", shown, detail))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_must_be_empty_but_for_managed_fields_and_maybe_namespace() {
        let mut meta = ObjectMeta::default();
        assert!(empty_metadata(&meta, false).is_none());
        meta.managed_fields = Some(Vec::new());
        assert!(empty_metadata(&meta, false).is_none());
        meta.namespace = Some("a".into());
        assert!(empty_metadata(&meta, true).is_none());
        let error = empty_metadata(&meta, false).expect("namespace refused");
        assert_eq!(
            error.render(),
            "metadata: Invalid value: {\"managedFields\":[],\"namespace\":\"a\"}: must be empty"
        );
        meta.name = Some("x".into());
        assert!(empty_metadata(&meta, true).is_some());
    }
}
