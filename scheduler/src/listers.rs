//! Read-only views of cluster objects that plugins consult (volumes, disruption budgets,
//! namespaces), as traits so the informer integration can back them with its stores.
//! `MemoryListers` is a simple in-memory implementation for tests and simulations.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;
use parking_lot::RwLock;

use crate::selectors::Labels;

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

/// In-memory listers.
#[derive(Default)]
pub struct MemoryListers {
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

    /// Adds a PDB.
    pub fn put_pdb(&self, pdb: PodDisruptionBudget) {
        self.pdbs.write().push(Arc::new(pdb));
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
