//! One server's snapshot directory, named and pruned as k3s names and prunes
//! its etcd snapshots: `<name>-<node>-<unix time>`, the newest `retention`
//! of one name kept.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Attachment, Snapshot, SnapshotError, io};
use crate::Store;

/// A snapshot file in the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotFile {
    /// The file name, which is also the name `delete` takes.
    pub name: String,
    /// Where the file is.
    pub path: PathBuf,
    /// Size in bytes.
    pub size: u64,
    /// When it was taken (seconds since the Unix epoch), from its name.
    pub created: u64,
}

/// Takes, lists and removes the snapshots of one store in one directory.
/// Every new snapshot also carries the attachment files named at
/// construction, read at the moment it is taken.
pub struct SnapshotDir {
    dir: PathBuf,
    node: String,
    store: Arc<dyn Store>,
    sources: Vec<(String, PathBuf)>,
    /// One save or prune at a time, so retention never races a save.
    busy: tokio::sync::Mutex<()>,
}

/// Whether `name` may name snapshots: it ends up in a file name, so only a
/// plain, short, visible word.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && name.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.')
        })
}

/// Whether `name` can be a snapshot file in the directory: the name part
/// is checked by [`valid_name`], the node's name comes from the host, so
/// anything that stays a plain visible file name inside the directory.
fn valid_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('.')
        && !name.contains('/')
        && !name.contains('\0')
}

impl std::fmt::Debug for SnapshotDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotDir")
            .field("dir", &self.dir)
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl SnapshotDir {
    /// Snapshots of `store` taken on node `node`, kept in `dir` (created
    /// 0700 at the first save), each carrying the files `sources` names
    /// as `(attachment name, path)`; a missing file is left out.
    pub fn new(
        dir: impl Into<PathBuf>,
        node: impl Into<String>,
        store: Arc<dyn Store>,
        sources: Vec<(String, PathBuf)>,
    ) -> Self {
        Self {
            dir: dir.into(),
            node: node.into(),
            store,
            sources,
            busy: tokio::sync::Mutex::new(()),
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Takes a snapshot named `<name>-<node>-<unix time>` and writes it
    /// into the directory.
    pub async fn save(&self, name: &str) -> Result<SnapshotFile, SnapshotError> {
        if !valid_name(name) {
            return Err(SnapshotError::InvalidName { name: name.into() });
        }
        let _busy = self.busy.lock().await;
        let mut attachments = Vec::new();
        for (attachment, path) in &self.sources {
            match tokio::fs::read(path).await {
                Ok(data) => attachments.push(Attachment {
                    name: attachment.clone(),
                    data,
                }),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io("read", path)(e)),
            }
        }
        let snapshot = Snapshot::take(self.store.as_ref(), attachments).await?;
        let file_name = format!("{name}-{}-{}", self.node, snapshot.created);
        let path = self.dir.join(&file_name);
        let dir = self.dir.clone();
        let target = path.clone();
        let size = tokio::task::spawn_blocking(move || {
            create_private_dir(&dir)?;
            snapshot.write(&target)
        })
        .await
        .map_err(|e| SnapshotError::Io {
            action: "write",
            path: path.clone(),
            source: std::io::Error::other(e),
        })??;
        tracing::info!(snapshot = %path.display(), size, "snapshot saved");
        Ok(SnapshotFile {
            created: unix_of(&file_name),
            name: file_name,
            path,
            size,
        })
    }

    /// The snapshots in the directory, oldest first. A missing directory
    /// holds none.
    pub fn list(&self) -> Result<Vec<SnapshotFile>, SnapshotError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io("list", &self.dir)(e)),
        };
        let mut files = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io("list", &self.dir))?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            // Temporary files of a save in progress start with a dot.
            if !valid_file_name(&name) {
                continue;
            }
            let Ok(meta) = entry.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            let created = unix_of(&name);
            files.push(SnapshotFile {
                path: entry.path(),
                size: meta.len(),
                created,
                name,
            });
        }
        files.sort_by(|a, b| (a.created, &a.name).cmp(&(b.created, &b.name)));
        Ok(files)
    }

    /// Removes the snapshot file `name` (a name `list` gives).
    pub fn delete(&self, name: &str) -> Result<(), SnapshotError> {
        if !valid_file_name(name) {
            return Err(SnapshotError::InvalidName { name: name.into() });
        }
        let path = self.dir.join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => {
                tracing::info!(snapshot = %path.display(), "snapshot deleted");
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(SnapshotError::NotFound {
                name: name.into(),
                dir: self.dir.clone(),
            }),
            Err(e) => Err(io("delete", &path)(e)),
        }
    }

    /// Deletes the oldest snapshots this node took under `name` beyond the
    /// newest `retention`, and returns the deleted names.
    pub async fn prune(&self, name: &str, retention: usize) -> Result<Vec<String>, SnapshotError> {
        if !valid_name(name) {
            return Err(SnapshotError::InvalidName { name: name.into() });
        }
        let _busy = self.busy.lock().await;
        let prefix = format!("{name}-{}-", self.node);
        let mine: Vec<SnapshotFile> = self
            .list()?
            .into_iter()
            .filter(|f| {
                f.name
                    .strip_prefix(&prefix)
                    .is_some_and(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
            })
            .collect();
        let excess = mine.len().saturating_sub(retention);
        let mut deleted = Vec::new();
        for file in mine.into_iter().take(excess) {
            self.delete(&file.name)?;
            deleted.push(file.name);
        }
        Ok(deleted)
    }
}

