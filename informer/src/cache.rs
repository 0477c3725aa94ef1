//! The thread-safe indexed store informers fill and listers read.
//!
//! Objects are shared as `Arc<K>`: readers get cheap clones of exactly what the
//! informer holds and must treat them as immutable (clone before modifying).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Resource;
use kube::core::{Selector, SelectorExt};
use parking_lot::RwLock;

use crate::indexes::{IndexFn, NAMESPACE_INDEX, namespace_index};
use crate::key::{key_for, object_key};

/// Errors from index registration and index lookups.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// `by_index` named an index nobody registered.
    #[error("no index named {0:?} is registered on this cache")]
    UnknownIndex(String),
    /// `add_index` used a name already registered.
    #[error("an index named {0:?} is already registered on this cache")]
    IndexExists(String),
    /// A `LabelSelector` could not be turned into a selector.
    #[error("invalid label selector: {0}")]
    InvalidSelector(String),
}

/// A map of `Arc<K>` keyed by "namespace/name" with named secondary indexes.
pub struct Cache<K> {
    inner: RwLock<Inner<K>>,
}

struct Inner<K> {
    items: HashMap<String, Arc<K>>,
    index_fns: BTreeMap<String, IndexFn<K>>,
    /// index name → index value → the objects filed under it, by key. Holding
    /// the objects (not just keys) saves a second map lookup per result.
    indices: HashMap<String, Index<K>>,
}

type Index<K> = HashMap<String, HashMap<String, Arc<K>>>;

/// Files `obj` in `index` under `key` at each value `index_fn` gives it:
/// how an object stored joins an index, and how a new index takes in the
/// objects already stored.
fn file<K>(index: &mut Index<K>, index_fn: &IndexFn<K>, key: &str, obj: &Arc<K>) {
    for value in index_fn(obj) {
        index
            .entry(value)
            .or_default()
            .insert(key.to_owned(), Arc::clone(obj));
    }
}

impl<K> Inner<K> {
    fn unindex(&mut self, key: &str, obj: &K) {
        for (name, index_fn) in &self.index_fns {
            let Some(index) = self.indices.get_mut(name) else {
                continue;
            };
            for value in index_fn(obj) {
                if let Some(keys) = index.get_mut(&value) {
                    keys.remove(key);
                    if keys.is_empty() {
                        index.remove(&value);
                    }
                }
            }
        }
    }

    fn index(&mut self, key: &str, obj: &Arc<K>) {
        for (name, index_fn) in &self.index_fns {
            let index = self.indices.entry(name.clone()).or_default();
            file(index, index_fn, key, obj);
        }
    }

    /// The objects filed under `value` in index `index_name`, by key; `None`
    /// when none are (a known index need not have an entry yet).
    fn filed(
        &self,
        index_name: &str,
        value: &str,
    ) -> Result<Option<&HashMap<String, Arc<K>>>, CacheError> {
        if !self.index_fns.contains_key(index_name) {
            return Err(CacheError::UnknownIndex(index_name.to_owned()));
        }
        Ok(self
            .indices
            .get(index_name)
            .and_then(|index| index.get(value)))
    }

    fn lookup(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, CacheError> {
        let filed = self.filed(index_name, value)?;
        Ok(filed.map_or_else(Vec::new, |objects| objects.values().cloned().collect()))
    }
}

impl<K: Resource> Default for Cache<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Resource> Cache<K> {
    /// An empty cache with the namespace index registered.
    pub fn new() -> Self {
        let mut index_fns = BTreeMap::new();
        index_fns.insert(NAMESPACE_INDEX.to_owned(), namespace_index::<K>());
        Self {
            inner: RwLock::new(Inner {
                items: HashMap::new(),
                index_fns,
                indices: HashMap::new(),
            }),
        }
    }

    /// Registers index `name`; objects already stored are indexed immediately.
    pub fn add_index(&self, name: &str, index_fn: IndexFn<K>) -> Result<(), CacheError> {
        let mut inner = self.inner.write();
        if inner.index_fns.contains_key(name) {
            return Err(CacheError::IndexExists(name.to_owned()));
        }
        let mut index: Index<K> = HashMap::new();
        for (key, obj) in &inner.items {
            file(&mut index, &index_fn, key, obj);
        }
        inner.indices.insert(name.to_owned(), index);
        inner.index_fns.insert(name.to_owned(), index_fn);
        Ok(())
    }

    /// True if an index called `name` is registered.
    pub fn has_index(&self, name: &str) -> bool {
        self.inner.read().index_fns.contains_key(name)
    }

    /// Stores `obj` under its key and returns what it replaced.
    pub fn insert(&self, obj: Arc<K>) -> Option<Arc<K>> {
        let key = object_key(obj.as_ref());
        let mut inner = self.inner.write();
        let old = inner.items.insert(key.clone(), Arc::clone(&obj));
        if let Some(old) = &old {
            inner.unindex(&key, old);
        }
        inner.index(&key, &obj);
        old
    }

    /// Removes the object stored under `key` and returns it.
    pub fn remove(&self, key: &str) -> Option<Arc<K>> {
        let mut inner = self.inner.write();
        let old = inner.items.remove(key)?;
        inner.unindex(key, &old);
        Some(old)
    }

