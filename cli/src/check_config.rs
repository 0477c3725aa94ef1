//! `skiff check-config`: whether this host can run `skiff server`, one
//! pass/fail line per item as k3s's check-config prints them — kernel
//! features, the binaries the node agent starts, and the ports the server
//! listens on. Required items decide the exit code; optional ones only warn.

use std::io::Read as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Flags of `skiff check-config`: the server's own flags (and `SKIFF_*`
/// variables) that change what is checked.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct CheckConfigArgs {
    /// Port of the HTTPS API.
    #[arg(long, env = "SKIFF_HTTPS_LISTEN_PORT", default_value_t = 6443)]
    pub https_listen_port: u16,

    /// Port of the node server.
    #[arg(long, env = "SKIFF_KUBELET_PORT", default_value_t = 10250)]
    pub kubelet_port: u16,

    /// Where the cluster DNS listens (UDP and TCP).
    #[arg(long, env = "SKIFF_CLUSTER_DNS_LISTEN", default_value = "0.0.0.0:53")]
    pub cluster_dns_listen: SocketAddr,

    /// The server will run without the cluster DNS.
    #[arg(long, env = "SKIFF_DISABLE_CLUSTER_DNS")]
    pub disable_cluster_dns: bool,

    /// The server will run without the node agent: no containerd, CNI or
    /// node server port is needed.
    #[arg(long, env = "SKIFF_DISABLE_AGENT")]
    pub disable_agent: bool,

    /// The server will run without the service proxy (no `nft` needed).
    #[arg(long, env = "SKIFF_DISABLE_KUBE_PROXY")]
    pub disable_kube_proxy: bool,

    /// The server will run without network policy enforcement (with the
    /// service proxy also off, no `nft` is needed).
    #[arg(long, env = "SKIFF_DISABLE_NETWORK_POLICY")]
    pub disable_network_policy: bool,

    /// How pod traffic will cross between nodes: with `vxlan` (the
    /// default) the kernel's vxlan device is required.
    #[arg(long, env = "SKIFF_FLANNEL_BACKEND", default_value = "vxlan")]
    pub flannel_backend: skiff_node::agent::overlay::Backend,

    /// The built-in ingress's ports (or that it is disabled).
    #[command(flatten)]
    pub ingress: crate::ingress::IngressFlags,
}

/// Runs every check, prints one line each, and fails when a required one
/// did not pass.
pub(crate) fn run(args: CheckConfigArgs) -> anyhow::Result<()> {
    let host = Host::real();
    let results = checks(&host, &args);
    let mut failed = 0;
    for result in &results {
        println!("{}", result.line());
        if result.required && !result.passed {
            failed += 1;
        }
    }
    if failed > 0 {
        anyhow::bail!("{failed} required check(s) failed");
    }
    println!("all required checks passed");
    Ok(())
}

/// The outcome of one item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CheckResult {
    /// What was checked, e.g. `kernel: overlay`.
    pub item: String,
    /// Whether it is fine.
    pub passed: bool,
    /// Whether a failure makes the whole check fail.
    pub required: bool,
    /// How it was found, or what is wrong.
    pub detail: String,
}

impl CheckResult {
    fn line(&self) -> String {
        let verdict = match (self.passed, self.required) {
            (true, _) => "pass",
            (false, true) => "FAIL",
            (false, false) => "warn",
        };
        format!("{verdict}  {}: {}", self.item, self.detail)
    }
}

/// Where the host's facts are read: `/` normally, a fake tree in tests.
struct Host {
    root: PathBuf,
    release: String,
    /// The kernel's build configuration, when it can be read.
    config: Option<String>,
    /// `$PATH`, to find binaries as the node agent does.
    path: String,
}

