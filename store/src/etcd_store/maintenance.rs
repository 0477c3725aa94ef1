//! Compaction and defragmentation, etcd's own: on request and, for
//! compaction, by the background policy (`retention.rs`), as
//! kube-apiserver compacts the etcd it uses. Several servers sharing a
//! cluster may each compact; a compaction another already did is a no-op.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{CompactionOptions, GetOptions};

use super::Inner;
use super::convert::{self, is_compacted, wire};
use crate::retention::compaction_target;
use crate::{Revision, StoreError};

/// Compaction and defragmentation rewrite etcd's database and may take far
/// longer than an ordinary request.
const MAINTENANCE_TIMEOUT: Duration = Duration::from_secs(600);

/// One member of the cluster failed to defragment.
#[derive(Debug, thiserror::Error)]
#[error("etcd at {endpoint}: {reason}")]
struct MemberFailed {
    endpoint: String,
    reason: String,
}

pub(crate) async fn compact(inner: &Inner, revision: Revision) -> Result<(), StoreError> {
    // Compacting beyond etcd's revision is clamped, as the trait says;
    // this read brings the known revision up to date first.
    let latest = inner
        .range(
            "reading etcd's revision",
            b"\0",
            GetOptions::new().with_count_only(),
        )
        .await?;
    inner.tracker.saw_header(latest.header());
    let target = revision.min(inner.tracker.current());
    if target <= inner.tracker.compact() {
        return Ok(());
    }
    let options = CompactionOptions::new().with_physical();
    let mut kv = inner.kv.clone();
    let request = kv.compact(wire(target), Some(options));
    match tokio::time::timeout(MAINTENANCE_TIMEOUT, request).await {
        Ok(Ok(response)) => {
            inner.tracker.saw_header(response.header());
            inner.tracker.compacted(target);
            Ok(())
        }
        // Someone compacted as far or further: nothing left to do here; the
        // next probe finds where they did.
        Ok(Err(e)) if is_compacted(&e) => Ok(()),
        Ok(Err(e)) => Err(convert::error("compacting etcd", e)),
        Err(_) => Err(StoreError::Backend {
            context: "compacting etcd",
            source: Box::new(super::TimedOut {
                endpoints: inner.config.endpoint_list(),
                timeout: MAINTENANCE_TIMEOUT,
            }),
        }),
    }
}

/// Defragments every member, one at a time (each member rewrites its own
/// database file, and a member defragmenting does not serve).
pub(crate) async fn defragment(inner: &Inner) -> Result<(), StoreError> {
    for member in inner.members.iter() {
        let failed = |reason: String| StoreError::Backend {
            context: "defragmenting etcd",
            source: Box::new(MemberFailed {
                endpoint: member.endpoint.clone(),
                reason,
            }),
        };
        let mut client = member.client.clone();
        match tokio::time::timeout(MAINTENANCE_TIMEOUT, client.defragment()).await {
            Ok(Ok(response)) => inner.tracker.saw_header(response.header()),
            Ok(Err(e)) => return Err(failed(e.to_string())),
            Err(_) => return Err(failed(format!("no answer within {MAINTENANCE_TIMEOUT:?}"))),
        }
    }
    Ok(())
}

/// Starts the background compaction policy, if the configuration has one.
pub(super) fn spawn_compactor(inner: &Arc<Inner>) {
    let Some(policy) = inner.config.compaction.clone() else {
        return;
    };
    let weak = Arc::downgrade(inner);
    let mut closed = inner.closed.subscribe();
    // History present at start-up is treated as written now: its real age
    // is unknown, and keeping it a little longer is safe.
    let mut samples = VecDeque::from([(Instant::now(), inner.tracker.current())]);
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = closed.wait_for(|closed| *closed) => return,
                _ = tokio::time::sleep(policy.interval) => {}
            }
            let Some(inner) = weak.upgrade() else {
                return;
            };
            let now = Instant::now();
            let current = inner.tracker.current();
            samples.push_back((now, current));
            let Some(target) = compaction_target(&mut samples, now, current, &policy) else {
                continue;
            };
            if target > inner.tracker.compact()
                && let Err(e) = compact(&inner, target).await
            {
                tracing::warn!(error = %e, target, "background compaction of etcd failed");
            }
        }
    });
    inner.tasks.lock().push(task);
}
