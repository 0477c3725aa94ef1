//! The watch cache: one per storage prefix. It holds the current objects
//! (an `imbl` map, so a snapshot for a paginated list is an O(1) clone) and a
//! bounded history of recent events, fed by a single store watch, and fans
//! every event out to any number of watchers through a broadcast channel —
//! a slow watcher falls behind on its own and resumes from history without
//! holding up the others.

mod cached;
mod feed;
mod handoff;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use std::time::{Duration, Instant};

use imbl::OrdMap;
use parking_lot::{Mutex, RwLock};
use serde_json::Value;
use skiff_store::{Revision, WatchProgress};
use tokio::sync::{broadcast, watch};

pub(crate) use cached::{CacheForm, Cached};
pub(crate) use feed::FeedError;
pub(crate) use handoff::Offer;

/// How many list snapshots are kept for continue tokens, and for how long.
const RETAINED_SNAPSHOTS: usize = 64;

/// Sizes of one cache.
#[derive(Debug, Clone)]
pub(crate) struct CacheLimits {
    /// Events kept for watches from an older resourceVersion, at most.
    pub history: usize,
    /// Events older than this are dropped from the history even below
    /// `history` (upstream's watch cache keeps about 75 s, its
    /// `eventFreshDuration`): a watch resuming from further back is served
    /// from the store, so a long history only costs memory — for big,
    /// busy objects (pods, EndpointSlices) 10,000 decoded events are
    /// hundreds of MiB.
    pub history_max_age: Duration,
    /// Live events buffered per watcher.
    pub fanout_buffer: usize,
    /// How long a list snapshot stays available to continue tokens.
    pub snapshot_ttl: Duration,
}

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeKind {
    Put,
    Delete,
}

/// One change as the cache saw it, shared by every watcher.
#[derive(Debug)]
pub(crate) struct CacheEvent {
    pub revision: Revision,
    pub kind: ChangeKind,
    pub key: String,
    /// The object after the change; for a delete, its last state with the
    /// deletion's resourceVersion.
    pub object: Cached,
    /// The object before the change, when it existed.
    pub prev: Option<Cached>,
    /// Wire frames of a decoded `object` as ADDED, MODIFIED and DELETED,
    /// each built once and shared by every watcher that sends it as is (an
    /// encoded object's frame is a copy of its bytes, not kept).
    encoded: [OnceLock<Bytes>; 3],
    /// What selectors look at in `object` and `prev` (see
    /// [`Cached::selection_view`]), decoded once for every watcher.
    views: [OnceLock<Arc<Value>>; 2],
    /// Whether the views agree on what selectors read (see
    /// [`Self::selection_unchanged`]), decided once for every watcher.
    selection_same: OnceLock<bool>,
}

impl CacheEvent {
    fn new(
        revision: Revision,
        kind: ChangeKind,
        key: String,
        object: Cached,
        prev: Option<Cached>,
    ) -> Self {
        Self {
            revision,
            kind,
            key,
            object,
            prev,
            encoded: Default::default(),
            views: Default::default(),
            selection_same: OnceLock::new(),
        }
    }

    /// The selection view of the object after the change, shared by every
    /// watcher that selects on labels or names.
    /// Borrowed, not cloned: a thousand watchers taking a reference each
    /// would bounce its count between the cores.
    pub(crate) fn object_view(&self) -> &Value {
        self.views[0].get_or_init(|| self.object.selection_view())
    }

    /// The selection view of `prev`, the object before the change (the
    /// caller's borrow of `self.prev`), shared like [`Self::object_view`].
    pub(crate) fn prev_view(&self, prev: &Cached) -> &Value {
        self.views[1].get_or_init(|| prev.selection_view())
    }

    /// Whether the object had a previous state with the same labels, name
    /// and namespace: then a watcher that selects on nothing else selects
    /// it before and after alike, and need not match twice.
    pub(crate) fn selection_unchanged(&self) -> bool {
        *self.selection_same.get_or_init(|| {
            let Some(prev) = &self.prev else {
                return false;
            };
            let (now, before) = (
                &self.object_view()["metadata"],
                &self.prev_view(prev)["metadata"],
            );
            ["labels", "name", "namespace"]
                .iter()
                .all(|field| now.get(field) == before.get(field))
        })
    }

