//! The on-disk layout, in one sled tree:
//!
//! - `k<key>` → [`IndexEntry`]: where the key's newest history record is;
//! - `r<revision, big endian>` → [`Record`]: the write made at that revision,
//!   holding the value (each value is stored once, in its history record);
//! - `m<name>` → store metadata (current revision, compaction progress).
//!
//! Decoding never trusts the bytes: anything malformed is reported as
//! [`StoreError::Corrupt`].

use bytes::Bytes;

use crate::{Revision, StoreError};

const INDEX_PREFIX: u8 = b'k';
const RECORD_PREFIX: u8 = b'r';
/// The sled key prefix of every index entry.
pub(crate) const INDEX: &[u8] = &[INDEX_PREFIX];
/// The sled key prefix of every history record.
pub(crate) const RECORDS: &[u8] = &[RECORD_PREFIX];

/// Metadata: the revision when the last compaction started. The current
/// revision is the newest record's; this keeps it from going backwards when
/// compaction removed that record (a deletion).
pub(crate) const META_REVISION: &[u8] = b"mrevision";
/// Metadata: the revision at or below which history is gone.
pub(crate) const META_COMPACT: &[u8] = b"mcompact";
/// Metadata: how far the physical removal of compacted records has got.
pub(crate) const META_COMPACTED_THROUGH: &[u8] = b"mcompacted-through";
/// Metadata: the layout version, so a future layout can refuse old data.
pub(crate) const META_FORMAT: &[u8] = b"mformat";
pub(crate) const FORMAT_VERSION: u64 = 1;

const RECORD_FORMAT: u8 = 1;
const KIND_PUT: u8 = 0;
const KIND_DELETE: u8 = 1;
const RECORD_HEADER: usize = 1 + 1 + 8 + 8 + 8 + 4;
/// The length of an encoded [`IndexEntry`].
pub(crate) const INDEX_LEN: usize = 1 + 8 + 8 + 8;

/// The sled key of `key`'s index entry.
pub(crate) fn index_key(key: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + key.len());
    out.push(INDEX_PREFIX);
    out.extend_from_slice(key.as_bytes());
    out
}

/// The user key of an index entry's sled key.
pub(crate) fn key_of_index(raw: &[u8]) -> Result<String, StoreError> {
    match raw.split_first() {
        Some((&INDEX_PREFIX, rest)) => String::from_utf8(rest.to_vec())
            .map_err(|e| corrupt("index key", format!("not UTF-8: {e}"))),
        _ => Err(corrupt("index key", "missing index prefix")),
    }
}

/// The sled key of the history record written at `revision`; big endian so
/// records sort by revision.
pub(crate) fn record_key(revision: Revision) -> [u8; 9] {
    let mut out = [0u8; 9];
    out[0] = RECORD_PREFIX;
    out[1..].copy_from_slice(&revision.to_be_bytes());
    out
}

/// The revision of a history record's sled key.
pub(crate) fn revision_of_record(raw: &[u8]) -> Result<Revision, StoreError> {
    match raw.split_first() {
        Some((&RECORD_PREFIX, rest)) if rest.len() == 8 => Ok(read_u64(rest, 0)),
        _ => Err(corrupt("record key", format!("malformed key {raw:?}"))),
    }
}

/// Where a key's newest history record is, with the metadata needed to
/// validate a write without reading the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IndexEntry {
    /// Revision of the newest record for the key.
    pub revision: Revision,
    /// Whether that record is a deletion (the key is absent from then on).
    pub deleted: bool,
    pub create_revision: Revision,
    pub version: u64,
}

impl IndexEntry {
    pub(crate) fn encode(&self) -> [u8; INDEX_LEN] {
        let mut out = [0u8; INDEX_LEN];
        out[0] = if self.deleted { KIND_DELETE } else { KIND_PUT };
        out[1..9].copy_from_slice(&self.revision.to_be_bytes());
        out[9..17].copy_from_slice(&self.create_revision.to_be_bytes());
        out[17..25].copy_from_slice(&self.version.to_be_bytes());
        out
    }

    pub(crate) fn decode(key: &str, raw: &[u8]) -> Result<Self, StoreError> {
        if raw.len() != INDEX_LEN {
            return Err(corrupt(
                format!("index of {key:?}"),
                format!("length {} instead of {INDEX_LEN}", raw.len()),
            ));
        }
        let deleted = match raw[0] {
            KIND_PUT => false,
            KIND_DELETE => true,
            other => {
                return Err(corrupt(
                    format!("index of {key:?}"),
                    format!("kind {other}"),
                ));
            }
        };
        Ok(Self {
            revision: read_u64(raw, 1),
            deleted,
            create_revision: read_u64(raw, 9),
            version: read_u64(raw, 17),
        })
    }
}

/// One write in the history, stored under its revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub key: String,
    /// Empty for a deletion.
    pub value: Bytes,
    pub deleted: bool,
    /// Create revision of the key's incarnation this write belongs to.
    pub create_revision: Revision,
    /// Version after this write (for a deletion: the version it removed).
    pub version: u64,
    /// Revision of the key's previous record (0 when it had none). For an
    /// update or delete it holds the previous value; for a create it is the
    /// tombstone that preceded it, which compaction uses to walk back.
    pub prev_revision: Revision,
}

