//! The deadline of a non-long-running request (upstream's
//! `--request-timeout` with the client's `?timeout=`): a request whose
//! handler has not answered by then gets upstream's 504 `Timeout` Status.
//! A write's handler runs on to its end in the background, as upstream's
//! does (dropping it mid-write could leave a write half done for no gain:
//! the store applies it anyway once sent); a read's is dropped, since it
//! leaves nothing half done, and so runs in place without a task of its own.
//!
//! It owns only the deadline; which requests are long-running is read from
//! the request's [`RequestInfo`]. It must never decide anything else about a
//! request (admission, fairness, limits on concurrency belong elsewhere),
//! and it never cuts a response that has started: the deadline covers the
//! time to the response's head.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::FutureExt;
use tracing::Instrument;

use crate::authz::request::RequestInfo;
use crate::status::ApiError;

/// Upstream's default `--request-timeout`.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Whether a request may run without a deadline: watches, proxies, exec,
/// attach, port-forward and logs.
pub fn is_long_running(method: &http::Method, path: &str, query: Option<&str>) -> bool {
    let (verb, kind) = crate::authz::request::describe(method, path, query);
    RequestInfo { verb, kind }.long_running()
}

/// The client's `timeout` query parameter (a Go duration such as `30s`,
/// `1m30s` or `500ms`), or a 400 with upstream's wording when it is not one.
fn client_timeout(query: Option<&str>) -> Result<Option<Duration>, ApiError> {
    let Some((_, value)) = form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .find(|(key, value)| key == "timeout" && !value.is_empty())
    else {
        return Ok(None);
    };
    parse_go_duration(&value).map(Some).ok_or_else(|| {
        ApiError::BadRequest(format!(
            "invalid timeout specified in the request URL: {value:?}"
        ))
    })
}

pub use skiff_common::duration::parse_go_duration;

/// Upstream's answer to a request that ran past its deadline.
pub fn timed_out() -> ApiError {
    ApiError::Timeout {
        message: "request did not complete within requested timeout - context deadline exceeded"
            .into(),
        retry_after_seconds: 0,
        causes: Vec::new(),
    }
}

/// The middleware: runs a non-long-running request under the shorter of
/// the server's `limit` and the client's `?timeout=`.
pub async fn enforce(State(limit): State<Duration>, mut request: Request, next: Next) -> Response {
    if RequestInfo::of(&mut request).long_running() {
        return next.run(request).await;
    }
    let deadline = match client_timeout(request.uri().query()) {
        Ok(Some(asked)) if asked > Duration::ZERO => asked.min(limit),
        Ok(_) => limit,
        Err(refused) => return refused.into_response(),
    };
    // Kept for the log line only; a clone shares the path's bytes.
    let uri = request.uri().clone();
    let answered = if is_read(request.method()) {
        // A read leaves nothing half done when it is dropped at its
        // deadline, so it runs in place, without a task of its own.
        let handler = AssertUnwindSafe(next.run(request)).catch_unwind();
        tokio::time::timeout(deadline, handler)
            .await
            .map(|caught| caught.map_err(drop))
    } else {
        let handler = tokio::spawn(next.run(request).in_current_span());
        tokio::time::timeout(deadline, handler)
            .await
            .map(|joined| joined.map_err(drop))
    };
    match answered {
        Ok(Ok(response)) => response,
        // The handler panicked; the panic hook has logged it.
        Ok(Err(())) => ApiError::Internal("the request handler failed".into()).into_response(),
        Err(_) => {
            tracing::warn!(path = uri.path(), ?deadline, "request timed out");
            timed_out().into_response()
        }
    }
}

