//! Writing a store tree that holds only the present: each key one history
//! record at its own mod revision (mod revisions are distinct, one write per
//! revision), with its index entry, and the tree's revision and compact
//! revision both the revision it was read at. Restoring a [`Snapshot`] and
//! reclaiming space on a short disk (see `reclaim`) both write one. History
//! before that revision is not in it, so a watch from an older revision is
//! answered `Compacted`, as after etcd's restore.

use super::codec::{self, IndexEntry, Record};
use super::config::SledConfig;
use super::layout;
use super::state::sled_error;
use crate::snapshot::Snapshot;
use crate::{KeyValue, Revision, StoreError};

/// Entries written per sled batch.
const BATCH: usize = 4096;

/// Writes the keys of one revision into an empty sled tree, in batches.
pub(crate) struct PresentTree<'a> {
    db: &'a sled::Db,
    revision: Revision,
    context: &'static str,
    batch: sled::Batch,
    in_batch: usize,
}

impl<'a> PresentTree<'a> {
    /// A writer of the keys live at `revision` into `db`; `context` names
    /// the work in errors.
    pub(crate) fn new(db: &'a sled::Db, revision: Revision, context: &'static str) -> Self {
        let mut batch = sled::Batch::default();
        batch.insert(codec::META_FORMAT, &codec::FORMAT_VERSION.to_be_bytes());
        Self {
            db,
            revision,
            context,
            batch,
            in_batch: 1,
        }
    }

    /// Adds one live key; its mod revision must not be newer than the tree's.
    pub(crate) fn put(&mut self, kv: &KeyValue) -> Result<(), StoreError> {
        if kv.mod_revision > self.revision {
            return Err(codec::corrupt(
                format!("entry {:?}", kv.key),
                format!(
                    "mod revision {} is newer than the revision {} being written",
                    kv.mod_revision, self.revision
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
        self.batch
            .insert(&codec::record_key(kv.mod_revision), record.encode());
        self.batch
            .insert(codec::index_key(&kv.key), &index.encode());
        self.in_batch += 1;
        if self.in_batch >= BATCH {
            self.db
                .apply_batch(std::mem::take(&mut self.batch))
                .map_err(|e| sled_error(self.context, e))?;
            self.in_batch = 0;
        }
        Ok(())
    }

    /// Records the tree's revision as current and compacted, and flushes.
    pub(crate) fn finish(mut self) -> Result<(), StoreError> {
        let revision = self.revision.to_be_bytes();
        self.batch.insert(codec::META_REVISION, &revision);
        self.batch.insert(codec::META_COMPACT, &revision);
        self.batch.insert(codec::META_COMPACTED_THROUGH, &revision);
        self.db
            .apply_batch(self.batch)
            .map_err(|e| sled_error(self.context, e))?;
        self.db.flush().map_err(|e| sled_error(self.context, e))?;
        Ok(())
    }
}

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
    let mut tree = PresentTree::new(&db, snapshot.revision, "restoring a snapshot");
    for kv in &snapshot.entries {
        tree.put(kv)?;
    }
    tree.finish()
}
