//! Turns kube-runtime watcher events into cache changes and notifications.
//!
//! This is the part of an informer that needs no API server: it is fed
//! `watcher::Event`s (from a real watch or a test) and answers what listeners
//! must be told. A relist (`Init` .. `InitDone`) is buffered and applied in one
//! step; objects that vanished during the gap are reported as deletes carrying
//! the last state the cache knew.

use std::collections::HashMap;
use std::sync::Arc;

use kube::Resource;
use kube::runtime::watcher;

use crate::cache::Cache;
use crate::handler::Notification;
use crate::key::object_key;

/// What one watcher event did.
pub(crate) struct Applied<K> {
    /// Notifications for listeners, in delivery order.
    pub(crate) notifications: Vec<Notification<K>>,
    /// True when this event completed a full list.
    pub(crate) list_completed: bool,
}

/// The reflector's memory between events: the list being received, if any.
pub(crate) struct Reflector<K> {
    relist: Option<Vec<Arc<K>>>,
}

impl<K: Resource> Reflector<K> {
    pub(crate) fn new() -> Self {
        Self { relist: None }
    }

    /// Applies `event` to `cache` and returns what listeners must be told.
    pub(crate) fn apply(&mut self, cache: &Cache<K>, event: watcher::Event<K>) -> Applied<K> {
        let mut applied = Applied {
            notifications: Vec::new(),
            list_completed: false,
        };
        match event {
            watcher::Event::Init => {
                // Listers keep serving the previous content until the list is complete.
                self.relist = Some(Vec::new());
            }
            watcher::Event::InitApply(obj) => match self.relist.as_mut() {
                Some(buffer) => buffer.push(Arc::new(obj)),
                // An object outside a list is an ordinary change.
                None => applied.notifications.push(upsert(cache, Arc::new(obj))),
            },
            watcher::Event::InitDone => {
                let listed = self.relist.take().unwrap_or_default();
                applied.notifications = replace(cache, listed);
                applied.list_completed = true;
            }
            watcher::Event::Apply(obj) => {
                applied.notifications.push(upsert(cache, Arc::new(obj)));
            }
            watcher::Event::Delete(obj) => {
                let key = object_key(&obj);
                // Unknown objects were never announced, so there is nothing to retract.
                if cache.remove(&key).is_some() {
                    applied
                        .notifications
                        .push(Notification::Delete(Arc::new(obj)));
                }
            }
        }
        applied
    }
}

fn upsert<K: Resource>(cache: &Cache<K>, obj: Arc<K>) -> Notification<K> {
    match cache.insert(Arc::clone(&obj)) {
        Some(old) => Notification::Update { old, new: obj },
        None => Notification::Add(obj),
    }
}

/// Swaps the cache content for `listed`: listed objects become adds or updates
/// (in list order), objects no longer listed become deletes with their last
/// known state (in key order).
fn replace<K: Resource>(cache: &Cache<K>, listed: Vec<Arc<K>>) -> Vec<Notification<K>> {
    // A key listed twice keeps its last state, like the cache does.
    let mut last_of: HashMap<String, Arc<K>> = HashMap::new();
    let mut order = Vec::new();
    for obj in listed {
        let key = object_key(obj.as_ref());
        if last_of.insert(key.clone(), obj).is_none() {
            order.push(key);
        }
    }
    let mut previous = cache.replace(last_of.values().cloned());
    let mut notifications = Vec::with_capacity(order.len());
    for key in order {
        let Some(new) = last_of.remove(&key) else {
            continue;
        };
        notifications.push(match previous.remove(&key) {
            Some(old) => Notification::Update { old, new },
            None => Notification::Add(new),
        });
    }
    let mut gone: Vec<(String, Arc<K>)> = previous.into_iter().collect();
    gone.sort_by(|a, b| a.0.cmp(&b.0));
    notifications.extend(gone.into_iter().map(|(_, obj)| Notification::Delete(obj)));
    notifications
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_api::cm;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn describe(n: &Notification<ConfigMap>) -> String {
        let id = |c: &ConfigMap| {
            format!(
                "{}@{}",
                c.metadata.name.as_deref().unwrap_or_default(),
                c.metadata.resource_version.as_deref().unwrap_or_default()
            )
        };
        match n {
            Notification::Add(o) => format!("add {}", id(o)),
            Notification::Update { old, new } => format!("update {}->{}", id(old), id(new)),
            Notification::Delete(o) => format!("delete {}", id(o)),
        }
    }

    fn feed(
        r: &mut Reflector<ConfigMap>,
        cache: &Cache<ConfigMap>,
        events: Vec<watcher::Event<ConfigMap>>,
    ) -> Vec<String> {
        events
            .into_iter()
            .flat_map(|e| r.apply(cache, e).notifications)
            .map(|n| describe(&n))
            .collect()
    }

    /// The start of a (re)list: `Init`, then each (name, resourceVersion) listed.
    fn listing(items: &[(&str, &str)]) -> Vec<watcher::Event<ConfigMap>> {
        std::iter::once(watcher::Event::Init)
            .chain(
                items
                    .iter()
                    .map(|(name, rv)| watcher::Event::InitApply(cm(name, rv))),
            )
            .collect()
    }

    #[test]
    fn initial_list_then_watch_events() {
        let cache = Cache::new();
        let mut r = Reflector::new();
        let out = feed(&mut r, &cache, listing(&[("a", "1"), ("b", "2")]));
        // Nothing is visible before the list completes.
        assert!(out.is_empty());
        assert!(cache.is_empty());
        let done = r.apply(&cache, watcher::Event::InitDone);
        assert!(done.list_completed);
        assert_eq!(
            done.notifications.iter().map(describe).collect::<Vec<_>>(),
            ["add a@1", "add b@2"]
        );
        let out = feed(
            &mut r,
            &cache,
            vec![
                watcher::Event::Apply(cm("a", "3")),
                watcher::Event::Apply(cm("c", "4")),
                watcher::Event::Delete(cm("b", "5")),
                watcher::Event::Delete(cm("never-seen", "6")),
            ],
        );
        assert_eq!(out, ["update a@1->a@3", "add c@4", "delete b@5"]);
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn relist_reports_missed_deletes_with_last_known_state() {
        let cache = Cache::new();
        let mut r = Reflector::new();
        let mut events = listing(&[("a", "1"), ("b", "2"), ("c", "3")]);
        events.extend([
            watcher::Event::InitDone,
            watcher::Event::Apply(cm("c", "4")),
        ]);
        feed(&mut r, &cache, events);
        // The watch broke (410); meanwhile b and c were deleted, a changed, d appeared.
        let out = feed(&mut r, &cache, listing(&[("d", "9"), ("a", "8")]));
        assert!(out.is_empty());
        // During the relist listers still serve the old content.
        assert_eq!(cache.len(), 3);
        let out = feed(&mut r, &cache, vec![watcher::Event::InitDone]);
        assert_eq!(
            out,
            ["add d@9", "update a@1->a@8", "delete b@2", "delete c@4"]
        );
        let mut keys = cache.keys();
        keys.sort();
        assert_eq!(keys, ["ns/a", "ns/d"]);
    }

    #[test]
    fn an_empty_relist_deletes_everything() {
        let cache = Cache::new();
        let mut r = Reflector::new();
        let mut events = listing(&[("a", "1")]);
        events.push(watcher::Event::InitDone);
        feed(&mut r, &cache, events);
        let out = feed(
            &mut r,
            &cache,
            vec![watcher::Event::Init, watcher::Event::InitDone],
        );
        assert_eq!(out, ["delete a@1"]);
        assert!(cache.is_empty());
    }
}
