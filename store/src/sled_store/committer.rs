//! The committer thread: the only writer of the sled tree. Owning every write
//! makes revisions trivially ordered. It drains its queue into a group, applies
//! each write as its own atomic sled batch and hands the group to the flusher
//! (see `flusher`), which makes it durable with one flush for everything
//! applied meanwhile (group commit) before anyone sees it. Compaction runs
//! here too, in chunks between groups; while the disk is short of space it
//! waits, and a compacting rewrite gives the space back instead (`reclaim`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{oneshot, watch};

use super::codec::{self, IndexEntry, Record};
use super::config::SledConfig;
use super::defrag;
use super::flusher::{Applied, Flusher, nanos, poison_error};
use super::reader::{self, event_from};
use super::reclaim;
use super::space::{Measured, Need};
use super::state::{Shared, sled_error};
use crate::{Event, KeyValue, Revision, StoreError};

/// History records examined per compaction step, between two commit groups,
/// so compaction never stalls writers for long.
const COMPACTION_CHUNK: u64 = 1024;

/// While the disk is short, how often the committer wakes without requests
/// to measure again and see whether reclaiming is due.
const SHORT_DISK_WAKE: Duration = Duration::from_secs(1);

pub(crate) type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// A write as the API asked for it.
pub(crate) enum WriteOp {
    Create {
        key: String,
        value: Bytes,
    },
    Update {
        key: String,
        value: Bytes,
        expected: Option<Revision>,
    },
    Delete {
        key: String,
        expected: Option<Revision>,
    },
}

pub(crate) enum Request {
    Write {
        op: WriteOp,
        reply: Reply<KeyValue>,
    },
    /// `reply` is `None` for the background policy, which does not wait.
    Compact {
        revision: Revision,
        reply: Option<Reply<()>>,
    },
    /// Rewrites the live data into a fresh generation (see `layout`).
    Defragment {
        reply: Reply<()>,
    },
    Close {
        reply: Reply<()>,
    },
}

/// Compaction in progress: records in `next..=target` are still to be examined.
struct Compaction {
    target: Revision,
    next: Revision,
    waiters: Vec<Reply<()>>,
}

/// What the committer knows at start-up, read from disk by the opener.
pub(crate) struct Recovered {
    pub revision: Revision,
    pub compact: Revision,
    pub compacted_through: Revision,
}

pub(crate) struct Committer {
    shared: Arc<Shared>,
    requests: mpsc::Receiver<Request>,
    /// Applied groups go to the flusher; `None` once closed.
    flusher: Option<mpsc::Sender<Applied>>,
    flusher_thread: Option<JoinHandle<()>>,
    /// The newest revision applied (ahead of the published one while groups
    /// wait for their flush).
    revision: Revision,
    compaction: Option<Compaction>,
    defrag_trigger: defrag::Trigger,
    /// Whether the last measurement found the disk below the write reserve.
    short_of_space: bool,
    reclaim_schedule: reclaim::Schedule,
    config: SledConfig,
}

/// The result of one write, before it is durable.
type Outcome = Result<(KeyValue, Event), StoreError>;

/// The writes of the group being applied: one sled batch (atomic, applied
/// once per group) and what later writes of the group must see of it.
#[derive(Default)]
struct Pending {
    batch: sled::Batch,
    index: HashMap<String, IndexEntry>,
    records: HashMap<Revision, Record>,
}

impl Committer {
    /// Starts the flusher thread and prepares the committer (run it on its own thread).
    pub(crate) fn start(
        shared: Arc<Shared>,
        requests: mpsc::Receiver<Request>,
        notify: watch::Sender<Revision>,
        recovered: Recovered,
        config: SledConfig,
    ) -> std::io::Result<Self> {
        let (flusher, groups) = mpsc::channel();
        let stage = Flusher::new(shared.clone(), groups, notify);
        let flusher_thread = std::thread::Builder::new()
            .name("skiff-store-flusher".into())
            .spawn(move || stage.run())?;
        let compaction = (recovered.compacted_through < recovered.compact).then(|| Compaction {
            target: recovered.compact,
            next: recovered.compacted_through + 1,
            waiters: Vec::new(),
        });
        Ok(Self {
            shared,
            requests,
            flusher: Some(flusher),
            flusher_thread: Some(flusher_thread),
            revision: recovered.revision,
            compaction,
            defrag_trigger: defrag::Trigger::default(),
            short_of_space: false,
            reclaim_schedule: reclaim::Schedule::default(),
            config,
        })
    }

