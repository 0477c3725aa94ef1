//! The layer in front of every route: the caller's identity (set by the
//! HTTPS listener or the in-process client), switched to the impersonated
//! user when the request asks for it and may, is turned into
//! [`Attributes`] and checked before any handler runs. The decision, its
//! reason and the impersonated user are left for the audit log.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::audit::AuditSlot;
use crate::authn::{self, UserInfo};
use crate::server::Inner;

use super::impersonation;
use super::request::RequestInfo;

/// Refuses the request unless the chain allows it.
pub(crate) async fn authorize(
    State(inner): State<Arc<Inner>>,
    mut request: Request,
    next: Next,
) -> Response {
    // Every entry point attaches an identity; a request without one never
    // passed authentication and gets no further.
    let Some(user) = request.extensions().get::<UserInfo>().cloned() else {
        return unauthorized();
    };
    // Only a caller that presented no credentials is asked to authenticate;
    // one that impersonates `system:anonymous` is told what it may not do.
    let without_credentials = user.is_anonymous();
    // Present when the request is audited: the decision goes into its events.
    let audit = request.extensions().get::<AuditSlot>().cloned();
    // Handlers see only the identity the request acts as.
    let user = if impersonation::requested(request.headers()) {
        match impersonation::impersonate(&inner.authorizer, &user, request.headers()) {
            Ok(Some(acting)) => {
                if let Some(audit) = &audit {
                    audit.impersonated(&acting);
                }
                impersonation::strip(request.headers_mut());
                request.extensions_mut().insert(acting.clone());
                acting
            }
            Ok(None) => user,
            Err(error) => return error.into_response(),
        }
    } else {
        user
    };
    let attrs = RequestInfo::of(&mut request).attributes(user);
    let decision = inner.authorizer.decide_why(&attrs);
    if let Some(audit) = &audit {
        match &decision {
            Ok(reason) => audit.authorized(true, reason),
            Err(reason) => audit.authorized(false, reason),
        }
    }
    if let Err(reason) = decision {
        let error = super::forbidden(&attrs, &reason);
        tracing::debug!(user = %attrs.user.name, verb = %attrs.verb, path = %request.uri().path(), "forbidden");
        // A caller without credentials reaches what the policy opens to
        // `system:anonymous` (health and version); anything else asks it to
        // authenticate rather than telling it what exists.
        if without_credentials {
            return unauthorized();
        }
        return error.into_response();
    }
    next.run(request).await
}

/// Upstream's 401 Status.
fn unauthorized() -> Response {
    let (code, body) = authn::unauthorized_status();
    (
        code,
        [(http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}
