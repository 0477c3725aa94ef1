//! The background compaction policy: a thread that periodically notes the
//! current revision with the time, and asks the committer to compact up to
//! the newest revision that is both old enough and far enough behind.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Instant;

use super::committer::Request;
use super::config::CompactionPolicy;
use super::state::Shared;
use crate::Revision;

/// Handle of the compactor thread; dropping it stops the thread.
pub(crate) struct Compactor {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Compactor {
    pub(crate) fn spawn(
        policy: CompactionPolicy,
        shared: Arc<Shared>,
        requests: mpsc::Sender<Request>,
    ) -> std::io::Result<Self> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("skiff-store-compactor".into())
            .spawn(move || {
                // History present at start-up is treated as written now: its
                // real age is unknown, and keeping it a little longer is safe.
                let mut samples = VecDeque::from([(Instant::now(), shared.published())]);
                while let Err(mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(policy.interval)
                {
                    let now = Instant::now();
                    let current = shared.published();
                    samples.push_back((now, current));
                    let Some(target) = compaction_target(&mut samples, now, current, &policy)
                    else {
                        continue;
                    };
                    if target > shared.compact_revision() {
                        let request = Request::Compact {
                            revision: target,
                            reply: None,
                        };
                        if requests.send(request).is_err() {
                            break;
                        }
                    }
                }
            })?;
        Ok(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Compactor {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
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
    use std::time::Duration;

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
