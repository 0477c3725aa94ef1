//! Per-key write serialisation inside this process. Concurrent
//! read-modify-write requests on one object would otherwise mostly lose
//! their compare-and-swap and retry; queueing them turns a conflict storm
//! into one durable write each. The store's compare-and-swap still decides
//! correctness (other processes sharing an etcd store are not covered).

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// Locks handed out per store key; entries vanish when unused.
#[derive(Default)]
pub struct KeyLocks {
    locks: Mutex<HashMap<String, Weak<AsyncMutex<()>>>>,
}

/// Held while one request reads and writes a key.
pub struct KeyGuard {
    _guard: OwnedMutexGuard<()>,
}

/// Dead entries are swept once the map grows past this.
const SWEEP_AT: usize = 1024;

impl KeyLocks {
    /// Waits for exclusive use of `key`.
    pub async fn lock(&self, key: &str) -> KeyGuard {
        let lock = {
            let mut locks = self.locks.lock();
            match locks.get(key).and_then(Weak::upgrade) {
                Some(lock) => lock,
                None => {
                    if locks.len() >= SWEEP_AT {
                        locks.retain(|_, w| w.strong_count() > 0);
                    }
                    let lock = Arc::new(AsyncMutex::new(()));
                    locks.insert(key.to_string(), Arc::downgrade(&lock));
                    lock
                }
            }
        };
        KeyGuard {
            _guard: lock.lock_owned().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn one_holder_per_key_at_a_time() {
        let locks = Arc::new(KeyLocks::default());
        let held = locks.lock("a").await;
        let other_key = tokio::time::timeout(Duration::from_millis(50), locks.lock("b")).await;
        assert!(other_key.is_ok(), "other keys are independent");
        let same_key = tokio::time::timeout(Duration::from_millis(50), locks.lock("a")).await;
        assert!(same_key.is_err(), "the same key waits");
        drop(held);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), locks.lock("a"))
                .await
                .is_ok()
        );
    }
}
