//! Resources kept back from pods for the operating system and for the
//! node's own daemons, as the kubelet's `--system-reserved` and
//! `--kube-reserved` spell them (`cpu=100m,memory=256Mi,ephemeral-storage=1Gi`).
//!
//! What the node offers pods follows upstream's node-allocatable rule:
//! allocatable is capacity less both reservations and the hard eviction
//! thresholds, while the `kubepods` cgroup that caps all pods together is
//! capacity less the reservations only, so the agent can still evict a pod
//! before the kernel has to kill one. A `pid` reservation caps how many
//! processes all pods together may run (`kubepods`' `pids.max`), as the
//! kernel's process limit less it.

use std::str::FromStr;

use skiff_common::quantity::parse_scaled;

use super::eviction::EvictionHard;

/// Why a reservation flag was refused, in the kubelet's words where it has
/// them.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReservedError {
    /// A term without `=`.
    #[error("{0:?} is not a resource=quantity pair")]
    Term(String),
    /// A resource that cannot be reserved here.
    #[error("cannot reserve {0:?} resource")]
    Resource(String),
    /// A value that is not a quantity.
    #[error("failed to parse quantity {value:?} for {resource:?} resource")]
    Quantity {
        /// The resource named.
        resource: String,
        /// The value as written.
        value: String,
    },
    /// A negative quantity.
    #[error("resource quantity for {resource:?} cannot be negative: {value}")]
    Negative {
        /// The resource named.
        resource: String,
        /// The value as written.
        value: String,
    },
}

/// One reservation (or the sum of several).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reserved {
    /// Millicores.
    pub cpu_milli: u64,
    /// Bytes of memory.
    pub memory: u64,
    /// Bytes of the agent's file system.
    pub ephemeral_storage: u64,
    /// Processes.
    pub pids: u64,
}

impl Reserved {
    /// Both reservations together (`--system-reserved` and `--kube-reserved`).
    pub fn plus(self, other: Reserved) -> Reserved {
        Reserved {
            cpu_milli: self.cpu_milli.saturating_add(other.cpu_milli),
            memory: self.memory.saturating_add(other.memory),
            ephemeral_storage: self
                .ephemeral_storage
                .saturating_add(other.ephemeral_storage),
            pids: self.pids.saturating_add(other.pids),
        }
    }
}

impl FromStr for Reserved {
    type Err = ReservedError;

    fn from_str(text: &str) -> Result<Self, ReservedError> {
        let mut reserved = Reserved::default();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (resource, value) = term
                .split_once('=')
                .ok_or_else(|| ReservedError::Term(term.to_owned()))?;
            let (resource, value) = (resource.trim(), value.trim());
            let slot = match resource {
                "cpu" => &mut reserved.cpu_milli,
                "memory" => &mut reserved.memory,
                "ephemeral-storage" => &mut reserved.ephemeral_storage,
                "pid" => &mut reserved.pids,
                other => return Err(ReservedError::Resource(other.to_owned())),
            };
            let scale = if resource == "cpu" { 1000 } else { 1 };
            let amount = parse_scaled(value, scale).ok_or_else(|| ReservedError::Quantity {
                resource: resource.to_owned(),
                value: value.to_owned(),
            })?;
            *slot = u64::try_from(amount).map_err(|_| ReservedError::Negative {
                resource: resource.to_owned(),
                value: value.to_owned(),
            })?;
        }
        Ok(reserved)
    }
}

/// The node's capacity as the agent measured it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    /// Millicores.
    pub cpu_milli: u64,
    /// Bytes of memory.
    pub memory: u64,
    /// Bytes of the agent's file system.
    pub ephemeral_storage: u64,
    /// Processes (0 when unknown).
    pub pids: u64,
}

/// What the node keeps back from pods: its reservations and its hard
/// eviction thresholds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KeptBack {
    /// `--system-reserved` and `--kube-reserved` together.
    pub reserved: Reserved,
    /// `--eviction-hard`.
    pub eviction: EvictionHard,
}

