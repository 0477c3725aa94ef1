//! Per-container back-off for restarts (CrashLoopBackOff; its parameters
//! also pace image pulls, `images::PullBackoff`): the first retry is
//! immediate, then the delay starts
//! at `initial` and doubles up to `max`; a container that ran longer than
//! `reset_after` starts over.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

/// Back-off parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffConfig {
    /// First delay.
    pub initial: Duration,
    /// Largest delay.
    pub max: Duration,
    /// A run at least this long forgets earlier failures.
    pub reset_after: Duration,
}

impl BackoffConfig {
    /// Upstream's container restart back-off: 10 s doubling to 5 min, reset
    /// after 10 min of running.
    pub fn crash_loop() -> Self {
        Self {
            initial: Duration::from_secs(10),
            max: Duration::from_secs(300),
            reset_after: Duration::from_secs(600),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    delay: Duration,
    /// When the failure that started the current delay happened.
    since: SystemTime,
}

/// Delays keyed by container name.
#[derive(Debug, Clone)]
pub struct Backoff {
    config: BackoffConfig,
    entries: HashMap<String, Entry>,
}

/// Whether a retry may happen now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Go ahead.
    Retry,
    /// Wait until this time; the current delay is given for messages.
    Wait {
        /// When the retry may happen.
        until: SystemTime,
        /// The delay in force.
        delay: Duration,
    },
}

impl Backoff {
    /// An empty back-off table.
    pub fn new(config: BackoffConfig) -> Self {
        Self {
            config,
            entries: HashMap::new(),
        }
    }

    /// Asks whether `key`, which failed at `failed_at` after running for
    /// `ran`, may be retried at `now`; a `Retry` answer also records the
    /// retry (the next delay doubles).
    pub fn check(
        &mut self,
        key: &str,
        failed_at: SystemTime,
        ran: Duration,
        now: SystemTime,
    ) -> Verdict {
        if ran >= self.config.reset_after {
            self.entries.remove(key);
        }
        match self.entries.get(key).copied() {
            None => {
                self.entries.insert(
                    key.to_string(),
                    Entry {
                        delay: self.config.initial,
                        since: failed_at,
                    },
                );
                Verdict::Retry
            }
            Some(entry) => {
                // A new failure after the last retry waits the current delay.
                let until = failed_at.max(entry.since) + entry.delay;
                if now >= until {
                    self.entries.insert(
                        key.to_string(),
                        Entry {
                            delay: (entry.delay * 2).min(self.config.max),
                            since: failed_at,
                        },
                    );
                    Verdict::Retry
                } else {
                    Verdict::Wait {
                        until,
                        delay: entry.delay,
                    }
                }
            }
        }
    }

    /// Forgets `key` (it succeeded).
    pub fn reset(&mut self, key: &str) {
        self.entries.remove(key);
    }
}

/// `d` cut to whole milliseconds in Go's duration text, as a kubelet
/// prints its back-off delays and pull times (`850ms`, `1.5s`,
/// `2m3.042s`, `1h0m5s`).
pub(crate) fn go_duration(d: Duration) -> String {
    let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 1_000_000);
    skiff_common::duration::format_go_duration(ms.saturating_mul(1_000_000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_retry_is_immediate_then_delays_double_to_the_max() {
        let cfg = BackoffConfig {
            initial: Duration::from_secs(10),
            max: Duration::from_secs(25),
            reset_after: Duration::from_secs(600),
        };
        let mut b = Backoff::new(cfg);
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let short = Duration::from_secs(1);
        assert_eq!(b.check("c", t0, short, t0), Verdict::Retry);
        // Each failure after a retry waits the delay in force, doubled each
        // time; once it has passed, the retry goes ahead.
        let mut failed_at = t0 + Duration::from_secs(1);
        for delay in [10, 20].map(Duration::from_secs) {
            assert_eq!(
                b.check("c", failed_at, short, failed_at),
                Verdict::Wait {
                    until: failed_at + delay,
                    delay
                }
            );
            assert_eq!(
                b.check("c", failed_at, short, failed_at + delay),
                Verdict::Retry
            );
            failed_at += delay + Duration::from_secs(1);
        }
        // Doubled again, it stops at the max.
        let t3 = failed_at;
        assert!(
            matches!(b.check("c", t3, short, t3), Verdict::Wait { delay, .. } if delay == Duration::from_secs(25))
        );
        // A long run forgets the history.
        assert_eq!(
            b.check("c", t3, Duration::from_secs(600), t3),
            Verdict::Retry
        );
    }

    #[test]
    fn durations_print_as_go_prints_them() {
        assert_eq!(go_duration(Duration::from_micros(850_900)), "850ms");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(go_duration(Duration::from_millis(123_042)), "2m3.042s");
        assert_eq!(go_duration(Duration::from_secs(3605)), "1h0m5s");
        assert_eq!(go_duration(Duration::from_micros(10)), "0s");
        assert_eq!(go_duration(Duration::from_secs(80)), "1m20s");
        assert_eq!(go_duration(Duration::from_secs(300)), "5m0s");
    }
}