    /// A change read straight from the store, in the cache's form (a watch
    /// resuming from before the cache's history is served this way). `None`
    /// for an undecodable value or the delete of a key with no known value.
    pub(crate) fn from_store(event: &skiff_store::Event) -> Option<Self> {
        let revision = event.revision();
        let prev = event
            .prev
            .as_ref()
            .and_then(|kv| crate::object::decode_from_store(kv).ok())
            .map(|value| Cached::Decoded(Arc::new(value)));
        let (kind, object) = match event.kind {
            skiff_store::EventKind::Put => (
                ChangeKind::Put,
                Cached::Decoded(Arc::new(crate::object::decode_from_store(&event.kv).ok()?)),
            ),
            skiff_store::EventKind::Delete => {
                let mut gone = prev.as_ref()?.to_value();
                crate::object::set_resource_version(&mut gone, revision);
                (ChangeKind::Delete, Cached::Decoded(Arc::new(gone)))
            }
        };
        Some(CacheEvent::new(
            revision,
            kind,
            event.kv.key.clone(),
            object,
            prev,
        ))
    }

    /// The watch frame `{"type":KIND,"object":OBJECT}\n` for `object`,
    /// built on first use.
    pub(crate) fn frame(&self, kind: &'static str) -> Frame {
        let slot = match kind {
            "ADDED" => 0,
            "MODIFIED" => 1,
            _ => 2,
        };
        match &self.object {
            Cached::Encoded(_) => Frame::around(kind, &self.object),
            Cached::Decoded(value) => Frame::Ready(
                self.encoded[slot]
                    .get_or_init(|| frame(kind, &crate::wire_order::to_vec(value)))
                    .clone(),
            ),
        }
    }
}

/// One watch frame on its way to a watcher: built, or an encoded object's
/// JSON with the frame's ends still to be written around it. The second
/// costs nothing per watcher until it is written out, and frames that
/// wait together are written into one chunk (see `handlers::watch_body`), so
/// under load an event's bytes are copied once per watcher, not twice.
#[derive(Debug, Clone)]
pub(crate) enum Frame {
    Ready(Bytes),
    Around { kind: &'static str, object: Bytes },
}

impl Frame {
    /// The frame of an object held encoded (of `{}` otherwise: callers
    /// check the form first).
    pub(crate) fn around(kind: &'static str, object: &Cached) -> Self {
        Frame::Around {
            kind,
            object: object
                .encoded_json()
                .cloned()
                .unwrap_or_else(|| Bytes::from_static(b"{}")),
        }
    }

    /// Its length in bytes once written.
    pub(crate) fn len(&self) -> usize {
        match self {
            Frame::Ready(bytes) => bytes.len(),
            Frame::Around { kind, object } => FRAME_OVERHEAD + kind.len() + object.len(),
        }
    }

    /// Appends the frame to `out`.
    pub(crate) fn write_to(&self, out: &mut bytes::BytesMut) {
        match self {
            Frame::Ready(bytes) => out.extend_from_slice(bytes),
            Frame::Around { kind, object } => write_frame(out, kind, object),
        }
    }

    /// The frame's bytes, built now when they are not yet.
    pub(crate) fn into_bytes(self) -> Bytes {
        match self {
            Frame::Ready(bytes) => bytes,
            Frame::Around { kind, object } => frame(kind, &object),
        }
    }
}

impl From<Bytes> for Frame {
    fn from(bytes: Bytes) -> Self {
        Frame::Ready(bytes)
    }
}

/// Bytes a frame adds around its kind and object.
const FRAME_OVERHEAD: usize = br#"{"type":"","object":}"#.len() + 1;

fn write_frame(out: &mut impl bytes::BufMut, kind: &str, object: &[u8]) {
    out.put_slice(b"{\"type\":\"");
    out.put_slice(kind.as_bytes());
    out.put_slice(b"\",\"object\":");
    out.put_slice(object);
    out.put_slice(b"}\n");
}

/// The watch frame `{"type":KIND,"object":OBJECT}\n` around an object's
/// JSON.
pub(crate) fn frame(kind: &str, object: &[u8]) -> Bytes {
    let mut bytes = Vec::with_capacity(FRAME_OVERHEAD + kind.len() + object.len());
    write_frame(&mut bytes, kind, object);
    Bytes::from(bytes)
}

/// The cache's objects at one revision.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    pub objects: OrdMap<String, Cached>,
    pub revision: Revision,
}

