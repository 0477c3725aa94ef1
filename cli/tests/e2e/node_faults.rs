//! Node faults on real containerd (issue #15): containerd SIGKILLed under a
//! running Deployment, `skiff server` SIGKILLed in the middle of a
//! 50-replica rolling update, and the node agent restarted (cleanly and by
//! SIGKILL) with pods running. What is checked is what a user sees through
//! kubectl and what the runtime holds, read over CRI with skiff's own client:
//! no container restarted that did not have to be, none left behind, and
//! never two sandboxes for one pod. Needs root (containerd, runc, CNI).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use skiff_node::Runtime;
use skiff_node::agent::pod::labels;
use skiff_node::cri_api as api;
use skiff_node::images::BUSYBOX_IMAGE;

use super::containerd::{import_busybox, pod, processes_naming, run_with_node, wait_node_ready};
use super::support::{Server, apply, eventually, json};

/// Flags every server here runs with: no node server port and no cluster
/// DNS on port 53, both shared host resources not under test.
const NODE_FLAGS: &[&str] = &["--kubelet-port", "0", "--disable-cluster-dns"];

/// A Deployment of busybox pods sleeping as PID 1 (so only SIGKILL ends
/// them: the short grace period keeps deletions quick).
fn sleeper_deployment(name: &str, replicas: u32, version: &str) -> String {
    serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
                    "name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "Never",
                    "command": ["sleep", "3600"],
                    "env": [{"name": "VERSION", "value": version}]}]}}}
    })
    .to_string()
}

/// One container of a pod as kubectl reports it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Reported {
    name: String,
    id: String,
    restarts: i64,
    ready: bool,
}

/// One pod as kubectl reports it: uid, phase, and every init and regular
/// container.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PodReport {
    uid: String,
    phase: String,
    hash: String,
    terminating: bool,
    init: Vec<Reported>,
    containers: Vec<Reported>,
}

impl PodReport {
    fn running_and_ready(&self) -> bool {
        self.phase == "Running"
            && !self.terminating
            && !self.containers.is_empty()
            && self
                .containers
                .iter()
                .all(|c| c.ready && c.id.starts_with("containerd://"))
    }
}

fn reported(statuses: &serde_json::Value) -> Vec<Reported> {
    let mut out: Vec<Reported> = statuses
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| Reported {
            name: c["name"].as_str().unwrap_or_default().to_string(),
            id: c["containerID"].as_str().unwrap_or_default().to_string(),
            restarts: c["restartCount"].as_i64().unwrap_or(-1),
            ready: c["ready"].as_bool().unwrap_or(false),
        })
        .collect();
    out.sort();
    out
}

/// Pods matching `selector` (all pods when empty), by name.
fn pods(server: &Server, selector: &str) -> BTreeMap<String, PodReport> {
    let mut args = vec!["get", "pods", "-o", "json"];
    if !selector.is_empty() {
        args.extend(["-l", selector]);
    }
    let list = json(&server.kubectl_ok(&args));
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let meta = &p["metadata"];
            let report = PodReport {
                uid: meta["uid"].as_str().unwrap_or_default().to_string(),
                phase: p["status"]["phase"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                hash: meta["labels"]["pod-template-hash"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                terminating: !meta["deletionTimestamp"].is_null(),
                init: reported(&p["status"]["initContainerStatuses"]),
                containers: reported(&p["status"]["containerStatuses"]),
            };
            (
                meta["name"].as_str().unwrap_or_default().to_string(),
                report,
            )
        })
        .collect()
}

/// What the node's containerd holds, by pod UID (from skiff's labels).
#[derive(Debug, Default)]
struct RuntimeState {
    /// Sandbox id and whether it is ready, per pod UID.
    sandboxes: BTreeMap<String, Vec<(String, bool)>>,
    /// Container id, name and state, per pod UID.
    containers: BTreeMap<String, Vec<(String, String, i32)>>,
}

impl RuntimeState {
    fn uids(&self) -> BTreeSet<String> {
        self.sandboxes
            .keys()
            .chain(self.containers.keys())
            .cloned()
            .collect()
    }
}

