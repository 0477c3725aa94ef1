//! Read-only views of cluster objects that plugins consult (volumes, disruption budgets,
//! namespaces, the selectors of Services and workload controllers), as traits so the informer integration can back them with its stores.
//! `MemoryListers` is a simple in-memory implementation for tests and simulations.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;
use parking_lot::RwLock;

use crate::selectors::{Labels, Selector};

/// Volume objects the VolumeBinding plugin reads.
pub trait VolumeLister: Send + Sync {
    /// A PVC by namespace and name.
    fn pvc(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>>;
    /// A PV by name.
    fn pv(&self, name: &str) -> Option<Arc<PersistentVolume>>;
    /// A StorageClass by name.
    fn storage_class(&self, name: &str) -> Option<Arc<StorageClass>>;
}

/// PodDisruptionBudgets preemption tries not to violate.
pub trait PdbLister: Send + Sync {
    /// All PDBs.
    fn pdbs(&self) -> Vec<Arc<PodDisruptionBudget>>;
}

/// Namespace labels, for pod affinity namespace selectors.
pub trait NamespaceLister: Send + Sync {
    /// Labels of a namespace, if it is known.
    fn namespace_labels(&self, name: &str) -> Option<Labels>;
}

/// Selectors of Services and pod controllers, from which PodTopologySpread derives the
/// pod set its system-default constraints spread.
pub trait WorkloadLister: Send + Sync {
    /// The map selectors of the Services in `namespace` whose non-empty selector
    /// matches `labels`.
    fn service_selectors(&self, namespace: &str, labels: &Labels) -> Vec<Labels>;
    /// The selector of a controller (`ReplicationController`, `ReplicaSet` or
    /// `StatefulSet`) by kind, namespace and name.
    fn controller_selector(&self, kind: &str, namespace: &str, name: &str) -> Option<Selector>;
}

/// Kinds whose selectors [`WorkloadLister::controller_selector`] answers for.
pub(crate) const SPREAD_CONTROLLER_KINDS: [&str; 3] =
    ["ReplicationController", "ReplicaSet", "StatefulSet"];

/// In-memory listers.
#[derive(Default)]
pub struct MemoryListers {
    services: RwLock<HashMap<(String, String), Labels>>,
    controllers: RwLock<HashMap<(String, String, String), Selector>>,
    pvcs: RwLock<HashMap<(String, String), Arc<PersistentVolumeClaim>>>,
    pvs: RwLock<HashMap<String, Arc<PersistentVolume>>>,
    classes: RwLock<HashMap<String, Arc<StorageClass>>>,
    pdbs: RwLock<Vec<Arc<PodDisruptionBudget>>>,
    namespaces: RwLock<HashMap<String, Labels>>,
}

impl MemoryListers {
    /// Empty listers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces a PVC.
    pub fn put_pvc(&self, pvc: PersistentVolumeClaim) {
        let key = (
            pvc.metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            pvc.metadata.name.clone().unwrap_or_default(),
        );
        self.pvcs.write().insert(key, Arc::new(pvc));
    }

    /// Adds or replaces a PV.
    pub fn put_pv(&self, pv: PersistentVolume) {
        self.pvs
            .write()
            .insert(pv.metadata.name.clone().unwrap_or_default(), Arc::new(pv));
    }

    /// Adds or replaces a StorageClass.
    pub fn put_storage_class(&self, sc: StorageClass) {
        self.classes
            .write()
            .insert(sc.metadata.name.clone().unwrap_or_default(), Arc::new(sc));
    }

    /// Adds or replaces a PDB (matched by namespace and name).
    pub fn put_pdb(&self, pdb: PodDisruptionBudget) {
        let mut pdbs = self.pdbs.write();
        let same = |p: &Arc<PodDisruptionBudget>| {
            p.metadata.namespace == pdb.metadata.namespace && p.metadata.name == pdb.metadata.name
        };
        match pdbs.iter().position(same) {
            Some(i) => pdbs[i] = Arc::new(pdb),
            None => pdbs.push(Arc::new(pdb)),
        }
    }

