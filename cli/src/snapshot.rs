//! `skiff snapshot save|ls|delete|prune|restore`, as k3s's `etcd-snapshot`.
//! All but `restore` go through the running server (the store is held by
//! it): the admin endpoints of `skiff_apiserver::snapshots`, with the admin
//! kubeconfig. `restore` works offline, into a data dir no server runs on;
//! `skiff server --cluster-reset --cluster-reset-restore-path` does the
//! same into the server's own data dir.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use skiff_apiserver::snapshots::{
    DEFAULT_ON_DEMAND_NAME, PRUNE_PATH, SNAPSHOTS_PATH, SnapshotInfo, SnapshotList,
};
use skiff_store::snapshot::{Snapshot, valid_name};
use skiff_store::{SledConfig, SledStore};

/// The data-dir files every snapshot carries, as k3s's bootstrap data: the
/// cluster CA (so existing kubeconfigs and node certificates stay valid),
/// the clients' certificates it signed, the service-account signing key
/// (so existing tokens verify), the token file, and the managed encryption
/// configuration (without which restored Secrets cannot be read), and the
/// join token `DATA_DIR/token` (so agents and servers joined with it still
/// reach the restored server, and bootstrap data sealed with it in an etcd
/// datastore still opens; it is no more secret than the CA key beside it,
/// and the file is 0600). The names are paths relative to the data dir;
/// restore writes only these.
pub(crate) const ATTACHMENTS: &[&str] = &[
    "tls/ca.crt",
    "tls/ca.key",
    "tls/admin.crt",
    "tls/admin.key",
    "tls/kubelet-client.crt",
    "tls/kubelet-client.key",
    "tls/service-account.key",
    "token.csv",
    JOIN_TOKEN,
    skiff_apiserver::encryption::MANAGED_CONFIG,
];

/// The join token's file. Snapshots taken before it was carried lack it: a
/// restore then keeps the one the data dir has, rather than leaving the
/// server to make a new one its agents do not know.
const JOIN_TOKEN: &str = "token";

/// Files of the data dir a restore removes so they are made anew for this
/// host under the restored CA (the serving certificate names the host).
const HOST_SPECIFIC: &[&str] = &["tls/serving.crt", "tls/serving.key", "tls/serving.sans"];

/// `(attachment name, path)` for every file snapshots carry.
pub(crate) fn attachment_sources(data_dir: &Path) -> Vec<(String, PathBuf)> {
    ATTACHMENTS
        .iter()
        .map(|name| (name.to_string(), data_dir.join(name)))
        .collect()
}

/// `skiff snapshot` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct SnapshotArgs {
    /// The server (`restore` writes into its `--data-dir` instead).
    #[command(flatten)]
    pub target: crate::admin_client::ServerTarget,

    #[command(subcommand)]
    pub command: SnapshotCommand,
}

/// What to do.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum SnapshotCommand {
    /// Take a snapshot now, on the server, into its snapshot directory.
    Save {
        /// Name prefix: the file is `<name>-<node>-<unix time>`.
        #[arg(long, default_value = DEFAULT_ON_DEMAND_NAME)]
        name: String,
    },
    /// List the snapshots on the server.
    #[command(alias = "list")]
    Ls {
        /// Print the server's answer as JSON.
        #[arg(long, short = 'o', value_parser = ["text", "json"], default_value = "text")]
        output: String,
    },
    /// Delete snapshots by name (as `ls` prints them).
    #[command(alias = "rm")]
    Delete {
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Delete the oldest snapshots of a name beyond the retention.
    Prune {
        #[arg(long, default_value = DEFAULT_ON_DEMAND_NAME)]
        name: String,
        /// Snapshots of that name to keep (default: the server's
        /// --snapshot-retention).
        #[arg(long = "snapshot-retention")]
        retention: Option<usize>,
    },
    /// Restore a snapshot file into a data dir no server is running on
    /// (then start `skiff server --data-dir` on it).
    Restore {
        /// The snapshot file (as `ls` shows its location on the server).
        file: PathBuf,
        /// Move a store already in the data dir aside (to
        /// `db-old-<unix time>`) instead of refusing.
        #[arg(long)]
        force: bool,
    },
}

/// Runs `skiff snapshot ...`.
pub(crate) async fn run(args: SnapshotArgs) -> anyhow::Result<()> {
    if let SnapshotCommand::Restore { file, force } = &args.command {
        let data_dir = &args.target.data_dir.path;
        let restored = restore(data_dir, file, *force)?;
        println!("{}", restored.summary(data_dir));
        return Ok(());
    }
    let client = args.target.client().await?;
    let call = |method, path: String| {
        let client = client.clone();
        async move { crate::admin_client::call(&client, method, &path).await }
    };
    match args.command {
        SnapshotCommand::Save { name } => {
            check_name(&name)?;
            let answer = call(http::Method::POST, format!("{SNAPSHOTS_PATH}?name={name}")).await?;
            let saved: SnapshotInfo = read(&answer)?;
            println!("Snapshot {} saved.", saved.name);
        }
        SnapshotCommand::Ls { output } => {
            let answer = call(http::Method::GET, SNAPSHOTS_PATH.to_string()).await?;
            if output == "json" {
                println!("{answer}");
            } else {
                print!("{}", render(&read::<SnapshotList>(&answer)?));
            }
        }
        SnapshotCommand::Delete { names } => {
            for name in names {
                call(http::Method::DELETE, format!("{SNAPSHOTS_PATH}/{name}")).await?;
                println!("Snapshot {name} deleted.");
            }
        }
        SnapshotCommand::Prune { name, retention } => {
            check_name(&name)?;
            let mut path = format!("{PRUNE_PATH}?name={name}");
            if let Some(retention) = retention {
                path.push_str(&format!("&retention={retention}"));
            }
            let answer = call(http::Method::POST, path).await?;
            for deleted in read::<SnapshotList>(&answer)?.items {
                println!("Snapshot {} deleted.", deleted.name);
            }
        }
        SnapshotCommand::Restore { .. } => unreachable!("handled above"),
    }
    Ok(())
}

