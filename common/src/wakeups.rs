//! When a controller that keeps something in step with its informer caches
//! syncs next: after a change (once a burst of changes has settled), at
//! every resync period (to repair what was changed behind its back), and
//! never again once it is told to stop. The service proxy's and network
//! policy controller's nftables tables, the pod network's routes and the
//! ingress proxy's routes are kept this way. Loops that only run on a period
//! (a node's heartbeat, relist, evictions, image collection) wake on
//! [`Ticks`].

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::time::{Interval, MissedTickBehavior};

/// The wake-ups of one sync loop.
pub struct SyncWakeups {
    changed: Arc<Notify>,
    stop: watch::Receiver<bool>,
    resync: Interval,
    coalesce: Duration,
}

impl SyncWakeups {
    /// Wakes on `changed` (then waits `coalesce` more, so a burst of changes
    /// makes one sync), every `resync` (the first one at once) and ends when
    /// `stop` is raised. A resync that fell behind is not made up for: the
    /// next comes a whole period after the late one.
    pub fn new(
        changed: Arc<Notify>,
        stop: watch::Receiver<bool>,
        resync: Duration,
        coalesce: Duration,
    ) -> Self {
        let mut resync = tokio::time::interval(resync);
        resync.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Self {
            changed,
            stop,
            resync,
            coalesce,
        }
    }

    /// Waits for the next sync: `Some(true)` for a periodic one,
    /// `Some(false)` after a change, `None` once stop is raised.
    pub async fn next(&mut self) -> Option<bool> {
        let periodic = tokio::select! {
            _ = self.stop.wait_for(|s| *s) => return None,
            _ = self.changed.notified() => false,
            _ = self.resync.tick() => true,
        };
        if !periodic {
            tokio::time::sleep(self.coalesce).await;
        }
        Some(periodic)
    }
}

/// The wake-ups of a loop that runs every period until it is told to stop.
pub struct Ticks {
    period: Interval,
    stop: watch::Receiver<bool>,
}

impl Ticks {
    /// Every `period` (the first at once) until `stop` is raised; a tick
    /// that fell behind is not made up for.
    pub fn new(period: Duration, stop: watch::Receiver<bool>) -> Self {
        let mut period = tokio::time::interval(period);
        period.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Self { period, stop }
    }

    /// Waits for the next tick: `false` once stop is raised.
    pub async fn next(&mut self) -> bool {
        tokio::select! {
            _ = self.stop.wait_for(|s| *s) => false,
            _ = self.period.tick() => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn resyncs_at_once_then_per_period_coalesces_changes_and_stops() {
        let changed = Arc::new(Notify::new());
        let (stop_tx, stop) = watch::channel(false);
        let mut wakeups = SyncWakeups::new(
            changed.clone(),
            stop,
            Duration::from_secs(30),
            Duration::from_millis(100),
        );
        assert_eq!(wakeups.next().await, Some(true));
        let before = tokio::time::Instant::now();
        changed.notify_one();
        assert_eq!(wakeups.next().await, Some(false));
        assert_eq!(before.elapsed(), Duration::from_millis(100));
        assert_eq!(wakeups.next().await, Some(true));
        assert_eq!(before.elapsed(), Duration::from_secs(30));
        stop_tx.send(true).unwrap();
        assert_eq!(wakeups.next().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn ticks_come_at_once_then_per_period_until_stopped() {
        let (stop, stop_rx) = watch::channel(false);
        let mut ticks = Ticks::new(Duration::from_secs(10), stop_rx);
        let start = tokio::time::Instant::now();
        assert!(ticks.next().await);
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert!(ticks.next().await);
        assert_eq!(start.elapsed(), Duration::from_secs(10));
        stop.send(true).unwrap();
        assert!(!ticks.next().await);
    }
}
