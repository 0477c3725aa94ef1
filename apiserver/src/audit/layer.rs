//! The audit layer around the authorizer and the handlers: it gives every
//! request its audit ID (the `Audit-Id` response header, as upstream sends
//! it whether or not a log is kept), asks the policy how much to record,
//! and writes the request's events — `RequestReceived` on arrival,
//! `ResponseStarted` once a long-running response (watch, exec, logs, …)
//! has its head, `ResponseComplete` when the answer is complete (for a
//! stream: when its body ends or the client goes), `Panic` if the handler
//! panicked.
//!
//! Bodies are recorded only at the levels that ask for them, the request's
//! as its handler reads it (so a refused request's body is never read), and
//! a long-running request's never.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use futures::{FutureExt, StreamExt};
use http::{HeaderMap, HeaderValue, StatusCode};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use parking_lot::Mutex;
use serde_json::Value;

use super::event::{Event, ObjectReference, ResponseStatus, event_user};
use super::policy::{Level, Stage};
use super::{Auditor, Decided};
use crate::authn::UserInfo;
use crate::authz::RequestKind;
use crate::authz::request::RequestInfo;
use crate::request_notes::{AuditAnnotations, NotedObject};
use crate::server::Inner;

/// The response header naming a request's audit ID (also honoured on the
/// request, as upstream does, so a proxy in front can choose it).
pub const AUDIT_ID_HEADER: &str = "audit-id";

const DECISION_ANNOTATION: &str = "authorization.k8s.io/decision";
const REASON_ANNOTATION: &str = "authorization.k8s.io/reason";

/// Upstream caps the recorded User-Agent.
const MAX_USER_AGENT: usize = 1024;

/// What authorization tells the audit log about one request; the layer
/// puts it in the request's extensions when the request is audited.
#[derive(Debug, Clone, Default)]
pub(crate) struct AuditSlot(Arc<Mutex<Noted>>);

#[derive(Debug, Default)]
struct Noted {
    /// Allowed or not, and why.
    decision: Option<(bool, String)>,
    impersonated: Option<UserInfo>,
}

impl AuditSlot {
    /// Records the authorizer's decision and its reason.
    pub(crate) fn authorized(&self, allowed: bool, reason: &str) {
        self.0.lock().decision = Some((allowed, reason.to_string()));
    }

    /// Records whom the caller acts as.
    pub(crate) fn impersonated(&self, user: &UserInfo) {
        self.0.lock().impersonated = Some(user.clone());
    }

    fn fill(&self, event: &mut Event) {
        let noted = self.0.lock();
        if let Some((allowed, reason)) = &noted.decision {
            let decision = if *allowed { "allow" } else { "forbid" };
            event
                .annotations
                .insert(DECISION_ANNOTATION.into(), decision.into());
            event
                .annotations
                .insert(REASON_ANNOTATION.into(), reason.clone());
        }
        if let Some(user) = &noted.impersonated {
            event.impersonated_user = Some(event_user(user));
        }
    }
}

/// The middleware.
pub(crate) async fn audit(
    State(inner): State<Arc<Inner>>,
    request: Request,
    next: Next,
) -> Response {
    let audit_id = audit_id(request.headers());
    let mut response = match &inner.audit {
        Some(auditor) => audited(auditor, &audit_id, request, next).await,
        None => next.run(request).await,
    };
    if let Ok(value) = HeaderValue::from_str(&audit_id) {
        response.headers_mut().insert(AUDIT_ID_HEADER, value);
    }
    response
}

