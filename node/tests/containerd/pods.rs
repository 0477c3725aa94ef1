//! A pod's life on real containerd: sandbox with a CNI address, a container
//! that prints and exits, exec into a long-running one, stop and removal.

use std::net::Ipv4Addr;
use std::time::Duration;

use skiff_node::cri_api as api;
use skiff_node::{Runtime, RuntimeError};

use crate::harness::{TestNode, bridge_exists, container_config, run_container};

const EXITED: i32 = api::ContainerState::ContainerExited as i32;
const RUNNING: i32 = api::ContainerState::ContainerRunning as i32;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_sandbox_containers_logs_exec_and_cleanup() {
    let node = TestNode::start(1).await;
    let runtime: &dyn Runtime = &node.cri;

    let version = runtime.version().await.expect("Version");
    assert_eq!(version.runtime_name, "containerd");
    assert_eq!(version.runtime_api_version, "v1");
    assert!(
        version
            .node_runtime_version()
            .starts_with("containerd://1.")
    );
    let health = runtime.health().await.expect("Status");
    assert!(health.is_ready(), "runtime not ready: {}", health.message);

    // Sandbox: running, with an address from the bridge's pod CIDR.
    let sandbox_config = node.sandbox_config("web");
    let sandbox = runtime
        .run_pod_sandbox(&sandbox_config, "")
        .await
        .expect("RunPodSandbox");
    let status = runtime
        .pod_sandbox_status(&sandbox)
        .await
        .expect("PodSandboxStatus");
    assert_eq!(status.state, api::PodSandboxState::SandboxReady as i32);
    let ip: Ipv4Addr = status
        .network
        .as_ref()
        .expect("network status")
        .ip
        .parse()
        .expect("IPv4 pod IP");
    assert!(node.cidr.contains(ip), "{ip} outside {}", node.cidr);
    assert_ne!(ip, node.cidr.gateway());
    assert!(
        bridge_exists(&node.bridge),
        "bridge {} not created",
        node.bridge
    );
    let listed = runtime
        .list_pod_sandboxes(None)
        .await
        .expect("ListPodSandbox");
    assert!(listed.iter().any(|s| s.id == sandbox
        && s.labels.get("io.kubernetes.pod.uid")
            == sandbox_config.labels.get("io.kubernetes.pod.uid")));

    // A container that prints to stdout and stderr and exits 3.
    let echo = container_config(
        "echo",
        &["sh", "-c", "echo hello from skiff; echo oops >&2; exit 3"],
    );
    let (echo_id, done) = run_container(runtime, &sandbox, &echo, &sandbox_config, |s| {
        s.state == EXITED
    })
    .await;
    assert_eq!(done.exit_code, 3);
    assert!(
        done.finished_at >= done.started_at && done.started_at > 0,
        "created {} started {} finished {}",
        done.created_at,
        done.started_at,
        done.finished_at
    );
    assert_eq!(
        done.log_path,
        format!("{}/echo_0.log", sandbox_config.log_directory)
    );
    // CRI log lines: "<RFC3339Nano time> <stream> <F|P> <text>".
    let log = std::fs::read_to_string(&done.log_path).expect("container log");
    let lines: Vec<Vec<&str>> = log.lines().map(|l| l.splitn(4, ' ').collect()).collect();
    assert!(
        lines
            .iter()
            .any(|l| l[1..] == ["stdout", "F", "hello from skiff"]),
        "{log}"
    );
    assert!(
        lines.iter().any(|l| l[1..] == ["stderr", "F", "oops"]),
        "{log}"
    );

    // A long-running container to exec into.
    let sleeper = container_config("sleeper", &["sleep", "3600"]);
    let (sleeper_id, _) = run_container(runtime, &sandbox, &sleeper, &sandbox_config, |s| {
        s.state == RUNNING
    })
    .await;

    let cmd = |args: &[&str]| args.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let out = runtime
        .exec_sync(
            &sleeper_id,
            &cmd(&["sh", "-c", "echo $((6*7)); echo err >&2; exit 5"]),
            Duration::from_secs(30),
        )
        .await
        .expect("ExecSync");
    assert_eq!(out.stdout, b"42\n");
    assert_eq!(out.stderr, b"err\n");
    assert_eq!(out.exit_code, 5);

    // The container sees the sandbox's address on eth0, and loopback is up.
    let addr = runtime
        .exec_sync(
            &sleeper_id,
            &cmd(&["ip", "-4", "addr", "show"]),
            Duration::from_secs(30),
        )
        .await
        .expect("ExecSync ip");
    let addr = String::from_utf8_lossy(&addr.stdout);
    assert!(
        addr.contains(&format!("inet {ip}/{}", node.cidr.prefix_len())),
        "{addr}"
    );
    assert!(addr.contains("inet 127.0.0.1/8"), "{addr}");
    // Two containers of one pod share its network namespace: the gateway is
    // reachable through the bridge.
    let ping = runtime
        .exec_sync(
            &sleeper_id,
            &cmd(&[
                "ping",
                "-c",
                "1",
                "-W",
                "5",
                &node.cidr.gateway().to_string(),
            ]),
            Duration::from_secs(30),
        )
        .await
        .expect("ExecSync ping");
    assert_eq!(
        ping.exit_code,
        0,
        "{}",
        String::from_utf8_lossy(&ping.stdout)
    );

    // Streaming calls answer with URLs of containerd's streaming server.
    let exec_url = runtime
        .exec_url(api::ExecRequest {
            container_id: sleeper_id.clone(),
            cmd: cmd(&["sh"]),
            stdout: true,
            ..Default::default()
        })
        .await
        .expect("Exec");
    let attach_url = runtime
        .attach_url(api::AttachRequest {
            container_id: sleeper_id.clone(),
            stdout: true,
            ..Default::default()
        })
        .await
        .expect("Attach");
    let pf_url = runtime
        .port_forward_url(&sandbox, &[80])
        .await
        .expect("PortForward");
    for url in [exec_url, attach_url, pf_url] {
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    }

    let filter = api::ContainerFilter {
        pod_sandbox_id: sandbox.clone(),
        ..Default::default()
    };
    let mut names: Vec<String> = runtime
        .list_containers(Some(filter))
        .await
        .expect("ListContainers")
        .into_iter()
        .map(|c| c.metadata.map(|m| m.name).unwrap_or_default())
        .collect();
    names.sort();
    assert_eq!(names, ["echo", "sleeper"]);

    // Stopping sends SIGTERM first: plain `sleep` dies of it (128 + 15) ...
    runtime
        .stop_container(&sleeper_id, Duration::from_secs(30))
        .await
        .expect("StopContainer");
    let stopped = runtime.container_status(&sleeper_id).await.expect("status");
    assert_eq!((stopped.state, stopped.exit_code), (EXITED, 143));
    // ... and a process that ignores it is killed when the grace period ends.
    let stubborn = container_config("stubborn", &["sh", "-c", "trap '' TERM; exec sleep 3600"]);
    let (stubborn_id, _) = run_container(runtime, &sandbox, &stubborn, &sandbox_config, |s| {
        s.state == RUNNING
    })
    .await;
    let grace = Duration::from_secs(1);
    let asked = std::time::Instant::now();
    runtime
        .stop_container(&stubborn_id, grace)
        .await
        .expect("StopContainer");
    assert!(
        asked.elapsed() >= grace,
        "killed before the grace period ended"
    );
    let killed = runtime
        .container_status(&stubborn_id)
        .await
        .expect("status");
    assert_eq!((killed.state, killed.exit_code), (EXITED, 137));

    for id in [&echo_id, &sleeper_id, &stubborn_id] {
        runtime.remove_container(id).await.expect("RemoveContainer");
        let err = runtime.container_status(id).await.expect_err("removed");
        assert!(err.is_not_found(), "{err}");
    }
    runtime
        .stop_pod_sandbox(&sandbox)
        .await
        .expect("StopPodSandbox");
    let stopped = runtime.pod_sandbox_status(&sandbox).await.expect("status");
    assert_eq!(stopped.state, api::PodSandboxState::SandboxNotready as i32);
    runtime
        .remove_pod_sandbox(&sandbox)
        .await
        .expect("RemovePodSandbox");
    let err: RuntimeError = runtime
        .pod_sandbox_status(&sandbox)
        .await
        .expect_err("removed");
    assert!(err.is_not_found(), "{err}");

    // The pod's network namespace and IP allocation are gone.
    let netns_dir = node
        .paths
        .state()
        .join("io.containerd.grpc.v1.cri")
        .join("netns");
    let left: Vec<_> = std::fs::read_dir(&netns_dir)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "network namespaces left: {left:?}");
    let ipam = node.paths.cni_ipam_dir();
    let allocated: Vec<_> = walk_files(&ipam)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.parse::<Ipv4Addr>().is_ok())
        })
        .collect();
    assert!(allocated.is_empty(), "IPs still allocated: {allocated:?}");

    node.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_is_pid_1_of_a_shared_pid_namespace_and_reaps_orphans() {
    let node = TestNode::start(5).await;
    let runtime: &dyn Runtime = &node.cri;
    let sandbox_config = node.sandbox_config_with_pid_mode("shared", api::NamespaceMode::Pod);
    let sandbox = runtime
        .run_pod_sandbox(&sandbox_config, "")
        .await
        .expect("RunPodSandbox");

    // The subshell exits at once, orphaning a short `sleep` to PID 1.
    let mut config = container_config("orphaner", &["sh", "-c", "(sleep 0.2 &); exec sleep 3600"]);
    config.linux = Some(api::LinuxContainerConfig {
        security_context: Some(api::LinuxContainerSecurityContext {
            namespace_options: Some(api::NamespaceOption {
                network: api::NamespaceMode::Pod as i32,
                pid: api::NamespaceMode::Pod as i32,
                ipc: api::NamespaceMode::Pod as i32,
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    let (id, _) = run_container(runtime, &sandbox, &config, &sandbox_config, |s| {
        s.state == RUNNING
    })
    .await;

    let list = [
        "sh",
        "-c",
        "for f in /proc/[0-9]*/stat; do cat $f; echo; done",
    ];
    let list: Vec<String> = list.iter().map(|s| s.to_string()).collect();
    // Until the orphan has exited (and been reaped), keep looking.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let table = loop {
        let out = runtime
            .exec_sync(&id, &list, Duration::from_secs(10))
            .await
            .expect("ExecSync");
        let table = String::from_utf8_lossy(&out.stdout).into_owned();
        let orphan_gone = !table.contains("(sleep) ") || table.matches("(sleep) ").count() == 1;
        if orphan_gone || std::time::Instant::now() >= deadline {
            break table;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        table.lines().any(|l| l.starts_with("1 (pause) ")),
        "{table}"
    );
    let zombies: Vec<&str> = table.lines().filter(|l| l.contains(") Z ")).collect();
    assert!(zombies.is_empty(), "unreaped: {zombies:?}\n{table}");
    assert_eq!(table.matches("(sleep) ").count(), 1, "{table}");

    node.teardown().await;
}

fn walk_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk_files(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}
