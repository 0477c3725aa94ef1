//! Error answers of the node server, as `metav1.Status` JSON so the API
//! server can pass them to clients unchanged.

use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde_json::json;

use super::target::TargetError;
use super::upgrade::UpgradeError;
use crate::agent::pod::logs::LogError;

/// A failure Status with upstream's reason for `code`.
pub(crate) fn failure(code: StatusCode, message: impl Into<String>) -> Response {
    let reason = match code {
        StatusCode::BAD_REQUEST => "BadRequest",
        StatusCode::UNAUTHORIZED => "Unauthorized",
        StatusCode::FORBIDDEN => "Forbidden",
        StatusCode::METHOD_NOT_ALLOWED => "MethodNotAllowed",
        StatusCode::NOT_FOUND => "NotFound",
        StatusCode::SERVICE_UNAVAILABLE => "ServiceUnavailable",
        _ => "InternalError",
    };
    let body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message.into(),
        "reason": reason,
        "code": code.as_u16(),
    });
    (
        code,
        [(http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

impl IntoResponse for TargetError {
    fn into_response(self) -> Response {
        // A kubelet answers a stream to a container that is not running
        // with its runtime error's text, not a Status.
        if let TargetError::ContainerNotFound { .. } = &self {
            return (StatusCode::INTERNAL_SERVER_ERROR, self.to_string()).into_response();
        }
        let code = match &self {
            TargetError::PodNotFound { .. } => StatusCode::NOT_FOUND,
            TargetError::NoSuchContainer { .. }
            | TargetError::NotRunning { .. }
            | TargetError::ContainerNotFound { .. } => StatusCode::BAD_REQUEST,
            TargetError::Runtime(e) if e.is_unavailable() => StatusCode::SERVICE_UNAVAILABLE,
            TargetError::Runtime(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        failure(code, self.to_string())
    }
}

impl IntoResponse for LogError {
    fn into_response(self) -> Response {
        let code = match &self {
            LogError::Io { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        };
        failure(code, self.to_string())
    }
}

impl IntoResponse for UpgradeError {
    fn into_response(self) -> Response {
        let code = match &self {
            UpgradeError::BadRequest(_) => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        failure(code, self.to_string())
    }
}