impl Snapshot {
    /// The objects whose keys start with `prefix` (a collection's, or one
    /// namespace's in it), in key order.
    pub(crate) fn under<'a>(
        &'a self,
        prefix: &'a str,
    ) -> impl Iterator<Item = (&'a String, &'a Cached)> + 'a {
        self.objects
            .range(prefix.to_string()..)
            .take_while(move |(key, _)| key.starts_with(prefix))
    }
}

/// Where a new watcher starts.
pub(crate) enum Start {
    /// Every current object (to be sent as ADDED), then events after `revision`.
    Snapshot(Snapshot),
    /// History events after the requested revision, then live ones.
    History(Vec<Arc<CacheEvent>>),
}

/// A watcher's starting point plus its live feed.
pub(crate) struct Subscription {
    pub start: Start,
    pub live: broadcast::Receiver<Arc<CacheEvent>>,
}

/// A watch asked for a revision older than the retained history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("too old resource version: {requested} ({oldest})")]
pub(crate) struct TooOld {
    pub requested: Revision,
    pub oldest: Revision,
}

struct State {
    objects: OrdMap<String, Cached>,
    revision: Revision,
    /// Recent events, each with when it was applied.
    history: VecDeque<(Instant, Arc<CacheEvent>)>,
    /// Watches from any revision >= this can be served from history.
    history_floor: Revision,
    sender: broadcast::Sender<Arc<CacheEvent>>,
    retained: BTreeMap<Revision, (Instant, OrdMap<String, Cached>)>,
}

/// The cache of one storage prefix.
pub(crate) struct WatchCache {
    prefix: String,
    /// How many events a watcher may lag behind the live feed before it
    /// has to resume from history.
    fanout_buffer: usize,
    history_capacity: usize,
    history_max_age: Duration,
    form: CacheForm,
    snapshot_ttl: Duration,
    state: RwLock<State>,
    /// The revision of the cache's last change, for waiters.
    applied: watch::Sender<Revision>,
    /// How far the feed's store watch has delivered, when the store says:
    /// the feed applies each change before it asks for the next, so the
    /// cache is current there even past its last change. `None` while the
    /// store does not say (or the feed re-lists): a consistent read must
    /// then read the store.
    store_progress: Mutex<Option<WatchProgress>>,
    /// Values handlers have just written, so the feed need not decode them.
    offers: handoff::Offers,
}

impl WatchCache {
    /// An empty cache for `prefix` holding decoded objects;
    /// [`WatchCache::reset`] fills it.
    pub(crate) fn new(prefix: String, limits: &CacheLimits) -> Arc<Self> {
        Self::with_form(prefix, limits, CacheForm::Decoded)
    }

    /// An empty cache for `prefix` holding its objects in `form`.
    pub(crate) fn with_form(prefix: String, limits: &CacheLimits, form: CacheForm) -> Arc<Self> {
        let fanout_buffer = limits.fanout_buffer.max(1);
        let (sender, _) = broadcast::channel(fanout_buffer);
        let (applied, _) = watch::channel(0);
        Arc::new(Self {
            prefix,
            fanout_buffer,
            history_capacity: limits.history.max(1),
            history_max_age: limits.history_max_age,
            form,
            snapshot_ttl: limits.snapshot_ttl,
            state: RwLock::new(State {
                objects: OrdMap::new(),
                revision: 0,
                history: VecDeque::new(),
                history_floor: 0,
                sender,
                retained: BTreeMap::new(),
            }),
            applied,
            store_progress: Mutex::new(None),
            offers: handoff::Offers::default(),
        })
    }

    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The form this cache holds objects in.
    pub(crate) fn form(&self) -> CacheForm {
        self.form
    }

    /// The revision of the cache's last change.
    pub(crate) fn revision(&self) -> Revision {
        self.state.read().revision
    }

