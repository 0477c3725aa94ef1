//! Reclaiming space on a short disk. Below the write reserve only deletes
//! are admitted, but a delete frees nothing by itself: the deleted values
//! stay in history until compaction, and compaction removes records from
//! the old file batch by batch, each removal appended to sled's log, which
//! on a nearly full disk eats the last free bytes (seen on a 24 MiB tmpfs:
//! compacting 7 MiB of deleted values took free space from 9 MiB to 0, and
//! sled then failed even reads). So while the disk is short, background
//! compaction waits and this runs instead: the newest value of every live
//! key, and nothing older, copied into a fresh generation that replaces the
//! old file whole. It only reads the old tree, and it writes only when the
//! copy fits the free space with room to spare. Afterwards history up to
//! the current revision is gone: a watcher behind it is answered
//! `Compacted` and lists again, as after an etcd operator compacts to clear
//! a NOSPACE alarm.

use std::time::{Duration, Instant};

use super::codec::{self, IndexEntry, Record};
use super::restore::PresentTree;
use super::state::sled_error;
use crate::{KeyValue, Revision, StoreError};

/// After new writes (deletes), the soonest the store is looked at again.
const RETRY_AFTER_WRITES: Duration = Duration::from_secs(2);
/// Without new writes, how often it is looked at anyway (other files on the
/// disk may have shrunk, making room for the copy).
const RETRY_IDLE: Duration = Duration::from_secs(30);
/// Free space the copy leaves untouched, and the least the old file must
/// exceed the copy by for the rewrite to pay off: sled's fresh log starts
/// at a few segments whatever it holds.
const MARGIN: u64 = 2 * 1024 * 1024;

/// When to look at a short disk again.
#[derive(Default)]
pub(crate) struct Schedule {
    /// The last look: when, at which revision.
    last: Option<(Instant, Revision)>,
}

impl Schedule {
    /// Whether to look now, at `revision`.
    pub(crate) fn due(&self, revision: Revision, now: Instant) -> bool {
        match self.last {
            None => true,
            Some((at, seen)) => {
                let waited = now.saturating_duration_since(at);
                (revision != seen && waited >= RETRY_AFTER_WRITES) || waited >= RETRY_IDLE
            }
        }
    }

    /// Notes a look at `revision`.
    pub(crate) fn looked(&mut self, revision: Revision, now: Instant) {
        self.last = Some((now, revision));
    }
}

/// Why a rewrite was not started.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Skip {
    /// The file holds little more than the live data.
    NothingToGain { size: u64, live: u64 },
    /// The copy does not fit the free space with the margin.
    NoRoom { live: u64, free: u64 },
}

/// Whether copying `live` bytes out of a file of `size` bytes, with `free`
/// bytes free, is worth doing and safe: the copy is counted twice (sled's
/// log writes a page again when it splits or merges) plus the margin.
pub(crate) fn decide(size: u64, live: u64, free: u64) -> Result<(), Skip> {
    let copy = live.saturating_mul(2).saturating_add(MARGIN);
    if size < copy.saturating_add(MARGIN) {
        return Err(Skip::NothingToGain { size, live });
    }
    if free < copy {
        return Err(Skip::NoRoom { live, free });
    }
    Ok(())
}

/// The bytes the copy writes: the newest record and the index entry of every
/// live key.
pub(crate) fn live_bytes(db: &sled::Db) -> Result<u64, StoreError> {
    let mut bytes = 0u64;
    for_each_live(db, |key, entry, raw| {
        let index = codec::index_key(key).len() + codec::INDEX_LEN;
        let record = codec::record_key(entry.revision).len() + raw.len();
        bytes += (index + record) as u64;
        Ok(())
    })?;
    Ok(bytes)
}

/// Copies the newest value of every live key of `old` into the empty `new`
/// tree, as the present at `revision` (which nothing in `old` is newer than).
pub(crate) fn copy_present(
    old: &sled::Db,
    new: &sled::Db,
    revision: Revision,
) -> Result<(), StoreError> {
    let mut tree = PresentTree::new(new, revision, "reclaiming space");
    for_each_live(old, |key, entry, raw| {
        let record = Record::decode(entry.revision, raw)?;
        tree.put(&KeyValue {
            key: key.to_owned(),
            value: record.value,
            create_revision: entry.create_revision,
            mod_revision: entry.revision,
            version: entry.version,
        })
    })?;
    tree.finish()
}

/// Calls `visit` with the key, index entry and raw newest record of every
/// live key, in key order.
fn for_each_live(
    db: &sled::Db,
    mut visit: impl FnMut(&str, IndexEntry, &[u8]) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    for item in db.scan_prefix(codec::INDEX) {
        let (raw_key, raw_entry) = item.map_err(|e| sled_error("reading the key index", e))?;
        let key = codec::key_of_index(&raw_key)?;
        let entry = IndexEntry::decode(&key, &raw_entry)?;
        if entry.deleted {
            continue;
        }
        let raw = db
            .get(codec::record_key(entry.revision))
            .map_err(|e| sled_error("reading a history record", e))?
            .ok_or_else(|| {
                codec::corrupt(
                    format!("history record {}", entry.revision),
                    format!("missing, but the index of {key:?} points at it"),
                )
            })?;
        visit(&key, entry, &raw)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_only_what_pays_off_and_fits() {
        const MIB: u64 = 1 << 20;
        // 20 MiB of file around 1 MiB of live data, 5 MiB free: go.
        assert_eq!(decide(20 * MIB, MIB, 5 * MIB), Ok(()));
        // A file about the size of its live data gives nothing back.
        assert!(matches!(
            decide(5 * MIB, 2 * MIB, 50 * MIB),
            Err(Skip::NothingToGain { .. })
        ));
        // Live data twice over with the margin must fit.
        assert!(matches!(
            decide(40 * MIB, 4 * MIB, 9 * MIB),
            Err(Skip::NoRoom { .. })
        ));
        assert_eq!(decide(40 * MIB, 4 * MIB, 10 * MIB), Ok(()));
    }

    #[test]
    fn looks_again_after_new_writes_or_a_long_wait() {
        let start = Instant::now();
        let mut schedule = Schedule::default();
        assert!(schedule.due(10, start));
        schedule.looked(10, start);
        assert!(!schedule.due(10, start + Duration::from_secs(5)));
        assert!(!schedule.due(11, start + Duration::from_secs(1)));
        assert!(schedule.due(11, start + RETRY_AFTER_WRITES));
        assert!(schedule.due(10, start + RETRY_IDLE));
    }
}
