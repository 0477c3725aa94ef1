//! The middleware that puts every request (after authentication,
//! impersonation and authorization) through priority and fairness: it is
//! classified, answered with the `X-Kubernetes-PF-FlowSchema-UID` and
//! `X-Kubernetes-PF-PriorityLevel-UID` headers, and then runs at once
//! (exempt levels) or holds a seat of its level until its handler has
//! answered. A long-running request (watch, exec, logs, port-forward,
//! proxy) thus holds its seat while it starts, as upstream's do, and not
//! while its body streams. A request that gets no seat is answered 429
//! TooManyRequests with `Retry-After`, in upstream's words. It never looks
//! into bodies.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::HeaderValue;
use serde_json::json;

use super::config::Classification;
use super::dispatch::Refusal;
use crate::authn::UserInfo;
use crate::authz::request::RequestInfo;
use crate::metrics::flowcontrol as flow_metrics;
use crate::server::Inner;
use crate::status::ApiError;

/// Upstream's response header naming the matched FlowSchema's UID.
pub(crate) const FLOW_SCHEMA_HEADER: &str = "X-Kubernetes-PF-FlowSchema-UID";
/// Upstream's response header naming the priority level's UID.
pub(crate) const PRIORITY_LEVEL_HEADER: &str = "X-Kubernetes-PF-PriorityLevel-UID";

/// The seconds a refused client is told to wait.
const RETRY_AFTER_SECONDS: u64 = 1;

/// The longest a request may wait in its queue: a quarter of the request
/// timeout, as upstream derives it (never under 100 ms).
pub(crate) fn queue_wait_limit(request_timeout: Duration) -> Duration {
    (request_timeout / 4).max(Duration::from_millis(100))
}

/// Upstream's 429 for a request that could not be queued or waited too long.
pub(crate) fn too_many_requests() -> Response {
    let error = ApiError::Refused {
        code: 429,
        reason: "TooManyRequests".into(),
        message: "Too many requests, please try again later.".into(),
        details: Some(json!({"retryAfterSeconds": RETRY_AFTER_SECONDS})),
    };
    let mut response = error.into_response();
    response.headers_mut().insert(
        http::header::RETRY_AFTER,
        HeaderValue::from(RETRY_AFTER_SECONDS),
    );
    response
}

fn flow_hash(flow: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    flow.hash(&mut hasher);
    hasher.finish()
}

fn set_headers(response: &mut Response, class: &Classification) {
    for (name, value) in [
        (FLOW_SCHEMA_HEADER, &class.schema_uid),
        (PRIORITY_LEVEL_HEADER, &class.level_uid),
    ] {
        if let Ok(value) = HeaderValue::from_str(value)
            && !value.is_empty()
        {
            response.headers_mut().insert(name, value);
        }
    }
}

/// The middleware.
pub(crate) async fn limit(
    State(inner): State<Arc<Inner>>,
    mut request: Request,
    next: Next,
) -> Response {
    let Some(flow_control) = &inner.flow_control else {
        return next.run(request).await;
    };
    let Some(user) = request.extensions().get::<UserInfo>().cloned() else {
        return next.run(request).await;
    };
    let attrs = RequestInfo::of(&mut request).attributes(user);
    let Some(class) = flow_control.classify(&attrs) else {
        return next.run(request).await;
    };
    let (schema, level_name) = (class.schema_name.as_str(), class.level_name.as_str());
    let seat = match &class.level {
        Some(level) => {
            let wait = queue_wait_limit(inner.config.request_timeout);
            let waiting = flow_metrics::waiting(schema, level_name);
            let acquired = level.acquire(flow_hash(&class.flow), wait).await;
            drop(waiting);
            match acquired {
                Ok(seat) => Some(seat),
                Err(refusal) => {
                    let reason = match refusal {
                        Refusal::Full if level.queuing().is_some() => "queue-full",
                        Refusal::Full => "concurrency-limit",
                        Refusal::TimedOut => "time-out",
                    };
                    flow_metrics::rejected(schema, level_name, reason);
                    tracing::debug!(user = %attrs.user.name, path = request.uri().path(), %refusal, "flow control refused");
                    let mut response = too_many_requests();
                    set_headers(&mut response, &class);
                    return response;
                }
            }
        }
        None => None,
    };
    let executing = flow_metrics::executing(schema, level_name);
    let mut response = next.run(request).await;
    // Held until the handler answered: a watch or stream is under way then,
    // and its body is not waited for.
    drop(seat);
    drop(executing);
    set_headers(&mut response, &class);
    response
}