/// The client's `Audit-Id` when it sent a usable one, else a new UUID.
fn audit_id(headers: &HeaderMap) -> String {
    headers
        .get(AUDIT_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map_or_else(|| uuid::Uuid::new_v4().to_string(), String::from)
}

async fn audited(auditor: &Auditor, audit_id: &str, mut request: Request, next: Next) -> Response {
    let received = Timestamp::now();
    let caller = request.extensions().get::<UserInfo>().cloned();
    let described = RequestInfo::of(&mut request);
    let (verb, target) = (&described.verb, &described.kind);
    let decided = auditor.policy.decide(caller.as_ref(), verb, target);
    if decided.level == Level::None {
        return next.run(request).await;
    }
    let long_running = described.long_running();
    let mut event = Event {
        kind: "Event".into(),
        api_version: "audit.k8s.io/v1".into(),
        level: decided.level,
        audit_id: audit_id.to_string(),
        stage: Stage::RequestReceived,
        request_uri: request
            .uri()
            .path_and_query()
            .map_or_else(|| request.uri().path().to_string(), |pq| pq.to_string()),
        verb: verb.clone(),
        user: caller.as_ref().map(event_user).unwrap_or_default(),
        impersonated_user: None,
        source_ips: source_ips(&request),
        user_agent: user_agent(request.headers()),
        object_ref: object_ref(target),
        response_status: None,
        request_object: None,
        response_object: None,
        request_received_timestamp: MicroTime(received),
        stage_timestamp: MicroTime(received),
        annotations: BTreeMap::new(),
    };
    let emit = |event: &Event, stage: Stage| {
        if !decided.omit_stages.contains(stage) {
            let mut event = event.clone();
            event.stage = stage;
            event.stage_timestamp = MicroTime(Timestamp::now());
            auditor.sink.send(event);
        }
    };
    emit(&event, Stage::RequestReceived);

    let slot = AuditSlot::default();
    let mut request = request;
    request.extensions_mut().insert(slot.clone());
    // The body is recorded as the handler reads it: a request refused
    // before its handler (unauthenticated, forbidden) is never read.
    let mut seen = None;
    if decided.level >= Level::Request && !long_running {
        let (parts, body) = request.into_parts();
        // A copy of what the handler reads, up to the API's body limit (the
        // handler refuses anything larger).
        let copy: Arc<Mutex<Vec<u8>>> = Default::default();
        let kept = copy.clone();
        let tee = crate::body::Watched::new(body, move |data: &bytes::Bytes| {
            let mut kept = kept.lock();
            if kept.len() + data.len() <= crate::status::MAX_BODY_BYTES {
                kept.extend_from_slice(data);
            }
        });
        seen = Some((parts.headers.clone(), copy));
        request = Request::from_parts(parts, Body::new(tee));
    }

    let response = match AssertUnwindSafe(next.run(request)).catch_unwind().await {
        Ok(response) => response,
        Err(panic) => {
            slot.fill(&mut event);
            event.response_status = Some(ResponseStatus {
                status: "Failure".into(),
                reason: "InternalError".into(),
                message: format!("the API server panicked: {}", panic_text(&panic)),
                ..ResponseStatus::code(500)
            });
            emit(&event, Stage::Panic);
            std::panic::resume_unwind(panic);
        }
    };
    slot.fill(&mut event);
    if let Some((headers, seen)) = seen {
        let bytes = std::mem::take(&mut *seen.lock());
        if let Some(object) = request_object(&headers, &bytes, &decided) {
            fill_from_object(&mut event, &object);
            event.request_object = Some(object);
        }
    }
    if let Some(AuditAnnotations(notes)) = response.extensions().get::<AuditAnnotations>() {
        for (key, value) in notes {
            event
                .annotations
                .entry(key.clone())
                .or_insert_with(|| value.clone());
        }
    }
    if let Some(noted) = response.extensions().get::<NotedObject>()
        && let Some(reference) = event.object_ref.as_mut()
    {
        if reference.name.is_empty() {
            reference.name.clone_from(&noted.name);
        }
        if reference.namespace.is_empty() {
            reference.namespace.clone_from(&noted.namespace);
        }
    }
    complete(auditor, &decided, event, response, long_running).await
}

/// Records the outcome: for a stream that started, `ResponseStarted` now
/// and `ResponseComplete` when its body is done; otherwise
/// `ResponseComplete` with the failure's Status and, at RequestResponse,
/// the body.
async fn complete(
    auditor: &Auditor,
    decided: &Decided,
    mut event: Event,
    response: Response,
    long_running: bool,
) -> Response {
    let code = response.status();
    event.response_status = Some(ResponseStatus::code(code.as_u16()));
    let send = |mut event: Event, stage: Stage| {
        if !decided.omit_stages.contains(stage) {
            event.stage = stage;
            event.stage_timestamp = MicroTime(Timestamp::now());
            auditor.sink.send(event);
        }
    };
    if long_running {
        send(event.clone(), Stage::ResponseStarted);
        if code.is_success() || code == StatusCode::SWITCHING_PROTOCOLS {
            let guard = CompleteOnDrop {
                event: Some(event),
                sink: auditor.sink.clone(),
                record: !decided.omit_stages.contains(Stage::ResponseComplete),
            };
            let (parts, body) = response.into_parts();
            let body = body.into_data_stream().map(move |chunk| {
                // The stream owns the guard: dropping it (at the end or
                // when the client leaves) records the completion.
                let _ = &guard;
                chunk
            });
            return Response::from_parts(parts, Body::from_stream(body));
        }
    }
    let failed = code.is_client_error() || code.is_server_error();
    if !failed && decided.level < Level::RequestResponse {
        send(event, Stage::ResponseComplete);
        return response;
    }
    let (parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(error) => {
            tracing::warn!(%error, "reading a response for the audit log failed");
            send(event, Stage::ResponseComplete);
            return Response::from_parts(parts, Body::empty());
        }
    };
    let json = is_json(&parts.headers)
        .then(|| serde_json::from_slice::<Value>(&bytes).ok())
        .flatten();
    if failed
        && let Some(status) = json
            .as_ref()
            .and_then(|v| serde_json::from_value::<ResponseStatus>(v.clone()).ok())
            .filter(|s| !s.message.is_empty() || !s.reason.is_empty())
    {
        event.response_status = Some(ResponseStatus {
            code: code.as_u16(),
            ..status
        });
    }
    if decided.level >= Level::RequestResponse
        && let Some(mut object) = json
    {
        if decided.omit_managed_fields {
            drop_managed_fields(&mut object);
        }
        event.response_object = Some(object);
    }
    send(event, Stage::ResponseComplete);
    Response::from_parts(parts, Body::from(bytes))
}

/// Records `ResponseComplete` of a stream when its body is dropped.
struct CompleteOnDrop {
    event: Option<Event>,
    sink: Arc<super::sink::Sink>,
    record: bool,
}

impl Drop for CompleteOnDrop {
    fn drop(&mut self) {
        if let Some(mut event) = self.event.take()
            && self.record
        {
            event.stage = Stage::ResponseComplete;
            event.stage_timestamp = MicroTime(Timestamp::now());
            self.sink.send(event);
        }
    }
}

fn object_ref(target: &RequestKind) -> Option<ObjectReference> {
    match target {
        RequestKind::Resource(r) => Some(ObjectReference {
            resource: r.resource.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            api_group: r.group.clone(),
            api_version: r.version.clone(),
            subresource: r.subresource.clone(),
            ..Default::default()
        }),
        RequestKind::NonResource { .. } => None,
    }
}

/// The request body as JSON, for the Request levels: objects in any media
/// type the API accepts, patches as sent.
fn request_object(headers: &HeaderMap, bytes: &[u8], decided: &Decided) -> Option<Value> {
    if bytes.is_empty() {
        return None;
    }
    let media = crate::body::content_type(headers);
    let mut value = match media.as_deref() {
        Some(crate::protobuf::MEDIA_TYPE) => crate::protobuf::decode_object(bytes).ok()?,
        Some(m) if m.contains("yaml") => {
            let yaml: serde_yaml::Value = serde_yaml::from_slice(bytes).ok()?;
            serde_json::to_value(yaml).ok()?
        }
        _ => serde_json::from_slice(bytes).ok()?,
    };
    if decided.omit_managed_fields {
        drop_managed_fields(&mut value);
    }
    Some(value)
}

/// Names, namespace, UID and version the request object gives where the
/// path did not (a create names its object only in the body).
fn fill_from_object(event: &mut Event, object: &Value) {
    let (Some(reference), Some(meta)) = (event.object_ref.as_mut(), object.get("metadata")) else {
        return;
    };
    let text = |key: &str| meta.get(key).and_then(Value::as_str).map(String::from);
    for (field, key) in [
        (&mut reference.name, "name"),
        (&mut reference.namespace, "namespace"),
        (&mut reference.uid, "uid"),
        (&mut reference.resource_version, "resourceVersion"),
    ] {
        if field.is_empty()
            && let Some(value) = text(key)
        {
            *field = value;
        }
    }
}

/// Removes `metadata.managedFields` from an object and a list's items.
fn drop_managed_fields(value: &mut Value) {
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    if let Some(items) = value.get_mut("items").and_then(Value::as_array_mut) {
        for item in items {
            if let Some(meta) = item.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("managedFields");
            }
        }
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("json"))
}

