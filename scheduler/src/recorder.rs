//! Asynchronous event recording, as upstream's event broadcaster does it: the scheduler
//! hands each core/v1 Event to a bounded queue and returns at once; a background task
//! writes them with a few requests in flight. Bindings therefore never wait on event
//! writes, and during a burst the events trail the bindings instead of competing with
//! them request for request. When the queue is full, events are dropped with a warning
//! (upstream drops too), because an event is a report, not state.

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, PostParams};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

/// Events waiting to be written before new ones are dropped.
pub const MAX_QUEUED_EVENTS: usize = 10_000;
/// Event writes in flight at once.
pub const CONCURRENT_WRITES: usize = 4;

enum Message {
    Event(Box<Event>),
    /// Answered once everything queued before it has been written.
    Flush(oneshot::Sender<()>),
}

/// Writes events in the background.
pub struct EventRecorder {
    client: kube::Client,
    queue: Option<mpsc::Sender<Message>>,
}

impl EventRecorder {
    /// A recorder writing through `client`. Outside a Tokio runtime it writes each event
    /// inline instead.
    pub fn new(client: kube::Client) -> Self {
        let queue = tokio::runtime::Handle::try_current().ok().map(|rt| {
            let (tx, rx) = mpsc::channel(MAX_QUEUED_EVENTS);
            rt.spawn(write_loop(client.clone(), rx));
            tx
        });
        EventRecorder { client, queue }
    }

    /// Queues `event` for writing (or writes it now when there is no background task).
    pub async fn record(&self, event: Event) {
        let Some(queue) = &self.queue else {
            write(&self.client, event).await;
            return;
        };
        match queue.try_send(Message::Event(Box::new(event))) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::warn!(
                    limit = MAX_QUEUED_EVENTS,
                    "event queue full; dropping an event"
                );
            }
            Err(mpsc::error::TrySendError::Closed(Message::Event(event))) => {
                write(&self.client, *event).await;
            }
            Err(mpsc::error::TrySendError::Closed(Message::Flush(_))) => {}
        }
    }

    /// Waits until every event queued so far has been written (or failed).
    pub async fn flush(&self) {
        let Some(queue) = &self.queue else { return };
        let (tx, rx) = oneshot::channel();
        if queue.send(Message::Flush(tx)).await.is_ok() {
            let _ = rx.await;
        }
    }
}

async fn write(client: &kube::Client, event: Event) {
    let ns = event
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    if let Err(e) = Api::<Event>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &event)
        .await
    {
        tracing::warn!(reason = ?event.reason, error = %e, "writing event");
    }
}

async fn write_loop(client: kube::Client, mut rx: mpsc::Receiver<Message>) {
    let mut in_flight = JoinSet::new();
    while let Some(msg) = rx.recv().await {
        match msg {
            Message::Event(event) => {
                while in_flight.len() >= CONCURRENT_WRITES {
                    in_flight.join_next().await;
                }
                let client = client.clone();
                in_flight.spawn(async move { write(&client, *event).await });
            }
            Message::Flush(done) => {
                while in_flight.join_next().await.is_some() {}
                let _ = done.send(());
            }
        }
    }
    while in_flight.join_next().await.is_some() {}
}
