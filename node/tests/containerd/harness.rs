//! A real containerd per test: its own temp data dir, pod CIDR and bridge,
//! started through skiff's supervisor with skiff's images imported, and
//! torn down completely afterwards (also when a test panics).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use skiff_node::containerd::bringup::{BringUpOptions, NodeRuntime, PodNetwork};
use skiff_node::containerd::config::{ContainerdPaths, PodCidr};
use skiff_node::containerd::supervisor::ContainerdSupervisor;
use skiff_node::cri_api as api;
use skiff_node::images;
use skiff_node::{CriRuntime, Runtime};

pub use skiff_testkit::host::{bridge_exists, process_exists, processes_mentioning};
use skiff_testkit::host::{delete_bridge, kill_processes_mentioning, unmount_under};

/// One containerd under test.
pub struct TestNode {
    // Dropped first (fields drop in order): the temp dir must outlive the
    // emergency cleanup, which needs the socket and the state inside it.
    guard: Cleanup,
    pub dir: tempfile::TempDir,
    pub options: BringUpOptions,
    pub paths: ContainerdPaths,
    pub runtime: Option<NodeRuntime>,
    pub cri: CriRuntime,
    pub cidr: PodCidr,
    pub bridge: String,
    /// Config digests of the images built for this node, by name.
    pub image_ids: HashMap<String, String>,
}

/// Last-resort cleanup when a test panics before `TestNode::teardown`.
struct Cleanup {
    base: PathBuf,
    bridge: String,
    armed: bool,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // Remove the pods through CRI first (that stops their processes and
        // releases their network), from a thread with its own runtime: the
        // test's runtime may be the one unwinding.
        let socket = ContainerdPaths::new(&self.base).socket();
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                let timeouts = skiff_node::CriTimeouts {
                    default: Duration::from_secs(20),
                    pull: Duration::from_secs(20),
                };
                let Ok(cri) = CriRuntime::new(&socket.to_string_lossy(), timeouts) else {
                    return;
                };
                if let Ok(sandboxes) = cri.list_pod_sandboxes(None).await {
                    for s in sandboxes {
                        let _ = cri.stop_pod_sandbox(&s.id).await;
                        let _ = cri.remove_pod_sandbox(&s.id).await;
                    }
                }
            });
        })
        .join();
        kill_processes_mentioning(&self.base);
        kill_container_inits(&self.base.join("runc"));
        unmount_under(&self.base);
        delete_bridge(&self.bridge);
    }
}