impl Host {
    fn real() -> Self {
        let root = PathBuf::from("/");
        let release = read(&root, "proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string();
        let config = kernel_config(&root, &release);
        Self {
            root,
            release,
            config,
            path: std::env::var("PATH").unwrap_or_default(),
        }
    }

    fn file(&self, relative: &str) -> Option<String> {
        read(&self.root, relative)
    }

    fn exists(&self, relative: &str) -> bool {
        self.root.join(relative).exists()
    }

    fn modules_file(&self, name: &str) -> Option<String> {
        self.file(&format!("lib/modules/{}/{name}", self.release))
    }

    /// What the kernel configuration says of `symbol`: `y`, `m` or nothing.
    fn config_value(&self, symbol: &str) -> Option<char> {
        let config = self.config.as_deref()?;
        let prefix = format!("{symbol}=");
        config
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|v| v.chars().next())
    }

    /// The first executable `name` on `$PATH`.
    fn which(&self, name: &str) -> Option<PathBuf> {
        std::env::split_paths(&self.path)
            .map(|dir| dir.join(name))
            .find(|p| is_executable(p))
    }
}

fn read(root: &Path, relative: &str) -> Option<String> {
    std::fs::read_to_string(root.join(relative)).ok()
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The kernel configuration from `/proc/config.gz` (through `gzip -dc`, as
/// k3s's script does) or `/boot/config-<release>`.
fn kernel_config(root: &Path, release: &str) -> Option<String> {
    let gz = root.join("proc/config.gz");
    if gz.exists()
        && let Ok(out) = Command::new("gzip").arg("-dc").arg(&gz).output()
        && out.status.success()
    {
        return Some(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let mut text = String::new();
    std::fs::File::open(root.join(format!("boot/config-{release}")))
        .and_then(|mut f| f.read_to_string(&mut text))
        .ok()?;
    Some(text)
}

/// A kernel feature skiff relies on.
struct Feature {
    /// The module's name (also its `/sys/module` directory).
    module: &'static str,
    /// Its kernel configuration symbol.
    symbol: &'static str,
    /// What needs it, for the line printed.
    used_for: &'static str,
    required: bool,
    /// Whether the kernel loads the module by itself on first use (a
    /// mount, a netlink request); br_netfilter it does not.
    autoloads: bool,
    /// A file whose presence shows the feature is active.
    evidence: Option<&'static str>,
}

const FEATURES: &[Feature] = &[
    Feature {
        module: "overlay",
        symbol: "CONFIG_OVERLAY_FS",
        used_for: "containerd's overlayfs snapshotter",
        required: true,
        autoloads: true,
        evidence: None,
    },
    Feature {
        module: "br_netfilter",
        symbol: "CONFIG_BRIDGE_NETFILTER",
        used_for: "Service traffic and network policies between pods on one bridge",
        required: true,
        autoloads: false,
        evidence: Some("proc/sys/net/bridge/bridge-nf-call-iptables"),
    },
    Feature {
        module: "nf_tables",
        symbol: "CONFIG_NF_TABLES",
        used_for: "the service proxy's and network policies' nftables rules",
        required: true,
        autoloads: true,
        evidence: None,
    },
    Feature {
        module: "vxlan",
        symbol: "CONFIG_VXLAN",
        used_for: "overlay networks between nodes",
        required: false,
        autoloads: true,
        evidence: None,
    },
];

fn checks(host: &Host, args: &CheckConfigArgs) -> Vec<CheckResult> {
    let vxlan =
        !args.disable_agent && args.flannel_backend == skiff_node::agent::overlay::Backend::Vxlan;
    let mut results: Vec<CheckResult> = FEATURES
        .iter()
        .map(|f| {
            let mut result = kernel(host, f);
            // The overlay the node agent will set up needs it.
            result.required |= vxlan && f.module == "vxlan";
            result
        })
        .collect();
    results.push(cgroups(host));
    if vxlan {
        results.push(vxlan_link());
    }
    if !args.disable_agent {
        for name in ["containerd", "containerd-shim-runc-v2", "runc", "ctr"] {
            results.push(binary(host, name, true));
        }
        if !args.disable_kube_proxy || !args.disable_network_policy {
            results.push(binary(host, "nft", true));
        }
        let cni = Path::new(skiff_node::containerd::config::DEFAULT_CNI_BIN_DIR);
        for plugin in ["bridge", "host-local", "portmap", "loopback"] {
            results.push(cni_plugin(&host.root, cni, plugin));
        }
    }
    let any = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
    results.push(tcp_port(
        SocketAddr::new(any, args.https_listen_port),
        "API server",
    ));
    if !args.disable_agent {
        results.push(tcp_port(
            SocketAddr::new(any, args.kubelet_port),
            "node server",
        ));
    }
    if !args.disable_cluster_dns {
        results.push(tcp_port(args.cluster_dns_listen, "cluster DNS"));
        results.push(udp_port(args.cluster_dns_listen, "cluster DNS"));
    }
    if !args.ingress.disable_ingress {
        for (port, what) in [
            (args.ingress.ingress_http_port, "ingress HTTP"),
            (args.ingress.ingress_https_port, "ingress HTTPS"),
        ] {
            results.push(tcp_port(SocketAddr::new(any, port), what));
        }
    }
    results
}

/// Whether `feature` is in the running kernel, or will be when first used.
fn kernel(host: &Host, feature: &Feature) -> CheckResult {
    let module = feature.module;
    let result = |passed: bool, detail: String| CheckResult {
        item: format!("kernel: {module}"),
        passed,
        required: feature.required,
        detail: format!("{detail} (for {})", feature.used_for),
    };
    let loaded = host.exists(&format!("sys/module/{module}"))
        || host.file("proc/modules").is_some_and(|m| {
            m.lines()
                .any(|l| l.split_whitespace().next() == Some(module))
        });
    if loaded {
        return result(true, "loaded".into());
    }
    let active = match feature.evidence {
        Some(path) => host.exists(path),
        None if module == "overlay" => host.file("proc/filesystems").is_some_and(|fs| {
            fs.lines()
                .any(|l| l.split_whitespace().last() == Some("overlay"))
        }),
        None => false,
    };
    if active {
        return result(true, "active".into());
    }
    // Entries are paths such as `kernel/net/bridge/br_netfilter.ko[.xz]`.
    let names_module = |path: &str| {
        let file = path.rsplit('/').next().unwrap_or(path);
        file.strip_prefix(module)
            .is_some_and(|rest| rest == ".ko" || rest.starts_with(".ko."))
    };
    let builtin = host
        .modules_file("modules.builtin")
        .is_some_and(|list| list.lines().any(|l| names_module(l.trim())));
    if builtin || host.config_value(feature.symbol) == Some('y') {
        return result(true, "built into the kernel".into());
    }
    let loadable = host.config_value(feature.symbol) == Some('m')
        || host.modules_file("modules.dep").is_some_and(|deps| {
            deps.lines()
                .any(|l| l.split(':').next().is_some_and(names_module))
        });
    match (loadable, feature.autoloads) {
        (true, true) => result(true, "module, loaded on first use".into()),
        (true, false) => result(
            false,
            format!("module not loaded; run `modprobe {module}` and add it to /etc/modules-load.d"),
        ),
        (false, _) => result(false, "not in this kernel".into()),
    }
}

/// cgroups: v2 (unified) with the controllers pods are limited by, or a v1
/// hierarchy with them (containerd and runc handle both).
fn cgroups(host: &Host) -> CheckResult {
    const WANTED: [&str; 4] = ["cpu", "cpuset", "memory", "pids"];
    let result = |passed: bool, detail: String| CheckResult {
        item: "kernel: cgroups".into(),
        passed,
        required: true,
        detail,
    };
    if let Some(controllers) = host.file("sys/fs/cgroup/cgroup.controllers") {
        let have: Vec<&str> = controllers.split_whitespace().collect();
        let missing: Vec<&str> = WANTED.into_iter().filter(|c| !have.contains(c)).collect();
        return if missing.is_empty() {
            result(true, format!("v2, controllers {}", WANTED.join(" ")))
        } else {
            result(
                false,
                format!("v2 without the {} controller(s)", missing.join(" ")),
            )
        };
    }
    // /proc/cgroups: name, hierarchy, count, enabled; hierarchy 0 is a
    // controller no v1 hierarchy is mounted with.
    let Some(table) = host.file("proc/cgroups") else {
        return result(false, "no cgroup.controllers and no /proc/cgroups".into());
    };
    let enabled: Vec<&str> = table
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && f[1] != "0" && f[3] == "1").then_some(f[0])
        })
        .collect();
    let missing: Vec<&str> = WANTED
        .into_iter()
        .filter(|c| !enabled.contains(c))
        .collect();
    let hybrid = if host.exists("sys/fs/cgroup/unified/cgroup.procs") {
        " (hybrid; v2 preferred)"
    } else {
        " (v2 preferred)"
    };
    if missing.is_empty() {
        result(
            true,
            format!("v1{hybrid}, controllers {}", WANTED.join(" ")),
        )
    } else {
        result(
            false,
            format!("v1 without the {} controller(s)", missing.join(" ")),
        )
    }
}

/// A binary the node agent runs, found on `$PATH` as it finds it.
fn binary(host: &Host, name: &str, required: bool) -> CheckResult {
    let found = host.which(name);
    CheckResult {
        item: format!("binary: {name}"),
        passed: found.is_some(),
        required,
        detail: match found {
            Some(path) => path.display().to_string(),
            None => "not found on PATH (scripts/bootstrap installs it)".into(),
        },
    }
}

/// A CNI plugin in the directory skiff's containerd configuration names.
fn cni_plugin(root: &Path, dir: &Path, name: &str) -> CheckResult {
    let path = dir.join(name);
    let on_host = root.join(path.strip_prefix("/").unwrap_or(&path));
    let passed = is_executable(&on_host);
    CheckResult {
        item: format!("CNI plugin: {name}"),
        passed,
        required: true,
        detail: if passed {
            path.display().to_string()
        } else {
            format!(
                "{} missing (Debian: containernetworking-plugins)",
                path.display()
            )
        },
    }
}

fn port_result(item: String, outcome: std::io::Result<()>) -> CheckResult {
    let detail = match &outcome {
        Ok(()) => "free".to_string(),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => "in use".to_string(),
        Err(e) => format!("cannot listen: {e}"),
    };
    CheckResult {
        item,
        passed: outcome.is_ok(),
        required: true,
        detail,
    }
}

/// Whether a vxlan link can really be made (the module loads, the process
/// may create links), tried in a network namespace of its own so the host
/// keeps no trace of it.
fn vxlan_link() -> CheckResult {
    let outcome = Command::new("unshare")
        .args(["--net", "ip", "link", "add", "skiff-check", "type", "vxlan"])
        .args(["id", "1", "dstport", "8472"])
        .output();
    let (passed, detail) = match outcome {
        Ok(out) if out.status.success() => (true, "created one in a scratch namespace".to_string()),
        Ok(out) => (
            false,
            format!(
                "cannot create one: {} (needs the vxlan module and root)",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ),
        Err(e) => (false, format!("cannot run `unshare --net ip`: {e}")),
    };
    CheckResult {
        item: "network: vxlan link".into(),
        passed,
        required: true,
        detail: format!("{detail} (for the vxlan flannel backend)"),
    }
}

/// Whether the server could listen on `address` (TCP).
fn tcp_port(address: SocketAddr, what: &str) -> CheckResult {
    port_result(
        format!("port {}/tcp ({what})", address.port()),
        TcpListener::bind(address).map(drop),
    )
}

/// Whether the server could listen on `address` (UDP).
fn udp_port(address: SocketAddr, what: &str) -> CheckResult {
    port_result(
        format!("port {}/udp ({what})", address.port()),
        UdpSocket::bind(address).map(drop),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake host tree with `files` (relative path, content).
    fn host(files: &[(&str, &str)], config: Option<&str>) -> (tempfile::TempDir, Host) {
        let dir = tempfile::tempdir().expect("temp dir");
        for (path, content) in files {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
            std::fs::write(full, content).expect("write");
        }
        let host = Host {
            root: dir.path().to_path_buf(),
            release: "6.1.0-test".into(),
            config: config.map(str::to_string),
            path: dir.path().join("bin").display().to_string(),
        };
        (dir, host)
    }

    fn feature(module: &str) -> &'static Feature {
        FEATURES
            .iter()
            .find(|f| f.module == module)
            .expect("known feature")
    }

    #[test]
    fn kernel_features_are_found_where_the_kernel_shows_them() {
        let (_dir, h) = host(
            &[
                ("proc/filesystems", "nodev\tproc\nnodev\toverlay\n"),
                ("proc/modules", "vxlan 100 0 - Live 0x0\n"),
                (
                    "lib/modules/6.1.0-test/modules.builtin",
                    "kernel/net/netfilter/nf_tables.ko\n",
                ),
                (
                    "lib/modules/6.1.0-test/modules.dep",
                    "kernel/net/bridge/br_netfilter.ko.xz: kernel/net/bridge/bridge.ko.xz\n",
                ),
            ],
            None,
        );
        let overlay = kernel(&h, feature("overlay"));
        assert!(overlay.passed, "{overlay:?}");
        assert!(kernel(&h, feature("vxlan")).detail.starts_with("loaded"));
        assert!(
            kernel(&h, feature("nf_tables"))
                .detail
                .starts_with("built into")
        );
        // A module that is only on disk: br_netfilter is not loaded by
        // the kernel on demand, so it fails and says what to do.
        let br = kernel(&h, feature("br_netfilter"));
        assert!(!br.passed && br.required, "{br:?}");
        assert!(br.line().contains("modprobe br_netfilter"), "{}", br.line());
    }

    #[test]
    fn kernel_config_decides_when_nothing_is_loaded() {
        let (_dir, h) = host(&[], Some("CONFIG_OVERLAY_FS=m\nCONFIG_NF_TABLES=y\n"));
        assert_eq!(
            kernel(&h, feature("overlay")).detail,
            "module, loaded on first use (for containerd's overlayfs snapshotter)"
        );
        assert!(kernel(&h, feature("nf_tables")).passed);
        let vxlan = kernel(&h, feature("vxlan"));
        assert!(!vxlan.passed && !vxlan.required, "{vxlan:?}");
        assert!(
            vxlan
                .line()
                .starts_with("warn  kernel: vxlan: not in this kernel")
        );
    }

    #[test]
    fn cgroups_need_the_pod_controllers() {
        let (_dir, v2) = host(
            &[(
                "sys/fs/cgroup/cgroup.controllers",
                "cpuset cpu io memory pids\n",
            )],
            None,
        );
        assert!(cgroups(&v2).passed);
        let (_dir, v2_short) = host(
            &[("sys/fs/cgroup/cgroup.controllers", "cpu io memory\n")],
            None,
        );
        let short = cgroups(&v2_short);
        assert!(!short.passed);
        assert!(short.detail.contains("cpuset pids"), "{short:?}");
        let (_dir, v1) = host(
            &[(
                "proc/cgroups",
                "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t1\t1\ncpu\t1\t1\t1\nmemory\t4\t9\t1\npids\t8\t1\t1\n",
            )],
            None,
        );
        assert!(cgroups(&v1).passed, "{:?}", cgroups(&v1));
    }

    #[test]
    fn binaries_come_from_path_and_must_be_executable() {
        let (dir, h) = host(&[("bin/runc", "#!/bin/sh\n"), ("bin/ctr", "")], None);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            dir.path().join("bin/runc"),
            std::fs::Permissions::from_mode(0o755),
        )
        .expect("chmod");
        assert!(binary(&h, "runc", true).passed);
        assert!(!binary(&h, "ctr", true).passed, "not executable");
        assert!(!binary(&h, "containerd", true).passed);
    }

    #[test]
    fn a_taken_port_fails_and_is_named() {
        let taken = TcpListener::bind("127.0.0.1:0").expect("listen");
        let port = taken.local_addr().expect("address").port();
        let result = tcp_port(
            SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port),
            "API server",
        );
        assert!(!result.passed);
        assert_eq!(
            result.line(),
            format!("FAIL  port {port}/tcp (API server): in use")
        );
        drop(taken);
        assert!(
            tcp_port(
                SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port),
                "API server"
            )
            .passed
        );
    }
}
