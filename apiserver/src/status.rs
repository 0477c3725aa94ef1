//! API errors and their wire form: every failure a client sees is a
//! Kubernetes `Status` object with upstream's code, reason and message shape,
//! because clients (kubectl, client-go, kube-rs) branch on `reason` and `code`.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde_json::{Value, json};

/// Largest request body accepted, as upstream's default (3 MiB).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// What kind of problem one field has; renders as upstream's field error text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// The field is missing (`FieldValueRequired`).
    Required,
    /// The field's value is not allowed (`FieldValueInvalid`).
    Invalid(Value),
    /// The same, with the value shown as upstream's Go prints its type
    /// (`v1.LabelSelector{...}`) where that differs from its JSON.
    InvalidShown(String),
    /// The value is not one of a fixed set (`FieldValueNotSupported`).
    NotSupported {
        /// The value given.
        value: Value,
        /// The values allowed.
        supported: Vec<String>,
    },
    /// The field may not be set, or not changed (`FieldValueForbidden`).
    Forbidden,
    /// The value appears twice where it must be unique (`FieldValueDuplicate`).
    Duplicate(Value),
    /// A Duplicate whose value is shown as upstream's Go prints its type
    /// (`core.ServicePort{...}`).
    DuplicateShown(String),
    /// The value is longer than allowed (`FieldValueTooLong`).
    TooLong(Value),
    /// A list or map holds more entries than allowed (`FieldValueTooMany`);
    /// the value is how many it holds.
    TooMany(u64),
    /// The value names something that does not exist (`FieldValueNotFound`).
    NotFound(Value),
}

/// One invalid field of an object, reported as a `causes` entry of a 422.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field's path, e.g. `spec.containers[0].name`.
    pub field: String,
    /// What is wrong with it.
    pub kind: FieldErrorKind,
    /// More words after the kind's own; may be empty.
    pub detail: String,
}

