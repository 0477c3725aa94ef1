//! Local storage limits, which the kubelet enforces whatever the node's
//! pressure: a pod is evicted when an emptyDir holds more than its
//! `sizeLimit`, when its containers and local volumes hold more than the
//! pod's `ephemeral-storage` limit, or when one container's writable layer
//! and logs hold more than its own. Each is reported in upstream's words.
//!
//! Volumes and writable layers are read from the stats summary, which
//! measures volumes as `du` does (allocated blocks) and takes a writable
//! layer from the runtime (refreshed every few seconds). Logs are file
//! sizes read here: the summary has those of running containers only, and
//! an exited container's logs count too.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};
use skiff_common::amount::Amount;
use skiff_common::quota::pods::pod_limits;

use crate::agent::node::host;
use crate::agent::node::stats::PodUsage;
use crate::agent::pod::cri_config::pod_log_dir;

const EPHEMERAL_STORAGE: &str = "ephemeral-storage";

/// Whether `pod` sets any limit enforced here.
pub(super) fn limited(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    let sized = spec.volumes.iter().flatten().any(|v| {
        v.empty_dir
            .as_ref()
            .is_some_and(|e| e.size_limit.is_some() && e.medium.as_deref() != Some("Memory"))
    });
    sized || spec.containers.iter().any(|c| limit_of(c).is_some())
}

/// A container's `ephemeral-storage` limit: bytes and the text as written.
fn limit_of(container: &Container) -> Option<(u64, String)> {
    let limit = container
        .resources
        .as_ref()?
        .limits
        .as_ref()?
        .get(EPHEMERAL_STORAGE)?;
    let bytes = skiff_common::quantity::parse_scaled(&limit.0, 1)?;
    Some((u64::try_from(bytes).ok()?, limit.0.clone()))
}

/// What one pod keeps on the node's disk.
pub(super) struct DiskUse<'a> {
    pod: &'a Pod,
    used: &'a PodUsage,
    logs: PathBuf,
}

impl<'a> DiskUse<'a> {
    /// The pod's disk use: `used` (the summary's figures, volumes among
    /// them) and its logs below `log_root`.
    pub(super) fn of(pod: &'a Pod, used: &'a PodUsage, log_root: &Path) -> Self {
        Self {
            pod,
            used,
            logs: pod_log_dir(log_root, pod),
        }
    }

    /// A container's writable layer and logs.
    pub(super) fn container(&self, container: &Container) -> u64 {
        let rootfs = self
            .used
            .containers
            .iter()
            .find(|u| u.name == container.name)
            .and_then(|u| u.rootfs_bytes)
            .unwrap_or(0);
        rootfs + host::file_sizes(&self.logs.join(&container.name))
    }

    /// One volume's files (none when the summary has no such volume).
    fn volume(&self, name: &str) -> u64 {
        self.used
            .volumes
            .iter()
            .find(|(volume, _)| volume == name)
            .map_or(0, |(_, bytes)| *bytes)
    }

    /// The containers' writable layers and logs and the local volumes
    /// upstream counts (emptyDirs on disk, configMaps, downward API files).
    pub(super) fn total(&self) -> u64 {
        let Some(spec) = self.pod.spec.as_ref() else {
            return 0;
        };
        let local_volumes: u64 = spec
            .volumes
            .iter()
            .flatten()
            .filter(|v| {
                v.empty_dir
                    .as_ref()
                    .is_some_and(|e| e.medium.as_deref() != Some("Memory"))
                    || v.config_map.is_some()
                    || v.downward_api.is_some()
            })
            .map(|v| self.volume(&v.name))
            .sum();
        spec.containers
            .iter()
            .map(|c| self.container(c))
            .sum::<u64>()
            + local_volumes
    }
}