impl KeptBack {
    /// The node's allocatable: capacity less the reservations and the hard
    /// eviction thresholds (never below zero).
    pub fn allocatable(&self, capacity: Capacity) -> Capacity {
        // Thresholds given as shares are shares of the whole capacity, as
        // the kubelet counts them.
        let cap = self.cgroup_limits(capacity);
        let memory = self.eviction.memory_available.bytes_of(capacity.memory);
        let disk = self
            .eviction
            .nodefs_available
            .bytes_of(capacity.ephemeral_storage);
        Capacity {
            memory: cap.memory.saturating_sub(memory),
            ephemeral_storage: cap.ephemeral_storage.saturating_sub(disk),
            ..cap
        }
    }

    /// What all pods together may use (the `kubepods` cgroup's caps):
    /// capacity less the reservations, the eviction thresholds left out.
    pub fn cgroup_limits(&self, capacity: Capacity) -> Capacity {
        Capacity {
            cpu_milli: capacity.cpu_milli.saturating_sub(self.reserved.cpu_milli),
            memory: capacity.memory.saturating_sub(self.reserved.memory),
            ephemeral_storage: capacity
                .ephemeral_storage
                .saturating_sub(self.reserved.ephemeral_storage),
            pids: capacity.pids.saturating_sub(self.reserved.pids),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_take_the_kubelets_spelling() {
        let r: Reserved = "cpu=250m, memory=256Mi,ephemeral-storage=1Gi,pid=1k"
            .parse()
            .unwrap();
        assert_eq!(
            r,
            Reserved {
                cpu_milli: 250,
                memory: 256 << 20,
                ephemeral_storage: 1 << 30,
                pids: 1000,
            }
        );
        assert_eq!("".parse::<Reserved>(), Ok(Reserved::default()));
        let both = r.plus("cpu=1,memory=1Gi".parse().unwrap());
        assert_eq!(
            (both.cpu_milli, both.memory),
            (1250, (256 << 20) + (1 << 30))
        );
    }

    #[test]
    fn what_cannot_be_reserved_is_refused_in_the_kubelets_words() {
        let cases = [
            (
                "nvidia.com/gpu=1",
                "cannot reserve \"nvidia.com/gpu\" resource",
            ),
            (
                "memory=lots",
                "failed to parse quantity \"lots\" for \"memory\" resource",
            ),
            (
                "cpu=-1",
                "resource quantity for \"cpu\" cannot be negative: -1",
            ),
            ("memory", "\"memory\" is not a resource=quantity pair"),
        ];
        for (text, want) in cases {
            let error = text.parse::<Reserved>().expect_err(text);
            assert_eq!(error.to_string(), want, "{text}");
        }
    }

    #[test]
    fn allocatable_leaves_out_the_reservations_and_the_eviction_thresholds() {
        let kept = KeptBack {
            reserved: "cpu=500m,memory=1Gi,ephemeral-storage=10Gi,pid=1000"
                .parse()
                .unwrap(),
            eviction: "memory.available<100Mi,nodefs.available<10%"
                .parse()
                .unwrap(),
        };
        let capacity = Capacity {
            cpu_milli: 2000,
            memory: 4 << 30,
            ephemeral_storage: 100 << 30,
            pids: 32_768,
        };
        assert_eq!(
            kept.allocatable(capacity),
            Capacity {
                cpu_milli: 1500,
                memory: (3 << 30) - (100 << 20),
                // 10% of the whole disk, as the kubelet counts it.
                ephemeral_storage: (90 << 30) - (10 << 30),
                pids: 31_768,
            }
        );
        // The pods' cgroup is not cut by the eviction thresholds.
        assert_eq!(
            kept.cgroup_limits(capacity),
            Capacity {
                cpu_milli: 1500,
                memory: 3 << 30,
                ephemeral_storage: 90 << 30,
                pids: 31_768,
            }
        );
        // A reservation beyond the node leaves nothing, not a wrap-around.
        let greedy = KeptBack {
            reserved: "cpu=8,memory=64Gi".parse().unwrap(),
            eviction: EvictionHard::default(),
        };
        let none = greedy.allocatable(capacity);
        assert_eq!((none.cpu_milli, none.memory), (0, 0));
    }
}
