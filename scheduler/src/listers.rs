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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::policy::v1::PodDisruptionBudgetStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pdb(name: &str, allowed: i32) -> PodDisruptionBudget {
        PodDisruptionBudget {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            spec: None,
            status: Some(PodDisruptionBudgetStatus {
                disruptions_allowed: allowed,
                ..Default::default()
            }),
        }
    }

    #[test]
    fn pdb_updates_replace_and_deletes_remove() {
        let l = MemoryListers::new();
        l.put_pdb(pdb("a", 0));
        l.put_pdb(pdb("a", 2));
        l.put_pdb(pdb("b", 1));
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
