//! The `audit.k8s.io/v1` `Event`: one line of the audit log, with
//! upstream's field names and order, so tools written for kube-apiserver's
//! log (and `jq` one-liners) read skiff's unchanged.
//!
//! This is data only: what goes into an event is decided by the layer
//! (`audit::layer`), how it is written by the sink.

use std::collections::BTreeMap;

use k8s_openapi::api::authentication::v1::UserInfo as EventUser;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::policy::{Level, Stage};
use crate::authn::UserInfo;

/// One audit event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// Always `Event`.
    pub kind: String,
    /// Always `audit.k8s.io/v1`.
    pub api_version: String,
    /// How much of the request this event records.
    pub level: Level,
    /// One per request, shared by its stages; also the `Audit-Id` header.
    #[serde(rename = "auditID")]
    pub audit_id: String,
    /// When in the request's life the event was written.
    pub stage: Stage,
    /// Path and query as the client sent them.
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    /// The API verb (`get`, `list`, `watch`, `create`, …) or, for a
    /// non-resource path, the lower-cased HTTP method.
    pub verb: String,
    /// Who sent the request (the real caller when impersonating).
    pub user: EventUser,
    /// Whom the caller acted as, when it impersonated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impersonated_user: Option<EventUser>,
    /// The addresses proxies named for the client (`X-Forwarded-For`), then the peer's.
    #[serde(default, rename = "sourceIPs", skip_serializing_if = "Vec::is_empty")]
    pub source_ips: Vec<String>,
    /// The client's `User-Agent` header.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user_agent: String,
    /// What the request was aimed at; absent for non-resource requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_ref: Option<ObjectReference>,
    /// The outcome: the code, and for failures the Status's message and
    /// reason. Absent at RequestReceived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_status: Option<ResponseStatus>,
    /// The request body, at Request and RequestResponse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_object: Option<Value>,
    /// The response body, at RequestResponse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_object: Option<Value>,
    /// When the request arrived.
    pub request_received_timestamp: MicroTime,
    /// When this stage was reached.
    pub stage_timestamp: MicroTime,
    /// `authorization.k8s.io/decision`, `authorization.k8s.io/reason` and
    /// whatever admission noted (Pod Security, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// The outcome of a request: upstream's `Status` without its type fields
/// (a success carries only the code).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResponseStatus {
    /// Always empty (upstream's list metadata).
    #[serde(default)]
    pub metadata: serde_json::Map<String, Value>,
    /// `Success` or `Failure`; empty when the response was not a Status.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// The Status's message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The Status's reason, e.g. `NotFound`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The Status's details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// The HTTP status code.
    #[serde(default)]
    pub code: u16,
}

impl ResponseStatus {
    /// A bare code (successes, or failures whose body was no Status).
    pub fn code(code: u16) -> Self {
        Self {
            code,
            ..Default::default()
        }
    }
}

/// What a resource request was aimed at.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// The resource, e.g. `pods`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource: String,
    /// The namespace; empty for cluster-scoped resources.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The object's name; empty for collections.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The object's uid, when known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The API group; empty for the core group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    /// The API version of the request's path.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// The object's resourceVersion, when known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// The subresource, e.g. `status`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

/// A user as events carry it (empty parts left out, as upstream's
/// `omitempty`).
pub(super) fn event_user(user: &UserInfo) -> EventUser {
    EventUser {
        username: (!user.name.is_empty()).then(|| user.name.clone()),
        uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
        groups: (!user.groups.is_empty()).then(|| user.groups.clone()),
        extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_serializes_with_upstreams_names_and_order() {
        let at: k8s_openapi::jiff::Timestamp = "2024-05-06T07:08:09.123456Z".parse().unwrap();
        let event = Event {
            kind: "Event".into(),
            api_version: "audit.k8s.io/v1".into(),
            level: Level::Metadata,
            audit_id: "a1".into(),
            stage: Stage::ResponseComplete,
            request_uri: "/api/v1/namespaces/a/pods?limit=1".into(),
            verb: "list".into(),
            user: event_user(&UserInfo::new("alice", Vec::new())),
            impersonated_user: None,
            source_ips: vec!["127.0.0.1".into()],
            user_agent: "kubectl/v1.32.4".into(),
            object_ref: Some(ObjectReference {
                resource: "pods".into(),
                namespace: "a".into(),
                api_version: "v1".into(),
                ..Default::default()
            }),
            response_status: Some(ResponseStatus::code(200)),
            request_object: None,
            response_object: None,
            request_received_timestamp: MicroTime(at),
            stage_timestamp: MicroTime(at),
            annotations: [(
                "authorization.k8s.io/decision".to_string(),
                "allow".to_string(),
            )]
            .into(),
        };
        let line = serde_json::to_string(&event).unwrap();
        assert_eq!(
            line,
            concat!(
                r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1","#,
                r#""stage":"ResponseComplete","requestURI":"/api/v1/namespaces/a/pods?limit=1","verb":"list","#,
                r#""user":{"groups":["system:authenticated"],"username":"alice"},"sourceIPs":["127.0.0.1"],"#,
                r#""userAgent":"kubectl/v1.32.4","objectRef":{"resource":"pods","namespace":"a","apiVersion":"v1"},"#,
                r#""responseStatus":{"metadata":{},"code":200},"#,
                r#""requestReceivedTimestamp":"2024-05-06T07:08:09.123456Z","stageTimestamp":"2024-05-06T07:08:09.123456Z","#,
                r#""annotations":{"authorization.k8s.io/decision":"allow"}}"#
            )
        );
        let back: Event = serde_json::from_str(&line).unwrap();
        assert_eq!(back, event);
    }
}
