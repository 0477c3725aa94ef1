//! Scheduled snapshots: a cron expression in the local time zone, as k3s's
//! `--etcd-snapshot-schedule-cron` (five fields, or six with seconds first),
//! and the loop that saves and prunes on it.

use std::future::Future;
use std::time::Duration;

use chrono::Local;

use super::SnapshotDir;

/// A parsed cron expression.
#[derive(Debug, Clone)]
pub struct Schedule {
    cron: croner::Cron,
    text: String,
}

/// A cron expression that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("invalid cron expression {text:?}: {detail}")]
pub struct ScheduleError {
    /// The expression given.
    pub text: String,
    /// What the cron parser said.
    pub detail: String,
}

impl Schedule {
    /// Parses `text` (`0 */12 * * *`; a sixth, leading field gives seconds).
    pub fn parse(text: &str) -> Result<Self, ScheduleError> {
        let cron = croner::Cron::new(text)
            .with_seconds_optional()
            .parse()
            .map_err(|e| ScheduleError {
                text: text.into(),
                detail: e.to_string(),
            })?;
        Ok(Self {
            cron,
            text: text.into(),
        })
    }

    /// The expression as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// How long from `now` until the next time the expression names
    /// (`None` when it names none).
    pub fn wait_from(&self, now: chrono::DateTime<Local>) -> Option<Duration> {
        let next = self.cron.find_next_occurrence(&now, false).ok()?;
        (next - now).to_std().ok()
    }
}

impl SnapshotDir {
    /// Saves a snapshot named `name` at every time `schedule` names, then
    /// prunes that name's snapshots to the newest `retention`, until `stop`
    /// resolves. A failed save is logged and the next time tried.
    pub async fn run_schedule(
        &self,
        schedule: Schedule,
        name: String,
        retention: usize,
        stop: impl Future<Output = ()>,
    ) {
        tokio::pin!(stop);
        loop {
            let Some(wait) = schedule.wait_from(Local::now()) else {
                tracing::warn!(
                    cron = schedule.as_str(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn k3s_default_runs_twice_a_day() {
        let schedule = Schedule::parse("0 */12 * * *").unwrap();
        let now = Local.with_ymd_and_hms(2026, 1, 1, 11, 59, 0).unwrap();
        assert_eq!(schedule.wait_from(now), Some(Duration::from_secs(60)));
        let now = Local.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap();
        assert_eq!(
            schedule.wait_from(now),
            Some(Duration::from_secs(12 * 3600))
        );
        // Seconds first when there are six fields.
        let every_two = Schedule::parse("*/2 * * * * *").unwrap();
        let now = Local.with_ymd_and_hms(2026, 1, 1, 0, 0, 1).unwrap();
        assert_eq!(every_two.wait_from(now), Some(Duration::from_secs(1)));
        let err = Schedule::parse("every day").unwrap_err();
        assert!(err.to_string().contains("\"every day\""), "{err}");
    }
}
