//! Recording events.k8s.io/v1 Events, as `kubectl describe` shows them.
//!
//! [`EventRecorder`] is what every controller (and the scheduler) holds: cheap to
//! clone, never blocking its caller. Recording puts the event on a bounded
//! channel; one background task per recorder family writes it. Repeats of the
//! same event (same regarding object, type, reason, action and note) within
//! [`AGGREGATION_WINDOW`] do not create new Events: the first one's
//! `series.count` and `series.lastObservedTime` are updated instead, as
//! upstream's event broadcaster does.
//!
//! ```text
//! let events = EventRecorder::new(ctx.client.clone(), "replicaset-controller");
//! events.normal(&rs_ref, "SuccessfulCreate", "Create", format!("Created pod: {name}"));
//! ```

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Resource};
use tokio::sync::mpsc;

/// Repeats within this long of the last occurrence update the existing Event's
/// series instead of creating a new Event (upstream uses six minutes).
pub const AGGREGATION_WINDOW: Duration = Duration::from_secs(6 * 60);

/// Events waiting to be written; beyond this, new events are dropped (and
/// logged) rather than slowing the controller down.
const QUEUE_CAPACITY: usize = 4096;

/// Upstream caps notes at 1 KiB.
const MAX_NOTE_BYTES: usize = 1024;

/// The two event types the API accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something expected happened.
    Normal,
    /// Something a user may need to look at.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }
}

/// Records Events on behalf of one reporting controller. Clones share the
/// background writer.
#[derive(Clone)]
pub struct EventRecorder {
    reporter: Arc<Reporter>,
    sender: mpsc::Sender<Occurrence>,
}

/// Who reports: upstream's `reportingController` (e.g.
/// `replicaset-controller`) and `reportingInstance` (controller and host).
struct Reporter {
    controller: String,
    instance: String,
}

/// One call to [`EventRecorder::record`].
#[derive(Debug, Clone)]
struct Occurrence {
    regarding: ObjectReference,
    kind: EventType,
    reason: String,
    action: String,
    note: String,
    controller: String,
    instance: String,
    at: Timestamp,
}

impl EventRecorder {
    /// A recorder for `reporting_controller` writing through `client`; spawns
    /// the writer task, so it must be called inside a tokio runtime.
    pub fn new(client: kube::Client, reporting_controller: &str) -> Self {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "skiff".to_owned());
        Self::with_instance(
            client,
            reporting_controller,
            &format!("{reporting_controller}-{host}"),
        )
    }

    /// Like [`new`](Self::new) with an explicit `reportingInstance`.
    pub fn with_instance(
        client: kube::Client,
        reporting_controller: &str,
        reporting_instance: &str,
    ) -> Self {
        let (sender, receiver) = mpsc::channel(QUEUE_CAPACITY);
        tokio::spawn(write_events(client, receiver));
        Self {
            reporter: Arc::new(Reporter {
                controller: reporting_controller.to_owned(),
                instance: reporting_instance.to_owned(),
            }),
            sender,
        }
    }

    /// Records a Normal event about `regarding`.
    pub fn normal(
        &self,
        regarding: &ObjectReference,
        reason: &str,
        action: &str,
        note: impl Into<String>,
    ) {
        self.record(regarding, EventType::Normal, reason, action, note);
    }

    /// Records a Warning event about `regarding`.
    pub fn warning(
        &self,
        regarding: &ObjectReference,
        reason: &str,
        action: &str,
        note: impl Into<String>,
    ) {
        self.record(regarding, EventType::Warning, reason, action, note);
    }

    /// Records an event; returns at once. `reason` is a short CamelCase word
    /// (e.g. `SuccessfulCreate`), `action` what was done (e.g. `Create`),
    /// `note` a human-readable sentence.
    pub fn record(
        &self,
        regarding: &ObjectReference,
        kind: EventType,
        reason: &str,
        action: &str,
        note: impl Into<String>,
    ) {
        let occurrence = Occurrence {
            regarding: regarding.clone(),
            kind,
            reason: reason.to_owned(),
            action: action.to_owned(),
            note: truncate(note.into()),
            controller: self.reporter.controller.clone(),
            instance: self.reporter.instance.clone(),
            at: Timestamp::now(),
        };
        if let Err(error) = self.sender.try_send(occurrence) {
            tracing::warn!(reason, %error, "event dropped: the event writer is behind");
        }
    }
}