    /// Removes a PDB.
    pub fn remove_pdb(&self, namespace: &str, name: &str) {
        self.pdbs.write().retain(|p| {
            p.metadata.namespace.as_deref() != Some(namespace)
                || p.metadata.name.as_deref() != Some(name)
        });
    }

    /// Removes a PVC.
    pub fn remove_pvc(&self, namespace: &str, name: &str) {
        self.pvcs
            .write()
            .remove(&(namespace.to_string(), name.to_string()));
    }

    /// Removes a PV.
    pub fn remove_pv(&self, name: &str) {
        self.pvs.write().remove(name);
    }

    /// Adds or replaces a Service's selector (`None` or empty: it selects no pods).
    pub fn put_service(&self, namespace: &str, name: &str, selector: Option<Labels>) {
        let key = (namespace.to_string(), name.to_string());
        match selector.filter(|s| !s.is_empty()) {
            Some(sel) => self.services.write().insert(key, sel),
            None => self.services.write().remove(&key),
        };
    }

    /// Removes a Service.
    pub fn remove_service(&self, namespace: &str, name: &str) {
        self.services
            .write()
            .remove(&(namespace.to_string(), name.to_string()));
    }

    /// Adds or replaces a controller's pod selector.
    pub fn put_controller(&self, kind: &str, namespace: &str, name: &str, selector: Selector) {
        self.controllers.write().insert(
            (kind.to_string(), namespace.to_string(), name.to_string()),
            selector,
        );
    }

    /// Removes a controller.
    pub fn remove_controller(&self, kind: &str, namespace: &str, name: &str) {
        self.controllers.write().remove(&(
            kind.to_string(),
            namespace.to_string(),
            name.to_string(),
        ));
    }

    /// Sets a namespace's labels.
    pub fn put_namespace(&self, name: &str, labels: Labels) {
        self.namespaces.write().insert(name.to_string(), labels);
    }
}

impl VolumeLister for MemoryListers {
    fn pvc(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        self.pvcs
            .read()
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }
    fn pv(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.pvs.read().get(name).cloned()
    }
    fn storage_class(&self, name: &str) -> Option<Arc<StorageClass>> {
        self.classes.read().get(name).cloned()
    }
}

impl PdbLister for MemoryListers {
    fn pdbs(&self) -> Vec<Arc<PodDisruptionBudget>> {
        self.pdbs.read().clone()
    }
}

impl NamespaceLister for MemoryListers {
    fn namespace_labels(&self, name: &str) -> Option<Labels> {
        self.namespaces.read().get(name).cloned()
    }
}

impl WorkloadLister for MemoryListers {
    fn service_selectors(&self, namespace: &str, labels: &Labels) -> Vec<Labels> {
        self.services
            .read()
            .iter()
            .filter(|((ns, _), sel)| {
                ns == namespace && sel.iter().all(|(k, v)| labels.get(k) == Some(v))
            })
            .map(|(_, sel)| sel.clone())
            .collect()
    }

    fn controller_selector(&self, kind: &str, namespace: &str, name: &str) -> Option<Selector> {
        self.controllers
            .read()
            .get(&(kind.to_string(), namespace.to_string(), name.to_string()))
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::pdb;

    #[test]
    fn pdb_updates_replace_and_deletes_remove() {
        let l = MemoryListers::new();
        l.put_pdb(pdb("a", &[], 0));
        l.put_pdb(pdb("a", &[], 2));
        l.put_pdb(pdb("b", &[], 1));
        let got: Vec<i32> = l
            .pdbs()
            .iter()
            .map(|p| p.status.as_ref().unwrap().disruptions_allowed)
            .collect();
        assert_eq!(got, vec![2, 1]);
        l.remove_pdb("default", "a");
        assert_eq!(l.pdbs().len(), 1);
    }
}