/// Kills the first process of every container runc still knows about.
fn kill_container_inits(runc_root: &Path) {
    let Ok(namespaces) = std::fs::read_dir(runc_root) else {
        return;
    };
    for ns in namespaces.flatten() {
        let Ok(containers) = std::fs::read_dir(ns.path()) else {
            continue;
        };
        for c in containers.flatten() {
            let Ok(state) = std::fs::read(c.path().join("state.json")) else {
                continue;
            };
            let pid = serde_json::from_slice::<serde_json::Value>(&state)
                .ok()
                .and_then(|v| v["init_process_pid"].as_i64())
                .and_then(|p| libc::pid_t::try_from(p).ok());
            if let Some(pid) = pid.filter(|&p| p > 1) {
                // SAFETY: kill(2) has no memory-safety preconditions.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

pub fn assert_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "the containerd tests run containerd, runc and CNI and need root; run them as root"
    );
}

/// A pod CIDR and bridge unique to this test process and `slot`, so tests
/// running in parallel (or a concurrent run) do not share a network.
fn network_for(slot: u8) -> (PodCidr, String) {
    let pid = std::process::id();
    let third = (pid % 30) * 8 + u32::from(slot % 8);
    let cidr = format!("10.231.{third}.0/24").parse().expect("valid CIDR");
    let bridge = format!("skt{}s{}", pid % 1_000_000, slot);
    (cidr, bridge)
}

impl TestNode {
    /// Brings the runtime up the way the agent does (`NodeRuntime::start`):
    /// skiff's containerd in a temp dir with a pod network of its own, the
    /// pause image, and an airgap dir holding a busybox archive.
    pub async fn start(slot: u8) -> TestNode {
        assert_root();
        let dir = tempfile::Builder::new()
            .prefix("skiff-ctd-")
            .tempdir_in("/tmp")
            .expect("temp dir");
        let (cidr, bridge) = network_for(slot);
        let mut options = BringUpOptions::new(dir.path().join("agent"));
        options.pod_network = Some(PodNetwork {
            name: format!("skiff-test-{bridge}"),
            bridge: bridge.clone(),
            ..PodNetwork::new(cidr)
        });
        let paths = options.containerd_paths();
        let guard = Cleanup {
            base: paths.base().to_path_buf(),
            bridge: bridge.clone(),
            armed: true,
        };

        let airgap_dir = options.images_dir();
        std::fs::create_dir_all(&airgap_dir).expect("airgap dir");
        let summary =
            images::write_host_busybox(&airgap_dir.join("busybox.tar")).expect("write archive");
        let pause = images::pause_image(Path::new(images::builtin::HOST_BUSYBOX))
            .expect("pause image")
            .to_docker_archive()
            .expect("pause archive")
            .1;
        let image_ids = HashMap::from([
            (summary.reference, summary.config_digest),
            (pause.reference, pause.config_digest),
        ]);

        let runtime = NodeRuntime::start(options.clone())
            .await
            .unwrap_or_else(|e| panic!("runtime did not come up: {e}\n{}", log_of(&paths)));
        let cri = runtime.cri();
        TestNode {
            guard,
            dir,
            options,
            paths,
            runtime: Some(runtime),
            cri,
            cidr,
            bridge,
            image_ids,
        }
    }

    pub fn supervisor(&self) -> &ContainerdSupervisor {
        self.runtime
            .as_ref()
            .and_then(NodeRuntime::supervisor)
            .expect("supervised containerd running")
    }

    /// Removes every sandbox, stops containerd, deletes the bridge, and
    /// checks that no process of this containerd is left.
    pub async fn teardown(mut self) {
        if let Ok(sandboxes) = self.cri.list_pod_sandboxes(None).await {
            for s in sandboxes {
                let _ = self.cri.stop_pod_sandbox(&s.id).await;
                let _ = self.cri.remove_pod_sandbox(&s.id).await;
            }
        }
        if let Some(runtime) = self.runtime.take() {
            let pid = runtime.supervisor().and_then(ContainerdSupervisor::pid);
            runtime.shutdown().await;
            if let Some(pid) = pid {
                assert!(
                    !process_exists(pid),
                    "containerd {pid} still running after shutdown"
                );
            }
        }
        let left = processes_mentioning(self.paths.base());
        assert!(left.is_empty(), "processes left behind: {left:?}");
        delete_bridge(&self.bridge);
        self.guard.armed = false;
    }

    /// A sandbox config for a pod named `name` with its log dir in the temp dir.
    pub fn sandbox_config(&self, name: &str) -> api::PodSandboxConfig {
        self.sandbox_config_with_pid_mode(name, api::NamespaceMode::Container)
    }

    /// As `sandbox_config`, with the given PID namespace mode (`Pod` is
    /// `shareProcessNamespace: true`).
    pub fn sandbox_config_with_pid_mode(
        &self,
        name: &str,
        pid: api::NamespaceMode,
    ) -> api::PodSandboxConfig {
        let uid = format!("uid-{name}-{}", std::process::id());
        let log_directory = self.dir.path().join("pods").join(&uid);
        std::fs::create_dir_all(&log_directory).expect("pod log dir");
        api::PodSandboxConfig {
            metadata: Some(api::PodSandboxMetadata {
                name: name.to_string(),
                uid: uid.clone(),
                namespace: "default".to_string(),
                attempt: 0,
            }),
            hostname: name.to_string(),
            log_directory: log_directory.to_string_lossy().into_owned(),
            labels: HashMap::from([("io.kubernetes.pod.uid".to_string(), uid)]),
            linux: Some(api::LinuxPodSandboxConfig {
                security_context: Some(api::LinuxSandboxSecurityContext {
                    namespace_options: Some(api::NamespaceOption {
                        network: api::NamespaceMode::Pod as i32,
                        pid: pid as i32,
                        ipc: api::NamespaceMode::Pod as i32,
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}

/// A busybox container config running `command`, logging to `<name>_0.log`.
pub fn container_config(name: &str, command: &[&str]) -> api::ContainerConfig {
    api::ContainerConfig {
        metadata: Some(api::ContainerMetadata {
            name: name.to_string(),
            attempt: 0,
        }),
        image: Some(api::ImageSpec {
            image: images::BUSYBOX_IMAGE.to_string(),
            ..Default::default()
        }),
        command: command.iter().map(|s| s.to_string()).collect(),
        log_path: format!("{name}_0.log"),
        labels: HashMap::from([("io.kubernetes.container.name".to_string(), name.to_string())]),
        ..Default::default()
    }
}

/// Polls the container's status until `done` holds or `timeout` passes.
/// Creates and starts `config` in `sandbox`, then waits (a minute at most) until its
/// status satisfies `reached`: the container's id and that status. A failed CRI call
/// fails the test, naming the call.
pub async fn run_container(
    runtime: &dyn Runtime,
    sandbox: &str,
    config: &api::ContainerConfig,
    sandbox_config: &api::PodSandboxConfig,
    reached: impl Fn(&api::ContainerStatus) -> bool,
) -> (String, api::ContainerStatus) {
    let id = runtime
        .create_container(sandbox, config, sandbox_config)
        .await
        .expect("CreateContainer");
    runtime.start_container(&id).await.expect("StartContainer");
    let status = wait_container(runtime, &id, Duration::from_secs(60), reached).await;
    (id, status)
}

pub async fn wait_container(
    runtime: &dyn Runtime,
    id: &str,
    timeout: Duration,
    done: impl Fn(&api::ContainerStatus) -> bool,
) -> api::ContainerStatus {
    let deadline = Instant::now() + timeout;
    loop {
        let status = runtime
            .container_status(id)
            .await
            .expect("container status");
        if done(&status) {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "container {id} did not reach the expected state in {timeout:?}: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn log_of(paths: &ContainerdPaths) -> String {
    let text = std::fs::read_to_string(paths.log_file()).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}
