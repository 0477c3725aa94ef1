//! Host clean-up for the tests that start containerd in a temp dir (the
//! node agent's and containerd harness's, and the CLI's end-to-end suites):
//! what such a containerd may leave behind — processes, mounts, a bridge,
//! pod cgroups —
//! found and removed the same way by every harness.

use std::path::Path;

/// The ids of every process on the host (the numeric entries of `/proc`).
pub fn all_pids() -> impl Iterator<Item = u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str().and_then(|s| s.parse().ok()))
}

/// Whether `pid` is a live process (not a zombie).
pub fn process_exists(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// The processes whose command line names `path` (a test's data dir, which
/// its containerd, containerd's shims and ctr name), zombies included, each
/// with its command line as read (arguments NUL-separated).
pub fn processes_naming(path: &Path) -> Vec<(u32, Vec<u8>)> {
    let needle = path.as_os_str().as_encoded_bytes();
    all_pids()
        .filter_map(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            cmd.windows(needle.len())
                .any(|w| w == needle)
                .then_some((pid, cmd))
        })
        .collect()
}

/// The live processes whose command line mentions `path`, each with its
/// command line spaced out for a message.
pub fn processes_mentioning(path: &Path) -> Vec<(u32, String)> {
    processes_naming(path)
        .into_iter()
        .filter(|(pid, _)| process_exists(*pid))
        .map(|(pid, cmd)| (pid, String::from_utf8_lossy(&cmd).replace('\0', " ")))
        .collect()
}

/// Kills (SIGKILL) every process whose command line mentions `path`.
pub fn kill_processes_mentioning(path: &Path) {
    for (pid, _) in processes_naming(path) {
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

/// Removes the cgroup tree `root` (a test's `--cgroup-root`), deepest
/// first, from every hierarchy. A container whose shim was killed with
/// containerd outlives it (reparented to init); what still runs in the tree
/// is killed first.
pub fn remove_cgroup_tree(root: &str) {
    fn remove(dir: &Path) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove(&entry.path());
            }
        }
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            // SAFETY: kill has no memory preconditions; the pid is one the
            // kernel lists in this test's own cgroup.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        // The kernel lets a cgroup go once its killed processes are reaped.
        for _ in 0..40 {
            if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    let relative = root.trim_start_matches('/');
    for hierarchy in std::fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
    {
        let dir = hierarchy.path().join(relative);
        if !relative.is_empty() && dir.is_dir() {
            remove(&dir);
        }
    }
}

/// Deletes nftables table `name` of `family` (`ip`, `inet`) if it is there:
/// a node's service, policy and pod-network rules outlive its process.
pub fn delete_nft_table(family: &str, name: &str) {
    let _ = std::process::Command::new("nft")
        .args(["delete", "table", family, name])
        .stderr(std::process::Stdio::null())
        .status();
}

/// Kills what is left running from `base`, unmounts under it, and deletes
/// the test's bridge.
pub fn cleanup_host(base: &Path, bridge: &str) {
    kill_processes_mentioning(base);
    unmount_under(base);
    delete_bridge(bridge);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_process_is_found_by_its_executable_path() {
        let me = std::process::id();
        let exe = std::env::current_exe().unwrap();
        assert!(process_exists(me));
        assert!(all_pids().any(|pid| pid == me));
        let found = processes_naming(&exe);
        assert!(found.iter().any(|(pid, _)| *pid == me), "{found:?}");
        let spaced = processes_mentioning(&exe);
        assert!(
            spaced
                .iter()
                .any(|(pid, cmd)| *pid == me && !cmd.contains('\0'))
        );
        assert!(processes_naming(Path::new("/no/such/skiff/test/dir")).is_empty());
    }
}