/// The reference events use for `obj` (kind, apiVersion, namespace, name, uid,
/// resourceVersion).
pub fn object_reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    obj.object_ref(&())
}

fn truncate(mut note: String) -> String {
    if note.len() > MAX_NOTE_BYTES {
        let mut end = MAX_NOTE_BYTES;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
    }
    note
}

/// What makes two occurrences "the same event".
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SeriesKey {
    regarding: (
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
    ),
    kind: EventType,
    reason: String,
    action: String,
    note: String,
    controller: String,
}

impl SeriesKey {
    fn of(o: &Occurrence) -> Self {
        let r = &o.regarding;
        Self {
            regarding: (
                r.kind.clone(),
                r.namespace.clone(),
                r.name.clone(),
                r.uid.clone(),
            ),
            kind: o.kind,
            reason: o.reason.clone(),
            action: o.action.clone(),
            note: o.note.clone(),
            controller: o.controller.clone(),
        }
    }
}

/// An Event already written, which repeats update.
#[derive(Debug, Clone)]
struct Written {
    namespace: String,
    name: String,
    count: i32,
    last_seen: Instant,
}

/// Which writes the aggregator asks for.
#[derive(Debug, PartialEq, Eq)]
enum Write {
    /// A new Event.
    Create,
    /// Set the series of the Event `namespace/name` to `count`.
    Series {
        namespace: String,
        name: String,
        count: i32,
    },
}

/// Remembers recent events to turn repeats into series updates.
#[derive(Default)]
struct Aggregator {
    seen: HashMap<SeriesKey, Written>,
    /// When expired series were last dropped (a sweep per second at most).
    swept: Option<Instant>,
}

impl Aggregator {
    /// Decides what `occurrence` (seen at `now`) writes.
    fn observe(&mut self, key: &SeriesKey, now: Instant) -> Write {
        if self
            .swept
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1))
        {
            self.seen
                .retain(|_, w| now.duration_since(w.last_seen) < AGGREGATION_WINDOW);
            self.swept = Some(now);
        }
        match self.seen.get_mut(key) {
            Some(written) if now.duration_since(written.last_seen) < AGGREGATION_WINDOW => {
                written.count += 1;
                written.last_seen = now;
                Write::Series {
                    namespace: written.namespace.clone(),
                    name: written.name.clone(),
                    count: written.count,
                }
            }
            _ => Write::Create,
        }
    }

    /// Notes that the Event for `key` was created as `namespace/name`.
    fn created(&mut self, key: SeriesKey, namespace: String, name: String, now: Instant) {
        self.seen.insert(
            key,
            Written {
                namespace,
                name,
                count: 1,
                last_seen: now,
            },
        );
    }

    fn forget(&mut self, key: &SeriesKey) {
        self.seen.remove(key);
    }
}

/// Events of cluster-scoped objects live in `default`, as upstream's do.
fn event_namespace(regarding: &ObjectReference) -> String {
    regarding
        .namespace
        .clone()
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| "default".to_owned())
}

fn new_event(o: &Occurrence, namespace: &str) -> Event {
    let base = o.regarding.name.clone().unwrap_or_else(|| "event".into());
    let nanos = o.at.as_nanosecond();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{base}.{nanos:x}")),
            namespace: Some(namespace.to_owned()),
            ..Default::default()
        },
        event_time: Some(MicroTime(o.at)),
        regarding: Some(o.regarding.clone()),
        reason: Some(o.reason.clone()),
        action: Some(o.action.clone()),
        note: Some(o.note.clone()),
        type_: Some(o.kind.as_str().to_owned()),
        reporting_controller: Some(o.controller.clone()),
        reporting_instance: Some(o.instance.clone()),
        ..Default::default()
    }
}

