//! How much history background compaction keeps, for either backend: the
//! policy, and the revision it picks from `(time, revision)` samples.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::Revision;

/// When the background compactor drops history.
///
/// A revision is compacted only when it is both older than `min_age` and more
/// than `min_revisions` behind the current revision, so watchers that reconnect
/// after a short outage still find their history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionPolicy {
    /// How often the compactor wakes up to record the revision and compact.
    pub interval: Duration,
    /// History younger than this is always kept.
    pub min_age: Duration,
    /// At least this many of the newest revisions are always kept.
    pub min_revisions: u64,
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(30),
            min_age: Duration::from_secs(5 * 60),
            min_revisions: 1000,
        }
    }
}

/// The revision to compact to, given `(time, revision)` samples: the newest
/// revision sampled at least `min_age` ago, kept `min_revisions` behind the
/// current one. Samples older than the newest aged one are dropped.
pub(crate) fn compaction_target(
    samples: &mut VecDeque<(Instant, Revision)>,
    now: Instant,
    current: Revision,
    policy: &CompactionPolicy,
) -> Option<Revision> {
    let aged = samples
        .iter()
        .rposition(|(at, _)| now.saturating_duration_since(*at) >= policy.min_age)?;
    samples.drain(..aged);
    let old_enough = samples.front()?.1;
    let target = old_enough.min(current.saturating_sub(policy.min_revisions));
    (target > 0).then_some(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> CompactionPolicy {
        CompactionPolicy {
            interval: Duration::from_secs(1),
            min_age: Duration::from_secs(300),
            min_revisions: 1000,
        }
    }

    #[test]
    fn keeps_young_history() {
        let start = Instant::now();
        let mut samples = VecDeque::from([(start, 5000)]);
        let now = start + Duration::from_secs(299);
        assert_eq!(compaction_target(&mut samples, now, 9000, &policy()), None);
    }

    #[test]
    fn compacts_to_the_newest_aged_sample_but_keeps_min_revisions() {
        let start = Instant::now();
        let mut samples = VecDeque::from([
            (start, 100),
            (start + Duration::from_secs(60), 3000),
            (start + Duration::from_secs(400), 8000),
        ]);
        let now = start + Duration::from_secs(400);
        // 3000 is the newest revision at least 5 minutes old.
        assert_eq!(
            compaction_target(&mut samples, now, 8000, &policy()),
            Some(3000)
        );
        assert_eq!(samples.len(), 2, "older samples are dropped");
        // Few revisions since: the revision floor wins.
        let mut samples = VecDeque::from([(start, 5000)]);
        assert_eq!(
            compaction_target(&mut samples, now, 5500, &policy()),
            Some(4500)
        );
    }
}
