//! The background compaction policy: a thread that periodically notes the
//! current revision with the time, and asks the committer to compact up to
//! the newest revision that is both old enough and far enough behind.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Instant;

use super::committer::Request;
use super::state::Shared;
use crate::retention::{CompactionPolicy, compaction_target};

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