/// Lists the server's containerd over CRI; `None` while it does not answer.
fn runtime_state(server: &Server) -> Option<RuntimeState> {
    let socket = server.data_dir().join("agent/containerd/containerd.sock");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(async {
        let cri = skiff_node::CriRuntime::new(
            &socket.to_string_lossy(),
            skiff_node::CriTimeouts {
                default: Duration::from_secs(10),
                pull: Duration::from_secs(10),
            },
        )
        .ok()?;
        let sandboxes = cri.list_pod_sandboxes(None).await.ok()?;
        let containers = cri.list_containers(None).await.ok()?;
        let mut state = RuntimeState::default();
        for s in sandboxes {
            let uid = s.labels.get(labels::POD_UID).cloned().unwrap_or_default();
            let ready = s.state == api::PodSandboxState::SandboxReady as i32;
            state.sandboxes.entry(uid).or_default().push((s.id, ready));
        }
        for c in containers {
            let uid = c.labels.get(labels::POD_UID).cloned().unwrap_or_default();
            let name = c
                .labels
                .get(labels::CONTAINER_NAME)
                .cloned()
                .unwrap_or_default();
            state
                .containers
                .entry(uid)
                .or_default()
                .push((c.id, name, c.state));
        }
        for v in state.sandboxes.values_mut() {
            v.sort();
        }
        for v in state.containers.values_mut() {
            v.sort();
        }
        Some(state)
    })
}

const RUNNING: i32 = api::ContainerState::ContainerRunning as i32;

/// Checks that the runtime holds exactly the given pods, each running one
/// with one ready sandbox (a replaced one may stay, stopped) and one running
/// container per spec container
/// (restarted ones also keep the exited instance, for `lastState`), each
/// finished one with one stopped sandbox and nothing running; returns what
/// is wrong, if anything.
fn runtime_matches(state: &RuntimeState, pods: &BTreeMap<String, PodReport>) -> Result<(), String> {
    let wanted: BTreeSet<String> = pods.values().map(|p| p.uid.clone()).collect();
    let orphans: Vec<_> = state.uids().difference(&wanted).cloned().collect();
    if !orphans.is_empty() {
        return Err(format!(
            "runtime objects of pods that are gone: {orphans:?}"
        ));
    }
    for (name, pod) in pods {
        let sandboxes = state.sandboxes.get(&pod.uid).cloned().unwrap_or_default();
        let containers = state.containers.get(&pod.uid).cloned().unwrap_or_default();
        if matches!(pod.phase.as_str(), "Succeeded" | "Failed") {
            if sandboxes.len() != 1 || sandboxes[0].1 || containers.iter().any(|c| c.2 == RUNNING) {
                return Err(format!(
                    "finished pod {name}: want one stopped sandbox and nothing running, \
                     runtime has {sandboxes:?} {containers:?}"
                ));
            }
            continue;
        }
        // A pod whose sandbox died keeps the stopped one with the previous
        // containers (for `lastState` and `logs --previous`), never more.
        let ready = sandboxes.iter().filter(|s| s.1).count();
        if ready != 1 || sandboxes.len() > 2 {
            return Err(format!(
                "pod {name}: want one ready sandbox (and at most the previous one), \
                 runtime has {sandboxes:?}"
            ));
        }
        for c in &pod.containers {
            let running = containers
                .iter()
                .filter(|(_, n, s)| n == &c.name && *s == RUNNING)
                .count();
            if running != 1 {
                return Err(format!(
                    "pod {name} container {}: {running} running instances in {containers:?}",
                    c.name
                ));
            }
        }
    }
    Ok(())
}

/// PIDs of the containerd daemons whose command line names `data_dir`
/// (the shims name it too, but are not `containerd`).
fn containerd_pids(data_dir: &Path) -> Vec<u32> {
    processes_naming(data_dir)
        .into_iter()
        .filter(|(_, cmd)| {
            let argv0 = cmd.split(|&b| b == 0).next().unwrap_or_default();
            Path::new(&*String::from_utf8_lossy(argv0))
                .file_name()
                .is_some_and(|n| n == "containerd")
        })
        .map(|(pid, _)| pid)
        .collect()
}

