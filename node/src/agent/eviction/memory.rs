//! Eviction under memory pressure: which pod goes first (upstream's
//! ranking) and the message it fails with.

use k8s_openapi::api::core::v1::Pod;

use super::{bytes_quantity, request};
use crate::agent::node::stats::PodUsage;

/// The pod's memory in use (its containers' working sets) and requested.
fn memory_of(pod: &Pod, used: Option<&PodUsage>) -> (Option<u64>, u64) {
    let requested = pod
        .spec
        .iter()
        .flat_map(|s| &s.containers)
        .map(|c| request(c, "memory").0)
        .sum();
    let in_use = used.map(|u| {
        u.memory.map(|m| m.working_set_bytes).unwrap_or_else(|| {
            u.containers
                .iter()
                .filter_map(|c| c.memory.map(|m| m.working_set_bytes))
                .sum()
        })
    });
    (in_use, requested)
}

/// The pods in the order upstream evicts them under memory pressure:
/// those without usage figures or using more than they request first,
/// then the lower priorities, then the most used beyond the request.
pub(super) fn rank<'a>(
    mut candidates: Vec<(&'a Pod, Option<&'a PodUsage>)>,
) -> Vec<(&'a Pod, Option<&'a PodUsage>)> {
    let key = |(pod, used): &(&Pod, Option<&PodUsage>)| {
        let (in_use, requested) = memory_of(pod, *used);
        let exceeds = in_use.is_none_or(|u| u > requested);
        let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
        let beyond = in_use.map_or(i128::MAX, |u| i128::from(u) - i128::from(requested));
        (exceeds, priority, beyond)
    };
    candidates.sort_by(|a, b| {
        let (a_exceeds, a_priority, a_beyond) = key(a);
        let (b_exceeds, b_priority, b_beyond) = key(b);
        b_exceeds
            .cmp(&a_exceeds)
            .then(a_priority.cmp(&b_priority))
            .then(b_beyond.cmp(&a_beyond))
    });
    candidates
}

/// Why `pod` is evicted, in the kubelet's words: what the node was short
/// of, and each container that used more memory than it requested.
pub(super) fn message(
    pod: &Pod,
    used: Option<&PodUsage>,
    threshold: u64,
    available: u64,
) -> String {
    let mut message = format!(
        "The node was low on resource: memory. Threshold quantity: {}, available: {}. ",
        bytes_quantity(threshold),
        bytes_quantity(available)
    );
    let Some(used) = used else {
        return message;
    };
    for container in pod.spec.iter().flat_map(|s| &s.containers) {
        let working_set = used
            .containers
            .iter()
            .find(|c| c.name == container.name)
            .and_then(|c| c.memory.map(|m| m.working_set_bytes));
        let (requested, written) = request(container, "memory");
        if let Some(in_use) = working_set.filter(|u| *u > requested) {
            message.push_str(&format!(
                "Container {} was using {}, request is {written}, has larger consumption of memory. ",
                container.name,
                bytes_quantity(in_use)
            ));
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::agent::node::stats::{ContainerUsage, MemoryFigures};

    fn pod(name: &str, request: Option<&str>, priority: i32) -> Pod {
        let resources = request.map_or(json!({}), |r| json!({"requests": {"memory": r}}));
        serde_json::from_value(json!({
            "metadata": {"name": name, "uid": name},
            "spec": {"priority": priority,
                     "containers": [{"name": "c", "resources": resources}]}}))
        .unwrap()
    }

    fn usage(name: &str, working_set: u64) -> PodUsage {
        let memory = MemoryFigures {
            working_set_bytes: working_set,
            ..Default::default()
        };
        PodUsage {
            namespace: "default".into(),
            name: name.into(),
            uid: name.into(),
            start_ns: 0,
            containers: vec![ContainerUsage {
                name: "c".into(),
                id: "id".into(),
                start_ns: 0,
                cpu: None,
                memory: Some(memory),
                rootfs_bytes: None,
            }],
            cpu: None,
            memory: None,
        }
    }

    #[test]
    fn pods_over_their_request_go_first_then_low_priority_then_the_biggest_excess() {
        let within = pod("within", Some("64Mi"), 0);
        let low = pod("low", Some("1Mi"), -10);
        let small = pod("small", Some("1Mi"), 0);
        let big = pod("big", Some("1Mi"), 0);
        let used = [
            usage("within", 8 << 20),
            usage("low", 2 << 20),
            usage("small", 2 << 20),
            usage("big", 32 << 20),
        ];
        let ranked = rank(vec![
            (&within, Some(&used[0])),
            (&small, Some(&used[2])),
            (&big, Some(&used[3])),
            (&low, Some(&used[1])),
        ]);
        let order: Vec<&str> = ranked
            .iter()
            .map(|(p, _)| p.metadata.name.as_deref().unwrap())
            .collect();
        assert_eq!(order, ["low", "big", "small", "within"]);
    }

    #[test]
    fn the_message_names_the_shortage_and_the_greedy_containers() {
        let p = pod("hog", Some("1Mi"), 0);
        let greedy = message(&p, Some(&usage("hog", 8 << 20)), 100 << 20, 51_200 << 10);
        assert_eq!(
            greedy,
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. \
             Container c was using 8Mi, request is 1Mi, has larger consumption of memory. "
        );
        let modest = message(&p, Some(&usage("hog", 512 << 10)), 100 << 20, 1025);
        assert_eq!(
            modest,
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 1025. "
        );
    }
}