impl FieldError {
    /// The error `kind` at `field`, with `detail` after the kind's words.
    fn at(field: impl Into<String>, kind: FieldErrorKind, detail: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            kind,
            detail: detail.into(),
        }
    }

    /// `field` is missing.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::at(field, FieldErrorKind::Required, detail)
    }

    /// `field` holds `value`, which is not allowed.
    pub fn invalid(
        field: impl Into<String>,
        value: impl Into<Value>,
        detail: impl Into<String>,
    ) -> Self {
        Self::at(field, FieldErrorKind::Invalid(value.into()), detail)
    }

    /// This Invalid (or Duplicate) error with its value shown as `shown`: how
    /// upstream's Go prints the value's type, where that differs from its JSON.
    pub fn shown_as(self, shown: impl Into<String>) -> Self {
        let kind = match self.kind {
            FieldErrorKind::Invalid(_) => FieldErrorKind::InvalidShown(shown.into()),
            FieldErrorKind::Duplicate(_) => FieldErrorKind::DuplicateShown(shown.into()),
            other => other,
        };
        Self { kind, ..self }
    }

    /// `field` may not be set, or not changed.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::at(field, FieldErrorKind::Forbidden, detail)
    }

    /// `field` holds more than `max` bytes (upstream's TooLong, which
    /// never shows the value; worded as since Kubernetes 1.32).
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        let unit = if max == 1 { "byte" } else { "bytes" };
        Self::at(
            field,
            FieldErrorKind::TooLong(Value::Null),
            format!("may not be more than {max} {unit}"),
        )
    }

    /// `field` holds `actual` entries where at most `max` are allowed
    /// (upstream's TooMany, which shows the count).
    pub fn too_many(field: impl Into<String>, actual: u64, max: u64) -> Self {
        let unit = if max == 1 { "item" } else { "items" };
        Self::at(
            field,
            FieldErrorKind::TooMany(actual),
            format!("must have at most {max} {unit}"),
        )
    }

    /// `value` appears twice in `field`.
    pub fn duplicate(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::at(field, FieldErrorKind::Duplicate(value.into()), "")
    }

    /// `field` names `value`, which does not exist.
    pub fn not_found(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::at(field, FieldErrorKind::NotFound(value.into()), "")
    }

    /// `field` holds `value`, which is not one of `supported`.
    pub fn not_supported(
        field: impl Into<String>,
        value: impl Into<Value>,
        supported: &[&str],
    ) -> Self {
        let supported = supported.iter().map(|s| s.to_string()).collect();
        let kind = FieldErrorKind::NotSupported {
            value: value.into(),
            supported,
        };
        Self::at(field, kind, "")
    }

    /// The `reason` of the Status cause, as upstream names it.
    fn reason(&self) -> &'static str {
        match self.kind {
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Invalid(_) | FieldErrorKind::InvalidShown(_) => "FieldValueInvalid",
            FieldErrorKind::NotSupported { .. } => "FieldValueNotSupported",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::Duplicate(_) | FieldErrorKind::DuplicateShown(_) => {
                "FieldValueDuplicate"
            }
            FieldErrorKind::NotFound(_) => "FieldValueNotFound",
            FieldErrorKind::TooLong(_) => "FieldValueTooLong",
            FieldErrorKind::TooMany(_) => "FieldValueTooMany",
        }
    }

    /// The message without the field path (the cause's `message`).
    fn body(&self) -> String {
        let with_detail = |head: String| {
            if self.detail.is_empty() {
                head
            } else {
                format!("{head}: {}", self.detail)
            }
        };
        match &self.kind {
            FieldErrorKind::Required => with_detail("Required value".to_string()),
            FieldErrorKind::Invalid(v) => {
                with_detail(format!("Invalid value: {}", render_value(v)))
            }
            FieldErrorKind::InvalidShown(shown) => with_detail(format!("Invalid value: {shown}")),
            FieldErrorKind::NotSupported { value, supported } => {
                let list: Vec<String> = supported.iter().map(|s| format!("\"{s}\"")).collect();
                format!(
                    "Unsupported value: {}: supported values: {}",
                    render_value(value),
                    list.join(", ")
                )
            }
            FieldErrorKind::Forbidden => with_detail("Forbidden".to_string()),
            FieldErrorKind::Duplicate(v) => format!("Duplicate value: {}", render_value(v)),
            FieldErrorKind::DuplicateShown(shown) => format!("Duplicate value: {shown}"),
            FieldErrorKind::NotFound(v) => format!("Not found: {}", render_value(v)),
            // Upstream never shows the value that is too long.
            FieldErrorKind::TooLong(_) => with_detail("Too long".to_string()),
            FieldErrorKind::TooMany(n) => with_detail(format!("Too many: {n}")),
        }
    }

    /// `field: message`, as in upstream's aggregated Invalid message.
    pub fn render(&self) -> String {
        format!("{}: {}", self.field, self.body())
    }
}

fn render_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Null => "null".to_string(),
        other => other.to_string(),
    }
}

