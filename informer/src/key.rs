//! Object keys: the "namespace/name" (or "name" for cluster-scoped objects) strings
//! caches are keyed by and controllers put on their work queues.

use std::fmt;

use kube::Resource;

/// Identifies one object of a known kind: its namespace (None when cluster-scoped) and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// Namespace, or None for cluster-scoped objects.
    pub namespace: Option<String>,
    /// Object name.
    pub name: String,
}

impl ObjectKey {
    /// A key from its parts; an empty namespace means cluster-scoped.
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        Self {
            namespace: namespace.filter(|ns| !ns.is_empty()).map(str::to_owned),
            name: name.to_owned(),
        }
    }

    /// The key of `obj` (objects without a name get an empty one).
    pub fn from_object<K: Resource>(obj: &K) -> Self {
        let meta = obj.meta();
        Self::new(
            meta.namespace.as_deref(),
            meta.name.as_deref().unwrap_or_default(),
        )
    }

    /// Parses "namespace/name" or "name"; the inverse of `Display`.
    pub fn parse(key: &str) -> Self {
        match key.split_once('/') {
            Some((ns, name)) => Self::new(Some(ns), name),
            None => Self::new(None, key),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// The cache key string of `obj`: "namespace/name", or "name" when cluster-scoped.
pub fn object_key<K: Resource>(obj: &K) -> String {
    key_for(
        obj.meta().namespace.as_deref().unwrap_or_default(),
        obj.meta().name.as_deref().unwrap_or_default(),
    )
}

/// The cache key string for `namespace` ("" when cluster-scoped) and `name`.
pub fn key_for(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_owned()
    } else {
        format!("{namespace}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_api::{node, pod};

    #[test]
    fn keys_of_namespaced_and_cluster_objects() {
        let pod = pod("default", "web", None, &[]);
        let node = node("n1");
        assert_eq!(object_key(&pod), "default/web");
        assert_eq!(object_key(&node), "n1");
        assert_eq!(ObjectKey::from_object(&pod).to_string(), "default/web");
        assert_eq!(
            ObjectKey::parse("default/web"),
            ObjectKey::from_object(&pod)
        );
        assert_eq!(ObjectKey::parse("n1"), ObjectKey::new(None, "n1"));
        assert_eq!(ObjectKey::new(Some(""), "n1").namespace, None);
    }
}
