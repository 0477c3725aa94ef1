//! Fan-out of notifications to listeners, each with its own unbounded buffer and
//! task, so a slow handler never stalls the reflector or the other listeners.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};
use tokio::time::Instant;

use crate::handler::{EventHandler, Notification, dispatch};

/// Identifies a registered listener; lets its owner see its backlog or remove it.
#[derive(Clone, Debug)]
pub struct ListenerHandle {
    id: u64,
    pending: Arc<AtomicUsize>,
}

impl ListenerHandle {
    /// Notifications buffered for this listener and not yet handled.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    /// Waits until the listener has handled everything delivered to it so far.
    pub async fn wait_idle(&self) {
        while self.pending() > 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

struct Listener<K> {
    id: u64,
    tx: UnboundedSender<Notification<K>>,
    pending: Arc<AtomicUsize>,
    resync: Option<Resync>,
}

struct Resync {
    period: Duration,
    next: Instant,
}

impl<K> Listener<K> {
    /// Buffers `notification`; false if the listener's task is gone.
    fn send(&self, notification: Notification<K>) -> bool {
        self.pending.fetch_add(1, Ordering::SeqCst);
        if self.tx.send(notification).is_err() {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        true
    }
}

/// Every listener of one informer, in registration order.
pub(crate) struct Processor<K> {
    listeners: Vec<Listener<K>>,
    next_id: u64,
}

impl<K: Send + Sync + 'static> Processor<K> {
    pub(crate) fn new() -> Self {
        Self {
            listeners: Vec::new(),
            next_id: 0,
        }
    }

    /// Registers `handler`; it first receives an add for each of `existing`,
    /// then every later notification.
    pub(crate) fn add(
        &mut self,
        runtime: &Handle,
        handler: Arc<dyn EventHandler<K>>,
        resync: Option<Duration>,
        existing: Vec<Arc<K>>,
    ) -> ListenerHandle {
        let (tx, mut rx) = unbounded_channel::<Notification<K>>();
        let pending = Arc::new(AtomicUsize::new(0));
        let id = self.next_id;
        self.next_id += 1;
        let listener = Listener {
            id,
            tx,
            pending: Arc::clone(&pending),
            resync: resync.filter(|p| !p.is_zero()).map(|period| Resync {
                period,
                next: Instant::now() + period,
            }),
        };
        for obj in existing {
            listener.send(Notification::Add(obj));
        }
        let task_pending = Arc::clone(&pending);
        runtime.spawn(async move {
            while let Some(notification) = rx.recv().await {
                // A panicking handler loses one notification, not the listener.
                let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    dispatch(handler.as_ref(), &notification)
                }));
                if outcome.is_err() {
                    tracing::error!(
                        listener = id,
                        "event handler panicked; notification dropped"
                    );
                }
                task_pending.fetch_sub(1, Ordering::SeqCst);
            }
        });
        self.listeners.push(listener);
        ListenerHandle { id, pending }
    }

    /// Drops the listener; its task finishes what is buffered, then ends.
    pub(crate) fn remove(&mut self, handle: &ListenerHandle) {
        self.listeners.retain(|l| l.id != handle.id);
    }

    /// Buffers `notification` for every listener, in registration order.
    pub(crate) fn distribute(&mut self, notification: &Notification<K>) {
        self.listeners.retain(|l| l.send(notification.clone()));
    }

    /// Re-delivers every object of `current()` as an unchanged update to each
    /// listener whose resync period has elapsed at `now`.
    pub(crate) fn resync_due(&mut self, now: Instant, current: impl FnOnce() -> Vec<Arc<K>>) {
        let due = self
            .listeners
            .iter()
            .any(|l| l.resync.as_ref().is_some_and(|r| r.next <= now));
        if !due {
            return;
        }
        let objects = current();
        for listener in &mut self.listeners {
            let Some(resync) = listener.resync.as_mut() else {
                continue;
            };
            if resync.next > now {
                continue;
            }
            resync.next = now + resync.period;
            for obj in &objects {
                listener.send(Notification::Update {
                    old: Arc::clone(obj),
                    new: Arc::clone(obj),
                });
            }
        }
    }

    /// Number of registered listeners.
    pub(crate) fn len(&self) -> usize {
        self.listeners.len()
    }
}