/// Every failure of an API request, each mapping to one upstream Status.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// 404 `NotFound`: the named object does not exist.
    #[error("{resource} \"{name}\" not found")]
    NotFound {
        /// The resource, e.g. `pods`.
        resource: String,
        /// The API group; empty for the core group.
        group: String,
        /// The object's name.
        name: String,
    },
    /// 404 `NotFound` for a path that names no resource.
    #[error("the server could not find the requested resource")]
    PathNotFound,
    /// 409 `AlreadyExists`: a create of a name already taken.
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists {
        /// The resource, e.g. `pods`.
        resource: String,
        /// The API group; empty for the core group.
        group: String,
        /// The object's name.
        name: String,
    },
    /// 409 `Conflict`: a stale resourceVersion, or a write the object's state does not allow.
    #[error("Operation cannot be fulfilled on {resource} \"{name}\": {detail}")]
    Conflict {
        /// The resource, e.g. `pods`.
        resource: String,
        /// The API group; empty for the core group.
        group: String,
        /// The object's name.
        name: String,
        /// Why the write cannot be done.
        detail: String,
    },
    /// Server-side apply would change fields other managers own; causes are
    /// `(reason, message, field)`.
    #[error("{message}")]
    ApplyConflict {
        /// The whole message, naming the managers.
        message: String,
        /// One cause per conflicting field.
        causes: Vec<(String, String, String)>,
    },
    /// 422 `Invalid`: the object fails validation.
    #[error(
        "{} \"{name}\" is invalid: {}",
        qualified_kind(kind, group),
        render_causes(causes)
    )]
    Invalid {
        /// The object's kind.
        kind: String,
        /// The kind's API group; empty for the core group.
        group: String,
        /// The object's name.
        name: String,
        /// Every invalid field.
        causes: Vec<FieldError>,
    },
    /// A JSON patch whose operations could not be applied (a failed
    /// `test`, a missing path): upstream's generic 422, whose message names
    /// neither the object nor the operation; why is its one cause
    /// (`UnexpectedServerResponse`).
    #[error("the server rejected our request due to an error in our request")]
    PatchNotApplied(String),
    /// 400 `BadRequest`, with the message given.
    #[error("{0}")]
    BadRequest(String),
    /// 405 `MethodNotAllowed`.
    #[error("the server does not allow this method on the requested resource")]
    MethodNotAllowed,
    /// 410 `Expired`: a continue token or resourceVersion too old to serve.
    #[error("{0}")]
    Expired(String),
    /// 410 `Expired` for a continue token whose revision was compacted:
    /// upstream's words, and in the Status's `metadata.continue` a token
    /// that resumes after the same key at the newest state.
    #[error(
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
    )]
    ContinueExpired {
        /// The inconsistent continuation offered instead.
        resume: String,
    },
    /// 403 `Forbidden`: authorization or a rule of the server refused the request.
    #[error("{}", forbidden_message(resource, name, detail))]
    Forbidden {
        /// The resource; empty for non-resource requests.
        resource: String,
        /// The API group; empty for the core group.
        group: String,
        /// The object's name; empty for collections.
        name: String,
        /// Why it was refused.
        detail: String,
        /// `(reason, message, field)` causes, when there are any.
        causes: Vec<(String, String, String)>,
    },
    /// An admission policy refused the write: Forbidden's wording about
    /// the object, with the policy's reason (and that reason's code).
    #[error("{}", forbidden_message(resource, name, detail))]
    AdmissionDenied {
        /// The resource.
        resource: String,
        /// The API group; empty for the core group.
        group: String,
        /// The object's name.
        name: String,
        /// The policy's message.
        detail: String,
        /// `Invalid`, `Forbidden`, `Unauthorized` or `RequestEntityTooLarge`.
        reason: &'static str,
    },
    /// 413 `RequestEntityTooLarge`: the body is over the limit (in bytes) given.
    #[error("Request entity too large: limit is {0}")]
    TooLarge(usize),
    /// 415 `UnsupportedMediaType`: the body's Content-Type is not one the server decodes; the text lists those it does.
    #[error("the body of the request was in an unknown format - accepted media types include: {0}")]
    UnsupportedMediaType(String),
    /// 429 `TooManyRequests`, e.g. an eviction a disruption budget does not allow.
    #[error("{message}")]
    TooManyRequests {
        /// The Status's message.
        message: String,
        /// `(reason, message, field)` causes.
        causes: Vec<(String, String, String)>,
    },
    /// 503 `ServiceUnavailable`, with the message given.
    #[error("{0}")]
    ServiceUnavailable(String),
    /// Upstream's 504 `Timeout`: a request that ran past its deadline, or a
    /// resourceVersion the server did not reach in time. `causes` are
    /// `(reason, message, field)` as for the other variants.
    #[error("Timeout: {message}")]
    Timeout {
        /// What ran out of time.
        message: String,
        /// The `retryAfterSeconds` detail; 0 for none.
        retry_after_seconds: u32,
        /// `(reason, message, field)` causes.
        causes: Vec<(String, String, String)>,
    },
    /// A write refused because the store's disk is (nearly) full: 507,
    /// which upstream has no reason for (etcd's NOSPACE reaches its clients
    /// as a 500); the message names the disk and the data directory.
    #[error("{0}")]
    InsufficientStorage(String),
    /// 500 `InternalError`: a failure that is the server's, not the request's.
    #[error("Internal error occurred: {0}")]
    Internal(String),
    /// A refusal worded by someone else: an admission webhook's Status,
    /// passed on with its code (at least 400), reason and details.
    #[error("{message}")]
    Refused {
        /// The HTTP status code.
        code: u16,
        /// The Status's reason.
        reason: String,
        /// The Status's message.
        message: String,
        /// The Status's details, passed on as they are.
        details: Option<Value>,
    },
}

