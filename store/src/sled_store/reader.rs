//! Reads at the published revision. Writes are applied to sled before their
//! group is flushed, so a reader walks a key's history chain back past any
//! record newer than the published revision: nobody ever sees a write that a
//! crash could still take back.

use bytes::Bytes;

use super::codec::{self, IndexEntry, Record};
use super::state::{Shared, sled_error};
use crate::{Event, EventKind, KeyValue, ListResult, Revision, StoreError};

/// How often a read restarts when a concurrent compaction removed a record it
/// was about to read, before the store reports the data as corrupt.
const READ_ATTEMPTS: usize = 8;

/// The revision of the first write to a new store (it starts at 1, empty).
const FIRST_WRITE: Revision = 2;

/// The outcome of resolving one key at a revision.
enum Resolved {
    Found(KeyValue),
    Absent,
    /// A compaction overtook the read revision; read again at a newer one.
    Retry,
}

pub(crate) fn read_record(
    shared: &Shared,
    revision: Revision,
) -> Result<Option<Record>, StoreError> {
    let raw = read_raw(
        shared,
        codec::record_key(revision),
        "reading a history record",
    )?;
    raw.map(|raw| Record::decode(revision, &raw)).transpose()
}

pub(crate) fn read_index(shared: &Shared, key: &str) -> Result<Option<IndexEntry>, StoreError> {
    let raw = read_raw(shared, codec::index_key(key), "reading the key index")?;
    raw.map(|raw| IndexEntry::decode(key, &raw)).transpose()
}

/// One point read in the live generation's database (defragmentation
/// replaces it, so each read takes the current one); `context` names the
/// read in the error.
fn read_raw(
    shared: &Shared,
    raw_key: impl AsRef<[u8]>,
    context: &'static str,
) -> Result<Option<sled::IVec>, StoreError> {
    shared
        .generation()
        .db
        .get(raw_key)
        .map_err(|e| sled_error(context, e))
}

fn key_value(record: Record, revision: Revision) -> KeyValue {
    KeyValue {
        key: record.key,
        value: record.value,
        create_revision: record.create_revision,
        mod_revision: revision,
        version: record.version,
    }
}

/// A missing record is fine only when compaction may have dropped it; if the
/// compaction moved past `at`, the caller must retry at a newer revision.
fn missing(shared: &Shared, revision: Revision, at: Revision) -> Result<Resolved, StoreError> {
    let compact = shared.compact_revision();
    if revision <= compact {
        if compact > at {
            return Ok(Resolved::Retry);
        }
        return Ok(Resolved::Absent);
    }
    Err(codec::corrupt(
        format!("history record {revision}"),
        format!("missing, but newer than the compact revision {compact}"),
    ))
}

/// The key's state at revision `at`, starting from its newest index entry
/// and walking back through its history: past a write newer than `at` (not
/// yet published, or a past revision asked for) to the one before it, and
/// past a create to the deletion that ended the key's previous incarnation.
fn resolve(
    shared: &Shared,
    key: &str,
    entry: IndexEntry,
    at: Revision,
) -> Result<Resolved, StoreError> {
    let mut revision = entry.revision;
    if revision <= at && entry.deleted {
        return Ok(Resolved::Absent);
    }
    loop {
        let Some(record) = read_record(shared, revision)? else {
            return missing(shared, revision, at);
        };
        if record.key != key {
            return Err(codec::corrupt(
                format!("history record {revision}"),
                format!("belongs to {:?}, not {key:?}", record.key),
            ));
        }
        if revision <= at {
            return Ok(if record.deleted {
                Resolved::Absent
            } else {
                Resolved::Found(key_value(record, revision))
            });
        }
        if record.prev_revision == 0 {
            return Ok(Resolved::Absent);
        }
        revision = record.prev_revision;
    }
}

pub(crate) fn get(shared: &Shared, key: &str) -> Result<Option<KeyValue>, StoreError> {
    for _ in 0..READ_ATTEMPTS {
        let at = shared.published();
        let Some(entry) = read_index(shared, key)? else {
            // Compaction drops the index entry of a deleted key; that says
            // nothing about revision `at` once compaction has passed it.
            if shared.compact_revision() > at {
                continue;
            }
            return Ok(None);
        };
        match resolve(shared, key, entry, at)? {
            Resolved::Found(kv) => return Ok(Some(kv)),
            Resolved::Absent => return Ok(None),
            Resolved::Retry => continue,
        }
    }
    Err(too_many_retries(key))
}

/// The revision [`get`] would return for `key` as `mod_revision`, read from
/// the key's index entry alone when that entry is published (the common
/// case); an entry newer than what readers may see yet is resolved as
/// [`get`] resolves it, through the history records.
pub(crate) fn mod_revision(shared: &Shared, key: &str) -> Result<Option<Revision>, StoreError> {
    let at = shared.published();
    match read_index(shared, key)? {
        Some(entry) if entry.revision <= at => Ok((!entry.deleted).then_some(entry.revision)),
        _ => Ok(get(shared, key)?.map(|kv| kv.mod_revision)),
    }
}

fn too_many_retries(what: &str) -> StoreError {
    codec::corrupt(
        format!("read of {what:?}"),
        "records kept disappearing under concurrent compaction",
    )
}