    fn poisoned(&self) -> Option<String> {
        self.shared.poisoned()
    }

    /// Runs until the store is closed or every handle is gone.
    pub(crate) fn run(mut self) {
        loop {
            let compacting = self.compaction.is_some() && self.poisoned().is_none();
            let first = if self.short_of_space {
                match self.requests.recv_timeout(SHORT_DISK_WAKE) {
                    Ok(request) => Some(request),
                    Err(mpsc::RecvTimeoutError::Timeout) => None,
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                }
            } else if compacting {
                match self.requests.try_recv() {
                    Ok(request) => Some(request),
                    Err(mpsc::TryRecvError::Empty) => None,
                    Err(mpsc::TryRecvError::Disconnected) => break,
                }
            } else {
                match self.requests.recv() {
                    Ok(request) => Some(request),
                    Err(_) => break,
                }
            };
            if let Some(first) = first {
                let mut group = vec![first];
                while group.len() < self.config.max_group {
                    match self.requests.try_recv() {
                        Ok(request) => group.push(request),
                        Err(_) => break,
                    }
                }
                if self.commit_group(group) {
                    break;
                }
            }
            if self.short_of_space {
                self.reclaim_if_due();
            } else if self.compaction.is_some() && self.poisoned().is_none() {
                self.compaction_step();
            }
        }
        // Every handle is gone or the store closed: the flusher makes what was
        // applied durable, answers, and exits once its queue is empty.
        self.flusher.take();
        if let Some(thread) = self.flusher_thread.take() {
            let _ = thread.join();
        }
    }

    fn poison(&mut self, err: &StoreError) {
        tracing::error!(error = %err, "store write failed; refusing further writes");
        self.shared.poison(err);
    }

    /// Hands work to the flusher (which answers every reply in it).
    fn hand_off(&mut self, applied: Applied) {
        if let Some(flusher) = &self.flusher
            && let Err(mpsc::SendError(applied)) = flusher.send(applied)
        {
            // The flusher is gone (it panicked): nothing can become durable.
            for (reply, _) in applied.replies {
                let _ = reply.send(Err(StoreError::Closed));
            }
        }
    }

    /// Applies one group and hands it to the flusher; returns whether the
    /// committer must stop (the store is closing).
    fn commit_group(&mut self, group: Vec<Request>) -> bool {
        let mut applied = Applied::default();
        let mut pending = Pending::default();
        let mut closing = false;
        let start = std::time::Instant::now();
        // Free space is measured once per group, when it has writes.
        let mut space: Option<Measured> = None;
        for request in group {
            match request {
                Request::Write { op, reply } => {
                    if let Some(reason) = self.poisoned() {
                        applied.replies.push((reply, Err(poison_error(&reason))));
                        continue;
                    }
                    let measured = *space.get_or_insert_with(|| self.shared.space.measure());
                    self.short_of_space = measured.short();
                    let need = match op {
                        WriteOp::Delete { .. } => Need::Delete,
                        _ => Need::Write,
                    };
                    if let Err(refused) = measured.admit(need, self.shared.space.dir()) {
                        applied.replies.push((reply, Err(refused)));
                        continue;
                    }
                    match self.apply(op, &mut pending) {
                        Ok((kv, event)) => {
                            applied.events.push(event);
                            applied.replies.push((reply, Ok(kv)));
                        }
                        Err(refused) => applied.replies.push((reply, Err(refused))),
                    }
                }
                Request::Compact { revision, reply } => {
                    if let Err(fatal) = self.start_compaction(revision, reply) {
                        self.poison(&fatal);
                    }
                }
                Request::Defragment { reply } => {
                    // Writes of this group so far are committed first.
                    let before = std::mem::take(&mut pending);
                    self.apply_pending(before);
                    let mut before = std::mem::take(&mut applied);
                    before.through = self.revision;
                    self.hand_off(before);
                    let _ = reply.send(self.defragment());
                }
                Request::Close { reply } => {
                    applied.waiters.push(reply);
                    closing = true;
                }
            }
        }
        self.apply_pending(pending);
        self.shared
            .counters
            .apply_nanos
            .fetch_add(nanos(start.elapsed()), Ordering::Relaxed);
        applied.through = self.revision;
        self.hand_off(applied);
        closing
    }