/// The processes inside a container or sandbox: their cgroup path ends in
/// its id.
fn cgroup_processes(container_id: &str) -> Vec<u32> {
    let id = container_id.trim_start_matches("containerd://");
    assert_eq!(id.len(), 64, "container id {container_id}");
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .is_ok_and(|cg| cg.lines().any(|l| l.ends_with(id)))
        {
            pids.push(pid);
        }
    }
    pids
}

/// Polls `check` until it succeeds; on timeout fails with what it last
/// said was missing.
fn wait_for<T>(timeout: Duration, what: &str, mut check: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match check() {
            Ok(value) => return value,
            Err(last) if Instant::now() >= deadline => {
                panic!("timed out waiting for {what}; last seen:\n{last}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

fn sigkill(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -KILL {pid}");
}

/// Runs `scenario` on a server whose node `node` is Ready with the
/// busybox image imported (see [`run_with_node`] for the bridge and pod
/// CIDR), and reports how long the test ran.
fn run_fault(
    test: &str,
    bridge_prefix: &str,
    pod_cidr: &str,
    node: &str,
    scenario: impl FnOnce(&mut Server),
) {
    let started = Instant::now();
    run_with_node(bridge_prefix, pod_cidr, node, NODE_FLAGS, |server| {
        wait_node_ready(server, node);
        import_busybox(server);
        scenario(server);
    });
    eprintln!("{test}: ran {:.1} s", started.elapsed().as_secs_f64());
}

/// Waits up to `within` until exactly `count` pods match `selector`, all
/// Running and Ready; their reports.
fn ready_pods(
    server: &Server,
    selector: &str,
    count: usize,
    within: Duration,
) -> BTreeMap<String, PodReport> {
    eventually(within, &format!("{count} pods Ready"), || {
        let now = pods(server, selector);
        (now.len() == count && now.values().all(PodReport::running_and_ready)).then_some(now)
    })
}

/// Waits until the runtime holds just what `pods` say it runs (its
/// relist has caught up after a start); its state.
fn runtime_settled(server: &Server, pods: &BTreeMap<String, PodReport>) -> RuntimeState {
    eventually(Duration::from_secs(30), "runtime settled", || {
        let state = runtime_state(server)?;
        runtime_matches(&state, pods).ok().map(|()| state)
    })
}

const CONTAINERD_NODE: &str = "e2e-faults-containerd";

#[test]
fn containerd_killed_under_a_deployment_comes_back_and_pods_recover() {
    run_fault(
        "containerd killed",
        "sfa",
        "10.233.21.0/24",
        CONTAINERD_NODE,
        containerd_killed,
    );
}

fn containerd_killed(server: &mut Server) {
    apply(server, &sleeper_deployment("steady", 3, "1"));
    // A pod that must never run twice: when its sandbox dies it is over.
    apply(
        server,
        &serde_json::json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "once"},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "main", "image": BUSYBOX_IMAGE,
                    "imagePullPolicy": "Never", "command": ["sleep", "3600"]}]}
        })
        .to_string(),
    );
    let before = ready_pods(server, "", 4, Duration::from_secs(120));
    let runtime_before = runtime_settled(server, &before);
    let sandbox_of = |name: &str| runtime_before.sandboxes[&before[name].uid][0].0.clone();

    let daemons = containerd_pids(server.data_dir());
    assert_eq!(daemons.len(), 1, "one containerd for the node: {daemons:?}");
    let old = daemons[0];
    // With containerd, one pod's process dies, and two pods' sandboxes
    // (their pause processes). With restartPolicy Always both containers
    // must be running again once containerd is back — the second in a new
    // sandbox, created exactly once — each counted as one restart; the
    // third pod's container must be the same one, never restarted. The
    // `Never` pod gets no second sandbox: it has failed.
    let mut steady = before.keys().filter(|n| n.starts_with("steady-")).cloned();
    let (victim, orphaned, untouched) = (
        steady.next().expect("3 pods"),
        steady.next().expect("3 pods"),
        steady.next().expect("3 pods"),
    );
    let victim_container = before[&victim].containers[0].id.clone();
    let old_sandbox = sandbox_of(&orphaned);
    let targets = [
        victim_container.clone(),
        old_sandbox.clone(),
        sandbox_of("once"),
    ];
    let processes: Vec<Vec<u32>> = targets.iter().map(|id| cgroup_processes(id)).collect();
    assert!(
        processes.iter().all(|p| !p.is_empty()),
        "no process in the cgroup of one of {targets:?}"
    );
    sigkill(old);
    for pid in processes.into_iter().flatten() {
        sigkill(pid);
    }

    let new = eventually(Duration::from_secs(60), "containerd restarted", || {
        let pids = containerd_pids(server.data_dir());
        (pids.len() == 1 && pids[0] != old).then(|| pids[0])
    });
    assert_ne!(new, old);
    wait_node_ready(server, CONTAINERD_NODE);

    let after = wait_for(Duration::from_secs(120), "pods recovered", || {
        let now = pods(server, "");
        let recovered = now.len() == 4
            && now
                .iter()
                .filter(|(n, _)| n.starts_with("steady-"))
                .all(|(_, p)| p.running_and_ready())
            && now[&victim].containers[0].restarts == 1
            && now[&orphaned].containers[0].restarts == 1
            && now["once"].phase == "Failed";
        if recovered {
            Ok(now)
        } else {
            Err(format!("{now:#?}\n{:#?}", runtime_state(server)))
        }
    });
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>(),
        "the pods were replaced"
    );
    for (name, pod) in &after {
        assert_eq!(pod.uid, before[name].uid, "{name} was recreated");
    }
    assert_ne!(after[&victim].containers[0].id, victim_container);
    assert_ne!(
        after[&orphaned].containers[0].id,
        before[&orphaned].containers[0].id
    );
    assert_eq!(
        after[&untouched].containers, before[&untouched].containers,
        "{untouched}'s container was restarted with containerd"
    );
    for name in [&victim, &orphaned] {
        let status = pod(server, name);
        let last = &status["status"]["containerStatuses"][0]["lastState"]["terminated"];
        assert_eq!(last["exitCode"], 137, "{status}");
    }
    assert_eq!(
        server.kubectl_ok(&["logs", &orphaned, "--previous"]),
        "",
        "the previous container's log is still there"
    );
    let once = json(&server.kubectl_ok(&["get", "pod", "once", "-o", "json"]));
    let main = &once["status"]["containerStatuses"][0];
    assert_eq!(main["restartCount"], 0, "{once}");
    assert_eq!(
        main["containerID"],
        before["once"].containers[0].id.as_str(),
        "{once}"
    );
    assert_eq!(main["state"]["terminated"]["exitCode"], 137, "{once}");

    // Exactly one ready sandbox per running pod: the same one where only a
    // container died, one new one where the sandbox died (the old one
    // stopped, kept with the previous container); the failed pod's old one,
    // stopped, and no other.
    let settled = |server: &Server| {
        let state = runtime_state(server)?;
        runtime_matches(&state, &after).ok()?;
        let sandboxes = |name: &str| state.sandboxes[&after[name].uid].clone();
        let replaced = sandboxes(&orphaned);
        let kept = replaced.contains(&(old_sandbox.clone(), false)) && replaced.len() == 2;
        (kept
            && sandboxes(&victim) == runtime_before.sandboxes[&after[&victim].uid]
            && sandboxes(&untouched) == runtime_before.sandboxes[&after[&untouched].uid]
            && sandboxes("once") == vec![(sandbox_of("once"), false)])
        .then_some(state)
    };
    let runtime_after = eventually(Duration::from_secs(30), "runtime matches the pods", || {
        settled(server)
    });
    // And it stays that way: a few more relists change nothing.
    std::thread::sleep(Duration::from_secs(3));
    let state = settled(server).expect("runtime unchanged");
    assert_eq!(state.sandboxes, runtime_after.sandboxes);
    assert_eq!(pods(server, ""), after);
}

