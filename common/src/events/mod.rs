//! Recording Events, as `kubectl describe` shows them: the one recorder of
//! the controllers, the scheduler and the node agent.
//!
//! [`EventRecorder`] is cheap to clone and never blocks its caller: recording
//! puts the occurrence on a bounded channel (beyond [`QUEUE_CAPACITY`] it is
//! dropped and logged, as upstream drops: an event is a report, not state);
//! one background task per recorder writes, a few requests in flight.
//! Repeats of the same event (same regarding object, type, reason, action,
//! note and reporter) within [`AGGREGATION_WINDOW`] do not create new Events:
//! the first one's series (events.k8s.io/v1) or count (core/v1) is updated.
//! Before that, [`correlate`] combines an object's events that differ only in
//! their note once there are many, and drops a reporter's events about one
//! object beyond a token-bucket budget, as upstream's correlator does.
//!
//! Controllers write events.k8s.io/v1 ([`EventRecorder::new`]); the
//! scheduler and the node agent write core/v1 with a `source`, as their
//! upstream counterparts do ([`EventRecorder::core`]).
//!
//! ```text
//! let events = EventRecorder::new(ctx.client.clone(), "replicaset-controller");
//! events.normal(&rs_ref, "SuccessfulCreate", "Create", format!("Created pod: {name}"));
//! ```

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{self as core, EventSource, ObjectReference};
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Resource};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

pub mod correlate;

/// Repeats within this long of the last occurrence update the existing Event's
/// series instead of creating a new Event (upstream uses six minutes).
pub const AGGREGATION_WINDOW: Duration = Duration::from_secs(6 * 60);

/// Events waiting to be written; beyond this, new events are dropped (and
/// logged) rather than slowing the caller down.
pub const QUEUE_CAPACITY: usize = 10_000;

/// Event writes in flight at once per recorder, so a burst (a scheduler
/// binding hundreds of pods) trails its work instead of queueing behind one
/// request at a time.
pub const CONCURRENT_WRITES: usize = 4;

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

/// Records Events on behalf of one reporting component. Clones share the
/// background writer.
#[derive(Clone)]
pub struct EventRecorder {
    reporter: Arc<Reporter>,
    sender: mpsc::Sender<Message>,
}

/// Who reports: upstream's `reportingController` (e.g.
/// `replicaset-controller`) and `reportingInstance` (controller and host).
struct Reporter {
    controller: String,
    instance: String,
}

/// Which Event API the writer speaks.
#[derive(Clone, Debug)]
enum Flavour {
    /// events.k8s.io/v1, repeats in `series`.
    V1,
    /// core/v1 with `source` (component, host), repeats in `count`.
    Core { host: Option<String> },
}