/// The message of the first limit `pod` is over, checked in upstream's
/// order (emptyDirs, then the pod, then each container); `None` within
/// them all.
pub(super) fn over_limit(pod: &Pod, used: &PodUsage, log_root: &Path) -> Option<String> {
    if !limited(pod) {
        return None;
    }
    let spec = pod.spec.as_ref()?;
    let disk = DiskUse::of(pod, used, log_root);
    for volume in spec.volumes.iter().flatten() {
        let Some(limit) = volume
            .empty_dir
            .as_ref()
            .filter(|e| e.medium.as_deref() != Some("Memory"))
            .and_then(|e| e.size_limit.as_ref())
        else {
            continue;
        };
        let bytes = skiff_common::quantity::parse_scaled(&limit.0, 1)
            .and_then(|b| u64::try_from(b).ok())?;
        if disk.volume(&volume.name) > bytes {
            return Some(format!(
                "Usage of EmptyDir volume {:?} exceeds the limit {:?}. ",
                volume.name, limit.0
            ));
        }
    }
    let pod_limit = serde_json::to_value(pod)
        .ok()
        .and_then(|value| pod_limits(&value).remove(EPHEMERAL_STORAGE));
    if let Some(limit) = pod_limit
        && i128::from(disk.total()) * 1000 > i128::from(limit.milli())
    {
        return Some(format!(
            "Pod ephemeral local storage usage exceeds the total limit of containers {limit}. "
        ));
    }
    spec.containers.iter().find_map(|c| {
        let (bytes, written) = limit_of(c)?;
        (disk.container(c) > bytes).then(|| {
            let limit = Amount::parse(&written).map_or(written, |a| a.to_string());
            format!(
                "Container {} exceeded its local ephemeral storage limit {limit:?}. ",
                c.name
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Pod `p`'s usage: `rootfs` bytes in container `c`'s writable layer
    /// and 2 MiB in its volume `scratch`.
    fn usage(rootfs: u64) -> PodUsage {
        let mut usage = crate::agent::eviction::fixtures::usage("p", rootfs);
        usage.volumes = vec![("scratch".into(), 2 << 20)];
        usage
    }

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u1"}, "spec": spec}))
        .unwrap()
    }

    #[test]
    fn each_limit_is_reported_in_upstreams_words() {
        let dir = tempfile::tempdir().unwrap();
        let log_root = dir.path().join("logs");
        let sized = pod(json!({
            "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "1Mi"}}],
            "containers": [{"name": "c"}]}));
        assert_eq!(
            over_limit(&sized, &usage(0), &log_root).as_deref(),
            Some("Usage of EmptyDir volume \"scratch\" exceeds the limit \"1Mi\". ")
        );
        let roomy = pod(json!({
            "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "4Mi"}}],
            "containers": [{"name": "c"}]}));
        assert_eq!(over_limit(&roomy, &usage(0), &log_root), None);

        let limited = |limit: &str| {
            pod(json!({
                "volumes": [{"name": "scratch", "emptyDir": {}}],
                "containers": [{"name": "c", "resources": {"limits": {"ephemeral-storage": limit}}}]}))
        };
        // The pod's total counts the emptyDir: 2 MiB there is over 1536Ki.
        assert_eq!(
            over_limit(&limited("1536Ki"), &usage(0), &log_root).as_deref(),
            Some(
                "Pod ephemeral local storage usage exceeds the total limit of containers 1536Ki. "
            )
        );
        // The container's own counts its writable layer and logs only.
        let logs = pod_log_dir(&log_root, &limited("3Mi")).join("c");
        std::fs::create_dir_all(&logs).unwrap();
        std::fs::write(logs.join("0.log"), vec![b'x'; 1 << 20]).unwrap();
        assert_eq!(
            over_limit(&limited("3Mi"), &usage(3 << 20), &log_root).as_deref(),
            Some("Pod ephemeral local storage usage exceeds the total limit of containers 3Mi. ")
        );
        assert_eq!(
            over_limit(&limited("8Mi"), &usage(1 << 20), &log_root),
            None
        );
        let two = pod(json!({"containers": [
            {"name": "c", "resources": {"limits": {"ephemeral-storage": "1Mi"}}},
            {"name": "d", "resources": {"limits": {"ephemeral-storage": "100Mi"}}}]}));
        assert_eq!(
            over_limit(&two, &usage(1 << 20), &log_root).as_deref(),
            Some("Container c exceeded its local ephemeral storage limit \"1Mi\". ")
        );
    }
}
