//! Entry points for the fuzz targets in `fuzz/` (hidden from the docs, not an API):
//! the on-disk codec, which decodes whatever bytes a damaged data directory holds,
//! and the snapshot file, which restore reads from wherever the operator points.

use super::codec::{self, IndexEntry, Record};
use crate::{Revision, StoreError};

/// Decodes a history record as the reader does, and encodes it again.
pub fn record_round_trip(revision: Revision, raw: &[u8]) -> Result<Vec<u8>, StoreError> {
    Record::decode(revision, raw).map(|record| record.encode())
}

/// Decodes an index entry as the reader does, and encodes it again.
pub fn index_round_trip(raw: &[u8]) -> Result<Vec<u8>, StoreError> {
    IndexEntry::decode("fuzz", raw).map(|entry| entry.encode().to_vec())
}

/// Reads a raw sled key as an index key or a record key (both are scanned
/// by prefix), and writes it back.
pub fn key_round_trip(raw: &[u8]) -> Result<Vec<u8>, StoreError> {
    match codec::key_of_index(raw) {
        Ok(key) => Ok(codec::index_key(&key)),
        Err(_) => codec::revision_of_record(raw).map(|r| codec::record_key(r).to_vec()),
    }
}

/// Reads a metadata value (revision, compaction marks, format).
pub fn decode_meta(raw: &[u8]) -> Result<u64, StoreError> {
    codec::decode_u64("fuzz", raw)
}

/// Decodes `body` sealed with its digest as a snapshot file, and encodes
/// the result again: `Ok` holds the re-encoded file, `Err` why it was
/// refused.
pub fn snapshot_round_trip(body: &[u8]) -> Result<(Vec<u8>, Vec<u8>), String> {
    use crate::snapshot::format;
    let file = format::seal(body);
    let snapshot = format::decode(&file)?;
    Ok((file, format::to_bytes(&snapshot)))
}
