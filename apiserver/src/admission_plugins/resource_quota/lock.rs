//! One lock per namespace for quota admission. Besides excluding other
//! counted writes while one is checked and stored, it remembers the store
//! revision each counted write got, per resource, so the next check first
//! waits until that resource's watch cache shows it: usage is counted from
//! the caches, and a cache that lags (a store write normally waits for it,
//! but only so long) must not hide the last counted write.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use skiff_store::Revision;
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// Per resource (storage prefix): the revision of the last counted write.
type Written = HashMap<String, Revision>;

/// Namespaces' quota locks.
#[derive(Default)]
pub(crate) struct QuotaLocks {
    locks: Mutex<HashMap<String, Arc<AsyncMutex<Written>>>>,
}

/// Namespaces whose lock nobody holds are forgotten once there are this
/// many (a forgotten namespace's writes are long in their caches).
const SWEEP_AT: usize = 4096;

/// The held lock of one namespace.
pub(crate) struct QuotaGuard {
    written: OwnedMutexGuard<Written>,
}

impl QuotaLocks {
    /// Waits for exclusive use of `namespace`'s quotas.
    pub async fn lock(&self, namespace: &str) -> QuotaGuard {
        let lock = {
            let mut locks = self.locks.lock();
            if locks.len() >= SWEEP_AT {
                locks.retain(|_, lock| Arc::strong_count(lock) > 1);
            }
            locks
                .entry(namespace.to_string())
                .or_insert_with(|| Arc::new(AsyncMutex::new(Written::new())))
                .clone()
        };
        QuotaGuard {
            written: lock.lock_owned().await,
        }
    }
}

impl QuotaGuard {
    /// The revision of the last counted write under `prefix`, if any.
    pub fn last_write(&self, prefix: &str) -> Option<Revision> {
        self.written.get(prefix).copied()
    }

    /// Records that a counted write under `prefix` was stored at `revision`.
    pub fn stored(&mut self, prefix: &str, revision: Revision) {
        self.written.insert(prefix.to_string(), revision);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn one_holder_per_namespace_and_the_last_write_is_remembered() {
        let locks = QuotaLocks::default();
        let mut held = locks.lock("a").await;
        assert!(
            tokio::time::timeout(Duration::from_millis(50), locks.lock("b"))
                .await
                .is_ok(),
            "other namespaces are independent"
        );
        assert!(
            tokio::time::timeout(Duration::from_millis(50), locks.lock("a"))
                .await
                .is_err(),
            "the same namespace waits"
        );
        held.stored("/registry/core/configmaps/", 42);
        drop(held);
        let again = locks.lock("a").await;
        assert_eq!(again.last_write("/registry/core/configmaps/"), Some(42));
        assert_eq!(again.last_write("/registry/core/pods/"), None);
    }
}