/// Upstream's Forbidden wording: the resource and name are left out when
/// the request named none.
fn forbidden_message(resource: &str, name: &str, detail: &str) -> String {
    match (resource.is_empty(), name.is_empty()) {
        (true, _) => format!("forbidden: {detail}"),
        (false, true) => format!("{resource} is forbidden: {detail}"),
        (false, false) => format!("{resource} \"{name}\" is forbidden: {detail}"),
    }
}

/// `Kind` for the core group, `Kind.group` otherwise (upstream's GroupKind).
fn qualified_kind(kind: &str, group: &str) -> String {
    if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    }
}

/// Field errors as upstream prints an invalid object's causes (see [`aggregate`]).
pub(crate) fn render_causes(causes: &[FieldError]) -> String {
    aggregate(&causes.iter().map(FieldError::render).collect::<Vec<_>>())
}

/// Messages as upstream's aggregate error prints them: each message once;
/// one alone, several as `[a, b]`, none as nothing.
pub(crate) fn aggregate<S: AsRef<str>>(messages: &[S]) -> String {
    let mut unique: Vec<&str> = Vec::with_capacity(messages.len());
    for message in messages {
        if !unique.contains(&message.as_ref()) {
            unique.push(message.as_ref());
        }
    }
    match unique.as_slice() {
        [] => String::new(),
        [one] => (*one).to_string(),
        many => format!("[{}]", many.join(", ")),
    }
}

impl ApiError {
    /// The HTTP status code upstream uses for this error.
    pub fn code(&self) -> StatusCode {
        match self {
            ApiError::NotFound { .. } | ApiError::PathNotFound => StatusCode::NOT_FOUND,
            ApiError::AlreadyExists { .. }
            | ApiError::Conflict { .. }
            | ApiError::ApplyConflict { .. } => StatusCode::CONFLICT,
            ApiError::Invalid { .. } | ApiError::PatchNotApplied(_) => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Expired(_) | ApiError::ContinueExpired { .. } => StatusCode::GONE,
            ApiError::Forbidden { .. } => StatusCode::FORBIDDEN,
            ApiError::AdmissionDenied { reason, .. } => match *reason {
                "Forbidden" => StatusCode::FORBIDDEN,
                "Unauthorized" => StatusCode::UNAUTHORIZED,
                "RequestEntityTooLarge" => StatusCode::PAYLOAD_TOO_LARGE,
                _ => StatusCode::UNPROCESSABLE_ENTITY,
            },
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::ServiceUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Timeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            ApiError::InsufficientStorage(_) => StatusCode::INSUFFICIENT_STORAGE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Refused { code, .. } => {
                StatusCode::from_u16(*code).unwrap_or(StatusCode::BAD_REQUEST)
            }
        }
    }

    /// The machine-readable `reason` of the Status.
    pub fn reason(&self) -> &str {
        match self {
            ApiError::NotFound { .. } | ApiError::PathNotFound => "NotFound",
            ApiError::AlreadyExists { .. } => "AlreadyExists",
            ApiError::Conflict { .. } | ApiError::ApplyConflict { .. } => "Conflict",
            ApiError::Invalid { .. } | ApiError::PatchNotApplied(_) => "Invalid",
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::MethodNotAllowed => "MethodNotAllowed",
            ApiError::Expired(_) | ApiError::ContinueExpired { .. } => "Expired",
            ApiError::Forbidden { .. } => "Forbidden",
            ApiError::AdmissionDenied { reason, .. } => reason,
            ApiError::TooLarge(_) => "RequestEntityTooLarge",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            ApiError::TooManyRequests { .. } => "TooManyRequests",
            ApiError::ServiceUnavailable(_) => "ServiceUnavailable",
            ApiError::Timeout { .. } => "Timeout",
            ApiError::InsufficientStorage(_) => "InsufficientStorage",
            ApiError::Internal(_) => "InternalError",
            ApiError::Refused { reason, .. } => reason,
        }
    }

