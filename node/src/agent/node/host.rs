//! Facts about this machine for the Node object: name, addresses, capacity
//! (CPU and memory from /proc, narrowed by the cgroup limits skiff runs
//! under; disk from the agent's file system), OS and kernel, and the
//! pressure signals behind the MemoryPressure/DiskPressure/PIDPressure
//! conditions.

use std::net::IpAddr;
use std::path::Path;

use super::eviction::EvictionHard;

/// Pods per node unless `--max-pods` says otherwise (the kubelet's
/// default).
pub const DEFAULT_MAX_PODS: u32 = 110;

/// What the Node reports about the machine.
#[derive(Debug, Clone, PartialEq)]
pub struct HostFacts {
    /// Host name (lowercased).
    pub hostname: String,
    /// The address other nodes reach this one on.
    pub internal_ip: String,
    /// The address it is reached on from outside the cluster
    /// (`--node-external-ip`), when it has one.
    pub external_ip: Option<String>,
    /// Whole CPUs available.
    pub cpus: u32,
    /// Memory in bytes.
    pub memory: u64,
    /// Size of the agent's file system in bytes.
    pub disk: u64,
    /// How many pods the node takes (`--max-pods`): its `pods` capacity.
    pub max_pods: u32,
    /// How many processes the kernel allows (the lesser of `pid_max` and
    /// `threads-max`); 0 when unknown.
    pub max_pids: u64,
    /// `PRETTY_NAME` from /etc/os-release.
    pub os_image: String,
    /// `uname -r`.
    pub kernel: String,
    /// /etc/machine-id.
    pub machine_id: String,
    /// The boot id.
    pub boot_id: String,
}

impl HostFacts {
    /// The node's capacity, as its allocatable is counted from.
    pub fn capacity(&self) -> super::reserved::Capacity {
        super::reserved::Capacity {
            cpu_milli: u64::from(self.cpus) * 1000,
            memory: self.memory,
            ephemeral_storage: self.disk,
            pids: self.max_pids,
        }
    }
}

/// Reads the host's facts; anything unreadable gets a harmless default.
pub fn read(agent_dir: &Path) -> HostFacts {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    let hostname = {
        let h = read("/proc/sys/kernel/hostname").to_lowercase();
        if h.is_empty() {
            "localhost".to_string()
        } else {
            h
        }
    };
    HostFacts {
        hostname,
        internal_ip: internal_ip().to_string(),
        external_ip: None,
        cpus: cpus(),
        memory: memory(),
        disk: disk_size(agent_dir).0,
        max_pods: DEFAULT_MAX_PODS,
        max_pids: ["/proc/sys/kernel/pid_max", "/proc/sys/kernel/threads-max"]
            .iter()
            .filter_map(|p| read(p).parse::<u64>().ok())
            .min()
            .unwrap_or(0),
        os_image: os_image(&read("/etc/os-release")),
        kernel: read("/proc/sys/kernel/osrelease"),
        machine_id: read("/etc/machine-id"),
        boot_id: read("/proc/sys/kernel/random/boot_id"),
    }
}

/// The first non-loopback IPv4 address, else loopback.
pub fn internal_ip() -> IpAddr {
    if_addrs::get_if_addrs()
        .ok()
        .into_iter()
        .flatten()
        .filter(|i| !i.is_loopback())
        .map(|i| i.ip())
        .find(|ip| ip.is_ipv4() && !ip.to_string().starts_with("169.254."))
        .unwrap_or(IpAddr::from([127, 0, 0, 1]))
}

fn cpus() -> u32 {
    let online = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    // cgroup v2 `cpu.max`: "quota period" or "max period".
    let limited = std::fs::read_to_string("/sys/fs/cgroup/cpu.max")
        .ok()
        .and_then(|s| {
            let mut parts = s.split_whitespace();
            let quota: f64 = parts.next()?.parse().ok()?;
            let period: f64 = parts.next()?.parse().ok()?;
            Some((quota / period).ceil() as u32)
        });
    limited.map_or(online, |l| l.clamp(1, online))
}