enum Message {
    Occurrence(Box<Occurrence>),
    /// Answered once everything queued before it has been written.
    Flush(oneshot::Sender<()>),
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
        Self::spawn(
            client,
            Flavour::V1,
            reporting_controller,
            reporting_instance,
        )
    }

    /// A recorder writing core/v1 Events with `source.component` set to
    /// `component` and `source.host` to `host` (the kubelet names its node;
    /// the scheduler none), as those components do upstream. As upstream's
    /// legacy recorder, the reporting controller and instance repeat the
    /// source and `eventTime` stays unset: kubectl prints the source as
    /// `component, host`, so a host-less recorder must leave the instance
    /// empty or it reads `default-scheduler, default-scheduler`.
    pub fn core(client: kube::Client, component: &str, host: Option<&str>) -> Self {
        let flavour = Flavour::Core {
            host: host.map(str::to_owned),
        };
        Self::spawn(client, flavour, component, host.unwrap_or_default())
    }

    fn spawn(client: kube::Client, flavour: Flavour, controller: &str, instance: &str) -> Self {
        let (sender, receiver) = mpsc::channel(QUEUE_CAPACITY);
        tokio::spawn(write_events(client, flavour, receiver));
        Self {
            reporter: Arc::new(Reporter {
                controller: controller.to_owned(),
                instance: instance.to_owned(),
            }),
            sender,
        }
    }

    /// Waits until every event recorded so far has been written (or has
    /// failed).
    pub async fn flush(&self) {
        let (done, written) = oneshot::channel();
        if self.sender.send(Message::Flush(done)).await.is_ok() {
            let _ = written.await;
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
    /// (e.g. `SuccessfulCreate`), `action` what was done (e.g. `Create`;
    /// the API server refuses an `events.k8s.io/v1` Event without one, so
    /// only the legacy recorder may leave it empty), `note` a
    /// human-readable sentence.
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
        if let Err(error) = self
            .sender
            .try_send(Message::Occurrence(Box::new(occurrence)))
        {
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

/// The Event's name: the regarding object's name and the time in hex
/// nanoseconds, unique per occurrence as upstream's recorders make it.
fn event_name(o: &Occurrence) -> String {
    let base = o.regarding.name.as_deref().unwrap_or("event");
    format!("{base}.{:x}", o.at.as_nanosecond())
}

fn new_event(o: &Occurrence, namespace: &str) -> Event {
    Event {
        metadata: ObjectMeta {
            name: Some(event_name(o)),
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

fn new_core_event(o: &Occurrence, namespace: &str, host: Option<&str>) -> core::Event {
    core::Event {
        metadata: ObjectMeta {
            name: Some(event_name(o)),
            namespace: Some(namespace.to_owned()),
            ..Default::default()
        },
        involved_object: o.regarding.clone(),
        reason: Some(o.reason.clone()),
        // The kubelet's legacy events carry no action.
        action: (!o.action.is_empty()).then(|| o.action.clone()),
        message: Some(o.note.clone()),
        type_: Some(o.kind.as_str().to_owned()),
        source: Some(EventSource {
            component: Some(o.controller.clone()),
            host: host.map(str::to_owned),
        }),
        reporting_component: Some(o.controller.clone()),
        reporting_instance: Some(o.instance.clone()),
        first_timestamp: Some(Time(o.at)),
        last_timestamp: Some(Time(o.at)),
        count: Some(1),
        ..Default::default()
    }
}

/// One write the writer runs.
enum Job {
    Create,
    Series { name: String, count: i32 },
}

/// What a finished write reports back to the aggregator.
struct Done {
    key: SeriesKey,
    occurrence: Box<Occurrence>,
    job: Job,
    result: Result<(), kube::Error>,
}

/// The writes in flight, and the events they are about: a repeat waits for
/// the write of its event to finish, so it updates what that write created.
#[derive(Default)]
struct InFlight {
    tasks: JoinSet<Done>,
    busy: HashSet<SeriesKey>,
}

/// The background writer: decides per occurrence (in order) whether it is a
/// new Event or a repeat, and runs the writes with up to
/// [`CONCURRENT_WRITES`] in flight.
async fn write_events(
    client: kube::Client,
    flavour: Flavour,
    mut receiver: mpsc::Receiver<Message>,
) {
    let mut aggregator = Aggregator::default();
    let mut similar = correlate::SimilarEvents::default();
    let mut spam = correlate::SpamFilter::default();
    let mut in_flight = InFlight::default();
    let writer = Writer { client, flavour };
    while let Some(message) = receiver.recv().await {
        match message {
            Message::Occurrence(mut occurrence) => {
                let now = Instant::now();
                similar.combine(&mut occurrence, now);
                if !spam.allow(&occurrence, now) {
                    tracing::debug!(
                        reason = %occurrence.reason,
                        object = occurrence.regarding.name.as_deref().unwrap_or(""),
                        "event dropped: this reporter wrote too many about this object"
                    );
                    continue;
                }
                let key = SeriesKey::of(&occurrence);
                while in_flight.tasks.len() >= CONCURRENT_WRITES || in_flight.busy.contains(&key) {
                    settle(&writer, &mut aggregator, &mut in_flight).await;
                }
                let now = Instant::now();
                let job = match aggregator.observe(&key, now) {
                    Write::Series { name, count, .. } => Job::Series { name, count },
                    Write::Create => {
                        let namespace = event_namespace(&occurrence.regarding);
                        aggregator.created(key.clone(), namespace, event_name(&occurrence), now);
                        Job::Create
                    }
                };
                in_flight.busy.insert(key.clone());
                in_flight
                    .tasks
                    .spawn(writer.clone().run(key, occurrence, job));
            }
            Message::Flush(done) => {
                while !in_flight.tasks.is_empty() {
                    settle(&writer, &mut aggregator, &mut in_flight).await;
                }
                let _ = done.send(());
            }
        }
    }
    while !in_flight.tasks.is_empty() {
        settle(&writer, &mut aggregator, &mut in_flight).await;
    }
}

/// Takes one finished write: a failed create is forgotten (the next repeat
/// creates afresh); a failed series update (the Event expired or was
/// deleted) starts a new Event.
async fn settle(writer: &Writer, aggregator: &mut Aggregator, in_flight: &mut InFlight) {
    let Some(joined) = in_flight.tasks.join_next().await else {
        return;
    };
    let done = match joined {
        Ok(done) => done,
        Err(error) => {
            // The write task itself failed: nothing says which event it was,
            // so every event may be repeated again.
            tracing::warn!(%error, "event write task failed");
            in_flight.busy.clear();
            return;
        }
    };
    let Err(error) = done.result else {
        in_flight.busy.remove(&done.key);
        return;
    };
    aggregator.forget(&done.key);
    match done.job {
        Job::Create => {
            in_flight.busy.remove(&done.key);
            tracing::warn!(%error, reason = %done.occurrence.reason, "could not write event");
        }
        Job::Series { name, .. } => {
            tracing::debug!(%error, event = %name, "event series update failed");
            let namespace = event_namespace(&done.occurrence.regarding);
            let now = Instant::now();
            aggregator.created(
                done.key.clone(),
                namespace,
                event_name(&done.occurrence),
                now,
            );
            in_flight
                .tasks
                .spawn(writer.clone().run(done.key, done.occurrence, Job::Create));
        }
    }
}

/// Writes one Event or one repeat in the recorder's flavour.
#[derive(Clone)]
struct Writer {
    client: kube::Client,
    flavour: Flavour,
}

impl Writer {
    async fn run(self, key: SeriesKey, occurrence: Box<Occurrence>, job: Job) -> Done {
        let result = self.write(&occurrence, &job).await;
        Done {
            key,
            occurrence,
            job,
            result,
        }
    }

    async fn write(&self, o: &Occurrence, job: &Job) -> Result<(), kube::Error> {
        let namespace = event_namespace(&o.regarding);
        let params = PatchParams::default();
        match (&self.flavour, job) {
            (Flavour::V1, Job::Create) => {
                let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
                api.create(&PostParams::default(), &new_event(o, &namespace))
                    .await?;
            }
            (Flavour::V1, Job::Series { name, count }) => {
                let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
                let series = EventSeries {
                    count: *count,
                    last_observed_time: MicroTime(o.at),
                };
                let patch = serde_json::json!({ "series": series });
                api.patch(name, &params, &Patch::Merge(&patch)).await?;
            }
            (Flavour::Core { host }, Job::Create) => {
                let api: Api<core::Event> = Api::namespaced(self.client.clone(), &namespace);
                let event = new_core_event(o, &namespace, host.as_deref());
                api.create(&PostParams::default(), &event).await?;
            }
            (Flavour::Core { .. }, Job::Series { name, count }) => {
                let api: Api<core::Event> = Api::namespaced(self.client.clone(), &namespace);
                let patch = serde_json::json!({ "count": count, "lastTimestamp": Time(o.at) });
                api.patch(name, &params, &Patch::Merge(&patch)).await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn occurrence(note: &str) -> Occurrence {
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

    type Seen = Arc<std::sync::Mutex<Vec<(String, serde_json::Value)>>>;

    /// A client whose API server records each request, answers slowly (so
    /// writes overlap) and echoes what it is sent.
    fn slow_client() -> (kube::Client, Seen) {
        use http::{Request, Response};
        use kube::client::Body;
        let seen: Seen = Arc::default();
        let record = seen.clone();
        let service = tower::service_fn(move |request: Request<Body>| {
            let record = record.clone();
            async move {
                let (parts, body) = request.into_parts();
                let bytes = body.collect_bytes().await.unwrap_or_default();
                let json = serde_json::from_slice(&bytes).unwrap_or_default();
                tokio::time::sleep(Duration::from_millis(50)).await;
                record
                    .lock()
                    .unwrap()
                    .push((parts.method.to_string(), json));
                Ok::<_, std::convert::Infallible>(
                    Response::builder()
                        .status(200)
                        .body(Body::from(bytes.to_vec()))
                        .unwrap(),
                )
            }
        });
        (kube::Client::new(service, "default"), seen)
    }

    #[tokio::test]
    async fn a_repeat_waits_for_its_event_and_counts_on_it() {
        let (client, seen) = slow_client();
        let recorder = EventRecorder::core(client, "default-scheduler", None);
        let pod = occurrence("x").regarding;
        for _ in 0..3 {
            recorder.warning(&pod, "FailedScheduling", "Scheduling", "0/1 nodes");
        }
        recorder.normal(&pod, "Other", "Other", "another event");
        recorder.flush().await;
        let seen = seen.lock().unwrap();
        let methods: Vec<&str> = seen.iter().map(|(m, _)| m.as_str()).collect();
        assert_eq!(
            methods.iter().filter(|m| **m == "POST").count(),
            2,
            "{seen:?}"
        );
        let counts: Vec<i64> = seen
            .iter()
            .filter(|(m, _)| m == "PATCH")
            .filter_map(|(_, body)| body["count"].as_i64())
            .collect();
        assert_eq!(counts, [2, 3], "{seen:?}");
        let created = seen.iter().find(|(m, _)| m == "POST").unwrap();
        assert_eq!(created.1["source"]["component"], "default-scheduler");
        // As upstream's legacy recorder: the reporting fields repeat the
        // source, and no eventTime.
        assert_eq!(created.1["reportingComponent"], "default-scheduler");
        assert_eq!(created.1["reportingInstance"], "");
        assert!(created.1["eventTime"].is_null(), "{created:?}");
    }

    #[tokio::test]
    async fn a_flood_about_one_object_is_combined_and_capped() {
        let (client, seen) = slow_client();
        let recorder = EventRecorder::core(client, "default-scheduler", None);
        let pod = occurrence("x").regarding;
        for i in 0..40 {
            recorder.warning(
                &pod,
                "FailedScheduling",
                "Scheduling",
                format!("0/{i} nodes"),
            );
        }
        recorder.flush().await;
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), correlate::SPAM_BURST as usize, "{seen:?}");
        let created: Vec<&str> = seen
            .iter()
            .filter(|(m, _)| m == "POST")
            .filter_map(|(_, body)| body["message"].as_str())
            .collect();
        assert_eq!(created.len(), correlate::SIMILAR_LIMIT + 1, "{created:?}");
        assert_eq!(
            created.last().copied(),
            Some("(combined from similar events): 0/10 nodes")
        );
    }

    #[test]
    fn core_events_carry_the_source_and_a_count() {
        let o = occurrence("pulled");
        let event = new_core_event(&o, "ns", Some("node-1"));
        let source = event.source.clone().unwrap();
        assert_eq!(
            (source.component.as_deref(), source.host.as_deref()),
            (Some("c"), Some("node-1"))
        );
        assert_eq!(event.count, Some(1));
        assert_eq!(event.event_time, None);
        assert_eq!(event.message.as_deref(), Some("pulled"));
        assert_eq!(event.involved_object.name.as_deref(), Some("web"));
        assert_eq!(event.metadata.name, new_event(&o, "ns").metadata.name);
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