/// Upstream's source IPs: the `X-Forwarded-For` chain, `X-Real-Ip`, then
/// the peer of the connection (none for in-process requests).
fn source_ips(request: &Request) -> Vec<String> {
    let mut ips: Vec<String> = Vec::new();
    let headers = request.headers();
    for value in headers.get_all("x-forwarded-for") {
        if let Ok(text) = value.to_str() {
            for part in text.split(',') {
                if let Ok(ip) = part.trim().parse::<std::net::IpAddr>() {
                    ips.push(ip.to_string());
                }
            }
        }
    }
    if let Some(ip) = headers
        .get("x-real-ip")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<std::net::IpAddr>().ok())
        .map(|ip| ip.to_string())
        && !ips.contains(&ip)
    {
        ips.push(ip);
    }
    if let Some(crate::serve::RemoteAddr(peer)) = request.extensions().get() {
        let ip = peer.ip().to_string();
        if ips.last() != Some(&ip) {
            ips.push(ip);
        }
    }
    ips
}

fn user_agent(headers: &HeaderMap) -> String {
    let agent = headers
        .get(http::header::USER_AGENT)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default();
    if agent.len() <= MAX_USER_AGENT {
        return agent;
    }
    let mut cut = MAX_USER_AGENT;
    while !agent.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}...TRUNCATED", &agent[..cut])
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown cause".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_user_agents_are_cut_as_upstream() {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::USER_AGENT,
            HeaderValue::from_str(&"k".repeat(2000)).unwrap(),
        );
        let agent = user_agent(&headers);
        assert_eq!(agent.len(), MAX_USER_AGENT + "...TRUNCATED".len());
        assert!(agent.ends_with("k...TRUNCATED"));
    }

    #[test]
    fn source_ips_list_forwarders_then_the_peer() {
        let mut request = Request::builder()
            .uri("/api")
            .header("x-forwarded-for", "10.0.0.1, 10.0.0.2")
            .header("x-real-ip", "10.0.0.2")
            .body(Body::empty())
            .unwrap();
        request.extensions_mut().insert(crate::serve::RemoteAddr(
            "192.168.1.5:4000".parse().unwrap(),
        ));
        assert_eq!(
            source_ips(&request),
            ["10.0.0.1", "10.0.0.2", "192.168.1.5"]
        );
    }
}