    fn apply_pending(&mut self, pending: Pending) {
        if !pending.records.is_empty()
            && let Err(err) = self.shared.generation().db.apply_batch(pending.batch)
        {
            // The tree may now be in an unknown state: fail this group and all later writes.
            let fatal = sled_error("applying writes", err);
            self.poison(&fatal);
        }
    }

    fn index(&self, pending: &Pending, key: &str) -> Result<Option<IndexEntry>, StoreError> {
        match pending.index.get(key) {
            Some(entry) => Ok(Some(*entry)),
            None => reader::read_index(&self.shared, key),
        }
    }

    fn record(&self, pending: &Pending, revision: Revision) -> Result<Option<Record>, StoreError> {
        match pending.records.get(&revision) {
            Some(record) => Ok(Some(record.clone())),
            None => reader::read_record(&self.shared, revision),
        }
    }

    /// Validates one write against the tree and the group's earlier writes and
    /// adds it to the group's batch; an error is a refusal of this write only.
    fn apply(&mut self, op: WriteOp, pending: &mut Pending) -> Outcome {
        let (key, value, expected, create) = match op {
            WriteOp::Create { key, value } => (key, Some(value), None, true),
            WriteOp::Update {
                key,
                value,
                expected,
            } => (key, Some(value), expected, false),
            WriteOp::Delete { key, expected } => (key, None, expected, false),
        };
        let newest = self.index(pending, &key)?;
        let live = newest.filter(|e| !e.deleted);
        let revision = self.revision + 1;
        let (record, prev) = match (create, live) {
            (true, Some(_)) => return Err(StoreError::AlreadyExists { key }),
            (false, None) => return Err(StoreError::NotFound { key }),
            (true, None) => {
                let record = Record {
                    key: key.clone(),
                    value: value.unwrap_or_default(),
                    deleted: false,
                    create_revision: revision,
                    version: 1,
                    // The tombstone this create follows lets compaction walk back.
                    prev_revision: newest.map_or(0, |e| e.revision),
                };
                (record, None)
            }
            (false, Some(entry)) => {
                if let Some(expected) = expected.filter(|e| *e != entry.revision) {
                    return Err(StoreError::Conflict {
                        key,
                        expected,
                        actual: entry.revision,
                    });
                }
                let prev = self.record(pending, entry.revision)?.ok_or_else(|| {
                    codec::corrupt(
                        format!("history record {}", entry.revision),
                        format!("missing, but the index of {key:?} points at it"),
                    )
                })?;
                let deleted = value.is_none();
                let record = Record {
                    key: key.clone(),
                    deleted,
                    value: value.unwrap_or_default(),
                    create_revision: entry.create_revision,
                    // A deletion records the version it removed.
                    version: if deleted {
                        entry.version
                    } else {
                        entry.version + 1
                    },
                    prev_revision: entry.revision,
                };
                let prev_kv = KeyValue {
                    key: prev.key,
                    value: prev.value,
                    create_revision: prev.create_revision,
                    mod_revision: entry.revision,
                    version: prev.version,
                };
                (record, Some(prev_kv))
            }
        };
        let entry = IndexEntry {
            revision,
            deleted: record.deleted,
            create_revision: record.create_revision,
            version: record.version,
        };
        // The current revision is not stored per write: it is the newest
        // record's (see `recover`), so each write touches two keys only.
        pending
            .batch
            .insert(&codec::record_key(revision), record.encode());
        pending
            .batch
            .insert(codec::index_key(&key), &entry.encode());
        pending.index.insert(key.clone(), entry);
        pending.records.insert(revision, record.clone());
        self.revision = revision;

        let answer = if record.deleted {
            // A delete answers with the value it removed, at the deletion's revision.
            KeyValue {
                key: key.clone(),
                value: prev.as_ref().map(|p| p.value.clone()).unwrap_or_default(),
                create_revision: record.create_revision,
                mod_revision: revision,
                version: record.version,
            }
        } else {
            KeyValue {
                key: key.clone(),
                value: record.value.clone(),
                create_revision: record.create_revision,
                mod_revision: revision,
                version: record.version,
            }
        };
        Ok((answer, event_from(revision, record, prev)))
    }

