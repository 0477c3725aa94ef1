//! Resource usage of the node, its pods and their containers, as the
//! kubelet's summary provider reports it: the node from the host's `/proc`
//! (`stat` for CPU time, `meminfo` for memory, which read the same under
//! cgroup v1 and v2), containers from the runtime's CRI `ListContainerStats`
//! and pods from `ListPodSandboxStats` (or the sum of their containers when
//! the runtime does not answer it). The node server renders one [`Summary`]
//! as `/stats/summary` ([`summary_json`]) or `/metrics/resource`
//! ([`resource_metrics`]).
//!
//! CPU rates (`usageNanoCores`) need two samples: the runtime's own when it
//! gives one, else the difference from the previous collection at least a
//! second older, kept here per node, pod and container.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::agent::node::host;
use crate::agent::pod::labels;
use crate::runtime::{Runtime, RuntimeError, cri_api};

/// Cumulative CPU time and, when known, the current rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CpuFigures {
    /// When sampled (nanoseconds since the epoch).
    pub time_ns: i64,
    /// CPU time used so far, in core-nanoseconds.
    pub usage_core_nano_seconds: u64,
    /// Recent use, in nanocores (a thousandth of a millicore).
    pub usage_nano_cores: Option<u64>,
}

/// Memory in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct MemoryFigures {
    /// When sampled (nanoseconds since the epoch).
    pub time_ns: i64,
    /// Memory that cannot be reclaimed without swapping: what limits and
    /// evictions are judged by, and what `kubectl top` shows.
    pub working_set_bytes: u64,
    /// All memory charged, page cache included.
    pub usage_bytes: u64,
    /// What is left before the limit (the node's capacity for the node).
    pub available_bytes: Option<u64>,
    /// Anonymous and swap cache memory.
    pub rss_bytes: Option<u64>,
    /// Page faults so far.
    pub page_faults: Option<u64>,
    /// Major page faults so far.
    pub major_page_faults: Option<u64>,
}

/// One running container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ContainerUsage {
    /// The container's name in the pod spec.
    pub name: String,
    /// The runtime's id of this instance.
    pub id: String,
    /// When it was created (nanoseconds since the epoch).
    pub start_ns: i64,
    /// CPU, when the runtime reported it.
    pub cpu: Option<CpuFigures>,
    /// Memory, when the runtime reported it.
    pub memory: Option<MemoryFigures>,
    /// Bytes in its writable layer, when the runtime reported them (it
    /// measures them every few seconds, so they lag a little).
    pub rootfs_bytes: Option<u64>,
    /// Bytes of its log files, when the provider knows where they are.
    pub logs_bytes: Option<u64>,
}

/// One pod with a ready sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PodUsage {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// The pod's UID.
    pub uid: String,
    /// When its sandbox was created (nanoseconds since the epoch).
    pub start_ns: i64,
    /// Its running containers.
    pub containers: Vec<ContainerUsage>,
    /// The whole pod's CPU.
    pub cpu: Option<CpuFigures>,
    /// The whole pod's memory.
    pub memory: Option<MemoryFigures>,
    /// Its volumes on this node's disk, by name, with the bytes they hold.
    pub volumes: Vec<(String, u64)>,
}

/// Everything one collection found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Summary {
    /// The node's name.
    pub node_name: String,
    /// When the host booted (nanoseconds since the epoch).
    pub node_start_ns: i64,
    /// The node's CPU.
    pub cpu: CpuFigures,
    /// The node's memory.
    pub memory: MemoryFigures,
    /// Pods with a ready sandbox, in namespace/name order.
    pub pods: Vec<PodUsage>,
    /// The agent's file system (capacity, available), which holds images,
    /// writable layers, logs and volumes alike.
    pub fs: Option<(u64, u64)>,
}

