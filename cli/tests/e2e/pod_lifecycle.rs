//! Pod lifecycle on real containerd, as a kubectl user sees it (issue #7):
//! a crash-looping pod shows `CrashLoopBackOff` with a growing restart
//! count, a configMap volume is read through `kubectl exec`, `exec -it`
//! gets a terminal and the exit code, a readiness
//! probe flips the pod's READY column both ways, and `kubectl delete` waits
//! for the grace period of a process that ignores SIGTERM but not for one
//! that exits on it. And (issue #19) a deleted Job's Running pod goes away,
//! last seen in a terminal phase, and its namespace can then be deleted.

use std::time::{Duration, Instant};

use skiff_node::images::BUSYBOX_IMAGE;

use super::containerd::{import_busybox, pod, run_with_node, wait_node_ready, wait_running};
use super::support::{Server, apply, condition, eventually, json};

const NODE: &str = "e2e-lifecycle";

#[test]
fn kubectl_sees_crash_loops_probes_volumes_and_graceful_deletion() {
    run_with_node(
        "skl",
        "10.233.11.0/24",
        NODE,
        &["--kubelet-port", "0"],
        |server| scenario(server),
    );
}

/// A one-container busybox pod running `script`, with extra spec fields.
fn busybox_pod(name: &str, script: &str, grace: u32, extra: serde_json::Value) -> String {
    let mut container = serde_json::json!({"name": "main", "image": BUSYBOX_IMAGE,
        "imagePullPolicy": "Never", "command": ["sh", "-c", script]});
    let mut spec = serde_json::json!({"restartPolicy": "Always",
        "terminationGracePeriodSeconds": grace, "containers": []});
    if let Some(extra) = extra.as_object() {
        for (key, value) in extra {
            match key.strip_prefix("container.") {
                Some(field) => container[field] = value.clone(),
                None => spec[key] = value.clone(),
            }
        }
    }
    spec["containers"] = serde_json::json!([container]);
    serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": spec})
    .to_string()
}

/// The READY column of `kubectl get pod`, e.g. `1/1`.
fn ready_column(server: &Server, name: &str) -> String {
    let table = server.kubectl_ok(&["get", "pod", name, "--no-headers"]);
    table
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_string()
}

fn ready_condition(server: &Server, name: &str) -> String {
    condition(&pod(server, name), "Ready")
        .unwrap_or_default()
        .to_string()
}