    /// Follows the progress of the feed's store watch (`None`: the store
    /// does not report it, or the feed is re-listing).
    pub(crate) fn follows(&self, store_progress: Option<WatchProgress>) {
        *self.store_progress.lock() = store_progress;
    }

    /// The revision the cache is current at: its last change's, or later
    /// as far as the store's watch has delivered.
    fn current(&self, last_change: Revision) -> Revision {
        let delivered = self.store_progress.lock().as_ref().map(WatchProgress::get);
        last_change.max(delivered.unwrap_or_default())
    }

    /// The revision the cache is current at (see [`WatchCache::current_snapshot`]).
    pub(crate) fn current_revision(&self) -> Revision {
        let state = self.state.read();
        self.current(state.revision)
    }

    /// Waits until the cache is current at `revision` by the store's own
    /// account (or `timeout` passes); whether it is. Never, while the
    /// store's watch reports no progress: a revision written under another
    /// prefix may then never show here.
    pub(crate) async fn wait_current(&self, revision: Revision, timeout: Duration) -> bool {
        let delivered = self.store_progress.lock().clone();
        delivered.is_some() && self.wait(revision, timeout, delivered).await
    }

    /// Replaces the whole content (after a (re)list). History is dropped and
    /// every existing watcher's feed ends, so clients re-watch as upstream's
    /// do when the cache re-initialises.
    pub(crate) fn reset(&self, objects: OrdMap<String, Cached>, revision: Revision) {
        let mut state = self.state.write();
        let (sender, _) = broadcast::channel(self.fanout_buffer);
        state.sender = sender;
        state.objects = objects;
        state.revision = revision;
        state.history.clear();
        state.history_floor = revision;
        state.retained.clear();
        drop(state);
        self.applied.send_replace(revision);
    }

    /// Applies one change from the store and fans it out.
    pub(crate) fn apply(
        &self,
        revision: Revision,
        kind: ChangeKind,
        key: String,
        object: Option<Value>,
    ) {
        let mut state = self.state.write();
        if revision <= state.revision {
            return;
        }
        let prev = state.objects.get(&key).cloned();
        let event = match kind {
            ChangeKind::Put => {
                let Some(object) = object else { return };
                let object = Cached::hold(object, self.form);
                state.objects.insert(key.clone(), object.clone());
                CacheEvent::new(revision, kind, key, object, prev)
            }
            ChangeKind::Delete => {
                let Some(last) = prev.clone() else {
                    state.revision = revision;
                    drop(state);
                    self.applied.send_replace(revision);
                    return;
                };
                state.objects.remove(&key);
                let mut gone = last.to_value();
                crate::object::set_resource_version(&mut gone, revision);
                CacheEvent::new(revision, kind, key, Cached::hold(gone, self.form), prev)
            }
        };
        let event = Arc::new(event);
        state.revision = revision;
        let now = Instant::now();
        state.history.push_back((now, event.clone()));
        while let Some((at, oldest)) = state.history.front().map(|(at, e)| (*at, e.revision)) {
            let stale = now.saturating_duration_since(at) > self.history_max_age;
            if !stale && state.history.len() <= self.history_capacity {
                break;
            }
            state.history_floor = oldest;
            state.history.pop_front();
        }
        // No receivers is fine: nobody is watching.
        let _ = state.sender.send(event);
        drop(state);
        self.applied.send_replace(revision);
    }

    /// Waits until the cache has applied a change of its own at or past
    /// `revision` (or `timeout` passes); returns whether it did. For a
    /// writer waiting for its own write: it is woken by this prefix's
    /// changes only, not by every change in the store.
    pub(crate) async fn wait_applied(&self, revision: Revision, timeout: Duration) -> bool {
        self.wait(revision, timeout, None).await
    }

    /// Waits until the cache has applied `revision`, or is current past it
    /// by the store's account (or `timeout` passes); returns whether it is.
    pub(crate) async fn wait_for(&self, revision: Revision, timeout: Duration) -> bool {
        let delivered = self.store_progress.lock().clone();
        self.wait(revision, timeout, delivered).await
    }

