//! One tracing span per API request, around authorization and the handler:
//! method, path and user when it starts; status and latency in the event
//! that closes it. Every line a request logs (admission, storage, a
//! controller's reconcile reaching the server in-process) then carries who
//! asked for what, so a log tells the story of one object.
//!
//! It only observes: it never changes a request or a response.

use std::time::Instant;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

use crate::authn::UserInfo;

/// The middleware: wraps the rest of the router in the request's span.
pub(crate) async fn trace(request: Request, next: Next) -> Response {
    let user = request
        .extensions()
        .get::<UserInfo>()
        .map_or("<none>", |u| u.name.as_str())
        .to_owned();
    let span = tracing::info_span!(
        "request",
        method = %request.method(),
        path = %request.uri().path(),
        %user,
    );
    let started = Instant::now();
    let response = next.run(request).instrument(span.clone()).await;
    tracing::debug!(
        parent: &span,
        status = response.status().as_u16(),
        latency_ms = started.elapsed().as_secs_f64() * 1000.0,
        "request served"
    );
    response
}
