//! How often a DaemonSet replaces a failed daemon pod on one node, as
//! upstream's controller limits it: a node that fails every pod (a kubelet
//! refusing them under disk pressure, say) would otherwise get a new one
//! per sync, hundreds a minute. The first failed pod goes at once; each
//! later one waits twice as long as the one before (1 s up to 15 min), and
//! a node quiet for twice the maximum starts again from 1 s.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The first wait after a failed pod was replaced.
const INITIAL: Duration = Duration::from_secs(1);
/// The longest wait.
const MAX: Duration = Duration::from_secs(15 * 60);

/// Per DaemonSet and node: when its last failed pod was deleted, and how
/// long the next one waits after that.
#[derive(Default)]
pub(super) struct FailedPodBackoff {
    entries: Mutex<HashMap<(String, String), (Instant, Duration)>>,
}

impl FailedPodBackoff {
    /// Whether a failed pod of `set` on `node` may be deleted now (it is
    /// then counted); else how long until it may.
    pub(super) fn allow(&self, set: &str, node: &str, now: Instant) -> Result<(), Duration> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.retain(|_, (last, _)| now.saturating_duration_since(*last) <= 2 * MAX);
        let key = (set.to_string(), node.to_string());
        match entries.get_mut(&key) {
            Some((last, delay)) => {
                let since = now.saturating_duration_since(*last);
                if since < *delay {
                    return Err(*delay - since);
                }
                *last = now;
                *delay = (*delay * 2).min(MAX);
            }
            None => {
                entries.insert(key, (now, INITIAL));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_replacement_on_a_node_waits_twice_as_long_as_the_last() {
        let backoff = FailedPodBackoff::default();
        let t0 = Instant::now();
        assert_eq!(backoff.allow("ds", "n1", t0), Ok(()));
        assert_eq!(
            backoff.allow("ds", "n1", t0 + Duration::from_millis(400)),
            Err(Duration::from_millis(600))
        );
        // Another node, or another set, has a backoff of its own.
        assert_eq!(backoff.allow("ds", "n2", t0), Ok(()));
        assert_eq!(backoff.allow("other", "n1", t0), Ok(()));
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(backoff.allow("ds", "n1", t1), Ok(()));
        assert_eq!(
            backoff.allow("ds", "n1", t1 + Duration::from_secs(1)),
            Err(Duration::from_secs(1))
        );
        let t2 = t1 + Duration::from_secs(2);
        assert_eq!(backoff.allow("ds", "n1", t2), Ok(()));
        assert_eq!(
            backoff.allow("ds", "n1", t2 + Duration::from_secs(3)),
            Err(Duration::from_secs(1))
        );
        // Quiet for long enough, a node starts again from the first wait.
        let later = t2 + 2 * MAX + Duration::from_secs(1);
        assert_eq!(backoff.allow("ds", "n1", later), Ok(()));
        assert!(
            backoff
                .allow("ds", "n1", later + Duration::from_millis(1100))
                .is_ok()
        );
    }
}
