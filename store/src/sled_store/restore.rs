//! Restoring a [`Snapshot`] into a new store directory: each key becomes one
//! history record at its own mod revision (mod revisions are distinct, one
//! write per revision), with its index entry, and the store's revision and
//! compact revision are the snapshot's. History before the snapshot is not
//! in it, so a watch from an older revision is answered `Compacted`, as
//! after etcd's restore.

use super::codec::{self, IndexEntry, Record};
use super::config::SledConfig;
use super::layout;
use super::state::sled_error;
use crate::StoreError;
use crate::snapshot::Snapshot;

/// Entries written per sled batch.
const BATCH: usize = 4096;

pub(crate) fn restore(config: &SledConfig, snapshot: &Snapshot) -> Result<(), StoreError> {
    if layout::exists(&config.path) {
        return Err(StoreError::Backend {
            context: "restoring a snapshot",
            source: format!(
                "{} already holds a store; restore into an empty directory",
                config.path.display()
            )
            .into(),
        });
    }
    let number = layout::current(&config.path)?;
    let dir = layout::generation_dir(&config.path, number);
    let db = layout::open_sled(&dir, config)?;
    let mut batch = sled::Batch::default();
    batch.insert(codec::META_FORMAT, &codec::FORMAT_VERSION.to_be_bytes());
    let mut in_batch = 1;
    for kv in &snapshot.entries {
        if kv.mod_revision > snapshot.revision {
            return Err(codec::corrupt(
                format!("snapshot entry {:?}", kv.key),
                format!(
                    "mod revision {} is newer than the snapshot's {}",
                    kv.mod_revision, snapshot.revision
                ),
            ));
        }
        let record = Record {
            key: kv.key.clone(),
            value: kv.value.clone(),
            deleted: false,
            create_revision: kv.create_revision,
            version: kv.version,
            prev_revision: 0,
        };
        let index = IndexEntry {
            revision: kv.mod_revision,
            deleted: false,
            create_revision: kv.create_revision,
            version: kv.version,
        };
        batch.insert(&codec::record_key(kv.mod_revision), record.encode());
        batch.insert(codec::index_key(&kv.key), &index.encode());
        in_batch += 1;
        if in_batch >= BATCH {
            db.apply_batch(std::mem::take(&mut batch))
                .map_err(|e| sled_error("restoring a snapshot", e))?;
            in_batch = 0;
        }
    }
    let revision = snapshot.revision.to_be_bytes();
    batch.insert(codec::META_REVISION, &revision);
    batch.insert(codec::META_COMPACT, &revision);
    batch.insert(codec::META_COMPACTED_THROUGH, &revision);
    db.apply_batch(batch)
        .map_err(|e| sled_error("restoring a snapshot", e))?;
    db.flush()
        .map_err(|e| sled_error("flushing the restored store", e))?;
    Ok(())
}
