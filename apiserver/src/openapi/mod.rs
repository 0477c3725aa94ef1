//! OpenAPI documents generated from the registry: `/openapi/v3` (an index of
//! one document per group version, each addressed with a content hash that
//! clients cache by) and `/openapi/v2` (one document for everything, JSON or
//! gnostic protobuf). Documents are generated on first use and kept, as
//! serialized bytes, until the set of served resources changes.

mod documents;
mod http_cache;
mod paths;
mod proto_v2;
mod schemas;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use parking_lot::Mutex;

use crate::registry::Registry;
use crate::server::Inner;
use crate::status::ApiError;

/// A built-in kind's schema name and the v2 definitions it reaches.
pub(crate) type KindDefinitions = (String, serde_json::Map<String, serde_json::Value>);

/// A built-in kind's schema name (`io.k8s.api.core.v1.Pod`) and the v2
/// definitions it reaches (`#/definitions/` references); `None` for a kind
/// k8s-openapi has no schema of. Only a body that failed to decode asks
/// (`decode_errors`); each kind's are made on its first failure and kept,
/// so a client sending bad bodies does not make the server generate
/// schemas over and over.
pub(crate) fn kind_definitions(
    group: &str,
    version: &str,
    kind: &str,
) -> Option<Arc<KindDefinitions>> {
    type Made = std::collections::HashMap<(String, String, String), Option<Arc<KindDefinitions>>>;
    static MADE: std::sync::OnceLock<Mutex<Made>> = std::sync::OnceLock::new();
    let key = (group.to_owned(), version.to_owned(), kind.to_owned());
    let mut made = MADE.get_or_init(Default::default).lock();
    made.entry(key)
        .or_insert_with(|| {
            let mut set = schemas::SchemaSet::new(schemas::Dialect::V2);
            let name = set.add_kind(group, version, kind)?;
            Some(Arc::new((name, set.finish())))
        })
        .clone()
}

/// The media type clients ask for gnostic's protobuf OpenAPI v2 document by.
pub(crate) const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The Content-Type it is served with: `@` is no token character, so
/// clients that parse the response header (Go's `mime`) need the dotted form.
pub(crate) const V2_PROTOBUF_RESPONSE: &str =
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// One serialized document and the hash clients address it by.
#[derive(Debug)]
pub(crate) struct Document {
    /// The document as served.
    pub bytes: Bytes,
    /// Upper-case hex SHA-256 of `bytes`.
    pub hash: String,
}

impl Document {
    fn new(bytes: Vec<u8>) -> Self {
        let hash = http_cache::hash_hex(&bytes);
        Self {
            bytes: Bytes::from(bytes),
            hash,
        }
    }
}

/// Every v3 document: `api/v1`, `apis/apps/v1`, ... and the index.
#[derive(Debug)]
pub(crate) struct V3Documents {
    /// The index, `/openapi/v3`, pointing at each document by hash.
    pub index: Document,
    /// Each group version's document, by its path (`api/v1`, `apis/apps/v1`, ...).
    pub by_path: BTreeMap<String, Document>,
}

/// Documents generated from one registry snapshot.
type Cached<T> = Mutex<Option<(Arc<Registry>, Arc<T>)>>;

/// Lazily generated, cached OpenAPI documents. The registry is replaced as a
/// whole when the served resources change (CRDs), so a cached document is
/// current exactly while it was made from the registry now served.
#[derive(Default)]
pub(crate) struct OpenApiCache {
    v3: Cached<V3Documents>,
    v2: Cached<(Document, Document)>,
}

fn cached<T>(slot: &Cached<T>, registry: &Arc<Registry>, make: impl FnOnce() -> T) -> Arc<T> {
    let mut slot = slot.lock();
    if let Some((made_from, docs)) = slot.as_ref()
        && Arc::ptr_eq(made_from, registry)
    {
        return docs.clone();
    }
    let docs = Arc::new(make());
    *slot = Some((registry.clone(), docs.clone()));
    docs
}

impl OpenApiCache {
    /// The v3 documents of this registry, generated on first use.
    pub(crate) fn v3(&self, registry: &Arc<Registry>) -> Arc<V3Documents> {
        cached(&self.v3, registry, || documents::v3(registry))
    }

    /// The v2 document of this registry as JSON and as protobuf,
    /// generated on first use.
    pub(crate) fn v2(&self, registry: &Arc<Registry>) -> Arc<(Document, Document)> {
        cached(&self.v2, registry, || {
            let doc = documents::v2(registry);
            let proto = proto_v2::encode(&doc);
            let json = serde_json::to_vec(&doc).unwrap_or_default();
            (Document::new(json), Document::new(proto))
        })
    }

    /// Forgets every document. Not needed when the registry is replaced
    /// (documents follow it), only when a schema changes in place.
    pub(crate) fn invalidate(&self) {
        *self.v3.lock() = None;
        *self.v2.lock() = None;
    }
}

/// `GET /openapi/v3`.
pub(crate) async fn v3_index(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    let docs = inner.openapi.v3(&inner.registry.current());
    http_cache::respond(&docs.index, "application/json", request.headers(), None)
}

/// `GET /openapi/v3/<api/v1 | apis/G/V>`.
pub(crate) async fn v3_document(
    State(inner): State<Arc<Inner>>,
    Path(path): Path<String>,
    request: Request,
) -> Response {
    let docs = inner.openapi.v3(&inner.registry.current());
    let Some(doc) = docs.by_path.get(path.trim_end_matches('/')) else {
        return ApiError::PathNotFound.into_response();
    };
    let wanted_hash = http_cache::query_hash(request.uri().query());
    http_cache::respond(
        doc,
        "application/json",
        request.headers(),
        Some((request.uri().path(), wanted_hash.as_deref())),
    )
}

/// `GET /openapi/v2`: protobuf when `Accept` asks for it, else JSON.
pub(crate) async fn v2(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    let docs = inner.openapi.v2(&inner.registry.current());
    if http_cache::accepts(request.headers(), V2_PROTOBUF) {
        http_cache::respond(&docs.1, V2_PROTOBUF_RESPONSE, request.headers(), None)
    } else {
        http_cache::respond(&docs.0, "application/json", request.headers(), None)
    }
}
