//! Pod-level cgroups, laid out as the kubelet's cgroupfs driver lays them
//! out below the cgroup root (`--cgroup-root`, `/` by default):
//!
//! - `kubepods`: every pod, capped at the node's capacity less its
//!   reservations (CPU shares, memory limit, process count), so pods
//!   together cannot take what the system and the node's own daemons need;
//! - `kubepods/burstable` and `kubepods/besteffort`: those QoS classes
//!   (BestEffort with the least CPU weight, Burstable weighted by what its
//!   pods request); Guaranteed pods sit in `kubepods` itself;
//! - `…/pod<uid>`: one pod, with its CPU shares, CFS quota and memory
//!   limit as upstream derives them from its containers and overhead, and
//!   the node's per-pod process limit (`--pod-max-pids`), so one pod's fork
//!   bomb cannot take the node's process table.
//!
//! The sandbox is run with the pod's cgroup as its parent, and containerd
//! puts each container of the pod below it. Anything that fails here falls
//! back to what the node did before: the runtime's own placement.
//!
//! cgroup v1 (these machines) writes `cpu.shares`, `cpu.cfs_quota_us`,
//! `memory.limit_in_bytes` and `pids.max`; v2 writes `cpu.weight`,
//! `cpu.max`, `memory.max` and `pids.max`, enabling the controllers for each
//! level's children. A host without the pids controller gets no process
//! limits.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use skiff_common::qos::recorded_qos_class as qos_class;
use skiff_common::quota;

/// Upstream's CFS period (100 ms).
pub(crate) const CPU_PERIOD_US: i64 = 100_000;
/// The kernel's least `cpu.shares`; BestEffort pods get it.
const MIN_SHARES: u64 = 2;
/// The kernel's greatest `cpu.shares`.
const MAX_SHARES: u64 = 262_144;
/// The least CFS quota (1 ms).
pub(crate) const MIN_QUOTA_US: i64 = 1_000;

/// The cgroup hierarchies of this host, as mounted.
#[derive(Debug, Clone, PartialEq)]
enum Hierarchy {
    /// One mount per controller group (`cpu`, `memory`, …).
    V1(Vec<(Vec<String>, PathBuf)>),
    /// The unified hierarchy.
    V2(PathBuf),
}

impl Hierarchy {
    /// Reads `/proc/self/mountinfo`'s cgroup mounts: v1 where the `cpu`
    /// and `memory` controllers are mounted as v1, else v2's unified mount.
    fn parse(mountinfo: &str) -> Option<Self> {
        let mut v1 = Vec::new();
        let mut unified = None;
        for line in mountinfo.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            let Some(dash) = fields.iter().position(|f| *f == "-") else {
                continue;
            };
            let (Some(mount), Some(fstype), Some(options)) =
                (fields.get(4), fields.get(dash + 1), fields.get(dash + 3))
            else {
                continue;
            };
            match *fstype {
                "cgroup" => {
                    let controllers: Vec<String> = options
                        .split(',')
                        .filter(|o| !matches!(*o, "rw" | "ro") && !o.starts_with("name="))
                        .map(str::to_owned)
                        .collect();
                    v1.push((controllers, PathBuf::from(mount)));
                }
                "cgroup2" => unified = Some(PathBuf::from(mount)),
                _ => {}
            }
        }
        let has = |name: &str| v1.iter().any(|(c, _)| c.iter().any(|c| c == name));
        if has("cpu") && has("memory") {
            Some(Self::V1(v1))
        } else {
            unified.map(Self::V2)
        }
    }

    /// The directory of `cgroup` in the hierarchy holding `controller`.
    fn dir(&self, controller: &str, cgroup: &str) -> Option<PathBuf> {
        let relative = cgroup.trim_start_matches('/');
        match self {
            Self::V1(mounts) => mounts
                .iter()
                .find(|(c, _)| c.iter().any(|c| c == controller))
                .map(|(_, mount)| mount.join(relative)),
            Self::V2(mount) => Some(mount.join(relative)),
        }
    }

    /// Every directory `cgroup` may have (the runtime creates it in each
    /// v1 hierarchy).
    fn all_dirs(&self, cgroup: &str) -> Vec<PathBuf> {
        let relative = cgroup.trim_start_matches('/');
        match self {
            Self::V1(mounts) => mounts.iter().map(|(_, m)| m.join(relative)).collect(),
            Self::V2(mount) => vec![mount.join(relative)],
        }
    }
}

