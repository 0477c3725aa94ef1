//! Watch streams. Each watcher owns a cursor (the last revision it has
//! examined) and pulls: from the in-memory ring while its cursor is still
//! there, from sled history once it fell behind. A slow watcher therefore
//! never blocks writers and never loses an event; it only reads disk.

use std::collections::VecDeque;
use std::sync::Arc;

use futures::StreamExt;
use tokio::sync::watch;

use super::reader;
use super::ring::RingRead;
use super::state::Shared;
use crate::{Event, Revision, StoreError, WatchProgress, WatchStream};

/// Revisions examined per refill, so one refill stays short and a watcher
/// far behind holds a bounded buffer.
const REFILL_SCAN: usize = 512;

struct Watcher {
    shared: Arc<Shared>,
    prefix: Arc<str>,
    /// Every revision up to here has been examined (and buffered if it matched).
    cursor: Revision,
    buffer: VecDeque<Event>,
    notify: watch::Receiver<Revision>,
    /// The cursor as of the consumer's latest request with nothing left
    /// buffered: all it was given up to there it has taken.
    progress: WatchProgress,
    /// The store closed: deliver what is published, then end.
    closing: bool,
    done: bool,
}

impl Watcher {
    /// Buffers events after the cursor; returns whether the cursor moved.
    async fn refill(&mut self) -> Result<bool, StoreError> {
        let published = self.shared.published();
        if self.cursor >= published {
            return Ok(false);
        }
        let from_ring =
            self.shared
                .ring
                .read()
                .read(self.cursor, published, &self.prefix, REFILL_SCAN);
        let (events, through) = match from_ring {
            // The ring holds every event it has whatever compaction did on
            // disk, so a watcher it can still serve is not cut off (a
            // reclamation on a full disk compacts right up to the present).
            RingRead::Events { events, through } => (events, through),
            RingRead::Evicted => {
                let compact = self.shared.compact_revision();
                if self.cursor < compact {
                    return Err(StoreError::Compacted {
                        requested: self.cursor,
                        compact_revision: compact,
                    });
                }
                let shared = self.shared.clone();
                let prefix = self.prefix.clone();
                let cursor = self.cursor;
                tokio::task::spawn_blocking(move || {
                    reader::history(&shared, cursor, published, &prefix, REFILL_SCAN)
                })
                .await
                .map_err(|e| StoreError::Backend {
                    context: "reading watch history",
                    source: Box::new(e),
                })??
            }
        };
        self.buffer.extend(events);
        self.cursor = through;
        Ok(true)
    }

    async fn next(&mut self) -> Option<Result<Event, StoreError>> {
        loop {
            if let Some(event) = self.buffer.pop_front() {
                return Some(Ok(event));
            }
            // Asked again with nothing buffered: every event up to the
            // cursor went out and the consumer came back for more.
            self.progress.advance(self.cursor);
            if self.done {
                return None;
            }
            match self.refill().await {
                Ok(true) => continue,
                Ok(false) if self.closing => {
                    self.done = true;
                    return None;
                }
                Ok(false) => {
                    if self.notify.changed().await.is_err() {
                        self.closing = true;
                    }
                }
                Err(err) => {
                    self.done = true;
                    return Some(Err(err));
                }
            }
        }
    }
}

/// A stream of changes under `prefix` after `from_revision`, with its
/// progress.
pub(crate) fn stream(
    shared: Arc<Shared>,
    prefix: &str,
    from_revision: Revision,
) -> (WatchStream, WatchProgress) {
    let progress = WatchProgress::new(from_revision);
    let watcher = Watcher {
        progress: progress.clone(),
        notify: shared.notify.clone(),
        shared,
        prefix: prefix.into(),
        cursor: from_revision,
        buffer: VecDeque::new(),
        closing: false,
        done: false,
    };
    let stream = futures::stream::unfold(watcher, |mut watcher| async move {
        let item = watcher.next().await?;
        Some((item, watcher))
    })
    .boxed();
    (stream, progress)
}
