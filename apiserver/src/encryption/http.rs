//! The admin endpoints behind `skiff secrets-encrypt`: [`super::STATUS_PATH`]
//! (GET) and [`super::ROTATE_KEYS_PATH`], [`super::REENCRYPT_PATH`] (POST).
//! They are non-resource paths, so the authorization middleware has decided
//! before they run (`get`/`post` on the path: cluster admins and
//! `system:masters`); they answer with an [`super::EncryptionStatus`] or a
//! Kubernetes `Status`.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use super::{EncryptionError, EncryptionStatus};
use crate::server::Inner;
use crate::status::{ApiError, json_response};

fn api_error(e: EncryptionError) -> ApiError {
    match e {
        EncryptionError::NotEnabled
        | EncryptionError::NotManaged { .. }
        | EncryptionError::ManagedProvider { .. } => ApiError::BadRequest(e.to_string()),
        EncryptionError::Store(skiff_store::StoreError::Closed) => {
            ApiError::ServiceUnavailable("the storage is shutting down".into())
        }
        other => ApiError::Internal(other.to_string()),
    }
}

fn answer(result: Result<EncryptionStatus, EncryptionError>) -> Response {
    match result {
        Ok(status) => match serde_json::to_value(&status) {
            Ok(body) => json_response(StatusCode::OK, &body),
            Err(e) => ApiError::Internal(e.to_string()).into_response(),
        },
        Err(e) => api_error(e).into_response(),
    }
}

/// `GET /v1-skiff/encrypt/status`.
pub(crate) async fn status_handler(State(inner): State<Arc<Inner>>) -> Response {
    match &inner.encryption {
        Some(store) => answer(store.status().await),
        None => answer(Ok(EncryptionStatus::default())),
    }
}

/// `POST /v1-skiff/encrypt/rotate-keys`.
pub(crate) async fn rotate_keys_handler(State(inner): State<Arc<Inner>>) -> Response {
    match &inner.encryption {
        Some(store) => answer(store.rotate_keys().await),
        None => answer(Err(EncryptionError::NotEnabled)),
    }
}

/// `POST /v1-skiff/encrypt/reencrypt`.
pub(crate) async fn reencrypt_handler(State(inner): State<Arc<Inner>>) -> Response {
    match &inner.encryption {
        Some(store) => answer(store.reencrypt(&inner.key_locks).await),
        None => answer(Err(EncryptionError::NotEnabled)),
    }
}
