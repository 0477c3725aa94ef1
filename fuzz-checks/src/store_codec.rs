//! The store's on-disk codec: history records, index entries, keys and
//! metadata values as read back from a data directory that may be damaged;
//! and snapshot files (sealed with a valid digest, so the structure behind
//! the checksum is what gets exercised).

use crate::options;
use skiff_store::StoreError;
use skiff_store::fuzzing;

/// Malformed bytes are reported as corruption, never anything else.
fn corrupt_or_exact(raw: &[u8], result: Result<Vec<u8>, StoreError>) {
    match result {
        // Every encoding is canonical: what decodes encodes to the same bytes.
        Ok(encoded) => assert_eq!(encoded, raw),
        Err(e) => assert!(matches!(e, StoreError::Corrupt { .. }), "{e}"),
    }
}

/// Checks one input; panics where skiff answers it wrongly.
pub fn run(data: &[u8]) {
    let Some((choice, raw)) = options(data) else {
        return;
    };
    match choice % 5 {
        0 => corrupt_or_exact(raw, fuzzing::record_round_trip(7, raw)),
        1 => corrupt_or_exact(raw, fuzzing::index_round_trip(raw)),
        2 => corrupt_or_exact(raw, fuzzing::key_round_trip(raw)),
        4 => {
            if let Ok((file, encoded)) = fuzzing::snapshot_round_trip(raw) {
                // Canonical too: a file that reads writes back the same bytes.
                assert_eq!(encoded, file);
            }
        }
        _ => match fuzzing::decode_meta(raw) {
            Ok(n) => assert_eq!(n.to_be_bytes().as_slice(), raw),
            Err(e) => assert!(matches!(e, StoreError::Corrupt { .. }), "{e}"),
        },
    }
}