    /// Waits until a change at or past `revision` is applied, or `delivered`
    /// (the store watch's progress, when given) reaches it.
    async fn wait(
        &self,
        revision: Revision,
        timeout: Duration,
        delivered: Option<WatchProgress>,
    ) -> bool {
        let mut changed = self.applied.subscribe();
        let applied = changed.wait_for(|r| *r >= revision);
        let through = async {
            match &delivered {
                Some(progress) => progress.reached(revision).await,
                None => std::future::pending().await,
            }
        };
        let reached = async {
            tokio::select! {
                applied = applied => applied.is_ok(),
                () = through => true,
            }
        };
        tokio::time::timeout(timeout, reached)
            .await
            .unwrap_or(false)
    }

    /// The current object at `key`, if the cache holds one. It may lag the
    /// store by writes not yet fed in; writers that use it pass its
    /// resourceVersion as a precondition and re-read the store on conflict.
    pub(crate) fn get(&self, key: &str) -> Option<Cached> {
        self.state.read().objects.get(key).cloned()
    }

    /// The current objects, at the revision of the cache's last change.
    /// Readers that key what they derive by [`WatchCache::revision`] (the
    /// RBAC policy, say) get the same revision here.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let state = self.state.read();
        Snapshot {
            objects: state.objects.clone(),
            revision: state.revision,
        }
    }

    /// The current objects, at the revision the cache is current at: past
    /// its last change when the store reported progress (nothing of this
    /// prefix changed in between). What a list answers with.
    pub(crate) fn current_snapshot(&self) -> Snapshot {
        let state = self.state.read();
        // Read under the lock: the store reports progress only after the
        // feed applied the changes up to it, so the state holds them all.
        Snapshot {
            objects: state.objects.clone(),
            revision: self.current(state.revision),
        }
    }

    /// Keeps `snapshot` so a continue token at its revision can find it.
    pub(crate) fn retain(&self, snapshot: &Snapshot) {
        let mut state = self.state.write();
        let now = Instant::now();
        let ttl = self.snapshot_ttl;
        state
            .retained
            .retain(|_, (at, _)| now.duration_since(*at) < ttl);
        state
            .retained
            .insert(snapshot.revision, (now, snapshot.objects.clone()));
        while state.retained.len() > RETAINED_SNAPSHOTS {
            state.retained.pop_first();
        }
    }

    /// The objects at `revision`, if that is the current revision or a
    /// retained snapshot's.
    pub(crate) fn snapshot_at(&self, revision: Revision) -> Option<Snapshot> {
        let state = self.state.read();
        if state.revision == revision {
            return Some(Snapshot {
                objects: state.objects.clone(),
                revision,
            });
        }
        let (at, objects) = state.retained.get(&revision)?;
        (at.elapsed() < self.snapshot_ttl).then(|| Snapshot {
            objects: objects.clone(),
            revision,
        })
    }

    /// Starts a watcher: from the current state (`None`) or after `from`.
    pub(crate) fn subscribe(&self, from: Option<Revision>) -> Result<Subscription, TooOld> {
        let state = self.state.read();
        let live = state.sender.subscribe();
        let start = match from {
            // At the revision the cache is current at, as a list's
            // snapshot is, so the initial-events-end bookmark is no older
            // than a consistent list made at the same moment.
            None => Start::Snapshot(Snapshot {
                objects: state.objects.clone(),
                revision: self.current(state.revision),
            }),
            Some(rv) => {
                if rv < state.history_floor {
                    return Err(TooOld {
                        requested: rv,
                        oldest: state.history_floor + 1,
                    });
                }
                Start::History(
                    state
                        .history
                        .iter()
                        .filter(|(_, e)| e.revision > rv)
                        .map(|(_, e)| e.clone())
                        .collect(),
                )
            }
        };
        Ok(Subscription { start, live })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Limits keeping `history` events for at most `max_age`.
    fn limits(history: usize, max_age: Duration) -> CacheLimits {
        CacheLimits {
            history,
            history_max_age: max_age,
            fanout_buffer: 16,
            snapshot_ttl: Duration::from_secs(60),
        }
    }

    fn cache() -> Arc<WatchCache> {
        let c = WatchCache::new("/p/".into(), &limits(2, Duration::from_secs(3600)));
        c.reset(OrdMap::new(), 10);
        c
    }

    /// What a watch from `from` is sent from `c`'s history; panics when it
    /// would not start from history.
    fn history(c: &WatchCache, from: Revision) -> Vec<Arc<CacheEvent>> {
        match c.subscribe(Some(from)) {
            Ok(Subscription {
                start: Start::History(events),
                ..
            }) => events,
            _ => panic!("expected history"),
        }
    }

    /// The revisions of the history a watch from `from` starts with.
    fn history_revisions(c: &WatchCache, from: Revision) -> Vec<Revision> {
        history(c, from).iter().map(|e| e.revision).collect()
    }

    /// A watch from `requested` is refused: the oldest event kept is at
    /// `oldest`.
    fn assert_too_old(c: &WatchCache, requested: Revision, oldest: Revision) {
        assert_eq!(
            c.subscribe(Some(requested)).err(),
            Some(TooOld { requested, oldest })
        );
    }

    #[test]
    fn an_event_knows_whether_labels_and_names_changed() {
        let c = WatchCache::new("/p/".into(), &limits(100, Duration::from_secs(3600)));
        c.reset(OrdMap::new(), 10);
        let put = |rev: u64, object: Value| {
            c.apply(rev, ChangeKind::Put, "/p/a".into(), Some(object));
        };
        put(
            11,
            json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"v": "1"}}),
        );
        // The data changed, the labels did not.
        put(
            12,
            json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"v": "2"}}),
        );
        // A label changed.
        put(
            13,
            json!({"metadata": {"name": "a", "labels": {"x": "2"}}, "data": {"v": "2"}}),
        );
        let events = history(&c, 10);
        let unchanged: Vec<bool> = events.iter().map(|e| e.selection_unchanged()).collect();
        // The first has no previous state to compare with.
        assert_eq!(unchanged, [false, true, false]);
    }

    #[test]
    fn history_window_moves_and_reports_too_old() {
        let c = cache();
        for (i, rev) in [11u64, 12, 13].into_iter().enumerate() {
            c.apply(
                rev,
                ChangeKind::Put,
                format!("/p/{i}"),
                Some(json!({"metadata": {}})),
            );
        }
        // capacity 2: event 11 dropped, so rv 10 can no longer be served.
        assert_too_old(&c, 10, 12);
        assert_eq!(history_revisions(&c, 11), [12, 13]);
    }

    #[test]
    fn history_forgets_events_older_than_its_age() {
        let c = WatchCache::new("/p/".into(), &limits(100, Duration::from_millis(50)));
        c.reset(OrdMap::new(), 10);
        let put = |rev: u64| {
            let object = Some(json!({"metadata": {}}));
            c.apply(rev, ChangeKind::Put, format!("/p/{rev}"), object);
        };
        put(11);
        put(12);
        std::thread::sleep(Duration::from_millis(80));
        put(13);
        // Far below the count limit, but 11 and 12 are stale: a watch from
        // before 12 is told to go to the store (the handler serves it there).
        assert_too_old(&c, 11, 13);
        assert_eq!(history_revisions(&c, 12), [13]);
    }

    #[test]
    fn snapshots_are_isolated_from_later_changes() {
        let c = cache();
        c.apply(
            11,
            ChangeKind::Put,
            "/p/a".into(),
            Some(json!({"metadata": {}})),
        );
        let snap = c.snapshot();
        c.retain(&snap);
        c.apply(12, ChangeKind::Delete, "/p/a".into(), None);
        assert_eq!(c.snapshot().objects.len(), 0);
        assert_eq!(c.snapshot_at(11).unwrap().objects.len(), 1);
        assert!(c.snapshot_at(5).is_none());
    }

    #[tokio::test]
    async fn a_cache_is_current_past_its_last_change_only_by_the_stores_progress() {
        let c = cache();
        let quick = Duration::from_millis(20);
        // No progress reported: even its own revision is not "current" by
        // the store's account.
        assert!(!c.wait_current(10, quick).await);
        let delivered = WatchProgress::new(10);
        c.follows(Some(delivered.clone()));
        assert!(c.wait_current(10, quick).await);
        assert!(!c.wait_current(12, quick).await);
        // A waiter is woken by the store's progress.
        let waiting = {
            let c = c.clone();
            tokio::spawn(async move { c.wait_current(12, Duration::from_secs(5)).await })
        };
        tokio::task::yield_now().await;
        delivered.advance(12);
        assert!(waiting.await.unwrap());
        assert_eq!(c.current_snapshot().revision, 12);
        assert_eq!(c.snapshot().revision, 10, "keyed by the last change");
        assert_eq!(c.revision(), 10);
        // A change past the store's progress leads again.
        c.apply(
            14,
            ChangeKind::Put,
            "/p/a".into(),
            Some(json!({"metadata": {"name": "a"}})),
        );
        assert_eq!(c.current_snapshot().revision, 14);
        assert!(c.wait_current(14, quick).await);
        // Re-listing: no account of progress until the next watch.
        c.follows(None);
        assert!(!c.wait_current(14, quick).await);
        assert_eq!(c.current_snapshot().revision, 14);
    }

    #[tokio::test]
    async fn live_receivers_see_deletes_with_last_state() {
        let c = cache();
        c.apply(
            11,
            ChangeKind::Put,
            "/p/a".into(),
            Some(json!({"metadata": {"name": "a"}})),
        );
        let mut sub = c.subscribe(None).unwrap();
        c.apply(12, ChangeKind::Delete, "/p/a".into(), None);
        let ev = sub.live.recv().await.unwrap();
        assert_eq!(ev.kind, ChangeKind::Delete);
        assert_eq!(ev.object.value()["metadata"]["name"], "a");
        assert_eq!(ev.object.value()["metadata"]["resourceVersion"], "12");
        assert!(c.wait_for(12, Duration::from_millis(10)).await);
    }

    #[tokio::test]
    async fn an_encoded_cache_serves_the_same_frames_and_deletes_as_a_decoded_one() {
        let limits = limits(8, Duration::from_secs(3600));
        let decoded = WatchCache::new("/p/".into(), &limits);
        let encoded = WatchCache::with_form("/p/".into(), &limits, CacheForm::Encoded);
        let object = json!({
            "kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"name": "a", "resourceVersion": "11"},
            "data": {"k": "v"}
        });
        for c in [&decoded, &encoded] {
            c.reset(OrdMap::new(), 10);
            c.apply(11, ChangeKind::Put, "/p/a".into(), Some(object.clone()));
            c.apply(12, ChangeKind::Delete, "/p/a".into(), None);
        }
        assert!(
            matches!(encoded.subscribe(Some(10)), Ok(Subscription { start: Start::History(ref e), .. }) if matches!(e[0].object, Cached::Encoded(_)))
        );
        let frames = |c: &WatchCache| {
            history(c, 10)
                .iter()
                .map(|e| {
                    e.frame(if e.kind == ChangeKind::Put {
                        "ADDED"
                    } else {
                        "DELETED"
                    })
                    .into_bytes()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(frames(&decoded), frames(&encoded));
        let deleted: Value = serde_json::from_slice(&frames(&encoded)[1]).unwrap();
        assert_eq!(deleted["object"]["metadata"]["resourceVersion"], "12");
        assert_eq!(deleted["object"]["data"]["k"], "v");
    }

    #[test]
    fn a_frame_around_an_encoded_object_writes_the_bytes_a_built_one_has() {
        let object = Cached::hold(
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}),
            CacheForm::Encoded,
        );
        let around = Frame::around("MODIFIED", &object);
        let built = frame("MODIFIED", object.encoded_json().unwrap());
        assert!(matches!(around, Frame::Around { .. }));
        assert_eq!(around.len(), built.len());
        let mut out = bytes::BytesMut::new();
        around.write_to(&mut out);
        Frame::Ready(built.clone()).write_to(&mut out);
        assert_eq!(&out[..built.len()], &built[..]);
        assert_eq!(&out[built.len()..], &built[..]);
        assert_eq!(around.into_bytes(), built);
        let parsed: Value = serde_json::from_slice(&built).unwrap();
        assert_eq!(parsed["type"], "MODIFIED");
        assert_eq!(parsed["object"]["metadata"]["name"], "a");
    }
}