    fn details(&self) -> Option<Value> {
        // Upstream's StatusDetails leave empty fields out (a refused list
        // has no name; a refused path has neither name nor kind).
        let named = |name: &str, group: &str, kind: &str| {
            let mut d = json!({});
            for (field, value) in [("name", name), ("group", group), ("kind", kind)] {
                if !value.is_empty() {
                    d[field] = json!(value);
                }
            }
            d
        };
        let plain_resource =
            |resource: &str| resource.split('.').next().unwrap_or(resource).to_string();
        let causes_json = |causes: &[(String, String, String)]| -> Value {
            causes
                .iter()
                .map(|(reason, message, field)| {
                    let mut c = json!({ "reason": reason, "message": message });
                    if !field.is_empty() {
                        c["field"] = json!(field);
                    }
                    c
                })
                .collect()
        };
        match self {
            ApiError::NotFound {
                resource,
                group,
                name,
            }
            | ApiError::AlreadyExists {
                resource,
                group,
                name,
            }
            | ApiError::Conflict {
                resource,
                group,
                name,
                ..
            } => Some(named(name, group, &plain_resource(resource))),
            ApiError::Forbidden {
                resource,
                group,
                name,
                causes,
                ..
            } => {
                let mut d = named(name, group, &plain_resource(resource));
                if !causes.is_empty() {
                    d["causes"] = causes_json(causes);
                }
                Some(d)
            }
            ApiError::AdmissionDenied {
                resource,
                group,
                name,
                detail,
                ..
            } => {
                let mut d = named(name, group, &plain_resource(resource));
                d["causes"] = json!([{ "message": detail }]);
                Some(d)
            }
            ApiError::Invalid {
                kind,
                group,
                name,
                causes,
            } => {
                let mut d = named(name, group, kind);
                d["causes"] = causes
                    .iter()
                    .map(|c| json!({ "reason": c.reason(), "message": c.body(), "field": c.field }))
                    .collect();
                Some(d)
            }
            ApiError::ApplyConflict { causes, .. } => {
                Some(json!({ "causes": causes_json(causes) }))
            }
            ApiError::PatchNotApplied(why) => Some(json!({
                "causes": [{ "reason": "UnexpectedServerResponse", "message": why }]
            })),
            ApiError::Refused { details, .. } => details.clone().filter(|d| !d.is_null()),
            ApiError::Timeout {
                retry_after_seconds,
                causes,
                ..
            } => {
                // Upstream always sends details here, empty when neither is set.
                let mut d = json!({});
                if !causes.is_empty() {
                    d["causes"] = causes_json(causes);
                }
                if *retry_after_seconds > 0 {
                    d["retryAfterSeconds"] = json!(retry_after_seconds);
                }
                Some(d)
            }
            ApiError::TooManyRequests { causes, .. } if !causes.is_empty() => {
                Some(json!({ "causes": causes_json(causes) }))
            }
            _ => None,
        }
    }

    /// The full `Status` object for this error.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code().as_u16(),
        });
        // Upstream leaves an empty reason out of the Status.
        if self.reason().is_empty()
            && let Some(map) = status.as_object_mut()
        {
            map.remove("reason");
        }
        if let Some(details) = self.details() {
            status["details"] = details;
        }
        if let ApiError::ContinueExpired { resume } = self {
            status["metadata"]["continue"] = json!(resume);
        }
        status
    }
}