pub(crate) fn list(
    shared: &Shared,
    prefix: &str,
    start_after: Option<&str>,
    limit: usize,
) -> Result<ListResult, StoreError> {
    'attempt: for _ in 0..READ_ATTEMPTS {
        let at = shared.published();
        let start = match start_after {
            Some(after) if after >= prefix => {
                let mut k = codec::index_key(after);
                // The smallest key strictly after `after`.
                k.push(0);
                k
            }
            _ => codec::index_key(prefix),
        };
        let index_prefix = codec::index_key(prefix);
        let mut items = Vec::new();
        let mut more = false;
        let generation = shared.generation();
        for entry in generation.db.range(start..) {
            let (raw_key, raw_entry) = entry.map_err(|e| sled_error("listing keys", e))?;
            if !raw_key.starts_with(&index_prefix) {
                break;
            }
            let key = codec::key_of_index(&raw_key)?;
            let entry = IndexEntry::decode(&key, &raw_entry)?;
            match resolve(shared, &key, entry, at)? {
                Resolved::Found(kv) => {
                    if limit > 0 && items.len() == limit {
                        more = true;
                        break;
                    }
                    items.push(kv);
                }
                Resolved::Absent => {}
                Resolved::Retry => continue 'attempt,
            }
        }
        if shared.compact_revision() > at {
            continue 'attempt;
        }
        return Ok(ListResult {
            items,
            revision: at,
            more,
        });
    }
    Err(too_many_retries(prefix))
}

/// Every key under `prefix` as it was at `revision` (see
/// [`crate::Store::list_at`]).
pub(crate) fn list_at(
    shared: &Shared,
    prefix: &str,
    revision: Revision,
) -> Result<ListResult, StoreError> {
    let published = shared.published();
    if revision > published {
        return Err(StoreError::Backend {
            context: "listing keys at a revision",
            source: format!("revision {revision} is ahead of the store's {published}").into(),
        });
    }
    let compacted = || StoreError::Compacted {
        requested: revision,
        compact_revision: shared.compact_revision(),
    };
    if shared.compact_revision() > revision {
        return Err(compacted());
    }
    let index_prefix = codec::index_key(prefix);
    let mut items = Vec::new();
    for entry in shared.generation().db.scan_prefix(&index_prefix) {
        let (raw_key, raw_entry) = entry.map_err(|e| sled_error("listing keys", e))?;
        let key = codec::key_of_index(&raw_key)?;
        let entry = IndexEntry::decode(&key, &raw_entry)?;
        match resolve(shared, &key, entry, revision)? {
            Resolved::Found(kv) => items.push(kv),
            Resolved::Absent => {}
            Resolved::Retry => return Err(compacted()),
        }
    }
    // A compaction that passed the revision meanwhile may have dropped
    // records this read relied on being absent or present.
    if shared.compact_revision() > revision {
        return Err(compacted());
    }
    Ok(ListResult {
        items,
        revision,
        more: false,
    })
}

/// Turns the record written at `revision` into the watch event it stands for,
/// reading the previous value from history.
pub(crate) fn event_of(
    shared: &Shared,
    revision: Revision,
    record: Record,
) -> Result<Event, StoreError> {
    let prev = if record.is_create() || record.prev_revision == 0 {
        None
    } else {
        let prev_revision = record.prev_revision;
        match read_record(shared, prev_revision)? {
            Some(prev) => Some(key_value(prev, prev_revision)),
            None => {
                let compact = shared.compact_revision();
                return Err(StoreError::Compacted {
                    requested: revision,
                    compact_revision: compact,
                });
            }
        }
    };
    Ok(event_from(revision, record, prev))
}

/// The event for `record` at `revision` given its previous value.
pub(crate) fn event_from(revision: Revision, record: Record, prev: Option<KeyValue>) -> Event {
    if record.deleted {
        Event {
            kind: EventKind::Delete,
            kv: KeyValue {
                key: record.key,
                value: Bytes::new(),
                create_revision: 0,
                mod_revision: revision,
                version: 0,
            },
            prev,
        }
    } else {
        Event {
            kind: EventKind::Put,
            kv: key_value(record, revision),
            prev,
        }
    }
}

/// History events in `(after, through]` under `prefix`, scanning at most
/// `max_scan` revisions, with the revision actually read up to.
pub(crate) fn history(
    shared: &Shared,
    after: Revision,
    through: Revision,
    prefix: &str,
    max_scan: usize,
) -> Result<(Vec<Event>, Revision), StoreError> {
    shared
        .counters
        .history_reads
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let compacted = |shared: &Shared| StoreError::Compacted {
        requested: after,
        compact_revision: shared.compact_revision(),
    };
    if after < shared.compact_revision() {
        return Err(compacted(shared));
    }
    let mut events = Vec::new();
    // Revision 1 is the empty store's; the first write is revision 2.
    let mut expected = (after + 1).max(FIRST_WRITE);
    let end = through.min(after.saturating_add(max_scan as u64));
    if end < expected {
        return Ok((events, end));
    }
    let generation = shared.generation();
    for item in generation
        .db
        .range(codec::record_key(expected)..=codec::record_key(end))
    {
        let (raw_key, raw) = item.map_err(|e| sled_error("reading history", e))?;
        let revision = codec::revision_of_record(&raw_key)?;
        if revision != expected {
            // Revisions are contiguous above the compact revision.
            if after < shared.compact_revision() {
                return Err(compacted(shared));
            }
            return Err(codec::corrupt(
                format!("history record {expected}"),
                format!("missing (next record is {revision})"),
            ));
        }
        let record = Record::decode(revision, &raw)?;
        if record.key.starts_with(prefix) {
            match event_of(shared, revision, record) {
                Err(StoreError::Compacted { .. }) if after >= shared.compact_revision() => {
                    return Err(codec::corrupt(
                        format!("history record {revision}"),
                        "its previous value is missing",
                    ));
                }
                Err(StoreError::Compacted { .. }) => return Err(compacted(shared)),
                other => events.push(other?),
            }
        }
        expected += 1;
    }
    if expected <= end {
        if after < shared.compact_revision() {
            return Err(compacted(shared));
        }
        return Err(codec::corrupt(
            format!("history record {expected}"),
            "missing at the end of history",
        ));
    }
    Ok((events, end))
}
