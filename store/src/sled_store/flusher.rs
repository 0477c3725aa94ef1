//! The flusher thread: second stage of the commit pipeline. The committer
//! applies writes to sled and hands each applied group here; while one flush
//! (sled flush + sync) is in progress, the committer keeps applying, and the
//! next flush covers every group that arrived meanwhile. Only after its flush
//! is a group's set of events published and its writers answered, in order.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::committer::Reply;
use super::state::{Shared, sled_error};
use crate::{Event, KeyValue, Revision, StoreError};

/// What one committer group left to do once it is durable.
#[derive(Default)]
pub(crate) struct Applied {
    /// The newest revision applied so far (publish up to here).
    pub through: Revision,
    pub events: Vec<Event>,
    pub replies: Vec<(Reply<KeyValue>, Result<KeyValue, StoreError>)>,
    /// Compactions and closes waiting for durability.
    pub waiters: Vec<Reply<()>>,
}

pub(crate) struct Flusher {
    shared: Arc<Shared>,
    groups: mpsc::Receiver<Applied>,
    notify: watch::Sender<Revision>,
}

pub(crate) fn nanos(elapsed: Duration) -> u64 {
    u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
}

/// The error every write gets once a write or flush has failed.
pub(crate) fn poison_error(reason: &str) -> StoreError {
    StoreError::Backend {
        context: "committing to a store whose earlier write failed",
        source: Box::new(std::io::Error::other(reason.to_owned())),
    }
}

impl Flusher {
    pub(crate) fn new(
        shared: Arc<Shared>,
        groups: mpsc::Receiver<Applied>,
        notify: watch::Sender<Revision>,
    ) -> Self {
        Self {
            shared,
            groups,
            notify,
        }
    }

    /// Runs until the committer hangs up.
    pub(crate) fn run(mut self) {
        while let Ok(first) = self.groups.recv() {
            let mut batch = vec![first];
            while let Ok(more) = self.groups.try_recv() {
                batch.push(more);
            }
            self.commit(batch);
        }
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        let counters = &self.shared.counters;
        let start = Instant::now();
        let generation = self.shared.generation();
        generation
            .db
            .flush()
            .map_err(|e| sled_error("flushing a commit group", e))?;
        let flushed = Instant::now();
        generation.durability.lock().sync()?;
        counters.flushes.fetch_add(1, Ordering::Relaxed);
        counters
            .flush_nanos
            .fetch_add(nanos(flushed - start), Ordering::Relaxed);
        counters
            .sync_nanos
            .fetch_add(nanos(flushed.elapsed()), Ordering::Relaxed);
        Ok(())
    }

    fn commit(&mut self, mut batch: Vec<Applied>) {
        if self.shared.poisoned().is_none()
            && let Err(err) = self.flush()
        {
            tracing::error!(error = %err, "store flush failed; refusing further writes");
            self.shared.poison(&err);
        }
        if let Some(reason) = self.shared.poisoned() {
            // Nothing of these groups is known to be durable.
            for group in batch {
                for (reply, result) in group.replies {
                    let _ = reply.send(result.and(Err(poison_error(&reason))));
                }
                for waiter in group.waiters {
                    let _ = waiter.send(Err(poison_error(&reason)));
                }
            }
            return;
        }
        let mut through = None;
        let mut writes = 0u64;
        {
            let mut ring = self.shared.ring.write();
            for group in &mut batch {
                writes += group.events.len() as u64;
                for event in group.events.drain(..) {
                    ring.push(event);
                }
                through = Some(group.through);
            }
        }
        if let Some(through) = through.filter(|t| *t > self.shared.published()) {
            let counters = &self.shared.counters;
            counters.writes.fetch_add(writes, Ordering::Relaxed);
            counters.commit_groups.fetch_add(1, Ordering::Relaxed);
            self.shared.published.store(through, Ordering::Release);
            self.notify.send_replace(through);
        }
        for group in batch {
            for (reply, result) in group.replies {
                let _ = reply.send(result);
            }
            for waiter in group.waiters {
                let _ = waiter.send(Ok(()));
            }
        }
    }
}
