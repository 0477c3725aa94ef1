//! What the EndpointSlice controller itself last wrote to each Service's
//! slices, as upstream's EndpointSliceTracker keeps it. The informer's cache
//! shows a write some time after the write has returned; a sync that read
//! the cache before then would create a slice a second time, or write back
//! endpoints an update of its own had already replaced. So a sync first asks
//! [`Tracker::stale`], and waits for the cache when it lags.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::discovery::v1::EndpointSlice;
use skiff_informer::ObjectKey;

/// The controller's last write to one slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wrote {
    /// Created or updated, to this generation.
    Generation(i64),
    /// Deleted.
    Deletion,
}

/// The controller's own writes, by Service and by slice uid.
#[derive(Debug, Default)]
pub(crate) struct Tracker {
    services: Mutex<HashMap<ObjectKey, HashMap<String, Wrote>>>,
}

impl Tracker {
    fn services(&self) -> MutexGuard<'_, HashMap<ObjectKey, HashMap<String, Wrote>>> {
        // A panic elsewhere leaves the map as whole as it was.
        self.services.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes `slice` as the API answered a create or update of it.
    pub(crate) fn wrote(&self, service: &ObjectKey, slice: &EndpointSlice) {
        let (Some(uid), Some(generation)) = (&slice.metadata.uid, slice.metadata.generation) else {
            return;
        };
        self.services()
            .entry(service.clone())
            .or_default()
            .insert(uid.clone(), Wrote::Generation(generation));
    }

    /// Notes that the controller deleted `slice`.
    pub(crate) fn deleted(&self, service: &ObjectKey, slice: &EndpointSlice) {
        if let Some(uid) = &slice.metadata.uid {
            self.services()
                .entry(service.clone())
                .or_default()
                .insert(uid.clone(), Wrote::Deletion);
        }
    }

    /// The cache no longer holds `slice` (whoever deleted it): nothing of
    /// it is awaited any more.
    pub(crate) fn gone(&self, service: &ObjectKey, slice: &EndpointSlice) {
        let Some(uid) = &slice.metadata.uid else {
            return;
        };
        let mut services = self.services();
        if let Some(slices) = services.get_mut(service) {
            slices.remove(uid);
            if slices.is_empty() {
                services.remove(service);
            }
        }
    }

    /// Whether `cached`, the cache's slices of `service`, lag a write of
    /// the controller's: a slice it wrote is missing or at an older
    /// generation, or one it deleted is still there.
    pub(crate) fn stale(&self, service: &ObjectKey, cached: &[Arc<EndpointSlice>]) -> bool {
        let services = self.services();
        let Some(written) = services.get(service) else {
            return false;
        };
        written.iter().any(|(uid, wrote)| {
            let seen = cached.iter().find(|s| s.metadata.uid.as_ref() == Some(uid));
            match (wrote, seen) {
                (Wrote::Deletion, seen) => seen.is_some(),
                (Wrote::Generation(_), None) => true,
                (Wrote::Generation(wrote), Some(seen)) => {
                    seen.metadata.generation.unwrap_or(0) < *wrote
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn slice(uid: &str, generation: i64) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                uid: Some(uid.into()),
                generation: Some(generation),
                ..Default::default()
            },
            address_type: "IPv4".into(),
            endpoints: Vec::new(),
            ports: None,
        }
    }

    #[test]
    fn a_cache_is_stale_until_it_shows_each_write() {
        let web = ObjectKey::new(Some("default"), "web");
        let tracker = Tracker::default();
        assert!(
            !tracker.stale(&web, &[]),
            "nothing written, nothing awaited"
        );

        tracker.wrote(&web, &slice("a", 1));
        assert!(tracker.stale(&web, &[]), "a created slice not cached yet");
        let cached_a1 = Arc::new(slice("a", 1));
        assert!(!tracker.stale(&web, std::slice::from_ref(&cached_a1)));

        tracker.wrote(&web, &slice("a", 2));
        assert!(
            tracker.stale(&web, std::slice::from_ref(&cached_a1)),
            "an update not cached yet"
        );
        let cached_a3 = Arc::new(slice("a", 3));
        assert!(
            !tracker.stale(&web, std::slice::from_ref(&cached_a3)),
            "someone else's later write is as good"
        );

        tracker.deleted(&web, &slice("a", 3));
        assert!(
            tracker.stale(&web, std::slice::from_ref(&cached_a3)),
            "a deleted slice still cached"
        );
        assert!(!tracker.stale(&web, &[]));

        let other = ObjectKey::new(Some("default"), "other");
        assert!(!tracker.stale(&other, &[]), "each Service apart");
    }

    #[test]
    fn a_slice_the_cache_saw_go_is_not_awaited() {
        let web = ObjectKey::new(Some("default"), "web");
        let tracker = Tracker::default();
        tracker.wrote(&web, &slice("a", 1));
        // Deleted by someone else before the cache ever showed the create.
        tracker.gone(&web, &slice("a", 1));
        assert!(!tracker.stale(&web, &[]));
    }
}