/// Methods that change nothing on the server.
fn is_read(method: &http::Method) -> bool {
    matches!(
        *method,
        http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn watches_streams_and_logs_are_long_running_the_rest_is_not() {
        let long = |method: Method, uri: &str| {
            let (path, query) = match uri.split_once('?') {
                Some((p, q)) => (p, Some(q)),
                None => (uri, None),
            };
            is_long_running(&method, path, query)
        };
        assert!(long(Method::GET, "/api/v1/pods?watch=true"));
        assert!(long(Method::GET, "/api/v1/namespaces/a/configmaps?watch=1"));
        assert!(long(Method::GET, "/api/v1/watch/namespaces/a/pods"));
        assert!(long(
            Method::GET,
            "/api/v1/namespaces/a/pods/p/log?follow=true"
        ));
        assert!(long(Method::GET, "/api/v1/namespaces/a/pods/p/log"));
        assert!(long(
            Method::POST,
            "/api/v1/namespaces/a/pods/p/exec?command=sh"
        ));
        assert!(long(Method::GET, "/api/v1/namespaces/a/pods/p/attach"));
        assert!(long(
            Method::POST,
            "/api/v1/namespaces/a/pods/p/portforward"
        ));
        assert!(long(Method::GET, "/api/v1/namespaces/a/services/s/proxy/x"));

        assert!(!long(Method::GET, "/api/v1/pods"));
        assert!(!long(Method::GET, "/api/v1/pods?watch=false"));
        assert!(!long(Method::POST, "/api/v1/namespaces/a/configmaps"));
        assert!(!long(Method::PUT, "/api/v1/namespaces/a/pods/p/status"));
        assert!(!long(Method::GET, "/readyz"));
    }

    #[test]
    fn go_durations_parse_and_nonsense_is_refused() {
        assert!(matches!(
            client_timeout(Some("timeout=soon")),
            Err(ApiError::BadRequest(_))
        ));
        assert_eq!(
            client_timeout(Some("limit=5&timeout=2s")).unwrap(),
            Some(Duration::from_secs(2))
        );
    }

    #[test]
    fn the_default_deadline_is_upstreams_minute() {
        assert_eq!(
            crate::ApiServerConfig::default().request_timeout,
            Duration::from_secs(60)
        );
    }

    #[test]
    fn a_timeout_reads_as_upstreams() {
        let status = crate::status::assert_status(
            &timed_out(),
            504,
            "Timeout",
            "Timeout: request did not complete within requested timeout - context deadline exceeded",
        );
        assert_eq!(status["details"], serde_json::json!({}));
    }

    async fn slow(query: &str, limit: Duration) -> (http::StatusCode, serde_json::Value) {
        use tower::ServiceExt;
        let router = axum::Router::new()
            .route(
                "/api/v1/namespaces/a/configmaps",
                axum::routing::get(|| async {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    "late"
                }),
            )
            .layer(axum::middleware::from_fn_with_state(limit, enforce));
        let response = router
            .oneshot(
                http::Request::get(format!("/api/v1/namespaces/a/configmaps{query}"))
                    .body(axum::body::Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        let code = response.status();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (code, serde_json::from_slice(&body).unwrap_or_default())
    }

    /// The answer came at the deadline (give or take a loaded machine).
    fn assert_between(elapsed: Duration, deadline: Duration) {
        assert!(
            elapsed >= deadline && elapsed < deadline + Duration::from_secs(2),
            "answered after {elapsed:?}, deadline {deadline:?}"
        );
    }

    #[tokio::test]
    async fn a_slow_request_gets_504_at_the_server_limit() {
        let limit = Duration::from_millis(300);
        let started = tokio::time::Instant::now();
        let (code, status) = slow("", limit).await;
        assert_eq!(code, http::StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(status["reason"], "Timeout");
        assert_between(started.elapsed(), limit);
    }

    #[tokio::test]
    async fn a_shorter_client_timeout_wins_a_longer_one_does_not() {
        let started = tokio::time::Instant::now();
        let (code, _) = slow("?timeout=200ms", Duration::from_secs(30)).await;
        assert_eq!(code, http::StatusCode::GATEWAY_TIMEOUT);
        assert_between(started.elapsed(), Duration::from_millis(200));

        let started = tokio::time::Instant::now();
        let (code, _) = slow("?timeout=10m", Duration::from_millis(300)).await;
        assert_eq!(code, http::StatusCode::GATEWAY_TIMEOUT);
        assert_between(started.elapsed(), Duration::from_millis(300));

        let (code, status) = slow("?timeout=soon", Duration::from_secs(30)).await;
        assert_eq!(code, http::StatusCode::BAD_REQUEST);
        assert_eq!(status["reason"], "BadRequest");
    }

    #[tokio::test]
    async fn a_watch_is_not_cut() {
        let outcome = tokio::time::timeout(
            Duration::from_secs(1),
            slow("?watch=true", Duration::from_millis(100)),
        )
        .await;
        assert!(outcome.is_err(), "the watch was answered: {outcome:?}");
    }
}
