//! Events expire: upstream stores them with a one-hour etcd lease. Here a
//! reaper periodically deletes events whose last activity is older than the
//! TTL, each only if unchanged since it was looked at.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::server::Inner;

/// The newest time an event was seen happening, in seconds since the epoch.
fn last_seen(event: &Value) -> Option<i64> {
    [
        &event["series"]["lastObservedTime"],
        &event["lastTimestamp"],
        &event["eventTime"],
        &event["metadata"]["creationTimestamp"],
    ]
    .into_iter()
    .filter_map(Value::as_str)
    .filter_map(|t| t.parse::<jiff::Timestamp>().ok())
    .map(|t| t.as_second())
    .max()
}

/// Deletes expired events every `every` until shutdown.
pub(crate) async fn reap(inner: Arc<Inner>, ttl: Duration, every: Duration) {
    let mut shutdown = inner.shutdown.subscribe();
    let mut ticker = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = ticker.tick() => {}
        }
        if inner.is_shutting_down() {
            return;
        }
        let removed = reap_once(&inner, ttl).await;
        if removed > 0 {
            tracing::debug!(removed, "expired events deleted");
        }
    }
}

/// One pass; returns how many events were deleted.
pub(crate) async fn reap_once(inner: &Inner, ttl: Duration) -> usize {
    let Some(info) = inner.registry.get("", "v1", "events") else {
        return 0;
    };
    let Ok(cache) = inner.cache(&info) else {
        return 0;
    };
    let cutoff =
        jiff::Timestamp::now().as_second() - i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
    let snapshot = cache.snapshot();
    let mut removed = 0;
    for (key, cached) in snapshot.objects.iter() {
        let event = cached.to_value();
        if last_seen(&event).is_none_or(|t| t >= cutoff) {
            continue;
        }
        let Some(revision) = crate::object::resource_version(&event) else {
            continue;
        };
        // A concurrent update (or delete) of the event wins.
        if inner.store.delete(key, Some(revision)).await.is_ok() {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn last_activity_is_the_newest_timestamp() {
        let e = json!({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"},
            "lastTimestamp": "2026-01-01T01:00:00Z", "eventTime": null});
        assert_eq!(last_seen(&e), Some(1_767_229_200));
        assert_eq!(last_seen(&json!({})), None);
    }
}