    /// Replaces the whole content with `objects` in one step (readers see either
    /// the old or the new content) and returns the previous content by key.
    pub fn replace(&self, objects: impl IntoIterator<Item = Arc<K>>) -> HashMap<String, Arc<K>> {
        let items: HashMap<String, Arc<K>> = objects
            .into_iter()
            .map(|obj| (object_key(obj.as_ref()), obj))
            .collect();
        let mut inner = self.inner.write();
        let old = std::mem::replace(&mut inner.items, items);
        inner.indices.clear();
        let current: Vec<(String, Arc<K>)> = inner
            .items
            .iter()
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect();
        for (key, obj) in current {
            inner.index(&key, &obj);
        }
        old
    }

    /// The object `name` in `namespace` ("" for cluster-scoped objects).
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.get_by_key(&key_for(namespace, name))
    }

    /// The object stored under `key` ("namespace/name" or "name").
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.inner.read().items.get(key).cloned()
    }

    /// Every stored object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.inner.read().items.values().cloned().collect()
    }

    /// Every stored object in `namespace`.
    pub fn list_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        self.inner
            .read()
            .lookup(NAMESPACE_INDEX, namespace)
            .unwrap_or_default()
    }

    /// Every stored object whose labels match `selector`.
    pub fn list_by_selector(&self, selector: &Selector) -> Vec<Arc<K>> {
        self.inner
            .read()
            .items
            .values()
            .filter(|obj| labels_match(obj.as_ref(), selector))
            .cloned()
            .collect()
    }

    /// Objects in `namespace` whose labels match `selector` (what a workload
    /// controller asks for its pods).
    pub fn list_namespace_by_selector(&self, namespace: &str, selector: &Selector) -> Vec<Arc<K>> {
        self.list_namespace(namespace)
            .into_iter()
            .filter(|obj| labels_match(obj.as_ref(), selector))
            .collect()
    }

    /// Objects in `namespace` matching a spec's `LabelSelector`. An empty selector
    /// matches everything, as in the Kubernetes API.
    pub fn list_namespace_by_label_selector(
        &self,
        namespace: &str,
        selector: &LabelSelector,
    ) -> Result<Vec<Arc<K>>, CacheError> {
        let selector = Selector::try_from(selector.clone())
            .map_err(|e| CacheError::InvalidSelector(e.to_string()))?;
        Ok(self.list_namespace_by_selector(namespace, &selector))
    }

    /// Objects filed under `value` in index `index_name`.
    pub fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, CacheError> {
        self.inner.read().lookup(index_name, value)
    }

    /// Keys of the objects filed under `value` in index `index_name`.
    pub fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<String>, CacheError> {
        let inner = self.inner.read();
        let filed = inner.filed(index_name, value)?;
        Ok(filed.map_or_else(Vec::new, |objects| objects.keys().cloned().collect()))
    }

    /// Every key currently stored.
    pub fn keys(&self) -> Vec<String> {
        self.inner.read().items.keys().cloned().collect()
    }

    /// Number of stored objects.
    pub fn len(&self) -> usize {
        self.inner.read().items.len()
    }

    /// True when nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn labels_match<K: Resource>(obj: &K, selector: &Selector) -> bool {
    match &obj.meta().labels {
        Some(labels) => selector.matches(labels),
        None => selector.matches(&BTreeMap::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_api;
    use crate::indexes::{NODE_NAME_INDEX, pod_node_name_index};
    use crate::indexes::{OWNER_UID_INDEX, label_value_index, owner_uid_index};
    use k8s_openapi::api::core::v1::{Node, Pod};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::core::Expression;

    fn pod(ns: &str, name: &str, node: Option<&str>, labels: &[(&str, &str)]) -> Arc<Pod> {
        Arc::new(fake_api::pod(ns, name, node, labels))
    }

    fn names(mut objs: Vec<Arc<Pod>>) -> Vec<String> {
        objs.sort_by_key(|p| object_key(p.as_ref()));
        objs.iter().map(|p| object_key(p.as_ref())).collect()
    }

    /// A cache with the node-name index registered first, then `pods`
    /// inserted, so every insert files them under the index.
    fn indexed_by_node(pods: impl IntoIterator<Item = Arc<Pod>>) -> Cache<Pod> {
        let cache = Cache::new();
        cache
            .add_index(NODE_NAME_INDEX, pod_node_name_index())
            .unwrap();
        for p in pods {
            cache.insert(p);
        }
        cache
    }

    #[test]
    fn get_list_and_namespace_listing() {
        let cache = Cache::new();
        cache.insert(pod("a", "p1", None, &[]));
        cache.insert(pod("a", "p2", None, &[]));
        cache.insert(pod("b", "p1", None, &[]));
        assert_eq!(cache.len(), 3);
        assert_eq!(
            cache.get("a", "p2").unwrap().metadata.name.as_deref(),
            Some("p2")
        );
        assert!(cache.get("c", "p1").is_none());
        assert_eq!(names(cache.list_namespace("a")), ["a/p1", "a/p2"]);
        assert_eq!(names(cache.list()), ["a/p1", "a/p2", "b/p1"]);
        assert!(cache.get_by_key("b/p1").is_some());
    }

    #[test]
    fn cluster_scoped_objects_are_keyed_by_name() {
        let cache: Cache<Node> = Cache::new();
        cache.insert(Arc::new(fake_api::node("n1")));
        assert!(cache.get("", "n1").is_some());
        assert_eq!(cache.keys(), ["n1"]);
        assert!(cache.by_index(NAMESPACE_INDEX, "").unwrap().is_empty());
    }

    #[test]
    fn node_name_index_follows_updates_and_deletes() {
        let cache = indexed_by_node([
            pod("ns", "p1", Some("n1"), &[]),
            pod("ns", "p2", Some("n1"), &[]),
            pod("ns", "p3", None, &[]),
        ]);
        assert_eq!(
            names(cache.by_index(NODE_NAME_INDEX, "n1").unwrap()),
            ["ns/p1", "ns/p2"]
        );
        // p1 moves to n2 (an update re-files it), p2 is deleted.
        cache.insert(pod("ns", "p1", Some("n2"), &[]));
        cache.remove("ns/p2");
        assert!(cache.by_index(NODE_NAME_INDEX, "n1").unwrap().is_empty());
        assert_eq!(
            names(cache.by_index(NODE_NAME_INDEX, "n2").unwrap()),
            ["ns/p1"]
        );
        assert_eq!(cache.index_keys(NODE_NAME_INDEX, "n2").unwrap(), ["ns/p1"]);
    }

    #[test]
    fn index_registered_late_covers_existing_objects_and_names_are_unique() {
        let cache: Cache<Pod> = Cache::new();
        let mut owned = (*pod("ns", "child", None, &[])).clone();
        owned.metadata.owner_references = Some(vec![OwnerReference {
            uid: "owner-1".into(),
            ..Default::default()
        }]);
        cache.insert(Arc::new(owned));
        cache.add_index(OWNER_UID_INDEX, owner_uid_index()).unwrap();
        assert_eq!(
            names(cache.by_index(OWNER_UID_INDEX, "owner-1").unwrap()),
            ["ns/child"]
        );
        assert!(matches!(
            cache.add_index(OWNER_UID_INDEX, owner_uid_index()),
            Err(CacheError::IndexExists(_))
        ));
        assert!(matches!(
            cache.by_index("nope", "x"),
            Err(CacheError::UnknownIndex(_))
        ));
    }

    #[test]
    fn custom_index_and_selector_listing() {
        let cache = Cache::new();
        cache
            .add_index("app", label_value_index::<Pod>("app"))
            .unwrap();
        cache.insert(pod("ns", "web-1", None, &[("app", "web"), ("tier", "fe")]));
        cache.insert(pod("ns", "web-2", None, &[("app", "web")]));
        cache.insert(pod("other", "web-3", None, &[("app", "web")]));
        cache.insert(pod("ns", "db-1", None, &[("app", "db")]));
        assert_eq!(
            names(cache.by_index("app", "web").unwrap()),
            ["ns/web-1", "ns/web-2", "other/web-3"]
        );
        let web: Selector = [("app", "web")].into_iter().collect();
        assert_eq!(
            names(cache.list_by_selector(&web)),
            ["ns/web-1", "ns/web-2", "other/web-3"]
        );
        assert_eq!(
            names(cache.list_namespace_by_selector("ns", &web)),
            ["ns/web-1", "ns/web-2"]
        );
        let no_tier: Selector = Expression::DoesNotExist("tier".into()).into();
        assert_eq!(
            names(cache.list_namespace_by_selector("ns", &no_tier)),
            ["ns/db-1", "ns/web-2"]
        );
        let spec_selector = LabelSelector {
            match_labels: Some([("app".to_string(), "db".to_string())].into()),
            ..Default::default()
        };
        assert_eq!(
            names(
                cache
                    .list_namespace_by_label_selector("ns", &spec_selector)
                    .unwrap()
            ),
            ["ns/db-1"]
        );
        assert_eq!(
            cache
                .list_namespace_by_label_selector("ns", &LabelSelector::default())
                .unwrap()
                .len(),
            3
        );
    }

    #[test]
    fn replace_swaps_content_and_rebuilds_indexes() {
        let cache = indexed_by_node([
            pod("ns", "old", Some("n1"), &[]),
            pod("ns", "kept", Some("n1"), &[]),
        ]);
        let previous = cache.replace([
            pod("ns", "kept", Some("n2"), &[]),
            pod("ns", "new", Some("n1"), &[]),
        ]);
        let mut previous_keys: Vec<_> = previous.into_keys().collect();
        previous_keys.sort();
        assert_eq!(previous_keys, ["ns/kept", "ns/old"]);
        assert_eq!(
            names(cache.by_index(NODE_NAME_INDEX, "n1").unwrap()),
            ["ns/new"]
        );
        assert_eq!(
            names(cache.by_index(NODE_NAME_INDEX, "n2").unwrap()),
            ["ns/kept"]
        );
        assert!(cache.get("ns", "old").is_none());
    }
}