const ROLLOUT_NODE: &str = "e2e-faults-rollout";
const FLEET: u32 = 50;

#[test]
fn server_killed_mid_rolling_update_of_50_replicas_completes_it_after_restart() {
    run_fault(
        "server killed mid rollout",
        "sfb",
        "10.233.22.0/24",
        ROLLOUT_NODE,
        server_killed_mid_rollout,
    );
}

fn deployment_status(server: &Server, name: &str) -> serde_json::Value {
    json(&server.kubectl_ok(&["get", "deployment", name, "-o", "json"]))["status"].clone()
}

fn server_killed_mid_rollout(server: &mut Server) {
    let scale_up = Instant::now();
    apply(server, &sleeper_deployment("fleet", FLEET, "1"));
    let first = ready_pods(
        server,
        "app=fleet",
        FLEET as usize,
        Duration::from_secs(300),
    );
    eprintln!(
        "{FLEET} pods Ready after {:.1} s",
        scale_up.elapsed().as_secs_f64()
    );
    let old_hash = first.values().next().expect("a pod").hash.clone();

    // The rolling update (an env change), and the server killed once it is
    // well under way: new pods Ready, old ones being deleted.
    let rollout = Instant::now();
    apply(server, &sleeper_deployment("fleet", FLEET, "2"));
    eventually(Duration::from_secs(300), "rollout under way", || {
        let status = deployment_status(server, "fleet");
        let updated = status["updatedReplicas"].as_i64().unwrap_or(0);
        (updated >= 20 && updated < i64::from(FLEET)).then_some(())
    });
    // What the kill interrupts, for the record.
    let at_kill = pods(server, "app=fleet");
    let count = |f: &dyn Fn(&PodReport) -> bool| at_kill.values().filter(|p| f(p)).count();
    eprintln!(
        "killing the server with {} old pods ({} terminating) and {} new ones ({} Ready)",
        count(&|p| p.hash == old_hash),
        count(&|p| p.hash == old_hash && p.terminating),
        count(&|p| p.hash != old_hash),
        count(&|p| p.hash != old_hash && p.running_and_ready()),
    );
    server.kill();
    server.restart();
    wait_node_ready(server, ROLLOUT_NODE);

    let out = server.kubectl(&["rollout", "status", "deployment/fleet", "--timeout=300s"]);
    if !out.status.success() {
        // What the rollout waits on, so that a failure explains itself.
        let stuck: Vec<_> = pods(server, "app=fleet")
            .into_iter()
            .filter(|(_, p)| !p.running_and_ready())
            .map(|(name, _)| server.kubectl(&["get", "pod", &name, "-o", "yaml"]))
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .collect();
        panic!(
            "rollout status: {}{}\nreplica sets: {}\npods not Ready:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&server.kubectl(&["get", "rs", "-o", "wide"]).stdout),
            stuck.join("\n---\n"),
        );
    }
    eprintln!(
        "rollout complete {:.1} s after it began",
        rollout.elapsed().as_secs_f64()
    );

    // Exactly 50 pods, all of the new ReplicaSet, Running and Ready; the old
    // ReplicaSet's are all gone.
    let last = eventually(Duration::from_secs(180), "only the new pods left", || {
        let now = pods(server, "app=fleet");
        (now.len() == FLEET as usize
            && now
                .values()
                .all(|p| p.hash != old_hash && p.running_and_ready()))
        .then_some(now)
    });
    let hashes: BTreeSet<&str> = last.values().map(|p| p.hash.as_str()).collect();
    assert_eq!(hashes.len(), 1, "pods of several ReplicaSets: {hashes:?}");
    for pod in last.values() {
        assert_eq!(pod.containers.len(), 1);
    }
    let status = deployment_status(server, "fleet");
    for field in [
        "replicas",
        "updatedReplicas",
        "readyReplicas",
        "availableReplicas",
    ] {
        assert_eq!(status[field], FLEET, "{field}: {status}");
    }
    let sets = json(&server.kubectl_ok(&["get", "replicasets", "-l", "app=fleet", "-o", "json"]));
    for rs in sets["items"].as_array().into_iter().flatten() {
        let hash = rs["metadata"]["labels"]["pod-template-hash"].as_str();
        let want = if hash == Some(old_hash.as_str()) {
            0
        } else {
            FLEET
        };
        assert_eq!(rs["spec"]["replicas"], want, "{rs}");
        assert_eq!(rs["status"]["replicas"], want, "{rs}");
    }

    // The runtime holds those 50 pods and nothing else: no sandbox or
    // container of an old pod, none created twice across the kill.
    eventually(
        Duration::from_secs(120),
        "runtime holds only the new pods",
        || {
            let state = runtime_state(server)?;
            match runtime_matches(&state, &last) {
                Ok(()) => Some(()),
                Err(problem) => {
                    eprintln!("{problem}");
                    None
                }
            }
        },
    );
    // One sandbox per pod. A container whose start the kill cut off is
    // found exited by the restarted containerd, or in the unknown state
    // (then stopped first), and replaced, as upstream's kubelet does: that
    // pod counts one restart and keeps the old instance for `lastState`; no
    // other pod restarted anything.
    let state = runtime_state(server).expect("runtime answers");
    let sandboxes: usize = state.sandboxes.values().map(Vec::len).sum();
    assert_eq!(sandboxes, FLEET as usize, "{:?}", state.sandboxes);
    let mut cut_off = 0;
    for (name, report) in &last {
        let instances = &state.containers[&report.uid];
        let restarts = report.containers[0].restarts;
        assert_eq!(
            restarts as usize,
            instances.len() - 1,
            "{name}: restart count against runtime instances {instances:?}"
        );
        if restarts > 0 {
            cut_off += 1;
            assert_eq!(restarts, 1, "{name}: {instances:?}");
            let status = pod(server, name);
            let previous = &status["status"]["containerStatuses"][0]["lastState"]["terminated"];
            assert!(previous.is_object(), "{status}");
            eprintln!("{name} was restarted: previous instance {previous}");
        }
    }
    eprintln!("{cut_off} containers were cut off mid-start and replaced");
}

