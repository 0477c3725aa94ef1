//! Keeping one table applied, the loop the service proxy and the network
//! policy controller share once their informers are synced: a sync on every
//! change (a burst coalesced into one) and on every resync period, which
//! first checks that the table is still there and intact (someone may have
//! flushed it) and rebuilds it when not. Each sync applies only the
//! difference from what was last applied, as one transaction; the first,
//! and any after a failure or a tampered table, replace the whole table.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Notify, watch};
use tracing::Instrument as _;

use super::{Applied, Applier, Family, Nft, NftError, Ruleset, sysctl};
use crate::wakeups::SyncWakeups;

/// What is fixed about one component's table, whatever its configuration:
/// a `const` next to the component's renderer.
#[derive(Debug)]
pub struct TableKind {
    /// The table's family.
    pub family: Family,
    /// What the rules are called in logs, e.g. "service rules".
    pub what: &'static str,
    /// Whether the table, once applied, is still there and intact.
    pub intact: fn(&Applier) -> Result<bool, NftError>,
    /// The host sysctls the rules need, as `(path, value)`, set before the
    /// first sync when [`TableSync::host_sysctls`] asks for it.
    pub sysctls: &'static [(&'static str, &'static str)],
    /// What needs those sysctls, named when one cannot be set.
    pub sysctls_purpose: &'static str,
    /// Those of `sysctls` only safe while rules are in place
    /// (`route_localnet` needs the proxy's loopback guard), each with text
    /// that such rules hold as `nft list ruleset` shows them: once the table
    /// is removed on stop, the earlier value is put back unless another
    /// table (another instance's) still holds that text.
    pub sysctls_undone_on_stop: &'static [(&'static str, &'static str)],
}

/// How one table is kept applied: the settings the service proxy's and the
/// network policy controller's configurations share.
#[derive(Debug, Clone)]
pub struct TableSync {
    /// The table's name.
    pub table: String,
    /// Changes arriving within this delay are applied together.
    pub coalesce: Duration,
    /// How often the table is checked and re-synced even without changes.
    pub resync: Duration,
    /// Where to run `nft`.
    pub nft: Nft,
    /// Set the host sysctls the rules need ([`TableKind::sysctls`]). Off
    /// for components in test namespaces.
    pub host_sysctls: bool,
    /// Delete the table when the component stops cleanly.
    pub remove_on_stop: bool,
}

impl TableSync {
    /// Table `table` through the host's `nft`, 100 ms coalescing, 30 s
    /// resync, the host sysctls set.
    pub fn new(table: impl Into<String>, remove_on_stop: bool) -> Self {
        Self {
            table: table.into(),
            coalesce: Duration::from_millis(100),
            resync: Duration::from_secs(30),
            nft: Nft::new(),
            host_sysctls: true,
            remove_on_stop,
        }
    }
}

/// The informer caches a component renders its table from.
pub trait TableSources {
    /// Waits until every cache has completed its first list (so the first
    /// table applied is a whole one).
    fn wait_for_sync(&self) -> impl Future<Output = ()> + Send;
}

/// Runs one component's table until `stop` is raised, the loop the service
/// proxy and the network policy controller share (they differ only in what
/// they watch and render): starts the sources with `start_sources` (which
/// has them notify the `Notify` it is given on every change), waits for
/// their caches, then keeps `ruleset(&sources)` applied with
/// [`keep_applied`], which also sets the host sysctls when asked. Once
/// stopped, removes the table when `sync.remove_on_stop`, and puts back the
/// sysctls that were only safe beside it. A stop before the caches synced
/// is a clean stop.
pub async fn run<S, E>(
    kind: &TableKind,
    sync: &TableSync,
    mut stop: watch::Receiver<bool>,
    start_sources: impl FnOnce(Arc<Notify>) -> Result<S, E>,
    mut ruleset: impl FnMut(&S) -> Ruleset,
) -> Result<(), E>
where
    S: TableSources,
{
    let result = async {
        let changed = Arc::new(Notify::new());
        let sources = start_sources(changed.clone())?;
        tokio::select! {
            _ = sources.wait_for_sync() => {}
            _ = stop.wait_for(|s| *s) => return Ok(()),
        }
        keep_applied(kind, sync, changed, stop, || ruleset(&sources)).await;
        Ok(())
    }
    .await;
    if sync.remove_on_stop {
        remove_table(sync.nft.clone(), kind.family, sync.table.clone(), kind.what).await;
        if sync.host_sysctls {
            undo_sysctls(kind, &sync.nft, Path::new(sysctl::MEMO_DIR)).await;
        }
    }
    result
}

