//! Watches as etcd watches with previous values.
//!
//! The etcd watch starts *at* `from_revision`, not after it, and the
//! events of that revision are dropped: etcd refuses a start below its
//! compact revision, so this makes "history after `from` is gone" exactly
//! the trait's `from < compact_revision`, rather than one revision later.
//! A previous value etcd could not read any more (compaction overtook a
//! slow watcher at the edge) makes the stream end with `Compacted` too,
//! instead of delivering an update that looks like a create.

use std::collections::VecDeque;
use std::sync::Arc;

use futures::StreamExt;

use super::Inner;
use super::convert::{self, wire};
use crate::{Event, EventKind, KeyValue, Revision, StoreError, WatchStream};

/// The etcd watch ended or failed in a way the trait has no name for.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct WatchBroke(String);

struct Watching {
    inner: Arc<Inner>,
    prefix: String,
    /// Events at or below this were asked to be skipped.
    from: Revision,
    /// The newest revision delivered, for a `Compacted` report.
    delivered: Revision,
    closed: tokio::sync::watch::Receiver<bool>,
    etcd: Option<etcd_client::WatchStream>,
    pending: VecDeque<Result<Event, StoreError>>,
    done: bool,
}

pub(crate) fn open(
    inner: &Arc<Inner>,
    prefix: &str,
    from: Revision,
) -> Result<WatchStream, StoreError> {
    let compact = inner.tracker.compact();
    if from < compact {
        return Err(StoreError::Compacted {
            requested: from,
            compact_revision: compact,
        });
    }
    let state = Watching {
        inner: Arc::clone(inner),
        prefix: prefix.to_owned(),
        from,
        delivered: from,
        closed: inner.closed.subscribe(),
        etcd: None,
        pending: VecDeque::new(),
        done: false,
    };
    Ok(futures::stream::unfold(state, next).boxed())
}

async fn next(mut state: Watching) -> Option<(Result<Event, StoreError>, Watching)> {
    loop {
        if let Some(item) = state.pending.pop_front() {
            return Some((item, state));
        }
        if state.done || *state.closed.borrow() {
            return None;
        }
        let mut closed = state.closed.clone();
        let Some(etcd) = state.etcd.as_mut() else {
            tokio::select! {
                _ = closed.wait_for(|closed| *closed) => return None,
                started = start(&state) => match started {
                    Ok(stream) => state.etcd = Some(stream),
                    Err(e) => state.fail(convert::error("starting an etcd watch", e)),
                },
            }
            continue;
        };
        tokio::select! {
            _ = closed.wait_for(|closed| *closed) => return None,
            message = etcd.message() => match message {
                Ok(Some(response)) => state.absorb(response),
                Ok(None) => state.fail(broke("etcd ended the watch stream")),
                Err(e) => state.fail(convert::error("watching etcd", e)),
            },
        }
    }
}

async fn start(state: &Watching) -> Result<etcd_client::WatchStream, etcd_client::Error> {
    let prefix = state.prefix.as_bytes();
    let key = if prefix.is_empty() {
        vec![0]
    } else {
        prefix.to_vec()
    };
    let options = etcd_client::WatchOptions::new()
        .with_range(convert::prefix_end(prefix))
        .with_prev_key()
        // etcd reads 0 as "from now"; ours means "all history".
        .with_start_revision(wire(state.from.max(1)));
    state.inner.watch.clone().watch(key, Some(options)).await
}

fn broke(what: &str) -> StoreError {
    StoreError::Backend {
        context: "watching etcd",
        source: Box::new(WatchBroke(what.to_owned())),
    }
}

impl Watching {
    /// Queues `error` as the stream's last item.
    fn fail(&mut self, error: StoreError) {
        self.pending.push_back(Err(error));
        self.done = true;
    }

    fn compacted(&mut self, compact_revision: Revision) {
        self.inner.tracker.compacted(compact_revision);
        let requested = self.delivered;
        self.fail(StoreError::Compacted {
            requested,
            compact_revision,
        });
    }

    fn absorb(&mut self, response: etcd_client::WatchResponse) {
        self.inner.tracker.saw_header(response.header());
        if response.compact_revision() > 0 {
            return self.compacted(convert::revision(response.compact_revision()));
        }
        if response.canceled() {
            let reason = format!("etcd canceled the watch: {}", response.cancel_reason());
            return self.fail(broke(&reason));
        }
        for event in response.events() {
            match self.event(event) {
                Ok(Some(event)) => {
                    self.delivered = event.revision();
                    self.inner.tracker.saw(self.delivered);
                    self.pending.push_back(Ok(event));
                }
                Ok(None) => {}
                Err(e) => return self.fail(e),
            }
        }
    }

    /// The store's event for an etcd event; `None` for one at or below
    /// `from`.
    fn event(&self, event: &etcd_client::Event) -> Result<Option<Event>, StoreError> {
        let Some(kv) = event.kv() else {
            return Err(StoreError::Corrupt {
                what: "an etcd watch event".into(),
                detail: "it carries no key".into(),
            });
        };
        let revision = convert::revision(kv.mod_revision());
        if revision <= self.from {
            return Ok(None);
        }
        let prev = event.prev_kv().map(convert::key_value).transpose()?;
        let (kind, kv) = match event.event_type() {
            etcd_client::EventType::Put => (EventKind::Put, convert::key_value(kv)?),
            etcd_client::EventType::Delete => (
                EventKind::Delete,
                KeyValue {
                    key: convert::key(kv.key())?,
                    value: Default::default(),
                    create_revision: 0,
                    mod_revision: revision,
                    version: 0,
                },
            ),
        };
        // A key that existed before (an update, or any delete) must come
        // with its previous value; etcd leaves it out silently when that
        // value is compacted away, which for us means history is gone.
        let existed = kind == EventKind::Delete || kv.version > 1;
        if existed && prev.is_none() {
            let compact = self.inner.tracker.compact().max(revision);
            self.inner.tracker.compacted(compact);
            return Err(StoreError::Compacted {
                requested: self.delivered,
                compact_revision: compact,
            });
        }
        Ok(Some(Event { kind, kv, prev }))
    }
}
