//! HTTP caching of OpenAPI documents as kubectl relies on it: an ETag per
//! document (304 for a matching `If-None-Match`), and for documents addressed
//! by `?hash=`, an immutable response when the hash is current or a redirect
//! to the current hash when it is not.

use axum::body::Body;
use axum::response::Response;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use sha2::{Digest, Sha256};

use super::Document;

/// Upper-case hex SHA-256.
pub(super) fn hash_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push_str(&format!("{b:02X}"));
    }
    out
}

/// The `hash` query parameter, if any.
pub(super) fn query_hash(query: Option<&str>) -> Option<String> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("hash="))
        .map(str::to_string)
}

/// The comma-separated entries of every `name` header.
fn list_entries(headers: &HeaderMap, name: header::HeaderName) -> impl Iterator<Item = &str> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
}

/// Whether `Accept` lists `media` (parameters and quality ignored).
pub(super) fn accepts(headers: &HeaderMap, media: &str) -> bool {
    list_entries(headers, header::ACCEPT).any(|entry| {
        entry
            .split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case(media))
    })
}

fn etag_matches(headers: &HeaderMap, etag: &str) -> bool {
    list_entries(headers, header::IF_NONE_MATCH).any(|t| {
        let t = t.trim();
        t == "*" || t.trim_start_matches("W/") == etag
    })
}

/// Serves `doc`. `addressed` is the request path and the hash it asked for,
/// for documents listed in the v3 index.
pub(super) fn respond(
    doc: &Document,
    content_type: &str,
    headers: &HeaderMap,
    addressed: Option<(&str, Option<&str>)>,
) -> Response {
    let etag = format!("\"{}\"", doc.hash);
    let mut builder = Response::builder()
        .header(header::ETAG, &etag)
        .header(header::VARY, "Accept");
    match addressed {
        Some((path, Some(hash))) if hash != doc.hash => {
            return Response::builder()
                .status(StatusCode::MOVED_PERMANENTLY)
                .header(header::LOCATION, format!("{path}?hash={}", doc.hash))
                .header(header::CACHE_CONTROL, "no-cache")
                .body(Body::empty())
                .unwrap_or_default();
        }
        Some((_, Some(_))) => {
            builder = builder
                .header(header::CACHE_CONTROL, "public, immutable")
                .header(header::EXPIRES, "Thu, 31 Dec 2099 23:59:59 GMT");
        }
        _ => {
            builder = builder.header(header::CACHE_CONTROL, "no-cache, private");
        }
    }
    if etag_matches(headers, &etag) {
        return builder
            .status(StatusCode::NOT_MODIFIED)
            .body(Body::empty())
            .unwrap_or_default();
    }
    let content_type =
        HeaderValue::from_str(content_type).unwrap_or(HeaderValue::from_static("application/json"));
    builder
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from(doc.bytes.clone()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_hash_and_accept() {
        assert_eq!(query_hash(Some("a=1&hash=ABC")).as_deref(), Some("ABC"));
        assert_eq!(query_hash(Some("a=1")), None);
        let mut h = HeaderMap::new();
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json;q=0.9, application/com.github.proto-openapi.spec.v2@v1.0+protobuf"),
        );
        assert!(accepts(&h, super::super::V2_PROTOBUF));
        assert!(!accepts(&h, "application/yaml"));
        assert_eq!(hash_hex(b"").len(), 64);
    }
}