/// Why usage could not be collected.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StatsError {
    /// The runtime failed to list containers or their stats.
    #[error("runtime stats: {0}")]
    Runtime(#[from] RuntimeError),
    /// A host file could not be read.
    #[error("reading {path}: {source}")]
    Host {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A host file did not say what it should.
    #[error("{path}: {detail}")]
    HostFormat {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        detail: &'static str,
    },
}

/// A cumulative counter at one time.
#[derive(Debug, Clone, Copy)]
struct Sample {
    time_ns: i64,
    value: u64,
}

/// Rates over the previous sample of each counter (node, pods,
/// containers). A sample replaces the remembered one only once it is a
/// second newer, so scrapes close together still measure over a useful
/// window.
#[derive(Default)]
struct Rates {
    previous: Mutex<HashMap<String, Sample>>,
}

/// The shortest window a rate is measured over.
const MIN_WINDOW_NS: i64 = 1_000_000_000;

impl Rates {
    /// Rates of `samples` (key → sample) against the remembered ones;
    /// counters not in `samples` are forgotten.
    fn rates(&self, samples: &HashMap<String, Sample>) -> HashMap<String, u64> {
        let mut previous = self.previous.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = HashMap::new();
        let mut kept = HashMap::with_capacity(samples.len());
        for (key, now) in samples {
            let before = previous.get(key).copied();
            if let Some(before) = before
                && let Some(rate) = rate(before, *now)
            {
                out.insert(key.clone(), rate);
            }
            let keep = match before {
                Some(b) if now.time_ns - b.time_ns < MIN_WINDOW_NS && now.value >= b.value => b,
                _ => *now,
            };
            kept.insert(key.clone(), keep);
        }
        *previous = kept;
        out
    }
}

/// Nanocores between two samples, when they are far enough apart and the
/// counter did not go back (a restarted container).
fn rate(before: Sample, now: Sample) -> Option<u64> {
    let window = now.time_ns - before.time_ns;
    if window < MIN_WINDOW_NS || now.value < before.value {
        return None;
    }
    let used = u128::from(now.value - before.value);
    u64::try_from(used * 1_000_000_000 / window as u128).ok()
}

/// Collects usage for one node.
pub(crate) struct StatsProvider {
    runtime: Arc<dyn Runtime>,
    node_name: String,
    proc_root: PathBuf,
    rates: Rates,
    /// Cleared once the runtime says it has no `ListPodSandboxStats`.
    sandbox_stats: AtomicBool,
    /// Where pods' volumes and logs are (`DATA_DIR/agent`, the log root),
    /// for the file system figures.
    storage: Option<(PathBuf, PathBuf)>,
}

impl StatsProvider {
    /// A provider reading the host's `/proc`.
    pub(crate) fn new(runtime: Arc<dyn Runtime>, node_name: impl Into<String>) -> Self {
        Self::with_proc_root(runtime, node_name, "/proc")
    }

    /// A provider reading `proc_root` as the host's `/proc` (tests).
    pub(crate) fn with_proc_root(
        runtime: Arc<dyn Runtime>,
        node_name: impl Into<String>,
        proc_root: impl Into<PathBuf>,
    ) -> Self {
        Self {
            runtime,
            node_name: node_name.into(),
            proc_root: proc_root.into(),
            rates: Rates::default(),
            sandbox_stats: AtomicBool::new(true),
            storage: None,
        }
    }

    /// Also reports disk figures: the agent's file system from `agent_dir`,
    /// pods' volumes below it and their logs below `log_root`.
    pub(crate) fn with_storage(mut self, agent_dir: PathBuf, log_root: PathBuf) -> Self {
        self.storage = Some((agent_dir, log_root));
        self
    }

    /// The usage of the node and every pod with a ready sandbox now.
    pub(crate) async fn summary(&self) -> Result<Summary, StatsError> {
        let now_ns = now_ns();
        let (node_cpu_ns, boot_s) = self.node_cpu()?;
        let memory = self.node_memory(now_ns)?;

        let ready = cri_api::PodSandboxFilter {
            state: Some(cri_api::PodSandboxStateValue {
                state: cri_api::PodSandboxState::SandboxReady as i32,
            }),
            ..Default::default()
        };
        let sandboxes = self.runtime.list_pod_sandboxes(Some(ready)).await?;
        let running = cri_api::ContainerFilter {
            state: Some(cri_api::ContainerStateValue {
                state: cri_api::ContainerState::ContainerRunning as i32,
            }),
            ..Default::default()
        };
        let containers = self.runtime.list_containers(Some(running)).await?;
        let container_stats: HashMap<String, cri_api::ContainerStats> = self
            .runtime
            .list_container_stats(None)
            .await?
            .into_iter()
            .filter_map(|s| Some((s.attributes.as_ref()?.id.clone(), s)))
            .collect();
        let sandbox_stats = self.sandbox_stats().await;

        let mut samples = HashMap::new();
        samples.insert(
            String::new(),
            Sample {
                time_ns: now_ns,
                value: node_cpu_ns,
            },
        );
        let mut pods: Vec<PodUsage> = Vec::new();
        for sandbox in &sandboxes {
            let Some(meta) = &sandbox.metadata else {
                continue;
            };
            let uid = sandbox
                .labels
                .get(labels::POD_UID)
                .cloned()
                .unwrap_or_else(|| meta.uid.clone());
            // A pod briefly has two ready sandboxes while one is retired:
            // report it once, with the newer.
            if let Some(existing) = pods.iter_mut().find(|p| p.uid == uid) {
                existing.start_ns = existing.start_ns.max(sandbox.created_at);
                continue;
            }
            let mut pod = PodUsage {
                namespace: meta.namespace.clone(),
                name: meta.name.clone(),
                uid: uid.clone(),
                start_ns: sandbox.created_at,
                containers: Vec::new(),
                cpu: None,
                memory: None,
                volumes: self
                    .storage
                    .as_ref()
                    .map(|(agent_dir, _)| volume_usage(agent_dir, &uid))
                    .unwrap_or_default(),
            };
            for container in containers
                .iter()
                .filter(|c| c.labels.get(labels::POD_UID) == Some(&uid))
            {
                let name = labels::container_name(container);
                let stats = container_stats.get(&container.id);
                let cpu = stats.and_then(|s| cpu_figures(s.cpu.as_ref()));
                if let Some(cpu) = cpu {
                    samples.insert(
                        format!("c/{}", container.id),
                        Sample {
                            time_ns: cpu.time_ns,
                            value: cpu.usage_core_nano_seconds,
                        },
                    );
                }
                pod.containers.push(ContainerUsage {
                    name,
                    id: container.id.clone(),
                    start_ns: container.created_at,
                    cpu,
                    memory: stats.and_then(|s| memory_figures(s.memory.as_ref())),
                    rootfs_bytes: stats
                        .and_then(|s| s.writable_layer.as_ref()?.used_bytes.as_ref())
                        .map(|b| b.value),
                    logs_bytes: self.storage.as_ref().map(|(_, log_root)| {
                        let dir =
                            log_root.join(format!("{}_{}_{}", meta.namespace, meta.name, uid));
                        host::file_sizes(&dir.join(labels::container_name(container)))
                    }),
                });
            }
            pod.containers.sort_by(|a, b| a.name.cmp(&b.name));
            let whole = sandbox_stats
                .iter()
                .find(|s| s.attributes.as_ref().is_some_and(|a| a.id == sandbox.id))
                .and_then(|s| s.linux.as_ref());
            pod.cpu = whole
                .and_then(|l| cpu_figures(l.cpu.as_ref()))
                .or_else(|| sum_cpu(&pod.containers));
            pod.memory = whole
                .and_then(|l| memory_figures(l.memory.as_ref()))
                .or_else(|| sum_memory(&pod.containers));
            if let Some(cpu) = pod.cpu {
                samples.insert(
                    format!("p/{uid}"),
                    Sample {
                        time_ns: cpu.time_ns,
                        value: cpu.usage_core_nano_seconds,
                    },
                );
            }
            pods.push(pod);
        }
        let rates = self.rates.rates(&samples);
        let fill = |cpu: &mut Option<CpuFigures>, key: String| {
            if let Some(cpu) = cpu
                && cpu.usage_nano_cores.is_none()
            {
                cpu.usage_nano_cores = rates.get(&key).copied();
            }
        };
        for pod in &mut pods {
            for container in &mut pod.containers {
                fill(&mut container.cpu, format!("c/{}", container.id));
            }
            fill(&mut pod.cpu, format!("p/{}", pod.uid));
        }
        pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        Ok(Summary {
            node_name: self.node_name.clone(),
            node_start_ns: boot_s.saturating_mul(1_000_000_000),
            cpu: CpuFigures {
                time_ns: now_ns,
                usage_core_nano_seconds: node_cpu_ns,
                usage_nano_cores: rates.get("").copied(),
            },
            memory,
            pods,
            fs: self
                .storage
                .as_ref()
                .map(|(agent_dir, _)| host::disk_size(agent_dir)),
        })
    }

    /// The runtime's pod sandbox stats, or none when it has no such call
    /// (asked again only after a restart of the agent) or it failed.
    async fn sandbox_stats(&self) -> Vec<cri_api::PodSandboxStats> {
        if !self.sandbox_stats.load(Ordering::Relaxed) {
            return Vec::new();
        }
        match self.runtime.list_pod_sandbox_stats(None).await {
            Ok(stats) => stats,
            Err(RuntimeError::Cri(e)) if e.code() == tonic::Code::Unimplemented => {
                tracing::debug!(
                    "runtime has no ListPodSandboxStats; pods are their containers' sum"
                );
                self.sandbox_stats.store(false, Ordering::Relaxed);
                Vec::new()
            }
            Err(error) => {
                tracing::debug!(%error, "ListPodSandboxStats failed; pods are their containers' sum");
                Vec::new()
            }
        }
    }

    fn read(&self, file: &str) -> Result<String, StatsError> {
        let path = self.proc_root.join(file);
        std::fs::read_to_string(&path).map_err(|source| StatsError::Host { path, source })
    }

    /// The node's CPU time (core-nanoseconds) and boot time (seconds).
    fn node_cpu(&self) -> Result<(u64, i64), StatsError> {
        let text = self.read("stat")?;
        parse_proc_stat(&text, clock_ticks()).ok_or_else(|| StatsError::HostFormat {
            path: self.proc_root.join("stat"),
            detail: "no cpu or btime line",
        })
    }

    fn node_memory(&self, now_ns: i64) -> Result<MemoryFigures, StatsError> {
        let text = self.read("meminfo")?;
        parse_meminfo(&text, now_ns).ok_or_else(|| StatsError::HostFormat {
            path: self.proc_root.join("meminfo"),
            detail: "no MemTotal or MemFree",
        })
    }
}

fn now_ns() -> i64 {
    i64::try_from(Timestamp::now().as_nanosecond()).unwrap_or(i64::MAX)
}

/// The unit of `/proc/stat` (USER_HZ).
fn clock_ticks() -> u64 {
    // SAFETY: sysconf only reads a constant of the C library.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|t| *t > 0).unwrap_or(100)
}

/// CPU time of every CPU (core-nanoseconds; idle and iowait excluded) and
/// the boot time (seconds) from `/proc/stat`.
pub(crate) fn parse_proc_stat(text: &str, ticks_per_second: u64) -> Option<(u64, i64)> {
    let cpu = text.lines().find_map(|l| l.strip_prefix("cpu "))?;
    let fields: Vec<u64> = cpu
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is
    // already in user and nice).
    let busy: u64 = [0usize, 1, 2, 5, 6, 7]
        .iter()
        .filter_map(|i| fields.get(*i))
        .sum();
    let boot = text
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    let ns = u128::from(busy) * 1_000_000_000 / u128::from(ticks_per_second.max(1));
    Some((u64::try_from(ns).unwrap_or(u64::MAX), boot))
}

/// The node's memory from `/proc/meminfo`: in use is all but the free
/// memory, the working set that minus the inactive page cache (which the
/// kernel reclaims first), available the capacity left beside it.
pub(crate) fn parse_meminfo(text: &str, time_ns: i64) -> Option<MemoryFigures> {
    let total = host::meminfo_field(text, "MemTotal")?;
    let free = host::meminfo_field(text, "MemFree")?;
    let inactive_file = host::meminfo_field(text, "Inactive(file)").unwrap_or(0);
    let usage = total.saturating_sub(free);
    let working_set = usage.saturating_sub(inactive_file);
    let anon = host::meminfo_field(text, "AnonPages");
    Some(MemoryFigures {
        time_ns,
        working_set_bytes: working_set,
        usage_bytes: usage,
        available_bytes: Some(total.saturating_sub(working_set)),
        rss_bytes: anon,
        page_faults: None,
        major_page_faults: None,
    })
}

fn value(v: Option<&cri_api::UInt64Value>) -> Option<u64> {
    v.map(|v| v.value)
}

fn cpu_figures(cpu: Option<&cri_api::CpuUsage>) -> Option<CpuFigures> {
    let cpu = cpu?;
    Some(CpuFigures {
        time_ns: cpu.timestamp,
        usage_core_nano_seconds: value(cpu.usage_core_nano_seconds.as_ref())?,
        // containerd answers 0 until it has two samples of its own.
        usage_nano_cores: value(cpu.usage_nano_cores.as_ref()).filter(|n| *n > 0),
    })
}

fn memory_figures(memory: Option<&cri_api::MemoryUsage>) -> Option<MemoryFigures> {
    let memory = memory?;
    Some(MemoryFigures {
        time_ns: memory.timestamp,
        working_set_bytes: value(memory.working_set_bytes.as_ref())?,
        usage_bytes: value(memory.usage_bytes.as_ref()).unwrap_or(0),
        available_bytes: value(memory.available_bytes.as_ref()),
        rss_bytes: value(memory.rss_bytes.as_ref()),
        page_faults: value(memory.page_faults.as_ref()),
        major_page_faults: value(memory.major_page_faults.as_ref()),
    })
}

/// A pod's CPU as its containers' sum (rates only when every one has one).
fn sum_cpu(containers: &[ContainerUsage]) -> Option<CpuFigures> {
    let cpus: Vec<CpuFigures> = containers.iter().filter_map(|c| c.cpu).collect();
    if cpus.is_empty() || cpus.len() != containers.len() {
        return None;
    }
    Some(CpuFigures {
        time_ns: cpus.iter().map(|c| c.time_ns).max().unwrap_or(0),
        usage_core_nano_seconds: cpus.iter().map(|c| c.usage_core_nano_seconds).sum(),
        usage_nano_cores: cpus.iter().map(|c| c.usage_nano_cores).sum(),
    })
}

/// A pod's memory as its containers' sum.
fn sum_memory(containers: &[ContainerUsage]) -> Option<MemoryFigures> {
    let all: Vec<MemoryFigures> = containers.iter().filter_map(|c| c.memory).collect();
    if all.is_empty() || all.len() != containers.len() {
        return None;
    }
    Some(MemoryFigures {
        time_ns: all.iter().map(|m| m.time_ns).max().unwrap_or(0),
        working_set_bytes: all.iter().map(|m| m.working_set_bytes).sum(),
        usage_bytes: all.iter().map(|m| m.usage_bytes).sum(),
        ..Default::default()
    })
}

fn rfc3339(ns: i64) -> Value {
    match Timestamp::from_nanosecond(i128::from(ns)) {
        Ok(t) => json!(t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
        Err(_) => Value::Null,
    }
}

fn cpu_json(cpu: &CpuFigures) -> Value {
    let mut out = json!({
        "time": rfc3339(cpu.time_ns),
        "usageCoreNanoSeconds": cpu.usage_core_nano_seconds,
    });
    if let Some(rate) = cpu.usage_nano_cores {
        out["usageNanoCores"] = json!(rate);
    }
    out
}

fn memory_json(memory: &MemoryFigures) -> Value {
    let mut out = json!({
        "time": rfc3339(memory.time_ns),
        "usageBytes": memory.usage_bytes,
        "workingSetBytes": memory.working_set_bytes,
    });
    for (field, v) in [
        ("availableBytes", memory.available_bytes),
        ("rssBytes", memory.rss_bytes),
        ("pageFaults", memory.page_faults),
        ("majorPageFaults", memory.major_page_faults),
    ] {
        if let Some(v) = v {
            out[field] = json!(v);
        }
    }
    out
}

/// Each volume directory of the pod `uid` below `agent_dir`, with the bytes
/// it holds.
fn volume_usage(agent_dir: &std::path::Path, uid: &str) -> Vec<(String, u64)> {
    let dir = crate::agent::volumes::pod_dir(agent_dir, uid).join("volumes");
    let mut volumes: Vec<(String, u64)> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            (name, host::disk_usage(&entry.path()))
        })
        .collect();
    volumes.sort();
    volumes
}