fn meminfo(field: &str) -> Option<u64> {
    meminfo_field(&std::fs::read_to_string("/proc/meminfo").ok()?, field)
}

/// The host's memory now: (total, available) bytes, from one read of
/// `/proc/meminfo`.
pub(crate) fn memory_now() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    Some((
        meminfo_field(&text, "MemTotal")?,
        meminfo_field(&text, "MemAvailable")?,
    ))
}

/// One field of `/proc/meminfo`'s text, in bytes (the file says KiB).
pub fn meminfo_field(text: &str, field: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kib| kib * 1024)
}

fn memory() -> u64 {
    let total = meminfo("MemTotal").unwrap_or(0);
    let limit = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    limit.map_or(total, |l| l.min(total))
}

/// (size, available) of the file system holding `path`, in bytes.
pub fn disk_size(path: &Path) -> (u64, u64) {
    let mut probe = path.to_path_buf();
    while !probe.exists() {
        if !probe.pop() {
            break;
        }
    }
    let Ok(c) = std::ffi::CString::new(probe.as_os_str().as_encoded_bytes()) else {
        return (0, 0);
    };
    // SAFETY: `stat` is plain data, written by statvfs; `c` is a valid
    // NUL-terminated path for the duration of the call.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut stat) } != 0 {
        return (0, 0);
    }
    let block = stat.f_frsize as u64;
    (stat.f_blocks as u64 * block, stat.f_bavail as u64 * block)
}

fn os_image(os_release: &str) -> String {
    os_release
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| "Linux".to_string())
}

/// Bytes allocated below `path`, as `du` counts them; links are not
/// followed.
pub(crate) fn disk_usage(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    let own = meta.blocks() * 512;
    if !meta.is_dir() {
        return own;
    }
    let children: u64 = std::fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| disk_usage(&entry.path()))
        .sum();
    own + children
}

/// The sizes of the files in `dir` (a container's logs).
pub(crate) fn file_sizes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.metadata().ok())
        .filter(|meta| meta.is_file())
        .map(|meta| meta.len())
        .sum()
}

/// The pressure signals, each true when under pressure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pressure {
    /// Available memory below `memory.available`.
    pub memory: bool,
    /// The agent's file system below `nodefs.available`.
    pub disk: bool,
    /// More than 90% of pid_max in use.
    pub pids: bool,
}

/// Reads the current pressure signals against the hard eviction
/// thresholds.
pub fn pressure(agent_dir: &Path, thresholds: &EvictionHard) -> Pressure {
    let memory = memory_now()
        .is_some_and(|(total, available)| thresholds.memory_available.crossed(available, total));
    let (size, available) = disk_size(agent_dir);
    let disk = thresholds.nodefs_available.crossed(available, size);
    let pid_max: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(u64::MAX);
    let pids_in_use = std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .bytes()
                        .all(|b| b.is_ascii_digit())
                })
                .count() as u64
        })
        .unwrap_or(0);
    Pressure {
        memory,
        disk,
        pids: pids_in_use * 10 > pid_max * 9,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_image_is_the_pretty_name() {
        assert_eq!(
            os_image("NAME=\"Debian\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"),
            "Debian GNU/Linux 12 (bookworm)"
        );
        assert_eq!(os_image(""), "Linux");
    }

    #[test]
    fn this_machine_has_cpus_memory_and_a_disk() {
        let dir = tempfile::tempdir().unwrap();
        let facts = read(dir.path());
        assert!(facts.cpus >= 1);
        assert!(facts.memory > 100 << 20);
        assert!(facts.disk > 0);
        assert!(!facts.kernel.is_empty());
        assert!(!pressure(dir.path(), &EvictionHard::default()).pids);
    }

    #[test]
    fn disk_pressure_follows_the_nodefs_threshold() {
        let dir = tempfile::tempdir().unwrap();
        let at = |spelling: &str| pressure(dir.path(), &spelling.parse().unwrap()).disk;
        assert!(at("nodefs.available<100%"), "no disk is ever wholly free");
        assert!(!at("nodefs.available<0%"));
        assert!(
            !at("nodefs.available<1"),
            "one byte free is above a one-byte threshold"
        );
    }
}