fn check_name(name: &str) -> anyhow::Result<()> {
    if !valid_name(name) {
        bail!(
            "invalid snapshot name {name:?}: use lower-case letters, digits, '-', '_' and '.', not starting with '.'"
        );
    }
    Ok(())
}

fn read<T: serde::de::DeserializeOwned>(answer: &str) -> anyhow::Result<T> {
    serde_json::from_str(answer).context("reading the server's answer")
}

/// The list as k3s prints it: `Name Location Size Created` in columns.
fn render(list: &SnapshotList) -> String {
    let header = ["Name", "Location", "Size", "Created"];
    let rows: Vec<[String; 4]> = list
        .items
        .iter()
        .map(|s| {
            [
                s.name.clone(),
                s.location.clone(),
                s.size.to_string(),
                s.created.clone(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: [&str; 4]| {
        format!(
            "{:<w0$} {:<w1$} {:<w2$} {}\n",
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
        )
    };
    let mut out = line(header);
    for row in &rows {
        out.push_str(&line([&row[0], &row[1], &row[2], &row[3]]));
    }
    out
}

/// What a restore did.
pub(crate) struct Restored {
    pub revision: u64,
    pub keys: usize,
    /// Where a store that was in the data dir was moved.
    pub moved_aside: Option<PathBuf>,
}

impl Restored {
    /// One line for the operator.
    pub(crate) fn summary(&self, data_dir: &Path) -> String {
        let mut text = format!(
            "Snapshot restored into {} ({} keys at revision {}).",
            data_dir.display(),
            self.keys,
            self.revision
        );
        if let Some(old) = &self.moved_aside {
            text.push_str(&format!(
                " The previous store was moved to {}.",
                old.display()
            ));
        }
        text
    }
}

/// Restores `file` into `data_dir`: the embedded store in `DATA_DIR/db`
/// and the files it carries. The file is read and checked whole first, so
/// a damaged one changes nothing. A data dir that holds a store is refused
/// unless `force`, which moves that store aside rather than deleting it.
pub(crate) fn restore(data_dir: &Path, file: &Path, force: bool) -> anyhow::Result<Restored> {
    let snapshot = Snapshot::read(file)?;
    crate::agent::create_data_dir(data_dir)?;
    let db = data_dir.join("db");
    let mut moved_aside = None;
    if SledStore::exists(&db) {
        if SledStore::in_use(&db).with_context(|| format!("checking {}", db.display()))? {
            bail!(
                "{} is in use by a running server; stop it before restoring",
                db.display()
            );
        }
        if !force {
            bail!(
                "{} already holds a store; restore into a new data dir, or move it aside with --force (skiff snapshot restore) or --cluster-reset (skiff server)",
                db.display()
            );
        }
        let old = data_dir.join(format!("db-old-{}", unix_now()));
        std::fs::rename(&db, &old)
            .with_context(|| format!("moving {} aside to {}", db.display(), old.display()))?;
        moved_aside = Some(old);
    } else if db.exists() {
        // A directory without a store (an interrupted restore): nothing in
        // it is worth keeping, and the restore needs it empty.
        std::fs::remove_dir_all(&db).with_context(|| format!("clearing {}", db.display()))?;
    }
    SledStore::restore(&SledConfig::new(&db), &snapshot)
        .with_context(|| format!("restoring the store into {}", db.display()))?;
    for name in HOST_SPECIFIC {
        match std::fs::remove_file(data_dir.join(name)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing {name}")),
        }
    }
    for name in ATTACHMENTS {
        let path = data_dir.join(name);
        match snapshot.attachment(name) {
            Some(attachment) => skiff_common::files::write_private(&path, &attachment.data)?,
            None if *name == JOIN_TOKEN => {}
            // Not in the snapshot (no encryption then): one left in the
            // data dir would not match the restored data.
            None => match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).with_context(|| format!("removing {}", path.display())),
            },
        }
    }
    Ok(Restored {
        revision: snapshot.revision,
        keys: snapshot.entries.len(),
        moved_aside,
    })
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ls_reads_like_k3s() {
        let list = SnapshotList {
            items: vec![SnapshotInfo {
                name: "on-demand-n1-1700000000".into(),
                location: "file:///d/server/db/snapshots/on-demand-n1-1700000000".into(),
                size: 1234,
                created: "2023-11-14T22:13:20Z".into(),
            }],
        };
        let text = render(&list);
        let mut lines = text.lines();
        let header = lines.next().unwrap();
        assert!(header.starts_with("Name "), "{text}");
        assert!(
            header.contains(" Location ") && header.ends_with(" Created"),
            "{text}"
        );
        let row = lines.next().unwrap();
        assert!(
            row.starts_with("on-demand-n1-1700000000 file:///d/"),
            "{text}"
        );
        assert!(row.ends_with(" 1234 2023-11-14T22:13:20Z"), "{text}");
    }
}
