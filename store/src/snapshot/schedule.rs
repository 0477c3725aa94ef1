//! Scheduled snapshots: the loop that saves and prunes each time the
//! caller's timetable says one is due. What a schedule is written in (k3s's
//! cron expression) is the caller's; the store only knows when.

use std::future::Future;
use std::time::Duration;

use super::SnapshotDir;

impl SnapshotDir {
    /// Saves a snapshot named `name` each time `next_wait` (how long from
    /// now until the next one is due; `None`: never again) runs out, then
    /// prunes that name's snapshots to the newest `retention`, until `stop`
    /// resolves. A failed save is logged and the next time tried.
    pub async fn run_schedule(
        &self,
        next_wait: impl Fn() -> Option<Duration>,
        name: String,
        retention: usize,
        stop: impl Future<Output = ()>,
    ) {
        tokio::pin!(stop);
        loop {
            let Some(wait) = next_wait() else {
                tracing::warn!(
                    "the snapshot schedule names no future time; no more scheduled snapshots"
                );
                return;
            };
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(wait) => {}
            }
            if let Err(error) = self.save(&name).await {
                tracing::error!(%error, "scheduled snapshot failed");
                continue;
            }
            match self.prune(&name, retention).await {
                Ok(deleted) if !deleted.is_empty() => {
                    tracing::info!(?deleted, retention, "old snapshots pruned");
                }
                Ok(_) => {}
                Err(error) => tracing::error!(%error, "pruning old snapshots failed"),
            }
        }
    }
}