/// A file system figure of the Summary API.
fn fs_json(time_ns: i64, used: u64, capacity_available: Option<(u64, u64)>) -> Value {
    let mut out = json!({"time": rfc3339(time_ns), "usedBytes": used});
    if let Some((capacity, available)) = capacity_available {
        out["capacityBytes"] = json!(capacity);
        out["availableBytes"] = json!(available);
    }
    out
}

/// The kubelet's Summary API document (`stats/v1alpha1`), with the CPU,
/// memory and disk figures this node collects (no network figures yet):
/// containers' writable layers (`rootfs`) and `logs`, pods' `volume`s and
/// `ephemeral-storage`, and the node's `fs` (which is also its image file
/// system).
pub(crate) fn summary_json(summary: &Summary) -> Value {
    let now = summary.memory.time_ns;
    let pods: Vec<Value> = summary
        .pods
        .iter()
        .map(|pod| {
            let containers: Vec<Value> = pod
                .containers
                .iter()
                .map(|c| {
                    let mut out = json!({"name": c.name, "startTime": rfc3339(c.start_ns)});
                    if let Some(cpu) = &c.cpu {
                        out["cpu"] = cpu_json(cpu);
                    }
                    if let Some(memory) = &c.memory {
                        out["memory"] = memory_json(memory);
                    }
                    if let Some(rootfs) = c.rootfs_bytes {
                        out["rootfs"] = fs_json(now, rootfs, summary.fs);
                    }
                    if let Some(logs) = c.logs_bytes {
                        out["logs"] = fs_json(now, logs, summary.fs);
                    }
                    out
                })
                .collect();
            let mut out = json!({
                "podRef": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
                "startTime": rfc3339(pod.start_ns),
                "containers": containers,
            });
            if let Some(cpu) = &pod.cpu {
                out["cpu"] = cpu_json(cpu);
            }
            if let Some(memory) = &pod.memory {
                out["memory"] = memory_json(memory);
            }
            if summary.fs.is_some() {
                let volumes: Vec<Value> = pod
                    .volumes
                    .iter()
                    .map(|(name, used)| {
                        let mut v = fs_json(now, *used, summary.fs);
                        v["name"] = json!(name);
                        v
                    })
                    .collect();
                let containers: u64 = pod
                    .containers
                    .iter()
                    .map(|c| c.rootfs_bytes.unwrap_or(0) + c.logs_bytes.unwrap_or(0))
                    .sum();
                let ephemeral = containers + pod.volumes.iter().map(|(_, used)| used).sum::<u64>();
                out["volume"] = json!(volumes);
                out["ephemeral-storage"] = fs_json(now, ephemeral, summary.fs);
            }
            out
        })
        .collect();
    let mut node = json!({
        "nodeName": summary.node_name,
        "startTime": rfc3339(summary.node_start_ns),
        "cpu": cpu_json(&summary.cpu),
        "memory": memory_json(&summary.memory),
    });
    if let Some((capacity, available)) = summary.fs {
        let fs = fs_json(now, capacity.saturating_sub(available), summary.fs);
        node["runtime"] = json!({"imageFs": fs});
        node["fs"] = fs;
    }
    json!({"node": node, "pods": pods})
}

