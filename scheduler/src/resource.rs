//! Resource quantities and the aggregate resource vectors the scheduler compares.
//!
//! Kubernetes quantities are strings ("250m", "1Gi", "1e3"); the scheduler parses them once
//! per pod and node (with `skiff_common::quantity`) into integer vectors so filters and
//! scores never re-parse.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use skiff_common::quantity;

/// Resource name for CPU.
pub(crate) const CPU: &str = "cpu";
/// Resource name for memory.
pub(crate) const MEMORY: &str = "memory";
/// Resource name for node-local ephemeral storage.
pub(crate) const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// Resource name for the node's pod capacity.
pub(crate) const PODS: &str = "pods";

/// CPU assumed for a container without a CPU request when scoring (100m, as upstream).
pub(crate) const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Memory assumed for a container without a memory request when scoring (200 MiB, as upstream).
pub(crate) const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// The integer value of a quantity, rounded up; invalid quantities count as zero.
pub(crate) fn quantity_value(q: &Quantity) -> i64 {
    quantity::value(q).unwrap_or(0)
}

/// The milli-value of a quantity, rounded up; invalid quantities count as zero.
pub(crate) fn quantity_milli_value(q: &Quantity) -> i64 {
    quantity::milli_value(q).unwrap_or(0)
}

/// A resource name resolved once, so hot loops index instead of comparing strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceKind {
    /// cpu.
    Cpu,
    /// memory.
    Memory,
    /// ephemeral-storage.
    EphemeralStorage,
    /// pods.
    Pods,
    /// Anything else (extended resources, hugepages).
    Scalar(String),
}

impl ResourceKind {
    /// Resolves a resource name.
    pub fn from_name(name: &str) -> Self {
        match name {
            CPU => ResourceKind::Cpu,
            MEMORY => ResourceKind::Memory,
            EPHEMERAL_STORAGE => ResourceKind::EphemeralStorage,
            PODS => ResourceKind::Pods,
            other => ResourceKind::Scalar(other.to_string()),
        }
    }
}

/// A vector of resource amounts: CPU in millicores, the rest in their base units.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resource {
    /// CPU in millicores.
    pub milli_cpu: i64,
    /// Memory in bytes.
    pub memory: i64,
    /// Ephemeral storage in bytes.
    pub ephemeral_storage: i64,
    /// Pod slots (only meaningful for node allocatable).
    pub allowed_pod_number: i64,
    /// Extended and other scalar resources (hugepages, devices), by name.
    pub scalar: BTreeMap<String, i64>,
}

impl Resource {
    /// Builds a resource vector from a `requests`/`allocatable`-style map.
    pub fn from_map(map: &BTreeMap<String, Quantity>) -> Self {
        let mut r = Resource::default();
        for (name, q) in map {
            r.set(name, q);
        }
        r
    }

    fn set(&mut self, name: &str, q: &Quantity) {
        match name {
            CPU => self.milli_cpu = quantity_milli_value(q),
            MEMORY => self.memory = quantity_value(q),
            EPHEMERAL_STORAGE => self.ephemeral_storage = quantity_value(q),
            PODS => self.allowed_pod_number = quantity_value(q),
            // Volume storage is not a node resource.
            "storage" => {}
            other => {
                self.scalar.insert(other.to_string(), quantity_value(q));
            }
        }
    }

    /// Adds `other` to `self` element-wise.
    pub fn add(&mut self, other: &Resource) {
        self.milli_cpu += other.milli_cpu;
        self.memory += other.memory;
        self.ephemeral_storage += other.ephemeral_storage;
        self.allowed_pod_number += other.allowed_pod_number;
        for (k, v) in &other.scalar {
            *self.scalar.entry(k.clone()).or_insert(0) += v;
        }
    }

    /// Subtracts `other` from `self` element-wise.
    pub fn sub(&mut self, other: &Resource) {
        self.milli_cpu -= other.milli_cpu;
        self.memory -= other.memory;
        self.ephemeral_storage -= other.ephemeral_storage;
        self.allowed_pod_number -= other.allowed_pod_number;
        for (k, v) in &other.scalar {
            *self.scalar.entry(k.clone()).or_insert(0) -= v;
        }
    }

    /// Raises each element of `self` to at least the matching element of `other`.
    pub fn set_max(&mut self, other: &Resource) {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        self.allowed_pod_number = self.allowed_pod_number.max(other.allowed_pod_number);
        for (k, v) in &other.scalar {
            let e = self.scalar.entry(k.clone()).or_insert(0);
            *e = (*e).max(*v);
        }
    }

    /// True when nothing is requested at all.
    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.scalar.values().all(|v| *v == 0)
    }

    /// The amount of a resolved resource.
    pub fn get_kind(&self, kind: &ResourceKind) -> i64 {
        match kind {
            ResourceKind::Cpu => self.milli_cpu,
            ResourceKind::Memory => self.memory,
            ResourceKind::EphemeralStorage => self.ephemeral_storage,
            ResourceKind::Pods => self.allowed_pod_number,
            ResourceKind::Scalar(name) => self.scalar.get(name).copied().unwrap_or(0),
        }
    }

    /// The amount of a named resource.
    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.milli_cpu,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            PODS => self.allowed_pod_number,
            other => self.scalar.get(other).copied().unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_vectors_from_maps() {
        let mut m = BTreeMap::new();
        m.insert("cpu".to_string(), Quantity("2".into()));
        m.insert("memory".to_string(), Quantity("1Gi".into()));
        m.insert("pods".to_string(), Quantity("110".into()));
        m.insert("example.com/gpu".to_string(), Quantity("4".into()));
        let r = Resource::from_map(&m);
        assert_eq!(r.milli_cpu, 2000);
        assert_eq!(r.memory, 1 << 30);
        assert_eq!(r.allowed_pod_number, 110);
        assert_eq!(r.get("example.com/gpu"), 4);
        let mut sum = r.clone();
        sum.add(&r);
        sum.sub(&r);
        assert_eq!(sum, r);
    }
}
