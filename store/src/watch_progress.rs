//! [`WatchProgress`]: how far a watch stream has delivered. A backend
//! advances it each time its consumer comes back with nothing left
//! buffered, on every change anywhere in the store, so advancing must cost
//! next to nothing: one atomic maximum, and a wake-up only when someone
//! waits (a consistent read the cache is behind for).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tokio::sync::Notify;

use crate::Revision;

/// How far a [`crate::WatchStream`] has delivered (see
/// [`crate::Store::watch_with_progress`]): every change under the watched
/// prefix at or below [`WatchProgress::get`] has been yielded, and the
/// consumer has asked for the next one since. A consumer that handles each
/// change before it polls again has handled all of them, so it is current
/// at that revision even when no change of its own came there (etcd's
/// progress notification, kept current instead of requested). Clones
/// share one position.
#[derive(Clone, Debug)]
pub struct WatchProgress(Arc<Cell>);

#[derive(Debug)]
struct Cell {
    at: AtomicU64,
    waiting: AtomicUsize,
    moved: Notify,
}

impl WatchProgress {
    /// A position at `at`.
    pub fn new(at: Revision) -> Self {
        Self(Arc::new(Cell {
            at: AtomicU64::new(at),
            waiting: AtomicUsize::new(0),
            moved: Notify::new(),
        }))
    }

    /// The revision delivered through.
    pub fn get(&self) -> Revision {
        self.0.at.load(Ordering::SeqCst)
    }

    /// Moves the position to `to` unless it is there already (it never
    /// moves back); for the backend whose stream this is.
    pub fn advance(&self, to: Revision) {
        let before = self.0.at.fetch_max(to, Ordering::SeqCst);
        // SeqCst on both sides: a waiter that registered before this load
        // is woken; one that registers after it sees the new position.
        if before < to && self.0.waiting.load(Ordering::SeqCst) > 0 {
            self.0.moved.notify_waiters();
        }
    }

    /// Returns once the position is at or past `revision`.
    pub async fn reached(&self, revision: Revision) {
        let cell = &self.0;
        cell.waiting.fetch_add(1, Ordering::SeqCst);
        let _registered = Registered(&cell.waiting);
        loop {
            let moved = cell.moved.notified();
            let mut moved = std::pin::pin!(moved);
            moved.as_mut().enable();
            if self.get() >= revision {
                return;
            }
            moved.await;
        }
    }
}

/// One waiter counted while it waits (also when its future is dropped).
struct Registered<'a>(&'a AtomicUsize);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_waiter_wakes_when_the_position_reaches_its_revision_and_not_before() {
        let progress = WatchProgress::new(5);
        progress.advance(3);
        assert_eq!(progress.get(), 5, "it never moves back");
        let waiter = {
            let progress = progress.clone();
            tokio::spawn(async move { progress.reached(8).await })
        };
        tokio::task::yield_now().await;
        progress.advance(7);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        progress.advance(9);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("woken")
            .unwrap();
        // Already there: no wait at all; a dropped waiter unregisters.
        progress.reached(9).await;
        let gave_up = tokio::time::timeout(Duration::from_millis(10), progress.reached(99)).await;
        assert!(gave_up.is_err());
        assert_eq!(progress.0.waiting.load(Ordering::SeqCst), 0);
    }
}
