//! The ownership graph: every watched object by uid, with its owner
//! references, and for every owner uid the objects naming it. Pure data: it
//! says which uids need a look after each change; the collector acts.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::DynamicObject;
use kube::discovery::ApiResource;

/// Finalizer of an owner whose dependents are deleted before it.
pub const FOREGROUND: &str = "foregroundDeletion";
/// Finalizer of an owner whose dependents are kept (their references removed).
pub const ORPHAN: &str = "orphan";

/// What the graph knows about one object.
#[derive(Clone, Debug)]
pub struct Node {
    /// The object's uid, the key owner references point at.
    pub uid: String,
    /// The object's resource, to read and delete it with.
    pub resource: Arc<ApiResource>,
    /// The object's namespace; None when cluster-scoped.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
    /// The object's owner references.
    pub owners: Vec<OwnerReference>,
    /// Whether the object has a deletion timestamp.
    pub deleting: bool,
    /// The object's finalizers (foreground deletion and orphaning are read from them).
    pub finalizers: Vec<String>,
}

impl Node {
    /// The node of `obj`, if it has a uid and a name.
    pub fn of(obj: &DynamicObject, resource: &Arc<ApiResource>) -> Option<Self> {
        let meta = &obj.metadata;
        Some(Self {
            uid: meta.uid.clone()?,
            resource: Arc::clone(resource),
            namespace: meta.namespace.clone().filter(|n| !n.is_empty()),
            name: meta.name.clone()?,
            owners: meta.owner_references.clone().unwrap_or_default(),
            deleting: meta.deletion_timestamp.is_some(),
            finalizers: meta.finalizers.clone().unwrap_or_default(),
        })
    }

    /// True if it carries `finalizer`.
    pub fn has_finalizer(&self, finalizer: &str) -> bool {
        self.finalizers.iter().any(|f| f == finalizer)
    }

    /// True if it is being deleted and waits for its dependents.
    pub fn waits_for_dependents(&self) -> bool {
        self.deleting && self.has_finalizer(FOREGROUND)
    }

    fn needs_attention(&self) -> bool {
        self.deleting && (self.has_finalizer(FOREGROUND) || self.has_finalizer(ORPHAN))
    }

    fn same_resource(&self, group: &str, plural: &str) -> bool {
        self.resource.group == group && self.resource.plural == plural
    }
}

/// All watched objects and who owns whom.
#[derive(Default)]
pub struct Graph {
    nodes: HashMap<String, Node>,
    /// owner uid → uids of the objects referencing it (the owner may be absent).
    dependents: HashMap<String, HashSet<String>>,
}

impl Graph {
    /// The object with `uid`, if watched.
    pub fn get(&self, uid: &str) -> Option<&Node> {
        self.nodes.get(uid)
    }

    /// Watched objects naming `owner_uid` as an owner.
    pub fn dependents_of(&self, owner_uid: &str) -> Vec<Node> {
        self.dependents
            .get(owner_uid)
            .into_iter()
            .flatten()
            .filter_map(|uid| self.nodes.get(uid).cloned())
            .collect()
    }

    /// Records the current state of an object; returns the uids to look at.
    pub fn upsert(&mut self, node: Node) -> Vec<String> {
        let mut attention = Vec::new();
        let old = self.nodes.get(&node.uid);
        let owners_changed = old.is_none_or(|o| o.owners != node.owners);
        let state_changed =
            old.is_none_or(|o| o.deleting != node.deleting || o.finalizers != node.finalizers);
        if let Some(old) = old {
            for owner in &old.owners {
                if let Some(set) = self.dependents.get_mut(&owner.uid) {
                    set.remove(&node.uid);
                    if set.is_empty() {
                        self.dependents.remove(&owner.uid);
                    }
                }
            }
        }
        for owner in &node.owners {
            self.dependents
                .entry(owner.uid.clone())
                .or_default()
                .insert(node.uid.clone());
        }
        if (owners_changed && !node.owners.is_empty()) || (state_changed && node.needs_attention())
        {
            attention.push(node.uid.clone());
        }
        if state_changed && node.deleting {
            // An owner in foreground deletion may now be unblocked or must act.
            attention.extend(self.waiting_owners(&node));
        }
        self.nodes.insert(node.uid.clone(), node);
        attention
    }

