//! The `authentication.k8s.io` reviews: whose is this bearer token
//! (TokenReview, asked by webhook authenticators such as a node server),
//! and who am I (SelfSubjectReview, `kubectl auth whoami`).

use k8s_openapi::api::authentication::v1::{
    self as authentication, SelfSubjectReview, SelfSubjectReviewStatus, TokenReview,
    TokenReviewStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

use super::{decode, encode};
use crate::authn::UserInfo;
use crate::handlers::Ctx;
use crate::status::ApiError;
use crate::tokens::{ISSUER, ServiceAccountTokens};

/// `POST /apis/authentication.k8s.io/v1/tokenreviews`: the token is checked
/// by the server's own authenticators (the token file and service-account
/// tokens), for the audiences the review names or else the server's own.
pub(super) fn token(ctx: &Ctx, object: Value) -> Result<Value, ApiError> {
    let mut review: TokenReview = decode(ctx, object)?;
    let token = review.spec.token.as_deref().unwrap_or("");
    if token.is_empty() {
        return Err(ApiError::BadRequest(
            "token is required for TokenReview in authentication".into(),
        ));
    }
    let asked = review.spec.audiences.clone().unwrap_or_default();
    let audiences = if asked.is_empty() {
        vec![ISSUER.to_string()]
    } else {
        asked.clone()
    };
    let found = match ctx.inner.authenticator() {
        Some(authenticator) => authenticator.authenticate_token(token, &audiences),
        // Without the network authenticator (tests, embedding), the server
        // still vouches for the tokens it signed itself.
        None if ServiceAccountTokens::looks_like_jwt(token) => {
            ServiceAccountTokens::new(ctx.inner.clone()).authenticate_for(token, &audiences)
        }
        None => None,
    };
    tracing::debug!(
        asker = %ctx.user.name,
        authenticated = found.is_some(),
        "token review"
    );
    review.status = Some(match found {
        Some((user, matched)) => TokenReviewStatus {
            authenticated: Some(true),
            user: Some(user_info(&user)),
            // Only a review that named audiences learns which ones matched.
            audiences: (!asked.is_empty()).then_some(matched),
            error: None,
        },
        None => TokenReviewStatus {
            authenticated: Some(false),
            user: None,
            audiences: None,
            error: Some("invalid bearer token".into()),
        },
    });
    encode(&review)
}

/// `POST /apis/authentication.k8s.io/v1/selfsubjectreviews`: the caller's
/// identity as the server sees it (after impersonation).
pub(super) fn self_subject(ctx: &Ctx, object: Value) -> Result<Value, ApiError> {
    let mut review: SelfSubjectReview = decode(ctx, object)?;
    review.metadata.creation_timestamp = Some(Time(jiff::Timestamp::now()));
    review.status = Some(SelfSubjectReviewStatus {
        user_info: Some(user_info(&ctx.user)),
    });
    encode(&review)
}

/// The wire form of an identity.
fn user_info(user: &UserInfo) -> authentication::UserInfo {
    authentication::UserInfo {
        username: Some(user.name.clone()),
        uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
        groups: Some(user.groups.clone()),
        extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
    }
}