const RESTART_NODE: &str = "e2e-faults-restart";

#[test]
fn agent_restarted_with_pods_running_restarts_no_container() {
    run_fault(
        "agent restarted",
        "sfc",
        "10.233.23.0/24",
        RESTART_NODE,
        agent_restarted,
    );
}

fn agent_restarted(server: &mut Server) {
    apply(server, &sleeper_deployment("kept", 3, "1"));
    // A pod with an init container and a readiness probe, and one that has
    // completed: neither may run anything again after the restart.
    apply(
        server,
        &serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "staged", "labels": {"app": "kept"}},
            "spec": {"terminationGracePeriodSeconds": 1,
                "initContainers": [{"name": "setup", "image": BUSYBOX_IMAGE,
                    "imagePullPolicy": "Never", "command": ["sh", "-c", "echo set up"]}],
                "containers": [{"name": "main", "image": BUSYBOX_IMAGE,
                    "imagePullPolicy": "Never", "command": ["sleep", "3600"],
                    "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1}}]}
        })
        .to_string(),
    );
    apply(
        server,
        &serde_json::json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "done"},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main",
                "image": BUSYBOX_IMAGE, "imagePullPolicy": "Never",
                "command": ["sh", "-c", "echo finished"]}]}
        })
        .to_string(),
    );
    let running = ready_pods(server, "app=kept", 4, Duration::from_secs(120));
    let done = eventually(Duration::from_secs(60), "done Succeeded", || {
        let p = pods(server, "").remove("done")?;
        (p.phase == "Succeeded").then_some(p)
    });
    assert_eq!(running["staged"].init.len(), 1);
    for pod in running.values() {
        assert!(pod.containers.iter().all(|c| c.restarts == 0), "{pod:?}");
    }
    let mut everything = running.clone();
    everything.insert("done".to_string(), done.clone());
    let runtime_before = runtime_settled(server, &everything);

    for how in ["SIGTERM", "SIGKILL"] {
        if how == "SIGTERM" {
            let status = server.terminate();
            assert!(status.success(), "server exit status {status}");
        } else {
            server.kill();
        }
        server.restart();
        wait_node_ready(server, RESTART_NODE);
        // The restarted agent has relisted the runtime and synced every pod
        // at least once by now (its relist runs every second).
        std::thread::sleep(Duration::from_secs(5));
        let after = ready_pods(server, "app=kept", 4, Duration::from_secs(60));
        assert_eq!(after, running, "after a {how} restart");
        assert_eq!(
            pods(server, "").remove("done"),
            Some(done.clone()),
            "after {how}"
        );
        let state = runtime_state(server).expect("runtime answers");
        runtime_matches(&state, &everything).unwrap_or_else(|e| panic!("after {how}: {e}"));
        assert_eq!(state.sandboxes, runtime_before.sandboxes, "after {how}");
        assert_eq!(state.containers, runtime_before.containers, "after {how}");
    }
}