/// Puts back the sysctls of [`TableKind::sysctls_undone_on_stop`] to the
/// values remembered in `memo_dir` from before any instance changed them,
/// unless the rules that make them safe are still there in another table
/// (another instance's, which keeps relying on them; the last one to stop
/// puts them back).
async fn undo_sysctls(kind: &TableKind, nft: &Nft, memo_dir: &Path) {
    if kind.sysctls_undone_on_stop.is_empty() {
        return;
    }
    let nft = nft.clone();
    let listed = tokio::task::spawn_blocking(move || nft.list_ruleset())
        .await
        .map_err(|join| join.to_string())
        .and_then(|listed| listed.map_err(|error| error.to_string()));
    let ruleset = match listed {
        Ok(text) => text,
        Err(error) => {
            tracing::warn!(%error, "listing the ruleset; sysctls left as they are");
            return;
        }
    };
    for (path, marker) in kind.sysctls_undone_on_stop {
        if !ruleset.contains(marker) {
            sysctl::restore_remembered(memo_dir, path);
        }
    }
}

/// Applies `ruleset()` to `sync.table` as described in the module doc
/// until `stop` is raised. A failed sync is retried soon, backing off up to the resync
/// period. When `sync.host_sysctls`, the kind's sysctls are set once a
/// whole table is in place and checked again at each resync (another
/// instance stopping may have put one back). Set only beside the table, a
/// sysctl that needs its rules (the proxy's `route_localnet`) is never on
/// without them; what such a sysctl was before is remembered on the host
/// ([`sysctl::MEMO_DIR`]) for the last instance to stop.
pub async fn keep_applied(
    kind: &TableKind,
    sync: &TableSync,
    changed: Arc<Notify>,
    stop: watch::Receiver<bool>,
    mut ruleset: impl FnMut() -> Ruleset,
) {
    let new_applier = || Applier::new(sync.nft.clone(), kind.family, sync.table.clone());
    let mut applier = Some(new_applier());
    let what = kind.what;
    let mut failures = 0u32;
    let mut wakeups = SyncWakeups::new(changed.clone(), stop, sync.resync, sync.coalesce);
    while let Some(periodic) = wakeups.next().await {
        let span = tracing::info_span!("nft_sync", table = %sync.table, what, periodic);
        let started = Instant::now();
        let ruleset = ruleset();
        let mut taken = applier.take().unwrap_or_else(new_applier);
        let (table, intact) = (sync.table.clone(), kind.intact);
        let task = tokio::task::spawn_blocking(move || {
            if periodic && taken.has_applied() {
                match intact(&taken) {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!(%table, "{what} missing or flushed; rebuilding");
                        taken.invalidate();
                    }
                    Err(error) => tracing::warn!(%error, "checking the {what}"),
                }
            }
            let result = taken.apply(ruleset);
            (result, taken)
        });
        let result = match task.instrument(span.clone()).await {
            Ok((result, returned)) => {
                applier = Some(returned);
                result
            }
            // The applier went with the task; a new one replaces the table.
            Err(join) => Err(NftError::Spawn {
                command: "nft sync".into(),
                source: std::io::Error::other(join.to_string()),
            }),
        };
        let _entered = span.enter();
        match result {
            Ok(how) => {
                failures = 0;
                if sync.host_sysctls && (periodic || how == Applied::Full) {
                    for (path, earlier) in sysctl::ensure(kind.sysctls, kind.sysctls_purpose) {
                        if kind.sysctls_undone_on_stop.iter().any(|(p, _)| *p == path) {
                            sysctl::remember(Path::new(sysctl::MEMO_DIR), path, &earlier);
                        }
                    }
                }
                if how != Applied::Unchanged {
                    tracing::debug!(
                        ?how,
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "{what} synced"
                    );
                }
            }
            Err(error) => {
                failures += 1;
                tracing::error!(%error, "applying {what} failed");
                // Retry soon, backing off up to the resync period.
                let delay = Duration::from_millis(500 << failures.min(6)).min(sync.resync);
                let retry = changed.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    retry.notify_one();
                });
            }
        }
    }
}

