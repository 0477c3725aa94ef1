//! Request bodies: size limit, media type, and JSON or YAML decoding; and
//! the pass-through wrapper the audit and metrics layers put around a body.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use bytes::Bytes;
use http::HeaderMap;
use hyper::body::{Frame, SizeHint};
use serde_json::Value;

use crate::status::{ApiError, MAX_BODY_BYTES};

/// Media types accepted for object bodies, as a 415 lists them.
const OBJECT_MEDIA_TYPES: &str =
    "application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// Reads the whole body, refusing more than [`MAX_BODY_BYTES`].
pub(crate) async fn read(headers: &HeaderMap, body: Body) -> Result<Bytes, ApiError> {
    let declared = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES) {
        return Err(ApiError::TooLarge(MAX_BODY_BYTES));
    }
    axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|e| {
            if std::error::Error::source(&e).is_some_and(|s| s.to_string().contains("length limit"))
                || e.to_string().contains("length limit")
            {
                ApiError::TooLarge(MAX_BODY_BYTES)
            } else {
                ApiError::BadRequest(format!("failed to read request body: {e}"))
            }
        })
}

/// The media type of the request without parameters, lower-cased.
pub(crate) fn content_type(headers: &HeaderMap) -> Option<String> {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|v| !v.is_empty())
}

/// The Go type upstream's decoder reads a body's kind into, as Go prints it.
const FIND_KIND_GO_TYPE: &str = "struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }";

/// Decodes an object body (create, update, subresource posts).
pub(crate) fn decode_object(headers: &HeaderMap, bytes: &[u8]) -> Result<Value, ApiError> {
    let value: Value = match content_type(headers).as_deref() {
        None | Some("application/json") | Some("*/*") => {
            serde_json::from_slice(bytes).map_err(|e| {
                let why = crate::go_json::syntax_error(bytes).unwrap_or_else(|| e.to_string());
                ApiError::BadRequest(format!(
                    "couldn't get version/kind; json parse error: {why}"
                ))
            })?
        }
        Some("application/yaml") | Some("application/x-yaml") | Some("text/yaml") => {
            let yaml: serde_yaml::Value = serde_yaml::from_slice(bytes).map_err(|e| {
                ApiError::BadRequest(format!("couldn't get version/kind; yaml parse error: {e}"))
            })?;
            serde_json::to_value(yaml)
                .map_err(|e| ApiError::BadRequest(format!("yaml is not valid JSON: {e}")))?
        }
        Some(crate::protobuf::MEDIA_TYPE) => crate::protobuf::decode_object(bytes)
            .map_err(|e| ApiError::BadRequest(e.to_string()))?,
        Some(_) => return Err(ApiError::UnsupportedMediaType(OBJECT_MEDIA_TYPES.into())),
    };
    // Go decodes `null` into an object as nothing at all.
    let value = if value.is_null() {
        Value::Object(serde_json::Map::new())
    } else {
        value
    };
    if !value.is_object() {
        // Upstream reads the kind into this Go struct first.
        let why = crate::go_json::cannot_unmarshal(&value, FIND_KIND_GO_TYPE);
        return Err(ApiError::BadRequest(format!(
            "couldn't get version/kind; json parse error: {why}"
        )));
    }
    Ok(value)
}

/// A body passing `inner`'s frames through unchanged, showing each data
/// frame to `look` on its way. `look` lives as long as the body, so what it
/// owns (a copy being kept, a guard) lasts until the stream ends or the
/// client leaves.
pub(crate) struct Watched<F> {
    inner: Body,
    look: F,
}

impl<F: FnMut(&Bytes) + Send + Unpin + 'static> Watched<F> {
    /// Wraps `inner`; `look` sees every data frame read from it.
    pub(crate) fn new(inner: Body, look: F) -> Self {
        Self { inner, look }
    }
}

impl<F: FnMut(&Bytes) + Unpin> hyper::body::Body for Watched<F> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            (this.look)(data);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        hyper::body::Body::is_end_stream(&self.inner)
    }

    fn size_hint(&self) -> SizeHint {
        hyper::body::Body::size_hint(&self.inner)
    }
}

/// `body` unchanged, holding `keep` (a gauge's guard) until the body is
/// dropped.
pub(crate) fn holding<K: Send + Unpin + 'static>(body: Body, keep: K) -> Body {
    Body::new(Watched::new(body, move |_: &Bytes| {
        // Naming `keep` moves it into the closure, and so into the body.
        let _ = &keep;
    }))
}
