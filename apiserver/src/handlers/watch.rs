//! WATCH: a chunked stream of JSON events served from the watch cache, each
//! watcher run by its response body (`watch_body.rs`), with selectors
//! applied per event (an object leaving the selection is DELETED, entering
//! it ADDED), bookmarks, timeouts, 410 as an ERROR event, and a clean end on
//! server shutdown.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderValue, StatusCode, header};
use serde::Serialize;
use serde_json::{Value, json};
use skiff_store::{Revision, Store, StoreError};
use tokio::sync::broadcast;

use super::Ctx;
use super::watch_body::{Outbox, WatchBody};
use crate::registry::ResourceInfo;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::watch_cache::{CacheEvent, Cached, ChangeKind, Frame, Start, WatchCache};
use crate::wire_order::Ordered;

/// How long a watch from a resourceVersion the store has not reached waits
/// for it before failing (upstream's watch cache waits 3 s).
pub(crate) const TOO_LARGE_WAIT: Duration = Duration::from_secs(3);

/// Waits until the store's revision reaches `revision`, for at most
/// `limit`; returns whether it did. Polls: the store has no notification
/// of its revision, and this wait is rare (a client ahead of the server).
pub(crate) async fn store_reaches(store: &dyn Store, revision: Revision, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if store.current_revision() >= revision {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[derive(Serialize)]
struct WireEvent<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    object: Ordered<'a>,
}

fn encode(kind: &str, object: &Value) -> Bytes {
    let mut bytes = serde_json::to_vec(&WireEvent {
        kind,
        object: Ordered::new(object),
    })
    .unwrap_or_default();
    bytes.push(b'\n');
    Bytes::from(bytes)
}

/// How long a watch runs: the client's `timeoutSeconds` when it set one
/// above zero, else between the server's default and twice that, spread so
/// that clients started together do not all come back at once (as
/// upstream's `minRequestTimeout`). A watch is a long-running request:
/// `timeout=` (a client's own request deadline) is not read for it.
fn watch_timeout(timeout_seconds: Option<u64>, default: Duration) -> Duration {
    match timeout_seconds {
        Some(seconds) if seconds > 0 => Duration::from_secs(seconds),
        _ => default.mul_f64(1.0 + rand::random::<f64>()),
    }
}

/// What one watcher wants to see.
struct Filter {
    info: Arc<ResourceInfo>,
    /// Set when the client asked for Table objects: (Table apiVersion, includeObject).
    table: Option<(&'static str, crate::table::IncludeObject)>,
    prefix: String,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    fn selects(&self, key: &str, served: &Value) -> bool {
        key.starts_with(&self.prefix) && self.labels.matches(served) && self.fields.matches(served)
    }

    /// Whether a cached object is selected, decoding and converting it
    /// only when a selector has to look inside.
    fn selects_stored(&self, key: &str, object: &Cached) -> bool {
        self.selects_cached(key, object, || object.selection_view())
    }

    /// As [`Self::selects_stored`], with the object's selection view from
    /// `view` (an event's, decoded once for every watcher) when labels and
    /// names are all the selectors read.
    fn selects_cached<V: std::ops::Deref<Target = Value>>(
        &self,
        key: &str,
        object: &Cached,
        view: impl FnOnce() -> V,
    ) -> bool {
        if !key.starts_with(&self.prefix) {
            return false;
        }
        if self.labels.is_empty() && self.fields.is_empty() {
            return true;
        }
        // A watch of one object by name (as kubelets watch the ConfigMaps
        // and Secrets their pods use) is answered from the key, without
        // decoding every object of the namespace for it.
        if self.labels.is_empty()
            && self.fields.only_names()
            && let Some((namespace, name)) = self.info.names_in_key(key)
        {
            let names = json!({"metadata": {"name": name, "namespace": namespace}});
            return self.fields.matches(&names);
        }
        if self.info.conversion.is_some() {
            return self.selects(key, &self.info.from_storage(object.to_value()));
        }
        if self.fields.only_names() {
            return self.selects(key, &view());
        }
        self.selects(key, &object.value())
    }

    /// The wire event for a cached object: its bytes as they are when it is
    /// held encoded and served unchanged, else encoded from its served form.
    fn encode_cached(&self, kind: &'static str, object: &Cached) -> Frame {
        if self.table.is_none() && self.info.conversion.is_none() {
            return match object {
                Cached::Encoded(_) => Frame::around(kind, object),
                Cached::Decoded(value) => encode(kind, value).into(),
            };
        }
        self.encode_served(kind, &self.info.from_storage(object.to_value()))
            .into()
    }

    /// The wire event for an object already in its served form: the object,
    /// or a one-row Table when the client asked for Tables.
    fn encode_served(&self, kind: &str, served: &Value) -> Bytes {
        match self.table {
            Some((version, include)) => {
                let metadata =
                    json!({ "resourceVersion": served.pointer("/metadata/resourceVersion") });
                let request = crate::table::TableRequest {
                    api_version: version,
                    objects: std::slice::from_ref(served),
                    include,
                    list_metadata: metadata,
                    now: k8s_openapi::jiff::Timestamp::now(),
                };
                let table = self.info.table(request);
                encode(kind, &table)
            }
            None => encode(kind, served),
        }
    }

    /// The wire event for the object after a change.
    fn encode_event(&self, kind: &'static str, event: &CacheEvent) -> Frame {
        if self.table.is_none() && self.info.conversion.is_none() {
            event.frame(kind)
        } else {
            self.encode_cached(kind, &event.object)
        }
    }

    /// Whether this watcher's selection depends on nothing but the key and
    /// an object's labels, name and namespace.
    fn selects_on_view_only(&self) -> bool {
        self.info.conversion.is_none() && self.fields.only_names()
    }

    /// The wire event for a change, given what this watcher selects.
    fn event(&self, event: &CacheEvent) -> Option<Frame> {
        let now = self.selects_cached(&event.key, &event.object, || event.object_view());
        match event.kind {
            ChangeKind::Delete => now.then(|| self.encode_event("DELETED", event)),
            ChangeKind::Put => {
                let before = match &event.prev {
                    None => false,
                    Some(_) if self.selects_on_view_only() && event.selection_unchanged() => now,
                    Some(p) => self.selects_cached(&event.key, p, || event.prev_view(p)),
                };
                match (before, now) {
                    (false, true) => Some(self.encode_event("ADDED", event)),
                    (true, true) => Some(self.encode_event("MODIFIED", event)),
                    // Left the selection: its new state goes out as DELETED.
                    (true, false) => Some(self.encode_event("DELETED", event)),
                    (false, false) => None,
                }
            }
        }
    }
}

fn gone(message: String) -> Bytes {
    let status = ApiError::Expired(message).to_status();
    encode("ERROR", &status)
}

pub(super) async fn watch_one(mut ctx: Ctx) -> Result<Response, ApiError> {
    let name = ctx.name()?.to_string();
    let selector = if ctx.params.field_selector.is_empty() {
        format!("metadata.name={name}")
    } else {
        format!("{},metadata.name={name}", ctx.params.field_selector)
    };
    ctx.params.field_selector = selector;
    ctx.target.name = None;
    watch(ctx).await
}

pub(super) async fn watch(ctx: Ctx) -> Result<Response, ApiError> {
    let info = ctx.info().clone();
    let (labels, fields) = ctx.collection_selectors()?;
    let from = match ctx.params.resource_version.as_deref() {
        None | Some("0") => None,
        Some(rv) if ctx.params.send_initial_events == Some(true) => {
            rv.parse::<Revision>()
                .map_err(|_| ApiError::BadRequest(format!("invalid resource version: {rv}")))?;
            None
        }
        Some(rv) => Some(
            rv.parse::<Revision>()
                .map_err(|_| ApiError::BadRequest(format!("invalid resource version: {rv}")))?,
        ),
    };
    let cache = ctx.inner.cache(&info)?.clone();
    // A streaming list without a resourceVersion is a consistent read, as
    // upstream's: its initial events are at least as new as the store is
    // now (a cache that cannot say so within the wait serves what it has).
    let consistent = ctx.params.send_initial_events == Some(true)
        && ctx
            .params
            .resource_version
            .as_deref()
            .is_none_or(str::is_empty);
    if consistent {
        let now = ctx.inner.store.current_revision();
        cache.wait_current(now, super::read::WAIT_FOR_CURRENT).await;
    }
    let table = match crate::table::requested_table_version(&ctx.headers) {
        Some(version) => Some((
            version,
            crate::table::IncludeObject::parse(ctx.params.include_object.as_deref())
                .map_err(ApiError::BadRequest)?,
        )),
        None => None,
    };
    let filter = Filter {
        table,
        prefix: info.collection_prefix(ctx.namespace()),
        info,
        labels,
        fields,
    };
    let config = &ctx.inner.config;
    let timeout = watch_timeout(ctx.params.timeout_seconds, config.default_watch_timeout);
    let options = WatchOptions {
        from,
        timeout,
        bookmarks: ctx
            .params
            .allow_bookmarks
            .then_some(config.bookmark_interval),
        initial_events_end: ctx.params.send_initial_events == Some(true)
            && ctx.params.allow_bookmarks,
    };
    let outbox = Arc::new(Outbox::default());
    let shutdown = ctx.inner.shutdown.subscribe();
    let registered =
        crate::metrics::watcher(filter.info.group, filter.info.version, filter.info.kind);
    let watcher = run_watcher(
        cache,
        ctx.inner.store.clone(),
        filter,
        options,
        outbox.clone(),
        shutdown,
    );
    let body = WatchBody::new(watcher, outbox, registered);
    let mut response = Response::new(Body::from_stream(body));
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

struct WatchOptions {
    from: Option<Revision>,
    timeout: Duration,
    bookmarks: Option<Duration>,
    /// Send the `k8s.io/initial-events-end` bookmark after the initial state.
    initial_events_end: bool,
}

fn bookmark(info: &ResourceInfo, revision: Revision, initial_end: bool) -> Bytes {
    let mut metadata = json!({ "resourceVersion": revision.to_string() });
    if initial_end {
        metadata["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
    }
    encode(
        "BOOKMARK",
        &json!({ "kind": info.kind, "apiVersion": info.api_version(), "metadata": metadata }),
    )
}

/// Feeds one watcher until the timeout passes, the cache resets or the
/// server shuts down; it ends the HTTP stream by returning. When the client
/// goes, its body is dropped and this with it.
async fn run_watcher(
    cache: Arc<WatchCache>,
    store: Arc<dyn Store>,
    filter: Filter,
    options: WatchOptions,
    out: Arc<Outbox>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    // A resourceVersion ahead of the store (from another server, or made
    // up) gets a short wait, then upstream's 504 as an ERROR event.
    if let Some(from) = options.from {
        let reached = tokio::select! {
            reached = store_reaches(store.as_ref(), from, TOO_LARGE_WAIT) => reached,
            _ = shutdown.changed() => return,
        };
        if !reached {
            let status = ApiError::too_large_resource_version(from, store.current_revision());
            out.send(encode("ERROR", &status.to_status())).await;
            return;
        }
    }
    let subscription = match cache.subscribe(options.from) {
        Ok(s) => s,
        Err(too_old) => match options.from {
            // Older than the cache's history (a client resuming after a
            // restart, whose cache starts at the store's revision then) but
            // still in the store's: served from the store.
            Some(from) if from >= store.compact_revision() => {
                run_store_watcher(store, from, filter, options, out, shutdown).await;
                return;
            }
            _ => {
                out.send(gone(too_old.to_string())).await;
                return;
            }
        },
    };
    let mut live = subscription.live;
    let mut last = options.from.unwrap_or(0);
    match subscription.start {
        Start::Snapshot(snapshot) => {
            for (key, object) in snapshot.objects.iter() {
                if filter.selects_stored(key, object) {
                    out.send(filter.encode_cached("ADDED", object)).await;
                }
            }
            last = snapshot.revision;
            if options.initial_events_end {
                out.send(bookmark(&filter.info, last, true)).await;
            }
        }
        Start::History(events) => send_history(events, &filter, &out, &mut last).await,
    }
    let mut clock = WatchClock::new(&options, shutdown);
    loop {
        tokio::select! {
            wake = clock.wake() => {
                if wake == Wake::End {
                    return;
                }
                // Past `last` only with nothing queued here: every change up
                // to the cache's revision has then been through this watcher,
                // so a client resuming from the bookmark misses none.
                let current = cache.current_revision();
                let revision = if live.is_empty() { current.max(last) } else { last };
                out.send(bookmark(&filter.info, revision, false)).await;
            }
            received = live.recv() => match received {
                Ok(event) => {
                    if event.revision <= last {
                        continue;
                    }
                    last = event.revision;
                    if let Some(frame) = filter.event(&event) {
                        out.send(frame).await;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    // Fell behind the live feed: catch up from history.
                    match cache.subscribe(Some(last)) {
                        Ok(resumed) => {
                            live = resumed.live;
                            if let Start::History(events) = resumed.start {
                                send_history(events, &filter, &out, &mut last).await;
                            }
                        }
                        Err(too_old) => {
                            out.send(gone(too_old.to_string())).await;
                            return;
                        }
                    }
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }
}

/// Sends a watcher the cache's `events` since its start or resume point,
/// moving `last` along.
async fn send_history(
    events: Vec<Arc<CacheEvent>>,
    filter: &Filter,
    out: &Outbox,
    last: &mut Revision,
) {
    for event in events {
        *last = event.revision;
        if let Some(frame) = filter.event(&event) {
            out.send(frame).await;
        }
    }
}

/// Why a [`WatchClock`] woke its watcher.
#[derive(Debug, PartialEq, Eq)]
enum Wake {
    /// The watch ends: its timeout passed or the server is shutting down.
    End,
    /// A bookmark is due.
    Bookmark,
}

/// What wakes a watch besides its events, the same for a cached and a
/// store watch: the request's timeout, the server's shutdown, and the
/// bookmark ticker when bookmarks were asked for.
struct WatchClock {
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
    shutdown: tokio::sync::watch::Receiver<bool>,
    bookmarks: bool,
    ticker: tokio::time::Interval,
}

impl WatchClock {
    fn new(options: &WatchOptions, shutdown: tokio::sync::watch::Receiver<bool>) -> Self {
        let bookmark_every = options.bookmarks.unwrap_or(Duration::from_secs(3600));
        Self {
            deadline: Box::pin(tokio::time::sleep(options.timeout)),
            shutdown,
            bookmarks: options.bookmarks.is_some(),
            ticker: tokio::time::interval_at(
                tokio::time::Instant::now() + bookmark_every,
                bookmark_every,
            ),
        }
    }

    /// Waits for the end of the watch or its next bookmark. Cancel-safe,
    /// so it races the watch's events in a `select!`.
    async fn wake(&mut self) -> Wake {
        if *self.shutdown.borrow() {
            return Wake::End;
        }
        tokio::select! {
            _ = &mut self.deadline => Wake::End,
            _ = self.shutdown.changed() => Wake::End,
            _ = self.ticker.tick(), if self.bookmarks => Wake::Bookmark,
        }
    }
}

/// Feeds one watcher from a store watch rather than the cache: for a
/// resume from a revision the cache's history no longer holds but the
/// store's still does. The same selection and encoding as a cached watch;
/// ends as one does, or with 410 Gone once the store compacts past it.
async fn run_store_watcher(
    store: Arc<dyn Store>,
    from: Revision,
    filter: Filter,
    options: WatchOptions,
    out: Arc<Outbox>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let too_old = |requested: Revision, compact: Revision| {
        gone(format!("too old resource version: {requested} ({compact})"))
    };
    let mut stream = match store.watch(&filter.prefix, from) {
        Ok(stream) => stream,
        Err(StoreError::Compacted {
            requested,
            compact_revision,
        }) => {
            out.send(too_old(requested, compact_revision)).await;
            return;
        }
        Err(_) => return,
    };
    let mut last = from;
    let mut clock = WatchClock::new(&options, shutdown);
    loop {
        tokio::select! {
            wake = clock.wake() => {
                if wake == Wake::End {
                    return;
                }
                out.send(bookmark(&filter.info, last, false)).await;
            }
            next = stream.next() => match next {
                Some(Ok(event)) => {
                    last = event.revision();
                    if let Some(change) = CacheEvent::from_store(&event)
                        && let Some(frame) = filter.event(&change)
                    {
                        out.send(frame).await;
                    }
                }
                Some(Err(StoreError::Compacted {
                    requested,
                    compact_revision,
                })) => {
                    out.send(too_old(requested, compact_revision)).await;
                    return;
                }
                Some(Err(_)) | None => return,
            }
        }
    }
}