/// The background writer: one Event create or series patch per occurrence.
async fn write_events(client: kube::Client, mut receiver: mpsc::Receiver<Occurrence>) {
    let mut aggregator = Aggregator::default();
    while let Some(occurrence) = receiver.recv().await {
        let key = SeriesKey::of(&occurrence);
        let now = Instant::now();
        if let Write::Series {
            namespace,
            name,
            count,
        } = aggregator.observe(&key, now)
        {
            let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
            let series = EventSeries {
                count,
                last_observed_time: MicroTime(occurrence.at),
            };
            let patch = serde_json::json!({ "series": series });
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => continue,
                Err(error) => {
                    // The Event expired or was deleted: start a new one.
                    tracing::debug!(%error, event = %name, "event series update failed");
                    aggregator.forget(&key);
                }
            }
        }
        let namespace = event_namespace(&occurrence.regarding);
        let event = new_event(&occurrence, &namespace);
        let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
        match api.create(&PostParams::default(), &event).await {
            Ok(created) => {
                let name = created.metadata.name.unwrap_or_default();
                aggregator.created(key, namespace, name, now);
            }
            Err(error) => {
                tracing::warn!(%error, reason = %occurrence.reason, "could not write event");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn occurrence(note: &str) -> Occurrence {
        Occurrence {
            regarding: ObjectReference {
                kind: Some("Pod".into()),
                namespace: Some("ns".into()),
                name: Some("web".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            kind: EventType::Normal,
            reason: "Started".into(),
            action: "Start".into(),
            note: note.into(),
            controller: "c".into(),
            instance: "c-1".into(),
            at: Timestamp::now(),
        }
    }

    #[test]
    fn repeats_within_the_window_become_a_series() {
        let mut agg = Aggregator::default();
        let key = SeriesKey::of(&occurrence("hello"));
        let t0 = Instant::now();
        assert_eq!(agg.observe(&key, t0), Write::Create);
        agg.created(key.clone(), "ns".into(), "web.1".into(), t0);
        let again = agg.observe(&key, t0 + Duration::from_secs(1));
        assert_eq!(
            again,
            Write::Series {
                namespace: "ns".into(),
                name: "web.1".into(),
                count: 2
            }
        );
        let third = agg.observe(&key, t0 + Duration::from_secs(2));
        assert!(matches!(third, Write::Series { count: 3, .. }));
    }

    #[test]
    fn different_notes_and_stale_series_make_new_events() {
        let mut agg = Aggregator::default();
        let key = SeriesKey::of(&occurrence("hello"));
        let t0 = Instant::now();
        agg.observe(&key, t0);
        agg.created(key.clone(), "ns".into(), "web.1".into(), t0);
        let other = SeriesKey::of(&occurrence("bye"));
        assert_eq!(agg.observe(&other, t0), Write::Create);
        let late = t0 + AGGREGATION_WINDOW + Duration::from_secs(1);
        assert_eq!(agg.observe(&key, late), Write::Create);
    }

    #[test]
    fn cluster_scoped_objects_report_into_default_and_notes_are_capped() {
        let node = ObjectReference {
            kind: Some("Node".into()),
            name: Some("n1".into()),
            ..Default::default()
        };
        assert_eq!(event_namespace(&node), "default");
        let long = "é".repeat(2000);
        let cut = truncate(long);
        assert!(cut.len() <= MAX_NOTE_BYTES && cut.chars().all(|c| c == 'é'));
        let event = new_event(&occurrence("x"), "ns");
        assert_eq!(event.type_.as_deref(), Some("Normal"));
        assert!(
            event
                .metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("web."))
        );
    }
}