/// Deletes `table` if it exists, so rules nobody keeps any more do not stay
/// enforced for ever; `what` names the rules in logs.
pub async fn remove_table(nft: Nft, family: Family, table: String, what: &'static str) {
    let name = table.clone();
    let removed = tokio::task::spawn_blocking(move || nft.delete_table(family, &name)).await;
    match removed {
        Ok(Ok(())) => tracing::info!(%table, "{what} removed"),
        Ok(Err(error)) => tracing::warn!(%error, "removing the {what}"),
        Err(error) => tracing::warn!(%error, "removing the {what}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file standing in for a sysctl, holding `value`.
    fn setting(dir: &tempfile::TempDir, name: &str, value: &str) -> &'static str {
        let path = dir.path().join(name);
        std::fs::write(&path, value).expect("write the setting");
        Box::leak(path.to_string_lossy().into_owned().into_boxed_str())
    }

    fn ip_netns(args: &[&str]) {
        let status = std::process::Command::new("ip")
            .arg("netns")
            .args(args)
            .status()
            .expect("run ip netns");
        assert!(status.success(), "ip netns {args:?}");
    }

    /// A setting only safe beside certain rules goes back to its value from
    /// before any instance changed it, by the last instance to stop: not
    /// while another table still holds those rules. Needs root.
    #[tokio::test]
    async fn a_setting_is_put_back_by_the_last_instance_to_stop() {
        let ns = format!("sku-{}", std::process::id());
        ip_netns(&["add", &ns]);
        let nft = Nft::in_netns(ns.clone());
        let dir = tempfile::tempdir().expect("temp dir");
        let memo = dir.path().join("memo");
        let guarded = setting(&dir, "guarded", "0");
        let marker = "ip saddr != 127.0.0.0/8";
        let kind = TableKind {
            family: Family::Ip,
            what: "test rules",
            intact: |_| Ok(true),
            sysctls: &[],
            sysctls_purpose: "the test",
            sysctls_undone_on_stop: Box::leak(vec![(guarded, marker)].into_boxed_slice()),
        };
        let read = || std::fs::read_to_string(guarded).expect("read the setting");
        // The first instance changes it and remembers 0; a second finds it
        // on already and remembers nothing new.
        for _ in 0..2 {
            for (path, earlier) in sysctl::ensure(&[(guarded, "1")], "the test") {
                sysctl::remember(&memo, path, &earlier);
            }
        }
        assert_eq!(read(), "1");

        nft.apply(&format!(
            "add table ip other\nadd chain ip other c\nadd rule ip other c {marker} counter\n"
        ))
        .expect("another instance's table");
        undo_sysctls(&kind, &nft, &memo).await;
        assert_eq!(read(), "1", "kept while another table holds the rules");

        nft.delete_table(Family::Ip, "other").expect("delete it");
        undo_sysctls(&kind, &nft, &memo).await;
        assert_eq!(read(), "0", "put back once nothing holds them");
        // What was remembered is gone with it: an admin's later 1 stays.
        std::fs::write(guarded, "1").expect("set by hand");
        undo_sysctls(&kind, &nft, &memo).await;
        assert_eq!(read(), "1", "nothing remembered, nothing put back");
        ip_netns(&["del", &ns]);
    }
}