impl Record {
    /// Whether this write created a new incarnation of the key.
    pub(crate) fn is_create(&self) -> bool {
        !self.deleted && self.version == 1
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(RECORD_HEADER + self.key.len() + self.value.len());
        out.push(RECORD_FORMAT);
        out.push(if self.deleted { KIND_DELETE } else { KIND_PUT });
        out.extend_from_slice(&self.create_revision.to_be_bytes());
        out.extend_from_slice(&self.version.to_be_bytes());
        out.extend_from_slice(&self.prev_revision.to_be_bytes());
        // Keys are bounded far below 4 GiB by the API server; refuse to
        // silently truncate one anyway.
        let key_len = u32::try_from(self.key.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&key_len.to_be_bytes());
        out.extend_from_slice(self.key.as_bytes());
        out.extend_from_slice(&self.value);
        out
    }

    /// Decodes the record stored at `revision`. `raw` is sled's buffer; the
    /// value is copied out once so it can outlive the read.
    pub(crate) fn decode(revision: Revision, raw: &[u8]) -> Result<Self, StoreError> {
        let what = || format!("history record {revision}");
        if raw.len() < RECORD_HEADER {
            return Err(corrupt(what(), format!("only {} bytes", raw.len())));
        }
        if raw[0] != RECORD_FORMAT {
            return Err(corrupt(what(), format!("unknown record format {}", raw[0])));
        }
        let deleted = match raw[1] {
            KIND_PUT => false,
            KIND_DELETE => true,
            other => return Err(corrupt(what(), format!("kind {other}"))),
        };
        let key_len = u32::from_be_bytes([raw[26], raw[27], raw[28], raw[29]]) as usize;
        let key_end = RECORD_HEADER
            .checked_add(key_len)
            .filter(|end| *end <= raw.len())
            .ok_or_else(|| corrupt(what(), format!("key length {key_len} past the end")))?;
        let key = std::str::from_utf8(&raw[RECORD_HEADER..key_end])
            .map_err(|e| corrupt(what(), format!("key not UTF-8: {e}")))?
            .to_owned();
        Ok(Self {
            key,
            value: Bytes::copy_from_slice(&raw[key_end..]),
            deleted,
            create_revision: read_u64(raw, 2),
            version: read_u64(raw, 10),
            prev_revision: read_u64(raw, 18),
        })
    }
}

/// Decodes a u64 metadata value.
pub(crate) fn decode_u64(what: &str, raw: &[u8]) -> Result<u64, StoreError> {
    if raw.len() != 8 {
        return Err(corrupt(what, format!("length {} instead of 8", raw.len())));
    }
    Ok(read_u64(raw, 0))
}

fn read_u64(raw: &[u8], at: usize) -> u64 {
    let mut buf = [0u8; 8];
    buf.copy_from_slice(&raw[at..at + 8]);
    u64::from_be_bytes(buf)
}

pub(crate) fn corrupt(what: impl Into<String>, detail: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        what: what.into(),
        detail: detail.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn record() -> impl Strategy<Value = Record> {
        (
            "[a-z/]{0,20}",
            proptest::collection::vec(any::<u8>(), 0..64),
            any::<bool>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
        )
            .prop_map(
                |(key, value, deleted, create_revision, version, prev_revision)| Record {
                    key,
                    value: Bytes::from(value),
                    deleted,
                    create_revision,
                    version,
                    prev_revision,
                },
            )
    }

    proptest! {
        #[test]
        fn records_round_trip(rec in record(), revision in any::<u64>()) {
            prop_assert_eq!(Record::decode(revision, &rec.encode())?, rec);
        }

        #[test]
        fn garbage_records_are_corrupt_not_panics(raw in proptest::collection::vec(any::<u8>(), 0..80)) {
            // Any outcome but a panic is fine; errors must be Corrupt.
            if let Err(e) = Record::decode(7, &raw) {
                prop_assert!(matches!(e, StoreError::Corrupt { .. }), "{}", e);
            }
            if let Err(e) = IndexEntry::decode("k", &raw) {
                prop_assert!(matches!(e, StoreError::Corrupt { .. }), "{}", e);
            }
        }

        #[test]
        fn index_entries_round_trip(revision in any::<u64>(), deleted in any::<bool>(), c in any::<u64>(), v in any::<u64>()) {
            let entry = IndexEntry { revision, deleted, create_revision: c, version: v };
            prop_assert_eq!(IndexEntry::decode("k", &entry.encode())?, entry);
        }
    }

    #[test]
    fn record_keys_sort_by_revision() {
        assert!(record_key(255) < record_key(256));
        assert_eq!(revision_of_record(&record_key(1 << 40)).unwrap(), 1 << 40);
    }

    #[test]
    fn truncated_record_is_corrupt() {
        let rec = Record {
            key: "abc".into(),
            value: Bytes::from_static(b"v"),
            deleted: false,
            create_revision: 2,
            version: 1,
            prev_revision: 0,
        };
        let raw = rec.encode();
        let err = Record::decode(2, &raw[..RECORD_HEADER + 1]).unwrap_err();
        assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    }
}
