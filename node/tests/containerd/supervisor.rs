//! Supervision of a real containerd: restart after it is killed, running
//! containers surviving that, clean shutdown, an external endpoint left
//! alone, and a containerd left by a crashed skiff being replaced.

use std::time::{Duration, Instant};

use skiff_node::Runtime;
use skiff_node::containerd::bringup::{BringUpError, BringUpOptions, NodeRuntime, PodNetwork};
use skiff_node::containerd::config::{ContainerdConfig, ContainerdPaths};
use skiff_node::containerd::supervisor::{ContainerdSupervisor, RuntimeEndpoint, SupervisorConfig};
use skiff_node::cri_api as api;

use crate::harness::{TestNode, container_config, process_exists, run_container};

const RUNNING: i32 = api::ContainerState::ContainerRunning as i32;

fn sigkill(pid: u32) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    let rc = unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    assert_eq!(rc, 0, "kill {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_containerd_is_restarted_and_running_containers_survive() {
    let node = TestNode::start(2).await;
    let runtime: &dyn Runtime = &node.cri;

    let sandbox_config = node.sandbox_config("survivor");
    let sandbox = runtime
        .run_pod_sandbox(&sandbox_config, "")
        .await
        .expect("RunPodSandbox");
    let config = container_config("sleeper", &["sleep", "3600"]);
    let (container, before) = run_container(runtime, &sandbox, &config, &sandbox_config, |s| {
        s.state == RUNNING
    })
    .await;

    let first = node.supervisor().pid().expect("containerd pid");
    assert_eq!(node.supervisor().restarts(), 0);
    sigkill(first);

    let deadline = Instant::now() + Duration::from_secs(90);
    let second = loop {
        match node.supervisor().pid() {
            Some(pid) if pid != first && node.supervisor().restarts() == 1 => break pid,
            _ => {}
        }
        assert!(Instant::now() < deadline, "containerd was not restarted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(!process_exists(first), "old containerd {first} still there");
    assert!(process_exists(second));

    // The same client answers again (it reconnects) ...
    let health = runtime.health().await.expect("Status after restart");
    assert!(health.runtime_ready, "{}", health.message);
    // ... and the container kept running through the restart.
    let after = runtime
        .container_status(&container)
        .await
        .expect("status after restart");
    assert_eq!(after.state, RUNNING);
    assert_eq!(after.started_at, before.started_at);
    let out = runtime
        .exec_sync(&container, &["true".to_string()], Duration::from_secs(30))
        .await
        .expect("exec after restart");
    assert_eq!(out.exit_code, 0);

    node.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_endpoint_is_used_but_never_stopped() {
    let node = TestNode::start(3).await;
    let pid = node.supervisor().pid().expect("pid");

    let endpoint = format!("unix://{}", node.paths.socket().display());
    let external = RuntimeEndpoint::external(&endpoint, Duration::from_secs(30))
        .await
        .expect("external runtime answers");
    let version = external.cri().version().await.expect("Version");
    assert_eq!(version.runtime_name, "containerd");
    external.shutdown().await;
    assert!(
        process_exists(pid),
        "shutting down an external runtime stopped it"
    );

    // The same through the agent's bring-up: no containerd of its own, the
    // airgap dir still imported, the pod network not skiff's to write.
    let agent_dir = node.dir.path().join("agent-external");
    let mut options = BringUpOptions::new(&agent_dir);
    options.external_endpoint = Some(endpoint.clone());
    std::fs::create_dir_all(options.images_dir()).expect("images dir");
    std::fs::copy(
        node.options.images_dir().join("busybox.tar"),
        options.images_dir().join("again.tar"),
    )
    .expect("copy archive");
    // One bad archive does not stop the others.
    std::fs::write(options.images_dir().join("broken.tar"), b"not a tar").expect("write");
    let runtime = NodeRuntime::start(options)
        .await
        .expect("external bring-up");
    assert!(runtime.supervisor().is_none());
    assert!(runtime.containerd_paths().is_none());
    assert!(
        !agent_dir.join("containerd").exists(),
        "wrote containerd files"
    );
    let report = runtime.airgap_report();
    assert_eq!(report.imported.len(), 1, "{report:?}");
    assert!(report.imported[0].0.ends_with("again.tar"));
    assert_eq!(report.failed.len(), 1, "{report:?}");
    assert!(report.failed[0].0.ends_with("broken.tar"));
    let network = PodNetwork::new("10.231.250.0/24".parse().expect("cidr"));
    assert!(matches!(
        runtime.set_pod_network(&network),
        Err(BringUpError::NotManaged(_))
    ));
    runtime.shutdown().await;
    assert!(
        process_exists(pid),
        "shutting down an external runtime stopped it"
    );
    node.cri.version().await.expect("still answering");

    // A missing endpoint is reported once the readiness deadline passes.
    let missing = node.dir.path().join("missing.sock");
    let err = RuntimeEndpoint::external(missing.to_str().unwrap(), Duration::from_millis(500))
        .await
        .expect_err("nothing listens there");
    assert!(err.to_string().contains("missing.sock"), "{err}");

    node.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containerd_left_by_a_crashed_skiff_is_replaced() {
    let mut node = TestNode::start(4).await;
    let paths = node.paths.clone();
    if let Some(runtime) = node.runtime.take() {
        runtime.shutdown().await;
    }
    assert!(
        !paths.pid_file().exists(),
        "a clean shutdown removes the pid file"
    );

    // What a crashed skiff leaves: containerd running on our config, and
    // its pid file.
    let mut stale = std::process::Command::new("containerd")
        .arg("--config")
        .arg(paths.config_file())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn containerd");
    std::fs::write(paths.pid_file(), format!("{}\n", stale.id())).expect("pid file");
    let deadline = Instant::now() + Duration::from_secs(60);
    while node.cri.version().await.is_err() {
        assert!(Instant::now() < deadline, "stale containerd never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let replacement = ContainerdSupervisor::start(SupervisorConfig::new(paths.clone()))
        .await
        .expect("start over a stale containerd");
    let new_pid = replacement.pid().expect("pid");
    assert_ne!(new_pid, stale.id());
    assert!(
        !process_exists(stale.id()),
        "stale containerd still running"
    );
    assert!(stale.wait().is_ok());
    replacement.cri().version().await.expect("Version");
    replacement.shutdown().await;
    assert!(
        !process_exists(new_pid),
        "containerd {new_pid} still running after shutdown"
    );
    node.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_containerd_that_keeps_failing_is_retried_with_growing_delays() {
    crate::harness::assert_root();
    let dir = tempfile::Builder::new()
        .prefix("skiff-ctd-")
        .tempdir_in("/tmp")
        .expect("temp dir");
    let paths = ContainerdPaths::new(dir.path().join("c"));
    ContainerdConfig::new(paths.clone(), skiff_node::images::PAUSE_IMAGE)
        .write()
        .expect("config");
    // Runs the real containerd the first time only; every later start
    // records its time and fails at once.
    let script = dir.path().join("flaky-containerd");
    let starts = dir.path().join("starts");
    let first = dir.path().join("first-done");
    skiff_testkit::write_executable(
        &script,
        format!(
            "#!/bin/sh\nif [ ! -e {first} ]; then touch {first}; exec containerd \"$@\"; fi\n\
             date +%s.%N >> {starts}\nexit 1\n",
            first = first.display(),
            starts = starts.display()
        ),
    );
    let mut config = SupervisorConfig::new(paths.clone());
    config.containerd_bin = script;
    config.backoff_initial = Duration::from_millis(200);
    config.backoff_max = Duration::from_secs(5);
    let supervisor = ContainerdSupervisor::start(config)
        .await
        .expect("first start");
    let pid = supervisor.pid().expect("pid");
    sigkill(pid);

    let deadline = Instant::now() + Duration::from_secs(60);
    let times = loop {
        let text = std::fs::read_to_string(&starts).unwrap_or_default();
        let times: Vec<f64> = text.lines().filter_map(|l| l.parse().ok()).collect();
        if times.len() >= 4 {
            break times;
        }
        assert!(
            Instant::now() < deadline,
            "only {} restart attempts",
            times.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(supervisor.pid(), None, "no containerd while restarts fail");
    assert_eq!(supervisor.restarts(), 0, "failed attempts are not restarts");
    // Each wait is at least the doubled delay before it: 0.4 s, 0.8 s, 1.6 s.
    for (i, min) in [0.4, 0.8, 1.6].iter().enumerate() {
        let gap = times[i + 1] - times[i];
        assert!(
            gap >= *min,
            "attempt {} came {gap:.2}s after the previous one",
            i + 2
        );
    }

    // Shutting down in the middle of the backoff returns and leaves nothing.
    tokio::time::timeout(Duration::from_secs(30), supervisor.shutdown())
        .await
        .expect("shutdown during backoff");
    assert!(!process_exists(pid));
    assert!(!paths.pid_file().exists());
    let left = crate::harness::processes_mentioning(paths.base());
    assert!(left.is_empty(), "processes left behind: {left:?}");
}