    /// Registers a compaction request; returns whether it wrote anything.
    fn start_compaction(
        &mut self,
        requested: Revision,
        reply: Option<Reply<()>>,
    ) -> Result<(), StoreError> {
        // Compacting beyond what is published would drop history no one has
        // seen yet (and records not yet durable).
        let target = requested.min(self.shared.published());
        let compact = self.shared.compact_revision();
        if target <= compact {
            match &mut self.compaction {
                Some(running) => running.waiters.extend(reply),
                None => {
                    if let Some(reply) = reply {
                        let _ = reply.send(Ok(()));
                    }
                }
            }
            return Ok(());
        }
        // Records kept by an earlier compaction (the newest value of each key
        // at its target) may be superseded now, so every compaction scans
        // history from its start; what survives there is one record per key.
        let mut batch = sled::Batch::default();
        batch.insert(codec::META_COMPACT, &target.to_be_bytes());
        batch.insert(codec::META_COMPACTED_THROUGH, &0u64.to_be_bytes());
        // Compaction may remove the newest record (a deletion), which is what
        // the current revision is recovered from; record it here instead. Only
        // the published (durable) revision: groups applied but not yet flushed
        // may be lost in a crash, and a noted revision beyond them would leave
        // a hole at the end of history.
        batch.insert(codec::META_REVISION, &self.shared.published().to_be_bytes());
        self.shared
            .generation()
            .db
            .apply_batch(batch)
            .map_err(|e| sled_error("recording the compact revision", e))?;
        // From here on readers and watchers treat history up to `target` as gone;
        // records are removed only afterwards, in chunks.
        self.shared.compact.store(target, Ordering::Release);
        match &mut self.compaction {
            Some(running) => {
                running.target = target;
                running.next = 1;
                running.waiters.extend(reply);
            }
            None => {
                self.compaction = Some(Compaction {
                    target,
                    next: 1,
                    waiters: reply.into_iter().collect(),
                })
            }
        }
        Ok(())
    }

    /// Finishes any compaction, waits until everything applied is durable,
    /// then rewrites the live data into a fresh generation.
    fn defragment(&mut self) -> Result<(), StoreError> {
        while self.compaction.is_some() && self.poisoned().is_none() {
            self.compaction_step_only();
        }
        self.wait_durable()?;
        // Nothing is in flight now and only this thread writes.
        defrag::rewrite(&self.shared, &self.config)
    }

    /// Waits until everything applied is durable and published.
    fn wait_durable(&mut self) -> Result<(), StoreError> {
        if let Some(reason) = self.poisoned() {
            return Err(poison_error(&reason));
        }
        let (barrier, flushed) = oneshot::channel();
        self.hand_off(Applied {
            through: self.revision,
            waiters: vec![barrier],
            ..Applied::default()
        });
        flushed.blocking_recv().map_err(|_| StoreError::Closed)?
    }

    /// On a short disk: measures again, and when a look is due and the
    /// compacting rewrite pays off and fits, runs it (see `reclaim`).
    fn reclaim_if_due(&mut self) {
        if self.poisoned().is_some() {
            return;
        }
        let measured = self.shared.space.measure();
        self.short_of_space = measured.short();
        let now = Instant::now();
        if !self.short_of_space || !self.reclaim_schedule.due(self.revision, now) {
            return;
        }
        self.reclaim_schedule.looked(self.revision, now);
        if let Err(err) = self.reclaim(measured.free.unwrap_or(0)) {
            tracing::warn!(error = %err, "reclaiming space on the short disk failed");
        }
    }

    /// The compacting rewrite, when it pays off and fits `free` bytes.
    fn reclaim(&mut self, free: u64) -> Result<(), StoreError> {
        let old = self.shared.generation();
        let size = old
            .db
            .size_on_disk()
            .map_err(|e| sled_error("measuring the database", e))?;
        let live = reclaim::live_bytes(&old.db)?;
        drop(old);
        if let Err(skip) = reclaim::decide(size, live, free) {
            tracing::debug!(?skip, "not reclaiming space on the short disk");
            return Ok(());
        }
        self.wait_durable()?;
        let revision = self.revision;
        // Readers treat the history as gone before the tree without it is
        // live, so none looks for it there.
        let compact_before = self.shared.compact.fetch_max(revision, Ordering::AcqRel);
        if let Err(err) = defrag::rewrite_with(&self.shared, &self.config, |old, new| {
            reclaim::copy_present(old, new, revision)
        }) {
            // The old tree, still live, holds that history: serve it again.
            self.shared.compact.store(compact_before, Ordering::Release);
            return Err(err);
        }
        // A compaction under way is done: its target is at or below `revision`.
        if let Some(running) = self.compaction.take() {
            for waiter in running.waiters {
                let _ = waiter.send(Ok(()));
            }
        }
        tracing::info!(
            revision,
            before_bytes = size,
            live_bytes = live,
            "reclaimed space on the short disk: history compacted to the current revision"
        );
        Ok(())
    }

