//! What the benches that drive a real `skiff server` share: sizes from the
//! environment, a free port, starting the server and connecting to it, and a
//! process's memory from `/proc`.

// Each bench includes this file as its own module and uses only part of it.
#![allow(dead_code)]

/// The number in environment variable `name`, or `default`.
pub fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The `skiff` binary the bench runs: this build's, or `SKIFF_BENCH_BIN`
/// (another build — an older commit's, or the shipped `--release` one — is
/// measured the same way, by the same driver).
pub fn skiff_binary() -> std::path::PathBuf {
    std::env::var_os("SKIFF_BENCH_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_skiff").into())
}

/// A loopback port nobody listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(16443)
}

/// A memory figure of a process from `/proc/<pid>/status` (`VmRSS:`,
/// `VmHWM:`, ...), in MiB; 0 when it cannot be read.
pub fn status_mib(pid: u32, field: &str) -> f64 {
    skiff_scheduler::testing::perf::process_memory_mib(pid, field)
}

/// `skiff server` (`binary`, normally this build's) as the benches run it:
/// control plane only, on loopback `port`, its data in `data_dir`, warnings
/// and errors to `log`. Callers add their own flags before spawning.
pub fn server_command(
    binary: impl AsRef<std::ffi::OsStr>,
    data_dir: &std::path::Path,
    port: u16,
    log: &std::path::Path,
) -> std::io::Result<std::process::Command> {
    let mut command = std::process::Command::new(binary);
    command
        .args(["server", "--disable-agent", "--bind-address", "127.0.0.1"])
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--https-listen-port", &port.to_string()])
        .env("SKIFF_LOG", "warn")
        // The built-in ingress on free ports: 80 and 443 may be taken.
        .env("SKIFF_INGRESS_HTTP_PORT", free_port().to_string())
        .env("SKIFF_INGRESS_HTTPS_PORT", free_port().to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(log)?);
    Ok(command)
}

/// `skiff server` with its node agent (containerd), as the benches that
/// run pods start it: on loopback `port`, its data in `data_dir`, node
/// `node` with pod bridge `bridge` and pod CIDR `pod_cidr`, warnings and
/// errors to `data_dir/server.log` (which [`stop_node_server`] prints).
/// Its nftables tables and pod cgroups are named after the bridge (no
/// overlay device), so [`stop_node_server`] removes all it leaves.
/// Callers add their own flags before spawning.
pub fn node_server_command(
    data_dir: &std::path::Path,
    port: u16,
    node: &str,
    bridge: &str,
    pod_cidr: &str,
) -> std::io::Result<std::process::Command> {
    let log = std::fs::File::create(data_dir.join("server.log"))?;
    let mut command = std::process::Command::new(skiff_binary());
    command
        .args(["server", "--bind-address", "127.0.0.1", "--node-name", node])
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--https-listen-port", &port.to_string()])
        .args(["--cni-bridge", bridge, "--pod-cidr", pod_cidr])
        .args(["--cgroup-root", &format!("/{bridge}")])
        .env("SKIFF_PROXY_TABLE", bridge)
        .env("SKIFF_NETPOL_TABLE", bridge)
        .env("SKIFF_POD_NETWORK_TABLE", format!("{bridge}-net"))
        .env("SKIFF_FLANNEL_BACKEND", "none")
        .env("SKIFF_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(log);
    Ok(command)
}

/// Stops a server of [`node_server_command`] (see [`terminate`]), removes
/// what its pods leave on the host, and when the bench `failed` prints the
/// server's log.
pub fn stop_node_server(
    server: &mut std::process::Child,
    data_dir: &std::path::Path,
    bridge: &str,
    failed: bool,
) {
    terminate(server);
    // A stopped agent leaves its pods running, as a kubelet does: their
    // shims, mounts, cgroups and rules go here.
    skiff_testkit::host::cleanup_host(data_dir, bridge);
    skiff_testkit::host::remove_cgroup_tree(&format!("/{bridge}"));
    let net = format!("{bridge}-net");
    for (family, table) in [("ip", bridge), ("ip", net.as_str()), ("inet", bridge)] {
        skiff_testkit::host::delete_nft_table(family, table);
    }
    if failed {
        eprintln!(
            "server log:\n{}",
            std::fs::read_to_string(data_dir.join("server.log")).unwrap_or_default()
        );
    }
}

/// A client of the server whose data directory is `data_dir`, once the
/// server has written its admin kubeconfig (within 60 s). With `retry`
/// false kube-rs does not retry 429/503/504 itself, so a bench sees them.
pub async fn admin_client(
    data_dir: &std::path::Path,
    retry: bool,
) -> Result<kube::Client, Box<dyn std::error::Error>> {
    let path = data_dir.join("kubeconfig.yaml");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !path.exists() {
        if std::time::Instant::now() > deadline {
            return Err("server did not start".into());
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let kubeconfig = kube::config::Kubeconfig::read_from(&path)?;
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    config.default_retry = retry;
    Ok(kube::Client::try_from(config)?)
}

/// Stops a server the way an operator would (SIGTERM, so it flushes its
/// store) and waits for it to exit.
pub fn terminate(server: &mut std::process::Child) {
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status();
    let _ = server.wait();
}

/// Builds the busybox image from the host's busybox and imports it into the
/// containerd of the server whose data directory is `data_dir`, waiting
/// until CRI lists it; returns a CRI client of that containerd.
pub async fn import_busybox(
    data_dir: &std::path::Path,
) -> Result<skiff_node::CriRuntime, Box<dyn std::error::Error + Send + Sync>> {
    use skiff_node::images;
    let socket = data_dir.join("agent/containerd/containerd.sock");
    let archive = data_dir.join("busybox.tar");
    images::write_host_busybox(&archive)?;
    let cri = skiff_node::CriRuntime::new(
        &socket.to_string_lossy(),
        skiff_node::CriTimeouts::default(),
    )?;
    images::ImageImporter::new(&socket)
        .wait_visible_through(cri.clone())
        .import(&archive)
        .await?;
    Ok(cri)
}

/// Waits until the Deployment `name` reports `replicas` updated and available
/// pods for its newest generation; returns how long that took since
/// `started`.
pub async fn wait_rolled_out(
    api: &kube::Api<k8s_openapi::api::apps::v1::Deployment>,
    name: &str,
    replicas: i32,
    started: std::time::Instant,
) -> std::time::Duration {
    loop {
        if let Ok(d) = api.get(name).await {
            let status = d.status.unwrap_or_default();
            let current = d.metadata.generation == status.observed_generation;
            if current
                && status.available_replicas == Some(replicas)
                && status.updated_replicas == Some(replicas)
                && status.replicas == Some(replicas)
            {
                return started.elapsed();
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The ConfigMap the write benches create: `name`, holding `payload` (each
/// bench sizes it) under the one key `payload`.
pub fn payload_configmap(name: String, payload: String) -> k8s_openapi::api::core::v1::ConfigMap {
    k8s_openapi::api::core::v1::ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name),
            ..Default::default()
        },
        data: Some([("payload".to_string(), payload)].into()),
        ..Default::default()
    }
}