    /// Forgets a deleted object; returns the uids to look at: its
    /// dependents (their owner is gone) and owners waiting for it.
    pub fn remove(&mut self, uid: &str) -> Vec<String> {
        let Some(node) = self.nodes.remove(uid) else {
            return Vec::new();
        };
        for owner in &node.owners {
            if let Some(set) = self.dependents.get_mut(&owner.uid) {
                set.remove(uid);
                if set.is_empty() {
                    self.dependents.remove(&owner.uid);
                }
            }
        }
        let mut attention: Vec<String> = self
            .dependents
            .get(uid)
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        attention.extend(self.waiting_owners(&node));
        attention
    }

    /// Uids of objects of `group`/`plural` not in `keep` (gone during a
    /// watch gap, noticed on relist).
    pub fn missing(&self, group: &str, plural: &str, keep: &HashSet<String>) -> Vec<String> {
        self.nodes
            .values()
            .filter(|n| n.same_resource(group, plural) && !keep.contains(&n.uid))
            .map(|n| n.uid.clone())
            .collect()
    }

    fn waiting_owners(&self, node: &Node) -> Vec<String> {
        node.owners
            .iter()
            .filter(|o| {
                self.nodes
                    .get(&o.uid)
                    .is_some_and(Node::waits_for_dependents)
            })
            .map(|o| o.uid.clone())
            .collect()
    }

    /// Number of objects watched.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when no object is watched.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource() -> Arc<ApiResource> {
        Arc::new(ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            plural: "configmaps".into(),
        })
    }

    fn node(uid: &str, owners: &[&str]) -> Node {
        Node {
            uid: uid.into(),
            resource: resource(),
            namespace: Some("ns".into()),
            name: uid.into(),
            owners: owners
                .iter()
                .map(|o| OwnerReference {
                    uid: (*o).into(),
                    name: (*o).into(),
                    kind: "ConfigMap".into(),
                    api_version: "v1".into(),
                    ..Default::default()
                })
                .collect(),
            deleting: false,
            finalizers: Vec::new(),
        }
    }

    #[test]
    fn dependents_are_looked_at_when_their_owner_goes() {
        let mut g = Graph::default();
        assert!(g.upsert(node("owner", &[])).is_empty());
        assert_eq!(g.upsert(node("child", &["owner"])), ["child"]);
        // Unchanged owners: nothing to do.
        assert!(g.upsert(node("child", &["owner"])).is_empty());
        assert_eq!(g.dependents_of("owner").len(), 1);
        assert_eq!(g.remove("owner"), ["child"]);
        assert_eq!(g.len(), 1);
    }

    #[test]
    fn foreground_owners_hear_about_their_dependents() {
        let mut g = Graph::default();
        g.upsert(node("child", &["owner"]));
        let mut owner = node("owner", &[]);
        owner.deleting = true;
        owner.finalizers = vec![FOREGROUND.into()];
        assert_eq!(g.upsert(owner), ["owner"]);
        let mut child = node("child", &["owner"]);
        child.deleting = true;
        assert_eq!(g.upsert(child), ["owner"]);
        assert_eq!(g.remove("child"), ["owner"]);
        assert!(g.dependents_of("owner").is_empty());
    }

    #[test]
    fn relists_find_objects_missed_while_the_watch_was_down() {
        let mut g = Graph::default();
        g.upsert(node("a", &[]));
        g.upsert(node("b", &[]));
        let keep: HashSet<String> = ["a".to_string()].into();
        assert_eq!(g.missing("", "configmaps", &keep), ["b"]);
        assert!(g.missing("apps", "replicasets", &keep).is_empty());
    }
}