/// What a cgroup is given: CPU shares, a CFS quota per upstream's period,
/// a memory limit in bytes, a process count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Relative CPU weight (`cpu.shares`).
    pub shares: u64,
    /// CFS quota in µs per [`CPU_PERIOD_US`], if capped.
    pub quota_us: Option<i64>,
    /// Memory limit in bytes, if capped.
    pub memory: Option<i64>,
    /// Most processes (`pids.max`), if capped.
    pub pids: Option<i64>,
}

impl Limits {
    /// A pod's limits as upstream's `ResourceConfigForPod`: shares from its
    /// CPU requests; for Guaranteed pods, and for Burstable pods whose every
    /// container limits it, the CFS quota and memory limit of its limits
    /// (overhead included); BestEffort pods only the least shares.
    pub(crate) fn of_pod(pod: &Pod) -> Self {
        let class = qos_class(pod);
        if class == "BestEffort" {
            return Self::shares(MIN_SHARES);
        }
        let value = serde_json::to_value(pod).unwrap_or_default();
        let requests = quota::pods::pod_requests(&value);
        let limits = quota::pods::pod_limits(&value);
        let milli =
            |list: &quota::ResourceList, name: &str| list.get(name).map_or(0, |a| a.milli());
        let guaranteed = class == "Guaranteed";
        let quota_us = (guaranteed || every_container_limits(pod, "cpu"))
            .then(|| cpu_quota(milli(&limits, "cpu")));
        let memory = (guaranteed || every_container_limits(pod, "memory"))
            .then(|| (milli(&limits, "memory") + 999) / 1000);
        Self {
            shares: cpu_shares(milli(&requests, "cpu")),
            quota_us,
            memory,
            pids: None,
        }
    }

    /// Only a CPU weight.
    fn shares(shares: u64) -> Self {
        Self {
            shares,
            quota_us: None,
            memory: None,
            pids: None,
        }
    }

    /// The files to write, as (controller, file, value), in order.
    fn files(&self, hierarchy: &Hierarchy) -> Vec<(&'static str, &'static str, String)> {
        let mut files = Vec::new();
        match hierarchy {
            Hierarchy::V1(_) => {
                files.push(("cpu", "cpu.shares", self.shares.to_string()));
                if let Some(quota) = self.quota_us {
                    files.push(("cpu", "cpu.cfs_period_us", CPU_PERIOD_US.to_string()));
                    files.push(("cpu", "cpu.cfs_quota_us", quota.to_string()));
                }
                if let Some(memory) = self.memory {
                    files.push(("memory", "memory.limit_in_bytes", memory.to_string()));
                }
            }
            Hierarchy::V2(_) => {
                // Shares 2..=262144 onto weights 1..=10000, as runc maps them.
                let weight = 1 + (self.shares.saturating_sub(2) * 9_999) / 262_142;
                files.push(("cpu", "cpu.weight", weight.to_string()));
                if let Some(quota) = self.quota_us {
                    files.push(("cpu", "cpu.max", format!("{quota} {CPU_PERIOD_US}")));
                }
                if let Some(memory) = self.memory {
                    files.push(("memory", "memory.max", memory.to_string()));
                }
            }
        }
        if let Some(pids) = self.pids {
            files.push(("pids", "pids.max", pids.to_string()));
        }
        files
    }
}

/// Removes `dir` and the cgroups below it, deepest first; false when one
/// still holds a process (the kernel refuses to remove it).
fn remove_empty(dir: &Path) -> bool {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_empty(&entry.path());
        }
    }
    std::fs::remove_dir(dir).is_ok()
}

/// The kernel's shares for `milli` CPUs requested.
pub(crate) fn cpu_shares(milli: i64) -> u64 {
    let shares = u64::try_from(milli.max(0)).unwrap_or(0) * 1024 / 1000;
    shares.clamp(MIN_SHARES, MAX_SHARES)
}

/// The CFS quota for a limit of `milli` CPUs (none when there is no limit).
fn cpu_quota(milli: i64) -> i64 {
    if milli <= 0 {
        return -1;
    }
    (milli * CPU_PERIOD_US / 1000).max(MIN_QUOTA_US)
}

/// Whether the pod has not ended (Succeeded or Failed): its cgroup stays.
fn still_runs(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    !matches!(phase, Some("Succeeded" | "Failed"))
}

/// Whether every container, init containers included, limits `name`.
fn every_container_limits(pod: &Pod, name: &str) -> bool {
    pod.spec.iter().all(|spec| {
        spec.containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .all(|c| {
                c.resources
                    .as_ref()
                    .and_then(|r| r.limits.as_ref())
                    .and_then(|l| l.get(name))
                    .and_then(skiff_common::quantity::milli_value)
                    .is_some_and(|v| v > 0)
            })
    })
}