fn scenario(server: &Server) {
    wait_node_ready(server, NODE);
    import_busybox(server);

    server.kubectl_ok(&[
        "create",
        "configmap",
        "settings",
        "--from-literal=greeting=hello from a configMap",
    ]);
    apply(
        server,
        &busybox_pod("crasher", "echo crashing; exit 2", 1, serde_json::json!({})),
    );
    apply(
        server,
        &busybox_pod(
            "reader",
            "sleep 3600",
            1,
            serde_json::json!({
                "volumes": [{"name": "cfg", "configMap": {"name": "settings"}}],
                "container.volumeMounts": [{"name": "cfg", "mountPath": "/etc/settings"}],
            }),
        ),
    );
    apply(
        server,
        &busybox_pod(
            "probed",
            "sleep 3600",
            1,
            serde_json::json!({
                "container.readinessProbe": {"exec": {"command": ["cat", "/tmp/ready"]},
                    "periodSeconds": 1, "failureThreshold": 1},
            }),
        ),
    );
    // PID 1 ignores SIGTERM: only the grace period's SIGKILL ends it.
    apply(
        server,
        &busybox_pod(
            "stubborn",
            "trap '' TERM; while true; do sleep 1; done",
            4,
            serde_json::json!({}),
        ),
    );
    // This one exits on SIGTERM (as PID 1 it needs its own handler), well
    // inside its 30 s grace period.
    apply(
        server,
        &busybox_pod(
            "polite",
            "trap 'exit 0' TERM; while true; do sleep 1; done",
            30,
            serde_json::json!({}),
        ),
    );

    // The crash loop: STATUS says CrashLoopBackOff and restarts grow.
    let table = eventually(Duration::from_secs(120), "CrashLoopBackOff", || {
        let table = server.kubectl_ok(&["get", "pod", "crasher"]);
        table.contains("CrashLoopBackOff").then_some(table)
    });
    let restarts = |server: &Server| {
        pod(server, "crasher")["status"]["containerStatuses"][0]["restartCount"]
            .as_i64()
            .unwrap_or(0)
    };
    let first = restarts(server);
    assert!(first >= 1, "{table}");
    eventually(Duration::from_secs(120), "restart count grows", || {
        (restarts(server) > first).then_some(())
    });
    let waiting = &pod(server, "crasher")["status"]["containerStatuses"][0];
    assert_eq!(
        waiting["lastState"]["terminated"]["exitCode"], 2,
        "{waiting}"
    );
    assert_eq!(
        server.kubectl_ok(&["logs", "crasher", "--previous"]),
        "crashing\n"
    );
    // A stream to it between runs: no container is running, and kubectl
    // says so in a kubelet's words (retried, as a run may be under way).
    eventually(Duration::from_secs(30), "exec finds no container", || {
        let out = server.kubectl(&["exec", "crasher", "--", "true"]);
        let error = String::from_utf8_lossy(&out.stderr).into_owned();
        (!out.status.success()
            && error.contains("unable to upgrade connection: container not found (\"main\")"))
        .then_some(())
    });

    // A configMap volume read through exec.
    wait_running(server, "reader");
    assert_eq!(
        server.kubectl_ok(&["exec", "reader", "--", "cat", "/etc/settings/greeting"]),
        "hello from a configMap"
    );

    // An interactive TTY: `kubectl exec -it` under a pseudo-terminal
    // (util-linux `script`): the process sees a terminal, its output and
    // exit code come back.
    let command = format!(
        "kubectl --kubeconfig {} exec -it reader -- sh -c 'tty; exit 7'",
        server.kubeconfig().display()
    );
    let out = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run script");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("/dev/pts/"), "no terminal in the pod: {text}");
    assert_eq!(out.status.code(), Some(7), "{text}");

    // The readiness probe flips Ready both ways.
    wait_running(server, "probed");
    assert_eq!(ready_column(server, "probed"), "0/1");
    assert_eq!(ready_condition(server, "probed"), "False");
    server.kubectl_ok(&["exec", "probed", "--", "touch", "/tmp/ready"]);
    eventually(Duration::from_secs(30), "probed Ready", || {
        (ready_column(server, "probed") == "1/1" && ready_condition(server, "probed") == "True")
            .then_some(())
    });
    server.kubectl_ok(&["exec", "probed", "--", "rm", "/tmp/ready"]);
    eventually(Duration::from_secs(30), "probed not Ready", || {
        (ready_column(server, "probed") == "0/1").then_some(())
    });

    // Graceful deletion: kubectl waits out the grace period of a process
    // that ignores SIGTERM, and not that of one that exits on it.
    wait_running(server, "stubborn");
    wait_running(server, "polite");
    let asked = Instant::now();
    server.kubectl_ok(&["delete", "pod", "stubborn", "--timeout=60s"]);
    let stubborn = asked.elapsed();
    assert!(
        stubborn >= Duration::from_secs(4),
        "stubborn pod gone after {stubborn:?}, before its 4 s grace period"
    );
    let asked = Instant::now();
    server.kubectl_ok(&["delete", "pod", "polite", "--timeout=60s"]);
    let polite = asked.elapsed();
    assert!(
        polite < Duration::from_secs(30),
        "polite pod took {polite:?}: its SIGTERM was not delivered"
    );
    let gone = server.kubectl(&["get", "pod", "stubborn"]);
    assert!(!gone.status.success(), "stubborn pod still listed");

    deleted_job_pods_go_and_their_namespace_with_them(server);
}

