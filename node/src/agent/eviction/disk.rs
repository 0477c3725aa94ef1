//! Eviction under disk pressure: upstream's ranking for the node's file
//! system (pods using more than they request first, then lower priorities,
//! then the largest use beyond the request) and the message.

use k8s_openapi::api::core::v1::Pod;

use super::local_storage::DiskUse;
use super::{bytes_quantity, request};

const RESOURCE: &str = "ephemeral-storage";

/// The pod's ephemeral storage requested.
fn requested(pod: &Pod) -> u64 {
    pod.spec
        .iter()
        .flat_map(|s| &s.containers)
        .map(|c| request(c, RESOURCE).0)
        .sum()
}

/// The pods in the order upstream evicts them under disk pressure.
pub(super) fn rank<'a>(mut candidates: Vec<(&'a Pod, DiskUse<'a>)>) -> Vec<(&'a Pod, DiskUse<'a>)> {
    let key = |(pod, disk): &(&Pod, DiskUse<'_>)| {
        let (in_use, requested) = (disk.total(), requested(pod));
        let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
        (
            in_use > requested,
            priority,
            i128::from(in_use) - i128::from(requested),
        )
    };
    let mut keyed: Vec<_> = candidates.drain(..).map(|c| (key(&c), c)).collect();
    keyed.sort_by(|(a, _), (b, _)| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(b.2.cmp(&a.2)));
    keyed.into_iter().map(|(_, c)| c).collect()
}

/// Why `pod` is evicted, in the kubelet's words: what the node was short
/// of, and each container whose writable layer and logs exceed its
/// request.
pub(super) fn message(pod: &Pod, disk: &DiskUse<'_>, threshold: u64, available: u64) -> String {
    let mut message = format!(
        "The node was low on resource: {RESOURCE}. Threshold quantity: {}, available: {}. ",
        bytes_quantity(threshold),
        bytes_quantity(available)
    );
    for container in pod.spec.iter().flat_map(|s| &s.containers) {
        let in_use = disk.container(container);
        let (requested, written) = request(container, RESOURCE);
        if in_use > requested {
            message.push_str(&format!(
                "Container {} was using {}, request is {written}, has larger consumption of {RESOURCE}. ",
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
    use crate::agent::eviction::local_storage::Places;
    use crate::agent::node::stats::{ContainerUsage, PodUsage};

    fn pod(name: &str, request: Option<&str>, priority: i32) -> Pod {
        let resources = request.map_or(json!({}), |r| json!({"requests": {RESOURCE: r}}));
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": {"priority": priority, "containers": [{"name": "c", "resources": resources}]}}))
        .unwrap()
    }

    fn usage(name: &str, rootfs: u64) -> PodUsage {
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
                memory: None,
                rootfs_bytes: Some(rootfs),
            }],
            cpu: None,
            memory: None,
        }
    }

    #[test]
    fn the_biggest_user_beyond_its_request_goes_first_and_is_told_why() {
        let dir = tempfile::tempdir().unwrap();
        let places = Places {
            agent_dir: &dir.path().join("agent"),
            log_root: &dir.path().join("logs"),
        };
        let pods = [
            pod("within", Some("64Mi"), 0),
            pod("low", Some("1Mi"), -5),
            pod("big", None, 0),
            pod("small", None, 0),
        ];
        let used = [
            usage("within", 8 << 20),
            usage("low", 2 << 20),
            usage("big", 32 << 20),
            usage("small", 1 << 20),
        ];
        let measured = pods
            .iter()
            .zip(&used)
            .map(|(p, u)| (p, DiskUse::of(p, u, &places)))
            .collect();
        let ranked = rank(measured);
        let order: Vec<&str> = ranked
            .iter()
            .map(|(p, _)| p.metadata.name.as_deref().unwrap())
            .collect();
        assert_eq!(order, ["low", "big", "small", "within"]);
        let (first, disk) = &ranked[1];
        assert_eq!(
            message(first, disk, 1000, 1025),
            "The node was low on resource: ephemeral-storage. Threshold quantity: 1000, available: 1025. \
             Container c was using 32Mi, request is 0, has larger consumption of ephemeral-storage. "
        );
    }
}
