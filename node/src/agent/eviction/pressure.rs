//! Eviction under memory or disk pressure: which pod goes first and the
//! message it fails with, as upstream ranks and words them for either
//! resource. Pods without usage figures or using more than they request
//! go first, then the lower priorities, then the most used beyond the
//! request.

use k8s_openapi::api::core::v1::{Container, Pod};

use super::local_storage::DiskUse;
use crate::agent::node::stats::PodUsage;

/// What the node is short of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shortage {
    /// `memory.available`: containers' working sets count.
    Memory,
    /// `nodefs.available`: writable layers, logs and local volumes count.
    Disk,
}

/// A candidate for eviction and what it uses.
pub(super) struct Candidate<'a> {
    /// The pod.
    pub pod: &'a Pod,
    /// Its usage as the runtime reported it.
    pub used: &'a PodUsage,
    /// Its disk use (read only under disk pressure).
    pub disk: DiskUse<'a>,
}

impl Shortage {
    /// The resource as the messages and requests name it.
    fn resource(self) -> &'static str {
        match self {
            Shortage::Memory => "memory",
            Shortage::Disk => "ephemeral-storage",
        }
    }

    /// A container's use of the resource, when measured.
    fn container_use(self, candidate: &Candidate<'_>, container: &Container) -> Option<u64> {
        match self {
            Shortage::Memory => candidate
                .used
                .containers
                .iter()
                .find(|c| c.name == container.name)?
                .memory
                .map(|m| m.working_set_bytes),
            Shortage::Disk => Some(candidate.disk.container(container)),
        }
    }

    /// The pod's use of the resource, when measured.
    fn pod_use(self, candidate: &Candidate<'_>) -> Option<u64> {
        match self {
            Shortage::Memory => Some(
                candidate
                    .used
                    .memory
                    .map(|m| m.working_set_bytes)
                    .unwrap_or_else(|| {
                        candidate
                            .used
                            .containers
                            .iter()
                            .filter_map(|c| c.memory.map(|m| m.working_set_bytes))
                            .sum()
                    }),
            ),
            Shortage::Disk => Some(candidate.disk.total()),
        }
    }

    /// The candidates in the order upstream evicts them.
    pub(super) fn rank<'a>(self, candidates: Vec<Candidate<'a>>) -> Vec<Candidate<'a>> {
        let mut keyed: Vec<_> = candidates
            .into_iter()
            .map(|candidate| {
                let in_use = self.pod_use(&candidate);
                let requested: u64 = candidate
                    .pod
                    .spec
                    .iter()
                    .flat_map(|s| &s.containers)
                    .map(|c| super::request(c, self.resource()).0)
                    .sum();
                let priority = candidate
                    .pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.priority)
                    .unwrap_or(0);
                let exceeds = in_use.is_none_or(|u| u > requested);
                let beyond = in_use.map_or(i128::MAX, |u| i128::from(u) - i128::from(requested));
                ((exceeds, priority, beyond), candidate)
            })
            .collect();
        keyed.sort_by(|(a, _), (b, _)| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(b.2.cmp(&a.2)));
        keyed.into_iter().map(|(_, c)| c).collect()
    }

    /// Why `candidate` is evicted, in the kubelet's words: what the node
    /// was short of, and each container that used more than it requested.
    pub(super) fn message(
        self,
        candidate: &Candidate<'_>,
        threshold: u64,
        available: u64,
    ) -> String {
        let resource = self.resource();
        let mut message = format!(
            "The node was low on resource: {resource}. Threshold quantity: {}, available: {}. ",
            super::bytes_quantity(threshold),
            super::bytes_quantity(available)
        );
        for container in candidate.pod.spec.iter().flat_map(|s| &s.containers) {
            let (requested, written) = super::request(container, resource);
            if let Some(in_use) = self
                .container_use(candidate, container)
                .filter(|u| *u > requested)
            {
                message.push_str(&format!(
                    "Container {} was using {}, request is {written}, has larger consumption of {resource}. ",
                    container.name,
                    super::bytes_quantity(in_use)
                ));
            }
        }
        message
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::eviction::fixtures::{pod, usage};

    fn ranked_names(shortage: Shortage, pods: &[Pod], used: &[PodUsage]) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let log_root = dir.path().join("logs");
        let candidates = pods
            .iter()
            .zip(used)
            .map(|(pod, used)| Candidate {
                pod,
                used,
                disk: DiskUse::of(pod, used, &log_root),
            })
            .collect();
        shortage
            .rank(candidates)
            .iter()
            .map(|c| c.pod.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    #[test]
    fn pods_over_their_request_go_first_then_low_priority_then_the_biggest_excess() {
        for (shortage, resource) in [
            (Shortage::Memory, "memory"),
            (Shortage::Disk, "ephemeral-storage"),
        ] {
            let pods = [
                pod("within", resource, Some("64Mi"), 0),
                pod("low", resource, Some("1Mi"), -10),
                pod("small", resource, Some("1Mi"), 0),
                pod("big", resource, None, 0),
            ];
            let used = [
                usage("within", 8 << 20),
                usage("low", 2 << 20),
                usage("small", 2 << 20),
                usage("big", 32 << 20),
            ];
            assert_eq!(
                ranked_names(shortage, &pods, &used),
                ["low", "big", "small", "within"],
                "{shortage:?}"
            );
        }
    }

    #[test]
    fn the_message_names_the_shortage_and_the_greedy_containers() {
        let dir = tempfile::tempdir().unwrap();
        let log_root = dir.path().join("logs");
        let hog = pod("hog", "memory", Some("1Mi"), 0);
        let (greedy, modest) = (usage("hog", 8 << 20), usage("hog", 512 << 10));
        let candidate = |used| Candidate {
            pod: &hog,
            used,
            disk: DiskUse::of(&hog, used, &log_root),
        };
        assert_eq!(
            Shortage::Memory.message(&candidate(&greedy), 100 << 20, 51_200 << 10),
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. \
             Container c was using 8Mi, request is 1Mi, has larger consumption of memory. "
        );
        assert_eq!(
            Shortage::Memory.message(&candidate(&modest), 100 << 20, 1025),
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 1025. "
        );
        assert_eq!(
            Shortage::Disk.message(&candidate(&greedy), 1000, 1025),
            "The node was low on resource: ephemeral-storage. Threshold quantity: 1000, available: 1025. \
             Container c was using 8Mi, request is 0, has larger consumption of ephemeral-storage. "
        );
    }
}
