//! What this process knows of etcd's revision, compact revision and health,
//! readable without a round trip (`Store::current_revision` and
//! `compact_revision` are synchronous).
//!
//! The invariant: both numbers only grow, never pass etcd's own, and are
//! at least every revision this store has handed out — every response
//! header and watch event is recorded before the call that carried it
//! returns or the event is yielded, and every compaction this store did or
//! a watch reported is recorded. Writes and compactions by *other* clients
//! of the same cluster (another server in HA) are learned from the next
//! response that carries them, and at the latest within one progress
//! interval from the background probe (`progress.rs`). So a revision seen
//! anywhere is "reached" here soon after, which is what waiting for a
//! resourceVersion from another server relies on.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::{Exhausted, Revision, StoreError};

/// Whether etcd takes writes, as last probed.
#[derive(Debug, Clone)]
pub(crate) enum Health {
    Ok,
    /// The NOSPACE alarm is raised.
    NoSpace,
    /// The last probe failed; the message says how.
    Unreachable(String),
}

/// Revisions and health, shared by every clone, watch and background task.
#[derive(Debug)]
pub(crate) struct Tracker {
    current: AtomicU64,
    compact: AtomicU64,
    health: Mutex<Health>,
    endpoints: String,
}

/// An unreachable etcd, for [`StoreError::Backend`].
#[derive(Debug, thiserror::Error)]
#[error("etcd at {endpoints} is unreachable: {reason}")]
pub(crate) struct Unreachable {
    pub(crate) endpoints: String,
    pub(crate) reason: String,
}

impl Tracker {
    pub(crate) fn new(endpoints: String) -> Self {
        Self {
            current: AtomicU64::new(0),
            compact: AtomicU64::new(0),
            health: Mutex::new(Health::Ok),
            endpoints,
        }
    }

    pub(crate) fn current(&self) -> Revision {
        self.current.load(Ordering::Acquire)
    }

    pub(crate) fn compact(&self) -> Revision {
        self.compact.load(Ordering::Acquire)
    }

    /// Records a revision etcd reported (a response header, an event).
    pub(crate) fn saw(&self, revision: Revision) {
        self.current.fetch_max(revision, Ordering::AcqRel);
    }

    /// Records the revision of a response header, if it has one.
    pub(crate) fn saw_header(&self, header: Option<&etcd_client::ResponseHeader>) {
        if let Some(header) = header {
            self.saw(super::convert::revision(header.revision()));
        }
    }

    /// Records that history at and below `revision` is gone.
    pub(crate) fn compacted(&self, revision: Revision) {
        self.compact.fetch_max(revision, Ordering::AcqRel);
        self.saw(revision);
    }

    pub(crate) fn set_health(&self, health: Health) {
        *self.health.lock() = health;
    }

    /// `Ok` when etcd was reachable and taking writes at the last probe.
    pub(crate) fn health(&self) -> Result<(), StoreError> {
        match &*self.health.lock() {
            Health::Ok => Ok(()),
            Health::NoSpace => Err(self.no_space()),
            Health::Unreachable(reason) => Err(StoreError::Backend {
                context: "probing etcd",
                source: Box::new(Unreachable {
                    endpoints: self.endpoints.clone(),
                    reason: reason.clone(),
                }),
            }),
        }
    }

    /// The error for a write etcd refused for lack of space.
    pub(crate) fn no_space(&self) -> StoreError {
        StoreError::NoSpace {
            exhausted: Exhausted::EtcdQuota {
                endpoints: self.endpoints.clone(),
            },
            deletes_refused: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_only_grow() {
        let tracker = Tracker::new("http://e:1".into());
        tracker.saw(5);
        tracker.saw(3);
        assert_eq!(tracker.current(), 5);
        tracker.compacted(4);
        tracker.compacted(2);
        assert_eq!((tracker.current(), tracker.compact()), (5, 4));
        tracker.compacted(7);
        assert_eq!((tracker.current(), tracker.compact()), (7, 7));
    }

    #[test]
    fn health_names_the_endpoints() {
        let tracker = Tracker::new("http://e:1".into());
        assert!(tracker.health().is_ok());
        tracker.set_health(Health::NoSpace);
        let err = tracker.health().unwrap_err();
        assert!(matches!(err, StoreError::NoSpace { .. }));
        assert!(err.to_string().contains("http://e:1"), "{err}");
        tracker.set_health(Health::Unreachable("connection refused".into()));
        let err = tracker.health().unwrap_err();
        assert!(err.to_string().contains("connection refused"), "{err}");
    }
}