/// Issue #19, as the user did it: a Job whose pod runs `sleep 300` (PID 1,
/// so SIGTERM is ignored and only the grace period's SIGKILL ends it),
/// Running, then `kubectl delete job` (kubectl's background propagation).
/// The pod must go, its last state seen before it goes must be terminal
/// (the node reports how it ended before its final delete), and then
/// `kubectl delete namespace` completes.
fn deleted_job_pods_go_and_their_namespace_with_them(server: &Server) {
    const NS: &str = "issue19";
    server.kubectl_ok(&["create", "namespace", NS]);
    apply(
        server,
        &serde_json::json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "sleeper", "namespace": NS},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "Never",
                "command": ["sleep", "300"]}]}}}})
        .to_string(),
    );
    let name = eventually(Duration::from_secs(120), "the Job's pod Running", || {
        let list = json(&server.kubectl_ok(&[
            "get",
            "pods",
            "-n",
            NS,
            "-l",
            "job-name=sleeper",
            "-o",
            "json",
        ]));
        let pod = list["items"].as_array()?.first()?.clone();
        (pod["status"]["phase"] == "Running")
            .then(|| pod["metadata"]["name"].as_str().map(str::to_string))?
    });
    let tracked = json(&server.kubectl_ok(&["get", "pod", "-n", NS, &name, "-o", "json"]));
    assert_eq!(
        tracked["metadata"]["finalizers"],
        serde_json::json!(["batch.kubernetes.io/job-tracking"]),
        "{tracked}"
    );

    // Every state of the pod from now on, as `kubectl get -w` shows them.
    let watch_out = server.data_dir().join("issue19-watch.json");
    let mut watch = server
        .admin()
        .command(&[
            "get",
            "pod",
            "-n",
            NS,
            &name,
            "-w",
            "-o",
            "json",
            "--output-watch-events",
        ])
        .stdout(std::fs::File::create(&watch_out).expect("watch output"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run kubectl get -w");
    eventually(Duration::from_secs(30), "the watch's first event", || {
        let text = std::fs::read_to_string(&watch_out).ok()?;
        text.contains("ADDED").then_some(())
    });

    server.kubectl_ok(&["delete", "job", "sleeper", "-n", NS]);
    // The 30 s default grace period passes before the SIGKILL.
    eventually(
        Duration::from_secs(120),
        "the deleted Job's pod gone",
        || {
            let out = server.kubectl(&["get", "pod", "-n", NS, &name, "-o", "json"]);
            (!out.status.success()).then_some(())
        },
    );
    let events = eventually(Duration::from_secs(30), "the watch's DELETED event", || {
        let text = std::fs::read_to_string(&watch_out).ok()?;
        let events: Vec<serde_json::Value> = serde_json::Deserializer::from_str(&text)
            .into_iter::<serde_json::Value>()
            .collect::<Result<_, _>>()
            .ok()?;
        (events.last()?["type"] == "DELETED").then_some(events)
    });
    let _ = watch.kill();
    let _ = watch.wait();
    let phases: Vec<&str> = events
        .iter()
        .map(|e| e["object"]["status"]["phase"].as_str().unwrap_or(""))
        .collect();
    let last = &events[events.len() - 1]["object"];
    assert_eq!(last["status"]["phase"], "Failed", "phases seen: {phases:?}");
    let terminated = &last["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(terminated["exitCode"], 137, "{last}");
    assert_eq!(terminated["reason"], "Error", "{last}");
    // Once terminal, never Running again: the node wrote the end before the
    // delete, not the other way round.
    let first_terminal = phases
        .iter()
        .position(|p| *p == "Failed")
        .unwrap_or(phases.len());
    assert!(
        phases[first_terminal..].iter().all(|p| *p == "Failed"),
        "phases seen: {phases:?}"
    );
    assert!(
        first_terminal < phases.len() - 1,
        "the terminal phase was only seen in the DELETED event: {phases:?}"
    );

    let asked = Instant::now();
    server.kubectl_ok(&["delete", "namespace", NS, "--timeout=90s"]);
    let gone = server.kubectl(&["get", "namespace", NS]);
    assert!(
        !gone.status.success(),
        "namespace still there {:?} after kubectl delete returned",
        asked.elapsed()
    );
}