    fn compaction_step(&mut self) {
        if self.compaction_step_only() {
            match self.defrag_trigger.worthwhile(&self.shared, &self.config) {
                Ok(true) => {
                    if let Err(err) = self.defragment() {
                        tracing::warn!(error = %err, "defragmentation after compaction failed");
                    }
                }
                Ok(false) => {}
                Err(err) => {
                    tracing::warn!(error = %err, "cannot measure the store for defragmentation")
                }
            }
        }
    }

    /// One compaction chunk; returns whether the compaction just finished.
    fn compaction_step_only(&mut self) -> bool {
        let result = self.compact_chunk();
        let Some(running) = &self.compaction else {
            return false;
        };
        let finished = running.next > running.target;
        match result {
            Ok(()) if !finished => false,
            Ok(()) => {
                let Some(running) = self.compaction.take() else {
                    return false;
                };
                tracing::debug!(target = running.target, "compaction finished");
                // Answered once the removals are durable.
                self.hand_off(Applied {
                    through: self.revision,
                    waiters: running.waiters,
                    ..Applied::default()
                });
                true
            }
            Err(err) => {
                tracing::error!(error = %err, "compaction failed");
                if let Some(running) = self.compaction.take() {
                    for waiter in running.waiters {
                        let _ = waiter.send(Err(StoreError::Corrupt {
                            what: "compaction".into(),
                            detail: err.to_string(),
                        }));
                    }
                }
                false
            }
        }
    }

    /// Removes, among the next chunk of records at or below the target, every
    /// record superseded by a later one at or below the target, and deletions
    /// at or below it. The newest value at or below the target stays, so the
    /// previous values of later events remain readable.
    fn compact_chunk(&mut self) -> Result<(), StoreError> {
        let Some(running) = &self.compaction else {
            return Ok(());
        };
        let (target, from) = (running.target, running.next);
        // The chunk is counted in records, not revisions: below an earlier
        // compaction's target records are sparse.
        let mut end = target;
        let mut kept: HashMap<String, Revision> = HashMap::new();
        let mut batch = sled::Batch::default();
        let range = codec::record_key(from)..=codec::record_key(target);
        let generation = self.shared.generation();
        for (examined, item) in generation.db.range(range).enumerate() {
            let (raw_key, raw) = item.map_err(|e| sled_error("compacting", e))?;
            let revision = codec::revision_of_record(&raw_key)?;
            if examined as u64 == COMPACTION_CHUNK {
                end = revision - 1;
                break;
            }
            let record = Record::decode(revision, &raw)?;
            let survivor = match kept.get(&record.key) {
                Some(survivor) => *survivor,
                None => {
                    let survivor = self.newest_at_or_below(&record.key, target)?;
                    kept.insert(record.key.clone(), survivor);
                    survivor
                }
            };
            let superseded = survivor == 0 || revision < survivor;
            let dead_tombstone = revision == survivor && record.deleted;
            if superseded || dead_tombstone {
                batch.remove(&raw_key);
            }
            if dead_tombstone
                && let Some(entry) = reader::read_index(&self.shared, &record.key)?
                && entry.revision == revision
            {
                batch.remove(codec::index_key(&record.key));
            }
        }
        batch.insert(codec::META_COMPACTED_THROUGH, &end.to_be_bytes());
        generation
            .db
            .apply_batch(batch)
            .map_err(|e| sled_error("removing compacted history", e))?;
        if let Some(running) = &mut self.compaction {
            running.next = end + 1;
        }
        Ok(())
    }

    /// The revision of `key`'s newest record at or below `target` (0 when the
    /// key has no index entry left), walking back from its newest record.
    fn newest_at_or_below(&self, key: &str, target: Revision) -> Result<Revision, StoreError> {
        let Some(entry) = reader::read_index(&self.shared, key)? else {
            return Ok(0);
        };
        let mut revision = entry.revision;
        while revision > target {
            let record = reader::read_record(&self.shared, revision)?.ok_or_else(|| {
                codec::corrupt(
                    format!("history record {revision}"),
                    format!("missing from the history chain of {key:?}"),
                )
            })?;
            revision = record.prev_revision;
        }
        Ok(revision)
    }
}