/// The Unix time at the end of a snapshot name (0 when there is none).
fn unix_of(name: &str) -> u64 {
    name.rsplit('-')
        .next()
        .and_then(|t| t.parse().ok())
        .unwrap_or(0)
}

fn create_private_dir(dir: &Path) -> Result<(), SnapshotError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io("create", dir))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(io("make private", dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SledConfig, SledStore};

    #[tokio::test]
    async fn saves_are_named_as_k3s_and_pruned_oldest_first() {
        let tmp = tempfile::tempdir().unwrap();
        let store =
            SledStore::open(SledConfig::new(tmp.path().join("db")).compaction(None)).unwrap();
        std::fs::write(tmp.path().join("ca.key"), b"k").unwrap();
        let dir = SnapshotDir::new(
            tmp.path().join("snapshots"),
            "node-1",
            Arc::new(store),
            vec![
                ("tls/ca.key".into(), tmp.path().join("ca.key")),
                ("missing".into(), tmp.path().join("missing")),
            ],
        );
        let saved = dir.save("on-demand").await.unwrap();
        assert!(
            saved.name.starts_with("on-demand-node-1-"),
            "{}",
            saved.name
        );
        let snapshot = Snapshot::read(&saved.path).unwrap();
        assert_eq!(snapshot.attachments.len(), 1);
        // Older snapshots of the same name, and one of another name.
        for (name, at) in [("on-demand", 100), ("on-demand", 200), ("other", 50)] {
            std::fs::write(dir.path().join(format!("{name}-node-1-{at}")), b"x").unwrap();
        }
        let names: Vec<String> = dir.list().unwrap().into_iter().map(|f| f.name).collect();
        assert_eq!(
            names[..3],
            [
                "other-node-1-50",
                "on-demand-node-1-100",
                "on-demand-node-1-200"
            ]
        );
        let deleted = dir.prune("on-demand", 2).await.unwrap();
        assert_eq!(deleted, ["on-demand-node-1-100"]);
        assert_eq!(dir.list().unwrap().len(), 3);
        // Names that could leave the directory are refused.
        for bad in ["../x", "a/b", ".hidden", ""] {
            assert!(
                matches!(dir.delete(bad), Err(SnapshotError::InvalidName { .. })),
                "{bad}"
            );
            assert!(dir.save(bad).await.is_err(), "{bad}");
        }
        assert!(matches!(
            dir.delete("nope"),
            Err(SnapshotError::NotFound { .. })
        ));
    }
}
