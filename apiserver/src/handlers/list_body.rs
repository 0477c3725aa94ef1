//! A JSON list body written item by item as the client reads it (upstream's
//! streaming collection encoding): the items stay shared with the watch
//! cache's snapshot and only about one chunk of encoded bytes exists per
//! list at a time, so an unpaginated list of 50 MB does not cost 50 MB.

use std::convert::Infallible;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use serde::Serialize;
use serde_json::Value;

use crate::status::ApiError;
use crate::watch_cache::Cached;

/// Encoded bytes gathered before a chunk is handed to the connection: large
/// enough that a big list crosses to the client in few hand-offs between the
/// server's and the client's threads (64 KiB chunks made a list of 10,000
/// ConfigMaps 15-20 % slower to arrive, docs/BENCHMARKS.md), small enough to
/// be noise next to the objects of a list that size.
const CHUNK_BYTES: usize = 256 * 1024;

/// The parts of a list body around its items.
pub(super) struct ListHead {
    /// `ConfigMapList` and the like.
    pub kind: String,
    pub api_version: String,
    /// `ListMeta`, written in upstream's key order.
    pub metadata: Value,
}

/// Writes a list's metadata in upstream's `ListMeta` order.
fn ordered_list_metadata<S: serde::Serializer>(value: &Value, s: S) -> Result<S::Ok, S::Error> {
    crate::wire_order::list_metadata(value).serialize(s)
}

#[derive(Serialize)]
struct HeadBody<'a> {
    kind: &'a str,
    #[serde(rename = "apiVersion")]
    api_version: &'a str,
    #[serde(serialize_with = "ordered_list_metadata")]
    metadata: &'a Value,
    items: [(); 0],
}

/// The list's bytes up to and including the `[` that opens its items.
fn opening(head: &ListHead) -> Result<Vec<u8>, ApiError> {
    let mut bytes = serde_json::to_vec(&HeadBody {
        kind: &head.kind,
        api_version: &head.api_version,
        metadata: &head.metadata,
        items: [],
    })
    .map_err(|e| ApiError::Internal(format!("encoding a list: {e}")))?;
    // `{"kind":…,"items":[]}` ends with the empty items and the brace.
    if !bytes.ends_with(b"[]}") {
        return Err(ApiError::Internal(
            "list head in an unexpected shape".into(),
        ));
    }
    bytes.truncate(bytes.len() - 2);
    Ok(bytes)
}

/// A 200 response whose JSON body is `head` with `items`. Items carry no apiVersion/kind unless `with_type` (custom objects keep
/// theirs, as upstream's unstructured lists do).
pub(super) fn respond(
    head: ListHead,
    items: Vec<Cached>,
    with_type: bool,
) -> Result<Response, ApiError> {
    let opening = opening(&head)?;
    let mut items = items.into_iter().peekable();
    let mut pending = Some(opening);
    let mut finished = false;
    let chunks = futures::stream::poll_fn(move |_| {
        if finished {
            return std::task::Poll::Ready(None);
        }
        let mut buf = pending.take().unwrap_or_default();
        while buf.len() < CHUNK_BYTES {
            let Some(item) = items.next() else {
                buf.extend_from_slice(b"]}");
                finished = true;
                break;
            };
            if let Err(e) = item.write_item(&mut buf, with_type) {
                // Values always encode; should one not, the client sees a
                // cut-off body rather than a list silently missing an item.
                tracing::error!(error = %e, "encoding a list item failed; ending the body");
                finished = true;
                return std::task::Poll::Ready(Some(Ok::<Bytes, Infallible>(Bytes::from(buf))));
            }
            if items.peek().is_some() {
                buf.push(b',');
            }
        }
        std::task::Poll::Ready(Some(Ok(Bytes::from(buf))))
    });
    let mut response = (StatusCode::OK, Body::from_stream(chunks)).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    async fn body(items: Vec<Value>, with_type: bool) -> Value {
        let head = ListHead {
            kind: "ConfigMapList".into(),
            api_version: "v1".into(),
            metadata: json!({"resourceVersion": "7"}),
        };
        let response = respond(
            head,
            items
                .into_iter()
                .map(|v| Cached::Decoded(Arc::new(v)))
                .collect(),
            with_type,
        )
        .expect("response");
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        serde_json::from_slice(&bytes).expect("a list body is JSON")
    }

    #[tokio::test]
    async fn an_empty_list_has_empty_items() {
        let list = body(vec![], false).await;
        assert_eq!(list["items"], json!([]));
        assert_eq!(list["metadata"]["resourceVersion"], "7");
    }

    #[tokio::test]
    async fn items_spanning_many_chunks_arrive_whole_and_in_order() {
        // About four chunks' worth of items.
        let count = 4 * CHUNK_BYTES / 1024;
        let items: Vec<Value> = (0..count)
            .map(|i| {
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": format!("cm-{i:04}")},
                       "data": {"blob": "x".repeat(1024)}})
            })
            .collect();
        let list = body(items, false).await;
        let got = list["items"].as_array().expect("items");
        assert_eq!(got.len(), count);
        assert_eq!(got[0]["metadata"]["name"], "cm-0000");
        assert_eq!(
            got[count - 1]["metadata"]["name"],
            format!("cm-{:04}", count - 1)
        );
        assert!(
            got[5].get("kind").is_none(),
            "typed list items have no kind"
        );
    }
}