/// A label value in the Prometheus text format.
pub(crate) fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

pub(crate) fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// The kubelet's `/metrics/resource` (Prometheus text format 0.0.4): the
/// node's, each pod's and each container's cumulative CPU seconds and
/// working set, each sample stamped with when it was taken (milliseconds),
/// and `resource_scrape_error` 0.
pub(crate) fn resource_metrics(summary: &Summary) -> String {
    let mut out = String::new();
    let ms = |ns: i64| ns / 1_000_000;
    let family = |out: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
    };
    let container_labels = |pod: &PodUsage, c: &ContainerUsage| {
        format!(
            "container=\"{}\",namespace=\"{}\",pod=\"{}\"",
            escape(&c.name),
            escape(&pod.namespace),
            escape(&pod.name)
        )
    };
    let pod_labels = |pod: &PodUsage| {
        format!(
            "namespace=\"{}\",pod=\"{}\"",
            escape(&pod.namespace),
            escape(&pod.name)
        )
    };
    let containers = || {
        summary
            .pods
            .iter()
            .flat_map(|p| p.containers.iter().map(move |c| (p, c)))
    };

    family(
        &mut out,
        "container_cpu_usage_seconds_total",
        "counter",
        "CPU time the container has used, in core-seconds",
    );
    for (pod, c) in containers() {
        if let Some(cpu) = &c.cpu {
            let _ = writeln!(
                out,
                "container_cpu_usage_seconds_total{{{}}} {} {}",
                container_labels(pod, c),
                seconds(cpu.usage_core_nano_seconds),
                ms(cpu.time_ns)
            );
        }
    }
    family(
        &mut out,
        "container_memory_working_set_bytes",
        "gauge",
        "The container's working set, in bytes",
    );
    for (pod, c) in containers() {
        if let Some(memory) = &c.memory {
            let _ = writeln!(
                out,
                "container_memory_working_set_bytes{{{}}} {} {}",
                container_labels(pod, c),
                memory.working_set_bytes,
                ms(memory.time_ns)
            );
        }
    }
    family(
        &mut out,
        "container_start_time_seconds",
        "gauge",
        "When the container started, in seconds since the epoch",
    );
    for (pod, c) in containers() {
        let _ = writeln!(
            out,
            "container_start_time_seconds{{{}}} {} {}",
            container_labels(pod, c),
            c.start_ns as f64 / 1e9,
            ms(c.start_ns)
        );
    }
    family(
        &mut out,
        "node_cpu_usage_seconds_total",
        "counter",
        "CPU time the node has used, in core-seconds",
    );
    let _ = writeln!(
        out,
        "node_cpu_usage_seconds_total {} {}",
        seconds(summary.cpu.usage_core_nano_seconds),
        ms(summary.cpu.time_ns)
    );
    family(
        &mut out,
        "node_memory_working_set_bytes",
        "gauge",
        "The node's working set, in bytes",
    );
    let _ = writeln!(
        out,
        "node_memory_working_set_bytes {} {}",
        summary.memory.working_set_bytes,
        ms(summary.memory.time_ns)
    );
    family(
        &mut out,
        "pod_cpu_usage_seconds_total",
        "counter",
        "CPU time the pod has used, in core-seconds",
    );
    for pod in &summary.pods {
        if let Some(cpu) = &pod.cpu {
            let _ = writeln!(
                out,
                "pod_cpu_usage_seconds_total{{{}}} {} {}",
                pod_labels(pod),
                seconds(cpu.usage_core_nano_seconds),
                ms(cpu.time_ns)
            );
        }
    }
    family(
        &mut out,
        "pod_memory_working_set_bytes",
        "gauge",
        "The pod's working set, in bytes",
    );
    for pod in &summary.pods {
        if let Some(memory) = &pod.memory {
            let _ = writeln!(
                out,
                "pod_memory_working_set_bytes{{{}}} {} {}",
                pod_labels(pod),
                memory.working_set_bytes,
                ms(memory.time_ns)
            );
        }
    }
    family(
        &mut out,
        "resource_scrape_error",
        "gauge",
        "1 when the runtime's container figures could not be had, else 0",
    );
    out.push_str("resource_scrape_error 0\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_counts_busy_time_without_idle_and_iowait() {
        let text = "cpu  100 20 30 5000 70 1 2 3 0 0\ncpu0 1 2 3 4\nbtime 1700000000\n";
        let (ns, boot) = parse_proc_stat(text, 100).unwrap();
        // user+nice+system+irq+softirq+steal = 156 ticks of 10 ms.
        assert_eq!(ns, 1_560_000_000);
        assert_eq!(boot, 1_700_000_000);
        assert!(parse_proc_stat("cpu0 1 2\n", 100).is_none());
    }

    #[test]
    fn meminfo_working_set_leaves_out_free_and_inactive_cache() {
        let text =
            "MemTotal: 1000 kB\nMemFree: 400 kB\nInactive(file): 100 kB\nAnonPages: 250 kB\n";
        let m = parse_meminfo(text, 7).unwrap();
        assert_eq!(m.usage_bytes, 600 * 1024);
        assert_eq!(m.working_set_bytes, 500 * 1024);
        assert_eq!(m.available_bytes, Some(500 * 1024));
        assert_eq!(m.rss_bytes, Some(250 * 1024));
        assert!(parse_meminfo("MemTotal: 1 kB\n", 0).is_none());
    }

    #[test]
    fn rates_need_a_second_between_samples_and_a_counter_that_grew() {
        let rates = Rates::default();
        let at = |t: i64, v: u64| {
            HashMap::from([(
                "k".to_string(),
                Sample {
                    time_ns: t,
                    value: v,
                },
            )])
        };
        assert!(rates.rates(&at(0, 0)).is_empty());
        // Too close to the first: no rate, and the first is kept.
        assert!(rates.rates(&at(500_000_000, 100)).is_empty());
        // Half a core over two seconds since the first sample.
        assert_eq!(
            rates.rates(&at(2_000_000_000, 1_000_000_000)).get("k"),
            Some(&500_000_000)
        );
        // A counter that went back (restart) has no rate.
        assert!(rates.rates(&at(4_000_000_000, 5)).is_empty());
    }

    fn summary() -> Summary {
        Summary {
            node_name: "n1".into(),
            node_start_ns: 1_700_000_000_000_000_000,
            cpu: CpuFigures {
                time_ns: 1_800_000_000_000_000_000,
                usage_core_nano_seconds: 12_500_000_000,
                usage_nano_cores: Some(250_000_000),
            },
            memory: MemoryFigures {
                time_ns: 1_800_000_000_000_000_000,
                working_set_bytes: 1024,
                usage_bytes: 2048,
                ..Default::default()
            },
            pods: vec![PodUsage {
                namespace: "default".into(),
                name: "web\"1".into(),
                uid: "u1".into(),
                start_ns: 1_790_000_000_000_000_000,
                containers: vec![ContainerUsage {
                    rootfs_bytes: Some(5 << 20),
                    logs_bytes: Some(1024),
                    name: "main".into(),
                    id: "c1".into(),
                    start_ns: 1_790_000_000_000_000_000,
                    cpu: Some(CpuFigures {
                        time_ns: 1_800_000_000_000_000_000,
                        usage_core_nano_seconds: 1_500_000_000,
                        usage_nano_cores: None,
                    }),
                    memory: Some(MemoryFigures {
                        time_ns: 1_800_000_000_000_000_000,
                        working_set_bytes: 4096,
                        usage_bytes: 8192,
                        ..Default::default()
                    }),
                }],
                cpu: None,
                memory: None,
                volumes: vec![("scratch".into(), 4096)],
            }],
            fs: Some((100 << 30, 40 << 30)),
        }
    }

    #[test]
    fn resource_metrics_are_the_kubelets_families_with_timestamps() {
        let text = resource_metrics(&summary());
        assert!(text.contains("# TYPE node_cpu_usage_seconds_total counter\n"));
        assert!(text.contains("node_cpu_usage_seconds_total 12.5 1800000000000\n"));
        assert!(text.contains("node_memory_working_set_bytes 1024 1800000000000\n"));
        assert!(text.contains(
            "container_cpu_usage_seconds_total{container=\"main\",namespace=\"default\",pod=\"web\\\"1\"} 1.5 1800000000000\n"
        ));
        assert!(text.contains(
            "container_memory_working_set_bytes{container=\"main\",namespace=\"default\",pod=\"web\\\"1\"} 4096 1800000000000\n"
        ));
        assert!(text.contains("resource_scrape_error 0\n"));
        // The pod has no figures of its own: no pod sample is invented.
        assert!(!text.contains("pod_cpu_usage_seconds_total{"));
    }

    #[test]
    fn the_summary_document_has_the_kubelets_field_names() {
        let doc = summary_json(&summary());
        assert_eq!(doc["node"]["nodeName"], "n1");
        assert_eq!(doc["node"]["cpu"]["usageNanoCores"], 250_000_000);
        assert_eq!(
            doc["node"]["cpu"]["usageCoreNanoSeconds"],
            12_500_000_000u64
        );
        assert_eq!(doc["node"]["memory"]["workingSetBytes"], 1024);
        assert_eq!(doc["node"]["startTime"], "2023-11-14T22:13:20Z");
        let pod = &doc["pods"][0];
        assert_eq!(pod["podRef"]["uid"], "u1");
        assert_eq!(pod["containers"][0]["name"], "main");
        assert_eq!(pod["containers"][0]["memory"]["workingSetBytes"], 4096);
        assert!(pod["containers"][0]["cpu"].get("usageNanoCores").is_none());
        // Disk: the writable layer and logs of each container, each volume,
        // the pod's ephemeral storage in all, and the node's file system.
        assert_eq!(pod["containers"][0]["rootfs"]["usedBytes"], 5u64 << 20);
        assert_eq!(pod["containers"][0]["logs"]["usedBytes"], 1024);
        assert_eq!(pod["volume"][0]["name"], "scratch");
        assert_eq!(pod["volume"][0]["usedBytes"], 4096);
        assert_eq!(
            pod["ephemeral-storage"]["usedBytes"],
            (5u64 << 20) + 1024 + 4096
        );
        assert_eq!(doc["node"]["fs"]["capacityBytes"], 100u64 << 30);
        assert_eq!(doc["node"]["fs"]["availableBytes"], 40u64 << 30);
        assert_eq!(doc["node"]["fs"]["usedBytes"], 60u64 << 30);
        assert_eq!(doc["node"]["runtime"]["imageFs"], doc["node"]["fs"]);
    }

    #[test]
    fn pods_sum_their_containers_only_when_every_one_reported() {
        let c = |cpu: Option<u64>| ContainerUsage {
            rootfs_bytes: None,
            logs_bytes: None,
            name: "c".into(),
            id: "c".into(),
            start_ns: 0,
            cpu: cpu.map(|v| CpuFigures {
                time_ns: 1,
                usage_core_nano_seconds: v,
                usage_nano_cores: Some(v),
            }),
            memory: None,
        };
        let sum = sum_cpu(&[c(Some(1)), c(Some(2))]).unwrap();
        assert_eq!(sum.usage_core_nano_seconds, 3);
        assert_eq!(sum.usage_nano_cores, Some(3));
        assert!(sum_cpu(&[c(Some(1)), c(None)]).is_none());
        assert!(sum_memory(&[c(Some(1))]).is_none());
    }

    #[test]
    fn volumes_are_measured_as_du_measures_them_each_by_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let volumes = crate::agent::volumes::pod_dir(dir.path(), "u1").join("volumes");
        std::fs::create_dir_all(volumes.join("empty")).unwrap();
        std::fs::create_dir_all(volumes.join("scratch")).unwrap();
        std::fs::write(volumes.join("scratch/blob"), vec![1u8; 2 << 20]).unwrap();
        let measured = volume_usage(dir.path(), "u1");
        let names: Vec<&str> = measured.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["empty", "scratch"]);
        assert!(measured[1].1 >= 2 << 20, "{measured:?}");
        assert!(volume_usage(dir.path(), "u2").is_empty());
    }
}