impl ApiError {
    /// Upstream's answer to a request from a resourceVersion the server has
    /// not reached (after waiting for it briefly): retry in a second.
    pub fn too_large_resource_version(requested: u64, current: u64) -> Self {
        ApiError::Timeout {
            message: format!("Too large resource version: {requested}, current: {current}"),
            retry_after_seconds: 1,
            causes: vec![(
                "ResourceVersionTooLarge".into(),
                "Too large resource version".into(),
                String::new(),
            )],
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        json_response(self.code(), &self.to_status())
    }
}

/// A JSON response with the given code, its keys in upstream's order.
pub fn json_response(code: StatusCode, body: &Value) -> Response {
    encoded_json_response(code, crate::wire_order::to_vec(body).into())
}

/// A JSON response whose body is encoded already (a watch cache's copy of
/// an object, in upstream's key order).
pub fn encoded_json_response(code: StatusCode, body: bytes::Bytes) -> Response {
    let mut response = (code, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// A `Status` reporting success, as returned by binding, eviction and some deletes.
pub fn success_status(code: u16) -> Value {
    json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code })
}

/// `error`'s Status, checked to carry `code`, `reason` and `message`; the
/// caller checks the rest.
#[cfg(test)]
pub(crate) fn assert_status(error: &ApiError, code: u16, reason: &str, message: &str) -> Value {
    let status = error.to_status();
    assert_eq!(status["code"], code, "{status}");
    assert_eq!(status["reason"], reason, "{status}");
    assert_eq!(status["message"], message, "{status}");
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_limits_are_worded_as_upstream_1_33() {
        let long = FieldError::too_long("metadata.annotations", 262144);
        assert_eq!(
            long.render(),
            "metadata.annotations: Too long: may not be more than 262144 bytes"
        );
        assert_eq!(long.reason(), "FieldValueTooLong");
        assert_eq!(
            FieldError::too_long("x", 1).render(),
            "x: Too long: may not be more than 1 byte"
        );
        let many = FieldError::too_many("spec.tags", 3, 2);
        assert_eq!(
            many.render(),
            "spec.tags: Too many: 3: must have at most 2 items"
        );
        assert_eq!(many.reason(), "FieldValueTooMany");
        assert_eq!(
            FieldError::too_many("x", 2, 1).render(),
            "x: Too many: 2: must have at most 1 item"
        );
    }

    #[test]
    fn conflict_message_matches_upstream() {
        let e = ApiError::Conflict {
            resource: "configmaps".into(),
            group: String::new(),
            name: "x".into(),
            detail: "the object has been modified; please apply your changes to the latest version and try again".into(),
        };
        let s = assert_status(
            &e,
            409,
            "Conflict",
            "Operation cannot be fulfilled on configmaps \"x\": the object has been modified; please apply your changes to the latest version and try again",
        );
        assert_eq!(s["details"]["kind"], "configmaps");
    }

    #[test]
    fn too_large_resource_version_is_upstreams_timeout() {
        let s = assert_status(
            &ApiError::too_large_resource_version(90, 12),
            504,
            "Timeout",
            "Timeout: Too large resource version: 90, current: 12",
        );
        assert_eq!(
            s["details"]["causes"][0]["reason"],
            "ResourceVersionTooLarge"
        );
        assert_eq!(
            s["details"]["causes"][0]["message"],
            "Too large resource version"
        );
        assert_eq!(s["details"]["retryAfterSeconds"], 1);
    }

    #[test]
    fn invalid_lists_every_cause() {
        let e = ApiError::Invalid {
            kind: "Pod".into(),
            group: String::new(),
            name: "p".into(),
            causes: vec![
                FieldError::required("spec.containers[0].image", ""),
                FieldError::invalid("metadata.name", "A", "bad"),
            ],
        };
        let s = e.to_status();
        assert_eq!(
            s["message"],
            "Pod \"p\" is invalid: [spec.containers[0].image: Required value, metadata.name: Invalid value: \"A\": bad]"
        );
        assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueRequired");
        assert_eq!(s["details"]["causes"][1]["field"], "metadata.name");
    }
}