/// How often the cgroups of pods that no longer run are looked for.
const SWEEP_PERIOD: std::time::Duration = std::time::Duration::from_secs(60);

/// Removes, at once and then every minute, the cgroups of pods that no
/// longer run here — gone from the node, or terminated (Succeeded, Failed)
/// — as the kubelet's housekeeping does; until `stop` is raised.
pub(crate) async fn keep_swept(
    ctx: std::sync::Arc<super::context::AgentContext>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let Some(cgroups) = &ctx.cgroups else {
        return;
    };
    let mut ticks = skiff_common::wakeups::Ticks::new(SWEEP_PERIOD, stop);
    while ticks.next().await {
        let pods = ctx.pods.list();
        let running = pods
            .iter()
            .filter(|p| still_runs(p))
            .filter_map(|p| p.metadata.uid.as_deref())
            .collect();
        cgroups.sweep(&running);
    }
}

/// The node's pod cgroups.
#[derive(Debug, Clone)]
pub(crate) struct PodCgroups {
    hierarchy: Hierarchy,
    /// `<root>/kubepods`.
    kubepods: String,
    /// Each pod's process limit (`--pod-max-pids`), if any.
    pod_max_pids: Option<i64>,
}

impl PodCgroups {
    /// Lays out `kubepods` and its QoS cgroups below `root`, capped at what
    /// all pods together may use (`pods`), each pod later capped at
    /// `pod_max_pids` processes. `None` (said in the log) where the host
    /// has no usable cgroup hierarchy or it cannot be written.
    pub(crate) fn start(
        root: &str,
        pods: &crate::agent::node::reserved::Capacity,
        pod_max_pids: Option<i64>,
    ) -> Option<Self> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let Some(hierarchy) = Hierarchy::parse(&mountinfo) else {
            tracing::info!(
                "no cgroup hierarchy with cpu and memory: pods get no pod-level cgroups"
            );
            return None;
        };
        let kubepods = format!("{}/kubepods", root.trim_end_matches('/'));
        let cgroups = Self {
            hierarchy,
            kubepods,
            pod_max_pids,
        };
        let whole = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let node = Limits {
            shares: cpu_shares(whole(pods.cpu_milli)),
            quota_us: None,
            memory: Some(whole(pods.memory)),
            pids: (pods.pids > 0).then(|| whole(pods.pids)),
        };
        let laid_out = cgroups
            .write(&cgroups.kubepods, &node)
            .and_then(|()| {
                cgroups.write(&cgroups.qos_dir("Burstable"), &Limits::shares(MIN_SHARES))
            })
            .and_then(|()| {
                cgroups.write(&cgroups.qos_dir("BestEffort"), &Limits::shares(MIN_SHARES))
            });
        match laid_out {
            Ok(()) => Some(cgroups),
            Err(error) => {
                tracing::warn!(kubepods = %cgroups.kubepods, %error, "pod cgroups could not be laid out; pods get none");
                None
            }
        }
    }

    /// The cgroup of a QoS class's pods.
    fn qos_dir(&self, class: &str) -> String {
        match class {
            "Guaranteed" => self.kubepods.clone(),
            "BestEffort" => format!("{}/besteffort", self.kubepods),
            _ => format!("{}/burstable", self.kubepods),
        }
    }

    /// The cgroup of the pod with `uid` in `class`.
    fn pod_dir(&self, class: &str, uid: &str) -> String {
        format!("{}/pod{uid}", self.qos_dir(class))
    }

    /// The pod's cgroup, created with its limits: the sandbox's cgroup
    /// parent. `None` (said in the log) when it could not be written.
    pub(crate) fn ensure(&self, pod: &Pod) -> Option<String> {
        let uid = pod.metadata.uid.as_deref()?;
        let dir = self.pod_dir(qos_class(pod), uid);
        let limits = Limits {
            pids: self.pod_max_pids,
            ..Limits::of_pod(pod)
        };
        match self.write(&dir, &limits) {
            Ok(()) => Some(dir),
            Err(error) => {
                tracing::warn!(pod = ?pod.metadata.name, cgroup = %dir, %error, "pod cgroup not written; the runtime places the pod");
                None
            }
        }
    }

    /// The pod's cgroup if it has one: the parent its containers are
    /// created under (the sandbox's, from [`Self::ensure`]).
    pub(crate) fn existing(&self, pod: &Pod) -> Option<String> {
        let uid = pod.metadata.uid.as_deref()?;
        let dir = self.pod_dir(qos_class(pod), uid);
        self.hierarchy
            .dir("memory", &dir)
            .is_some_and(|d| d.is_dir())
            .then_some(dir)
    }

    /// Weighs the Burstable cgroup by what its pods request (BestEffort
    /// keeps the least weight; each Guaranteed pod carries its own).
    pub(crate) fn weigh_burstable<'a>(&self, pods: impl Iterator<Item = &'a Pod>) {
        let milli: i64 = pods
            .filter(|p| qos_class(p) == "Burstable" && still_runs(p))
            .map(|p| {
                let value = serde_json::to_value(p).unwrap_or_default();
                quota::pods::pod_requests(&value)
                    .get("cpu")
                    .map_or(0, |a| a.milli())
            })
            .sum();
        let dir = self.qos_dir("Burstable");
        if let Err(error) = self.write(&dir, &Limits::shares(cpu_shares(milli))) {
            tracing::warn!(cgroup = %dir, %error, "weighing the burstable cgroup");
        }
    }

    /// Removes the cgroup of the pod with `uid` once nothing of it runs,
    /// in every hierarchy the runtime created it in.
    pub(crate) fn remove(&self, uid: &str) {
        for class in ["Guaranteed", "Burstable", "BestEffort"] {
            for dir in self.hierarchy.all_dirs(&self.pod_dir(class, uid)) {
                match std::fs::remove_dir(&dir) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(error) => {
                        tracing::warn!(cgroup = %dir.display(), %error, "removing a pod cgroup")
                    }
                }
            }
        }
    }

    /// Removes what is left of pods this node no longer runs (terminated,
    /// or gone while the node was stopped or killed): pod cgroups whose uid
    /// is not in `running`, holding no process, untouched for a minute — a
    /// pod another agent sharing the root is starting keeps its cgroup.
    fn sweep(&self, running: &std::collections::HashSet<&str>) {
        let settled = |dir: &Path| {
            std::fs::metadata(dir)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|at| at.elapsed().ok())
                .is_some_and(|age| age >= std::time::Duration::from_secs(60))
        };
        let mut removed = 0;
        for class in ["Guaranteed", "Burstable", "BestEffort"] {
            for parent in self.hierarchy.all_dirs(&self.qos_dir(class)) {
                for entry in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
                    let name = entry.file_name();
                    let Some(uid) = name.to_str().and_then(|n| n.strip_prefix("pod")) else {
                        continue;
                    };
                    let dir = entry.path();
                    if !running.contains(uid) && dir.is_dir() && settled(&dir) && remove_empty(&dir)
                    {
                        removed += 1;
                    }
                }
            }
        }
        if removed > 0 {
            tracing::info!(removed, "cgroups of pods that no longer run removed");
        }
    }

    /// Creates `cgroup` (and its parents) where `limits` are written, then
    /// writes them.
    fn write(&self, cgroup: &str, limits: &Limits) -> std::io::Result<()> {
        for (controller, file, value) in limits.files(&self.hierarchy) {
            let Some(dir) = self.hierarchy.dir(controller, cgroup) else {
                continue;
            };
            self.create(&dir)?;
            let written = std::fs::write(dir.join(file), &value).map_err(|e| {
                std::io::Error::new(e.kind(), format!("{}: {e}", dir.join(file).display()))
            });
            match written {
                // A v2 host whose pids controller is not delegated has no
                // pids.max: the cgroup goes without a process limit.
                Err(error) if controller == "pids" => {
                    tracing::debug!(%error, "no process limit for this cgroup")
                }
                other => other?,
            }
        }
        Ok(())
    }

    /// Creates `dir`; on v2 each new level's parent first hands its
    /// children the cpu and memory controllers, and pids where it has it.
    fn create(&self, dir: &Path) -> std::io::Result<()> {
        if dir.is_dir() {
            return Ok(());
        }
        if let Hierarchy::V2(mount) = &self.hierarchy {
            let mut missing = Vec::new();
            let mut at = dir.to_path_buf();
            while !at.is_dir() && at.starts_with(mount) {
                missing.push(at.clone());
                if !at.pop() {
                    break;
                }
            }
            for level in missing.iter().rev() {
                if let Some(parent) = level.parent() {
                    let control = parent.join("cgroup.subtree_control");
                    std::fs::write(&control, "+cpu +memory")?;
                    // Optional: a host without it gets no process limits.
                    let _ = std::fs::write(&control, "+pids");
                }
                std::fs::create_dir(level)?;
            }
            return Ok(());
        }
        std::fs::create_dir_all(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({"metadata": {"uid": "u1"}, "spec": spec}))
            .expect("pod")
    }

    const MOUNTINFO_V1: &str = "\
25 24 0:22 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
26 25 0:23 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
27 25 0:24 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
28 25 0:25 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
";

    #[test]
    fn hierarchies_are_read_from_mountinfo() {
        let v1 = Hierarchy::parse(MOUNTINFO_V1).expect("v1");
        assert_eq!(
            v1.dir("memory", "/kubepods/podu1"),
            Some(PathBuf::from("/sys/fs/cgroup/memory/kubepods/podu1"))
        );
        assert_eq!(v1.all_dirs("/kubepods").len(), 3);
        let v2 = Hierarchy::parse("30 25 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
        assert_eq!(v2, Some(Hierarchy::V2(PathBuf::from("/sys/fs/cgroup"))));
        assert_eq!(
            Hierarchy::parse("1 0 0:1 / / rw - ext4 /dev/vda rw\n"),
            None
        );
    }

    #[test]
    fn pod_limits_follow_upstream() {
        let exact = serde_json::json!({"cpu": "250m", "memory": "64Mi"});
        let cases = [
            // Guaranteed: shares, quota and memory of its limits, overhead added.
            (
                serde_json::json!({"overhead": {"cpu": "10m", "memory": "1Mi"},
                    "containers": [{"name": "c", "resources": {"requests": exact, "limits": exact}}]}),
                Limits {
                    shares: 266,
                    quota_us: Some(26_000),
                    memory: Some(65 << 20),
                    pids: None,
                },
            ),
            // Burstable limiting memory in every container, CPU in none.
            (
                serde_json::json!({"containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "32Mi"}}},
                    {"name": "b", "resources": {"limits": {"memory": "32Mi"}}}]}),
                Limits {
                    shares: 102,
                    quota_us: None,
                    memory: Some(64 << 20),
                    pids: None,
                },
            ),
            // Burstable where one container limits nothing: no caps.
            (
                serde_json::json!({"containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1", "memory": "32Mi"}}},
                    {"name": "b"}]}),
                Limits {
                    shares: 1024,
                    quota_us: None,
                    memory: None,
                    pids: None,
                },
            ),
            (
                serde_json::json!({"containers": [{"name": "c"}]}),
                Limits {
                    shares: 2,
                    quota_us: None,
                    memory: None,
                    pids: None,
                },
            ),
        ];
        for (spec, limits) in cases {
            assert_eq!(Limits::of_pod(&pod(spec.clone())), limits, "{spec}");
        }
    }

    #[test]
    fn a_sweep_removes_only_settled_cgroups_of_pods_gone() {
        let mount = tempfile::tempdir().expect("temp dir");
        let cgroups = PodCgroups {
            hierarchy: Hierarchy::V1(vec![(vec!["memory".into()], mount.path().to_path_buf())]),
            kubepods: "/kubepods".into(),
            pod_max_pids: None,
        };
        let besteffort = mount.path().join("kubepods/besteffort");
        let minutes_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
        for (uid, settled) in [("gone", true), ("known", true), ("starting", false)] {
            let dir = besteffort.join(format!("pod{uid}"));
            std::fs::create_dir_all(dir.join("container")).expect("dirs");
            if settled {
                let handle = std::fs::File::open(&dir).expect("open dir");
                handle.set_modified(minutes_ago).expect("mtime");
            }
        }
        cgroups.sweep(&["known"].into_iter().collect());
        assert!(!besteffort.join("podgone").exists());
        assert!(besteffort.join("podknown/container").is_dir());
        assert!(besteffort.join("podstarting/container").is_dir());
    }

    #[test]
    fn limits_become_each_versions_files() {
        let limits = Limits {
            shares: 1024,
            quota_us: Some(50_000),
            memory: Some(1 << 20),
            pids: Some(64),
        };
        let cases = [
            (
                Hierarchy::V1(Vec::new()),
                vec![
                    ("cpu", "cpu.shares", "1024"),
                    ("cpu", "cpu.cfs_period_us", "100000"),
                    ("cpu", "cpu.cfs_quota_us", "50000"),
                    ("memory", "memory.limit_in_bytes", "1048576"),
                    ("pids", "pids.max", "64"),
                ],
            ),
            (
                Hierarchy::V2(PathBuf::new()),
                vec![
                    ("cpu", "cpu.weight", "39"),
                    ("cpu", "cpu.max", "50000 100000"),
                    ("memory", "memory.max", "1048576"),
                    ("pids", "pids.max", "64"),
                ],
            ),
        ];
        for (hierarchy, expected) in cases {
            let files = limits.files(&hierarchy);
            let files: Vec<_> = files.iter().map(|(c, f, v)| (*c, *f, v.as_str())).collect();
            assert_eq!(files, expected, "{hierarchy:?}");
        }
    }
}
