//! Host clean-up shared by the agent and containerd tests: what a containerd
//! started in a temp dir may leave behind (processes, mounts, a bridge), found
//! and removed the same way by both harnesses.

use std::path::Path;

/// Whether `pid` is a live process (not a zombie).
pub fn process_exists(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// PIDs whose command line mentions `path` (containerd, its shims, ctr).
pub fn processes_mentioning(path: &Path) -> Vec<(u32, String)> {
    let needle = path.as_os_str().as_encoded_bytes();
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        if cmdline.windows(needle.len()).any(|w| w == needle) && process_exists(pid) {
            found.push((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
        }
    }
    found
}

/// Kills (SIGKILL) every process whose command line mentions `path`.
pub fn kill_processes_mentioning(path: &Path) {
    for (pid, _) in processes_mentioning(path) {
        if let Ok(pid) = libc::pid_t::try_from(pid) {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// Lazily unmounts whatever containerd left mounted under `base` (rootfs
/// overlays, shm, network namespaces), deepest first.
pub fn unmount_under(base: &Path) {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let prefix = base.to_string_lossy().into_owned();
    let mut points: Vec<&str> = mounts
        .lines()
        .filter_map(|l| l.split(' ').nth(1))
        .filter(|p| p.starts_with(&prefix))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in points {
        if let Ok(c) = std::ffi::CString::new(p) {
            // SAFETY: `c` is a valid NUL-terminated path for the call's duration.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// Whether the network interface `bridge` exists.
pub fn bridge_exists(bridge: &str) -> bool {
    Path::new("/sys/class/net").join(bridge).exists()
}

/// Deletes the network interface `bridge` if it exists.
pub fn delete_bridge(bridge: &str) {
    if bridge_exists(bridge) {
        let _ = std::process::Command::new("ip")
            .args(["link", "delete", bridge])
            .status();
    }
}
