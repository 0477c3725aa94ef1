//! Keeping one table applied, the loop the service proxy and the network
//! policy controller share once their informers are synced: a sync on every
//! change (a burst coalesced into one) and on every resync period, which
//! first checks that the table is still there and intact (someone may have
//! flushed it) and rebuilds it when not. Each sync applies only the
//! difference from what was last applied, as one transaction; the first,
//! and any after a failure or a tampered table, replace the whole table.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Notify, watch};
use tracing::Instrument as _;

use super::{Applied, Applier, Family, Nft, NftError, Ruleset};

/// One table [`keep_applied`] keeps applied, and how.
#[derive(Debug, Clone)]
pub struct TableSync {
    /// How to run nft.
    pub nft: Nft,
    /// The table's family.
    pub family: Family,
    /// The table's name.
    pub table: String,
    /// How long a burst of changes is collected before one sync.
    pub coalesce: Duration,
    /// How often the table is checked and synced without a change.
    pub resync: Duration,
    /// What the rules are called in logs, e.g. "service rules".
    pub what: &'static str,
    /// Whether the table, once applied, is still there and intact.
    pub intact: fn(&Applier) -> Result<bool, NftError>,
}

/// Applies `ruleset()` as described in the module doc until `stop` is
/// raised. A failed sync is retried soon, backing off up to the resync
/// period.
pub async fn keep_applied(
    sync: &TableSync,
    changed: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
    mut ruleset: impl FnMut() -> Ruleset,
) {
    let new_applier = || Applier::new(sync.nft.clone(), sync.family, sync.table.clone());
    let mut applier = Some(new_applier());
    let what = sync.what;
    let mut failures = 0u32;
    let mut resync = tokio::time::interval(sync.resync);
    resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let periodic = tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = changed.notified() => false,
            _ = resync.tick() => true,
        };
        if !periodic {
            // Coalesce a burst of changes into one sync.
            tokio::time::sleep(sync.coalesce).await;
        }
        let span = tracing::info_span!("nft_sync", table = %sync.table, what, periodic);
        let started = Instant::now();
        let ruleset = ruleset();
        let mut taken = applier.take().unwrap_or_else(new_applier);
        let (table, intact) = (sync.table.clone(), sync.intact);
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
